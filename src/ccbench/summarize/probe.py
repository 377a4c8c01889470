"""RTT under load from the run's probe (summary.json `probe`)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from ccbench import layout, metrics, probes, runmeta
from ccbench.errors import CcbenchError
from ccbench.layout import RawDir, load_spec
from ccbench.probes import ProbeResult, ProbeRun

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


def recorded_run(raw: Path) -> ProbeRun:
    """What raw/'s spec.json and meta.json say for reading its probe, read on their own
    (for a reader without the run's summary at hand; their problems are the summary's):
    no traffic window without a spec."""
    try:
        spec = load_spec(raw)
    except CcbenchError:
        spec = None
    meta = runmeta.load(RawDir(raw), len(spec.flows) if spec else 0)
    return meta.probe_run(spec.traffic_s if spec else None)


def read_probe(raw: Path) -> ProbeResult | None:
    """The probe's samples of run directory `raw` (probes.read with recorded_run)."""
    return probes.read(raw, recorded_run(raw))


def probe_record(rd: RawDir, run: ProbeRun) -> dict[str, Any] | None:
    """RTT under load from the concurrent probe (a probe tool of ccbench.probes); `run`:
    what the run recorded for reading it (RunMeta.probe_run, or recorded_run)."""
    try:
        p = probes.read(rd.path, run)
    except _PROBE_ERRORS as e:
        name = next((f for f in probes.raw_files() if rd.exists(f)), "probe")
        msg = f"{e}" if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        msg = msg.splitlines()[0] if msg.strip() else type(e).__name__
        err = _last_line(rd.path / layout.PROBE_ERR)
        if err:  # the tool's own words say why (e.g. "sh: 1: flent: not found")
            msg += f"; {layout.PROBE_ERR}: {err}"
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
    if p.first_sample_s is not None:
        rec["first_sample_s"] = p.first_sample_s
    if not rtts:
        return rec

    rec.update(rtt_p50_us=metrics.percentile(rtts, 50), rtt_p95_us=metrics.percentile(rtts, 95),
               rtt_p99_us=metrics.percentile(rtts, 99), rtt_max_us=rtts[-1])  # fmt: skip
    return rec
