"""fping's per-probe output with timestamps (`fping -D -p MS -c N host`, fping 4/5).

fping >= 5.0 prints one stdout line per probe, replied or not:
    [1795376097.70269] 198.18.252.2 : [1], 64 bytes, 0.088 ms (0.088 avg, 50% loss)
    [1795376097.70256] 198.18.252.2 : [0], timed out (NaN avg, 100% loss)
fping < 5.0 prints a line for a reply only (its CHANGELOG, 5.0: "a line is printed for
every lost packet"), with the IP header in the size and a microsecond timestamp
(src/fping.c, wait_for_reply()):
    [1795376097.741387] 198.18.4.2 : [0], 84 bytes, 41.2 ms (41.2 avg, 0% loss)
So what was sent is the count asked (`-c N`, `asked`), or, not knowing it, at least the
highest sequence number seen + 1. The summary (xmt/rcv/%loss) goes to stderr.
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
    sent: int  # probes sent: the count asked, else those seen (a line, or a later one)
    received: int
    rtts_us: list[float]  # replies in sequence order
    times: list[float]  # unix time of each reply, as fping printed it


def parse_fping(text: str, asked: int | None = None) -> FpingResult:
    """Replies and timeouts of one fping run against one target; `asked`: the probe
    count it was run with (-c), which fping < 5.0 does not print."""
    return read_fping(text.splitlines(), asked=asked)


def read_fping(
    lines: Iterable[str], window: int | None = None, asked: int | None = None
) -> FpingResult:
    """parse_fping over a stream (an open file); see iter_fping_probes for `window`."""
    target: list[str] = []
    sent = 0
    replies: list[tuple[float, float]] = []
    for p in iter_fping_probes(lines, window, target):
        # A line for probe k (a reply, or 5.x's timeout) means k + 1 were sent.
        sent = max(sent + 1, p.seq + 1)
        if p.rtt_ms is not None:
            replies.append((p.t_unix, p.rtt_ms))
    return FpingResult(
        target=target[0] if target else None,
        sent=max(sent, asked or 0),
        received=len(replies),
        rtts_us=[ms * 1e3 for _, ms in replies],
        times=[t for t, _ in replies],
    )


def count_asked(argv: list[str]) -> int | None:
    """The probe count an fping command line asks for (-c N, -cN, --count[=]N)."""
    for i, a in enumerate(argv):
        if a in ("-c", "--count") and i + 1 < len(argv):
            v = argv[i + 1]
        elif a.startswith("--count="):
            v = a.split("=", 1)[1]
        elif a.startswith("-c") and len(a) > 2:
            v = a[2:]
        else:
            continue
        return int(v) if v.isdigit() else None
    return None


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
