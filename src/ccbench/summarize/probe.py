"""RTT under load from the run's probe (summary.json `probe`)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from ccbench import metrics, probes
from ccbench.layout import RawDir

# A probe file that is not its tool's output: what its parser may raise.
_PROBE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, OSError,
                 EOFError, zlib.error)  # fmt: skip


def _last_line(path: Path) -> str:
    """The last non-empty line of a small text file ('' if none or unreadable)."""
    try:
        lines = path.read_text(errors="replace")[-4096:].strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def probe_record(rd: RawDir) -> dict[str, Any] | None:
    """RTT under load from the concurrent probe (a probe tool of ccbench.probes)."""
    try:
        p = probes.read(rd.path)
    except _PROBE_ERRORS as e:
        name = next((f for f in probes.raw_files() if rd.exists(f)), "probe")
        msg = f"{e}" if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        msg = msg.splitlines()[0] if msg.strip() else type(e).__name__
        err = _last_line(rd.path / "probe.err")
        if err:  # the tool's own words say why (e.g. "sh: 1: flent: not found")
            msg += f"; probe.err: {err}"
        rd.problem(name, f"unreadable ({msg})")
        return {"tool": "unreadable", "samples": 0, "error": f"{name}: {msg}"}
    if p is None:
        return None
    rtts = sorted(p.rtts_us)
    rec: dict[str, Any] = {"tool": p.tool, "what": p.what, "samples": len(rtts),
                           "sent": p.sent, "received": p.received, "raw": p.raw}  # fmt: skip
    # every sample in the order measured: the report's CDF reads them here, not raw/
    rec["samples_us"] = list(p.rtts_us)
    if p.series:
        rec["series"] = p.series
    if p.coverage is not None:
        rec["coverage"] = p.coverage
    if not rtts:
        return rec

    rec.update(rtt_p50_us=metrics.percentile(rtts, 50), rtt_p95_us=metrics.percentile(rtts, 95),
               rtt_p99_us=metrics.percentile(rtts, 99), rtt_max_us=rtts[-1])  # fmt: skip
    return rec
