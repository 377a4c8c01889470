"""fping's per-probe output with timestamps (`fping -D -p MS -c N host`, fping 4/5).

One stdout line per probe, replied or not:
    [1795376097.70269] 198.18.252.2 : [1], 64 bytes, 0.088 ms (0.088 avg, 50% loss)
    [1795376097.70256] 198.18.252.2 : [0], timed out (NaN avg, 100% loss)
The summary (xmt/rcv/%loss) goes to stderr and is not needed: every probe has a line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(
    r"^\[(?P<t>\d+(?:\.\d+)?)\] (?P<host>\S+)\s+: \[(?P<seq>\d+)\], "
    r"(?:\d+ bytes, (?P<ms>[0-9.]+) ms|timed out)"
)


@dataclass(frozen=True)
class FpingResult:
    target: str | None
    sent: int  # probes with a line (replied or timed out)
    received: int
    rtts_us: list[float]  # replies in sequence order
    times: list[float]  # unix time of each reply, as fping printed it


def parse_fping(text: str) -> FpingResult:
    """Replies and timeouts of one fping run against one target."""
    seqs: dict[int, tuple[float, float | None]] = {}
    target = None
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        if target is not None and m["host"] != target:
            raise ValueError(f"fping output for two targets ({target}, {m['host']})")
        target = m["host"]
        # a late reply after its timeout line is the reply (fping prints both)
        ms = float(m["ms"]) if m["ms"] is not None else None
        if ms is not None or int(m["seq"]) not in seqs:
            seqs[int(m["seq"])] = (float(m["t"]), ms)
    replies = [(t, ms) for _, (t, ms) in sorted(seqs.items()) if ms is not None]
    return FpingResult(
        target=target,
        sent=len(seqs),
        received=len(replies),
        rtts_us=[ms * 1e3 for _, ms in replies],
        times=[t for t, _ in replies],
    )
