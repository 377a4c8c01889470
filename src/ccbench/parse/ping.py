"""Parse Linux (iputils) and FreeBSD ping output into RTTs and loss.

The two differ in the counts line ("4 received" vs "4 packets received") and the
summary ("rtt min/avg/max/mdev" vs "round-trip min/avg/max/stddev"); both print
per-reply `time=<ms> ms`. No pattern spans a line, so output whose line breaks were
lost (pasted into a web page) still parses, and a file can be read as a stream
(read_ping, iter_ping_runs): memory holds the replies, not the text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
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
    return read_ping([text])


def parse_ping_runs(text: str) -> list[PingResult]:
    """Parse every run in a text (each starts with a `PING host (` header)."""
    return list(iter_ping_runs([text]))


def read_ping(lines: Iterable[str]) -> PingResult:
    """parse_ping over a stream (an open file, or any iterable of text pieces that
    break only at line ends): memory holds the run's replies, not its text."""
    headless = _Run()
    runs = iter_ping_runs(lines, headless)
    first = next(runs, None)
    extra = sum(1 for _ in runs)
    if extra:
        raise ValueError(f"{extra + 1} ping runs in the text; use parse_ping_runs")
    return first if first is not None else headless.result()


def iter_ping_runs(lines: Iterable[str], headless: _Run | None = None) -> Iterator[PingResult]:
    """Each run (from its `PING host (` header on) as it ends. The patterns never span
    a line, so reading line by line finds what a search of the whole text finds, and a
    text whose line breaks were lost (one long line) still splits at its headers.
    Text before the first header goes to `headless` (parse_ping's no-header case)."""
    run = headless or _Run()
    seen = False
    for line in lines:
        at = 0
        for m in _HEADER.finditer(line):
            run.feed(line[at : m.start()])
            if seen:
                yield run.result()
            run, seen, at = _Run(), True, m.start()
        run.feed(line[at:])
    if seen:
        yield run.result()


class _Run:
    """One run's text fed in order; holds what _parse_one needs, not the text."""

    def __init__(self) -> None:
        self.target: str | None = None
        self.rtts: list[float] = []
        self.counts: re.Match[str] | None = None
        self.summary: re.Match[str] | None = None

    def feed(self, text: str) -> None:
        if not text:
            return
        if self.target is None and (h := _HEADER.search(text)):
            self.target = h.group(1)
        self.rtts += [float(m.group(2)) * 1000.0 for m in _REPLY.finditer(text) if not m.group(3)]
        self.counts = self.counts or _COUNTS.search(text)
        self.summary = self.summary or _SUMMARY.search(text)

    def result(self) -> PingResult:
        rtts, counts, summary = self.rtts, self.counts, self.summary
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
            target=self.target,
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
