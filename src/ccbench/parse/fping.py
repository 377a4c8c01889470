"""fping's per-probe output with timestamps (`fping -D -p MS -c N host`, fping 4/5).

One stdout line per probe, replied or not:
    [1795376097.70269] 198.18.252.2 : [1], 64 bytes, 0.088 ms (0.088 avg, 50% loss)
    [1795376097.70256] 198.18.252.2 : [0], timed out (NaN avg, 100% loss)
The summary (xmt/rcv/%loss) goes to stderr and is not needed: every probe has a line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

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
    return read_fping(text.splitlines())


def read_fping(lines: Iterable[str], window: int | None = None) -> FpingResult:
    """parse_fping over a stream (an open file); see iter_fping_probes for `window`."""
    target: list[str] = []
    sent = 0
    replies: list[tuple[float, float]] = []
    for p in iter_fping_probes(lines, window, target):
        sent += 1
        if p.rtt_ms is not None:
            replies.append((p.t_unix, p.rtt_ms))
    return FpingResult(
        target=target[0] if target else None,
        sent=sent,
        received=len(replies),
        rtts_us=[ms * 1e3 for _, ms in replies],
        times=[t for t, _ in replies],
    )


class FpingProbe(NamedTuple):
    seq: int
    t_unix: float  # as fping printed it: of the reply, or of the timeout line
    rtt_ms: float | None  # None: timed out


def iter_fping_probes(
    lines: Iterable[str], window: int | None = None, target: list[str] | None = None
) -> Iterator[FpingProbe]:
    """One probe per sequence number, in sequence order. A late reply after its
    timeout line is the reply (fping prints both). `window`: hold at most this many
    sequence numbers back for such late lines (memory bounded by it); a line for a
    probe already given out is then ignored. None: hold all (exactly parse_fping).
    `target`, if given, receives the target's name."""
    held: dict[int, tuple[float, float | None]] = {}
    done_below = 0  # every seq below this was given out
    name: str | None = None
    for line in lines:
        m = _LINE.match(line.strip())
        if not m:
            continue
        if name is not None and m["host"] != name:
            raise ValueError(f"fping output for two targets ({name}, {m['host']})")
        if name is None:
            name = m["host"]
            if target is not None:
                target.append(name)
        seq = int(m["seq"])
        ms = float(m["ms"]) if m["ms"] is not None else None
        if seq >= done_below and (ms is not None or seq not in held):
            held[seq] = (float(m["t"]), ms)
        if window is not None and len(held) > 2 * window:  # flush in bulk: sorting is not free
            for s in sorted(held)[: len(held) - window]:
                yield FpingProbe(s, *held.pop(s))
                done_below = s + 1
    for s in sorted(held):
        yield FpingProbe(s, *held.pop(s))
