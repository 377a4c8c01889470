"""Parse the bottleneck qdisc sampler's file (`raw/qdisc-rt1.txt`) and reduce it.

The sampler (ccbench.hosts.linux.LinuxHost.qdisc_sampler) writes, per sample, a line
`TS <unix seconds>` (taken just before tc was asked) and then tc's one-line answer to
`tc -s -j qdisc show dev DEV` (what ccbench.parse.tc reads). The sampler is stopped
with a signal, so the file may end inside a sample: an incomplete last sample (no
newline, or a TS line with no answer) is dropped; anything else that is not this
format raises ValueError naming the line.

Counters are the kernel's: `drops`, `sent_pkts` and `overlimits` are cumulative since
the qdisc was made; `backlog_pkts`/`backlog_bytes` are the queue at that instant, read
one after the other without the queue's lock (net/sched/sch_api.c tc_fill_qdisc: the
packet count first), so a sample can be off by the few packets that came or went in
between. A queued GSO/GRO skb is one packet of all its segments' bytes
(net/core/dev.c qdisc_pkt_len_init): bytes ÷ packets above one frame shows super-packets.

Streams: iter_qdisc_samples (an open file) -> iter_queue_points -> QueueStats (one
pass, memory bounded by the queue's limit) or queue_point_batches; the list functions
wrap them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa

from ccbench.parse.batches import BATCH_ROWS, batched_records, complete_lines
from ccbench.parse.counts import ValueCounts
from ccbench.parse.tc import QdiscStats, parse_tc_qdisc_json

QUEUE_HANDLE = "10:"  # the child queue under the shaper (hosts.linux.bottleneck)
SHAPER_HANDLE = "1:"


@dataclass(frozen=True)
class QdiscSample:
    t_unix: float
    qdiscs: tuple[QdiscStats, ...]

    def get(self, handle: str) -> QdiscStats | None:
        return next((q for q in self.qdiscs if q.handle == handle), None)


@dataclass(frozen=True)
class QueuePoint:
    """One sample of the bottleneck: the child queue's state and the shaper's count."""

    t_unix: float
    backlog_pkts: int
    backlog_bytes: int
    drops: int  # cumulative (kernel counter)
    sent_pkts: int  # cumulative
    overlimits: int | None  # the shaper's, cumulative
    limit_pkts: int | None
    limit_bytes: int | None


POINT_SCHEMA = pa.schema([("t_unix", pa.float64())] + [
    (k, pa.int64()) for k in ("backlog_pkts", "backlog_bytes", "drops", "sent_pkts",
                              "overlimits", "limit_pkts", "limit_bytes")
])  # fmt: skip


def parse_qdisc_samples(text: str) -> list[QdiscSample]:
    """Samples in file order. ValueError for a line that is neither a TS line nor tc's
    JSON after one, or for timestamps that go backwards. For long files iterate
    iter_qdisc_samples over the open file instead (this wraps it)."""
    lines = text.split("\n")
    lines.pop()  # "" after a final newline, or cut inside the last line
    return list(iter_qdisc_samples(lines, newlines=False))


def iter_qdisc_samples(lines: Iterable[str], newlines: bool = True) -> Iterator[QdiscSample]:
    """The samples of a sampler file read as a stream (memory: one sample). `lines`:
    the file's lines with their newlines (an open text file); a last line without one
    was cut by the sampler's stop and is dropped, as is a last TS line with no answer.
    `newlines=False`: lines without newlines, all complete."""
    t_prev: float | None = None
    pending: tuple[int, float] | None = None  # (line number, time) of a TS line
    numbered = complete_lines(lines) if newlines else enumerate(lines, start=1)
    for n, raw in numbered:
        if pending is None:
            t = _ts_line(n, raw)
            if t_prev is not None and t < t_prev:
                raise ValueError(f"line {n}: timestamp goes backwards")
            pending = (n, t)
            continue
        try:
            stats = parse_tc_qdisc_json(raw)
        except ValueError as e:
            raise ValueError(f"line {n}: not tc -s -j qdisc output ({e})") from None
        t_prev = pending[1]
        yield QdiscSample(pending[1], tuple(stats))
        pending = None


def _ts_line(n: int, line: str) -> float:
    if not line.startswith("TS "):
        raise ValueError(f"line {n}: expected 'TS <unix seconds>', got {line[:40]!r}")
    try:
        t = float(line[3:])
    except ValueError:
        raise ValueError(f"line {n}: bad timestamp {line[3:40]!r}") from None
    if not math.isfinite(t) or t <= 0:
        raise ValueError(f"line {n}: bad timestamp {line[3:40]!r}")
    return t


def queue_points(
    samples: Iterable[QdiscSample], queue: str = QUEUE_HANDLE, shaper: str = SHAPER_HANDLE
) -> list[QueuePoint]:
    """The child queue's series (samples without it, e.g. a qdisc being replaced, are
    left out)."""
    return list(iter_queue_points(samples, queue, shaper))


def iter_queue_points(
    samples: Iterable[QdiscSample], queue: str = QUEUE_HANDLE, shaper: str = SHAPER_HANDLE
) -> Iterator[QueuePoint]:
    """queue_points as a stream: one point per sample that has the child queue."""
    for s in samples:
        q = s.get(queue)
        if q is None or q.backlog_pkts is None or q.dropped is None or q.sent_pkts is None:
            continue
        sh = s.get(shaper)
        yield QueuePoint(
            t_unix=s.t_unix,
            backlog_pkts=q.backlog_pkts,
            backlog_bytes=q.backlog_bytes or 0,
            drops=q.dropped,
            sent_pkts=q.sent_pkts,
            overlimits=sh.overlimits if sh is not None else None,
            limit_pkts=q.limit_pkts,
            limit_bytes=q.limit_bytes,
        )


def queue_point_batches(
    points: Iterable[QueuePoint], rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """The points as RecordBatches (POINT_SCHEMA) of at most `rows` rows."""
    yield from batched_records((asdict(p) for p in points), POINT_SCHEMA, rows)


# The queue held super-packets (GSO/TSO skbs, GRO/LRO aggregates) when more than this
# share of its samples with a backlog, and at least SUPER_MIN_SAMPLES of them, hold more
# bytes than their packets can as frames. One sample alone proves nothing: the dump
# reads the packet count before the bytes, unlocked, and a packet enqueued in between
# adds its bytes only. Measured here with every offload off (13 runs, both local
# layouts, 100 Mbit/s-1 Gbit/s, samples every 2-50 ms): 10 of 6,049 samples with a
# backlog were over, by 1 to 5 frames, at most 0.6 % of one run's; with a sender's
# TSO/GSO on, 99.9-100 % (docs/fidelity.md, "Super-packets at the bottleneck").
SUPER_SHARE = 0.05
SUPER_MIN_SAMPLES = 3


def queue_stats(
    pts: Iterable[QueuePoint],
    t0: float,
    traffic_s: float,
    interval_s: float,
    frame_bytes: int,
    before: QdiscStats | None = None,
    after: QdiscStats | None = None,
) -> dict[str, Any]:
    """summary.json's `queue`: backlog statistics over the samples taken while the
    flows ran (t0 .. t0 + traffic_s), drop bursts, how well the interval was kept, and
    the cross-check of the series' drops against the before/after counters.
    One pass over `pts` (QueueStats), so a stream of points works in bounded memory.

    - full: backlog >= limit - 1 packets (pfifo), or within one frame of a byte limit
      (bfifo); None for a queue without a limit reading.
    - drop bursts: sampling intervals in which the drop counter rose; `burst_max` the
      largest rise in one interval.
    - bytes per queued packet (samples with a backlog): the largest sample's backlog
      bytes ÷ packets, the mean (bytes summed ÷ packets summed), and the samples holding
      more bytes than their packets can as frames; `super_packets` when more than
      SUPER_SHARE of the samples, and at least SUPER_MIN_SAMPLES, do (see there).
    - drops cross-check: the series counts last - first; tc-before/after count the whole
      run. They differ only by drops before the first or after the last sample, which
      the counters show; `consistent` is False only when that does not explain the
      difference (counters that went backwards: the qdisc was replaced).
    """
    acc = QueueStats(t0, traffic_s, interval_s, frame_bytes)
    for p in pts:
        acc.add(p)
    return acc.result(before, after)


class QueueStats:
    """queue_stats computed one point at a time: memory is a count per distinct
    backlog value (bounded by the queue's limit), not per sample."""

    def __init__(self, t0: float, traffic_s: float, interval_s: float, frame_bytes: int):
        self.t0, self.t_end = t0, t0 + traffic_s
        self.interval_s, self.frame_bytes = interval_s, frame_bytes
        self.n = 0
        self.first: QueuePoint | None = None
        self.last: QueuePoint | None = None
        self.backwards = False
        self.limit_pkts: int | None = None
        self.limit_bytes: int | None = None
        # over the points inside the traffic window
        self.win_n = 0
        self.win_first: QueuePoint | None = None
        self.win_last: QueuePoint | None = None
        self.max_gap: float | None = None
        self.backlog = ValueCounts()
        self.backlog_bytes = ValueCounts()
        self.drop_intervals = 0
        self.burst_max: int | None = None
        # bytes per queued packet, over the window's samples with a backlog
        self.busy_n = 0
        self.busy_bytes = 0
        self.busy_pkts = 0
        self.pkt_bytes_max: float | None = None
        self.over_frame = 0

    def add(self, p: QueuePoint) -> None:
        a = self.last
        if a is not None and (p.drops < a.drops or p.sent_pkts < a.sent_pkts):
            self.backwards = True
        self.first = self.first or p
        self.last = p
        self.n += 1
        if self.limit_pkts is None:
            self.limit_pkts = p.limit_pkts
        if self.limit_bytes is None:
            self.limit_bytes = p.limit_bytes
        if not self.t0 <= p.t_unix <= self.t_end:
            return
        w = self.win_last
        if w is not None:
            gap = p.t_unix - w.t_unix
            self.max_gap = gap if self.max_gap is None else max(self.max_gap, gap)
            rise = p.drops - w.drops
            self.drop_intervals += rise > 0
            self.burst_max = rise if self.burst_max is None else max(self.burst_max, rise)
        self.win_first = self.win_first or p
        self.win_last = p
        self.win_n += 1
        self.backlog.add_one(p.backlog_pkts)
        self.backlog_bytes.add_one(p.backlog_bytes)
        if p.backlog_pkts > 0:
            self.busy_n += 1
            self.busy_bytes += p.backlog_bytes
            self.busy_pkts += p.backlog_pkts
            size = p.backlog_bytes / p.backlog_pkts
            self.pkt_bytes_max = size if self.pkt_bytes_max is None else max(self.pkt_bytes_max,
                                                                             size)  # fmt: skip
            self.over_frame += p.backlog_bytes > p.backlog_pkts * self.frame_bytes

    def result(
        self, before: QdiscStats | None = None, after: QdiscStats | None = None
    ) -> dict[str, Any]:
        notes: list[str] = []
        t0, win_n, wf, wl = self.t0, self.win_n, self.win_first, self.win_last
        achieved = None
        if win_n > 1 and wf is not None and wl is not None:
            achieved = (wl.t_unix - wf.t_unix) / (win_n - 1)
        out: dict[str, Any] = {
            "sampled": True,
            "samples": self.n,
            "samples_in_traffic": win_n,
            "interval_s": self.interval_s,
            "interval_achieved_s": _r(achieved, 6),
            "max_gap_s": _r(self.max_gap, 6),
            "first_s": _r(self.first.t_unix - t0, 4) if self.first else None,
            "last_s": _r(self.last.t_unix - t0, 4) if self.last else None,
        }
        if achieved is not None and achieved > 1.5 * self.interval_s:
            notes.append(f"the sampler took a sample every {achieved * 1e3:.1f} ms on average, "
                         f"not every {self.interval_s * 1e3:g} ms (a busy router CPU)")  # fmt: skip
        bl = self.backlog
        full: int | None = None
        if self.limit_pkts is not None:
            full = _at_least(bl, self.limit_pkts - 1)
        elif self.limit_bytes is not None:
            full = _at_least(self.backlog_bytes, self.limit_bytes - self.frame_bytes)
        out.update(
            limit_pkts=self.limit_pkts,
            limit_bytes=self.limit_bytes,
            backlog_mean_pkts=_r(bl.mean(), 3) if win_n else None,
            backlog_p95_pkts=bl.percentile(95) if win_n else None,
            backlog_max_pkts=bl.max() if win_n else None,
            backlog_mean_bytes=_r(self.backlog_bytes.mean(), 1) if win_n else None,
            full_share=_r(full / win_n, 4) if full is not None and win_n else None,
            drop_intervals=self.drop_intervals,
            drop_burst_max=0 if self.burst_max is None else self.burst_max,
            drops_in_traffic=(wl.drops - wf.drops) if wf and wl else None,
        )
        out.update(self._pkt_bytes())
        out["drops_check"] = self._drops_check(before, after)
        if out["drops_check"].get("note"):
            notes.append(out["drops_check"]["note"])
        out["notes"] = notes
        return out

    def _pkt_bytes(self) -> dict[str, Any]:
        n = self.busy_n
        return {
            "frame_bytes": self.frame_bytes,
            "samples_with_backlog": n,
            "pkt_bytes_max": _r(self.pkt_bytes_max, 1),
            "pkt_bytes_mean": _r(self.busy_bytes / self.busy_pkts, 1) if n else None,
            "samples_over_frame": self.over_frame,
            "super_packets": (self.over_frame >= SUPER_MIN_SAMPLES
                              and self.over_frame > SUPER_SHARE * n) if n else None,
        }  # fmt: skip

    def _drops_check(self, before: QdiscStats | None, after: QdiscStats | None) -> dict[str, Any]:
        first, last = self.first, self.last
        series = last.drops - first.drops if first and last else None
        chk: dict[str, Any] = {"series": series, "counters": None, "equal": None,
                               "before_first_sample": None, "after_last_sample": None,
                               "consistent": True, "note": None}  # fmt: skip
        if first is None or last is None or before is None or after is None \
                or before.dropped is None or after.dropped is None:  # fmt: skip
            chk["note"] = "drops not cross-checked: no samples or no before/after counters"
            return chk
        assert series is not None
        counters = after.dropped - before.dropped
        pre = first.drops - before.dropped
        post = after.dropped - last.drops
        chk.update(counters=counters, equal=series == counters, before_first_sample=pre,
                   after_last_sample=post)  # fmt: skip
        if self.backwards or pre < 0 or post < 0:
            chk["consistent"] = False
            chk["note"] = (
                "queue counters disagree: the sampled drop counter went backwards "
                "or outside tc-before/after (the qdisc was replaced during the run)"
            )
        elif series != counters:
            parts = []
            if pre:
                parts.append(f"{pre} before the first sample ({first.t_unix - self.t0:+.3f} s)")
            if post:
                parts.append(f"{post} after the last sample ({last.t_unix - self.t0:+.3f} s)")
            chk["note"] = (f"series counts {series} of {counters} drops: " + ", ".join(parts)
                           + " (outside the sampled span)")  # fmt: skip
        return chk


def _at_least(counts: ValueCounts, threshold: float) -> int:
    return sum(c for v, c in counts.items() if v >= threshold)


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)
