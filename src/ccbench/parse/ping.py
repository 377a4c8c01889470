"""Parse Linux (iputils) and FreeBSD ping output into RTTs and loss.

The two differ in the counts line ("4 received" vs "4 packets received") and the
summary ("rtt min/avg/max/mdev" vs "round-trip min/avg/max/stddev"); both print
per-reply `time=<ms> ms`. Regexes run over the whole text, not line by line, so
output whose line breaks were lost (pasted into a web page) still parses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

_HEADER = re.compile(r"PING (\S+) \(")
_REPLY = re.compile(r"icmp_seq=(\d+) ttl=\d+ time[=<]([0-9.]+) ms( \(DUP!\))?")
_COUNTS = re.compile(
    r"(\d+) packets transmitted, (\d+) (?:packets )?received"
    r"(?:, \+(\d+) duplicates)?(?:, \+(\d+) errors)?"
)
_SUMMARY = re.compile(
    r"(rtt|round-trip) min/avg/max/(?:mdev|stddev) = "
    r"([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms"
)


@dataclass(frozen=True)
class PingResult:
    os: str | None  # "linux" or "freebsd" by output style; None if no summary seen
    target: str | None
    rtts_us: list[float] = field(default_factory=list)  # replies in order, no DUPs
    min_us: float | None = None
    avg_us: float | None = None
    max_us: float | None = None
    mdev_us: float | None = None  # iputils mdev / FreeBSD stddev (population)
    sent: int | None = None
    received: int | None = None
    duplicates: int = 0
    loss: float | None = None  # 1 - received/sent, from the counts (not the rounded %)


def parse_ping(text: str) -> PingResult:
    """Parse the output of one ping run.

    min/avg/max/mdev come from the summary line (more digits than the per-reply
    times on Linux); without a summary they are computed from the replies. Raises
    ValueError if the text holds more than one run (use parse_ping_runs).
    """
    runs = parse_ping_runs(text)
    if len(runs) > 1:
        raise ValueError(f"{len(runs)} ping runs in the text; use parse_ping_runs")
    return runs[0] if runs else _parse_one(text)


def parse_ping_runs(text: str) -> list[PingResult]:
    """Parse every run in a text (each starts with a `PING host (` header)."""
    starts = [m.start() for m in _HEADER.finditer(text)]
    if not starts:
        return []
    bounds = zip(starts, starts[1:] + [len(text)], strict=True)
    return [_parse_one(text[a:b]) for a, b in bounds]


def _parse_one(text: str) -> PingResult:
    header = _HEADER.search(text)
    rtts = [float(m.group(2)) * 1000.0 for m in _REPLY.finditer(text) if not m.group(3)]
    counts = _COUNTS.search(text)
    summary = _SUMMARY.search(text)
    sent = int(counts.group(1)) if counts else None
    received = int(counts.group(2)) if counts else None
    os_name = None
    if summary:
        os_name = "linux" if summary.group(1) == "rtt" else "freebsd"
        mn, avg, mx, mdev = (float(summary.group(i)) * 1000.0 for i in range(2, 6))
    elif rtts:
        mn, mx = min(rtts), max(rtts)
        avg = sum(rtts) / len(rtts)
        mdev = math.sqrt(max(sum(r * r for r in rtts) / len(rtts) - avg * avg, 0.0))
    else:
        mn = avg = mx = mdev = math.nan
    return PingResult(
        os=os_name,
        target=header.group(1) if header else None,
        rtts_us=[round(r, 3) for r in rtts],
        min_us=_num(mn),
        avg_us=_num(avg),
        max_us=_num(mx),
        mdev_us=_num(mdev),
        sent=sent,
        received=received,
        duplicates=int(counts.group(3)) if counts and counts.group(3) else 0,
        loss=1.0 - received / sent if sent and received is not None else None,
    )


def _num(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 3)
