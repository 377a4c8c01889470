"""Parse the bottleneck qdisc sampler's file (`raw/qdisc-rt1.txt`) and reduce it.

The sampler (ccbench.hosts.linux.LinuxHost.qdisc_sampler) writes, per sample, a line
`TS <unix seconds>` (taken just before tc was asked) and then tc's one-line answer to
`tc -s -j qdisc show dev DEV` (what ccbench.parse.tc reads). The sampler is stopped
with a signal, so the file may end inside a sample: an incomplete last sample (no
newline, or a TS line with no answer) is dropped; anything else that is not this
format raises ValueError naming the line.

Counters are the kernel's: `drops`, `sent_pkts` and `overlimits` are cumulative since
the qdisc was made; `backlog_pkts`/`backlog_bytes` are the queue at that instant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ccbench.metrics import percentile
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


def parse_qdisc_samples(text: str) -> list[QdiscSample]:
    """Samples in file order. ValueError for a line that is neither a TS line nor tc's
    JSON after one, or for timestamps that go backwards."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        lines.pop()  # cut inside the last line (the sampler was stopped while writing)
    out: list[QdiscSample] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("TS "):
            raise ValueError(f"line {i + 1}: expected 'TS <unix seconds>', got {line[:40]!r}")
        try:
            t = float(line[3:])
        except ValueError:
            raise ValueError(f"line {i + 1}: bad timestamp {line[3:40]!r}") from None
        if not math.isfinite(t) or t <= 0:
            raise ValueError(f"line {i + 1}: bad timestamp {line[3:40]!r}")
        if out and t < out[-1].t_unix:
            raise ValueError(f"line {i + 1}: timestamp goes backwards")
        if i + 1 >= len(lines):
            break  # the last TS line had no answer yet: stopped between the two
        try:
            stats = parse_tc_qdisc_json(lines[i + 1])
        except ValueError as e:
            raise ValueError(f"line {i + 2}: not tc -s -j qdisc output ({e})") from None
        out.append(QdiscSample(t, tuple(stats)))
        i += 2
    return out


def queue_points(
    samples: list[QdiscSample], queue: str = QUEUE_HANDLE, shaper: str = SHAPER_HANDLE
) -> list[QueuePoint]:
    """The child queue's series (samples without it, e.g. a qdisc being replaced, are
    left out)."""
    pts = []
    for s in samples:
        q = s.get(queue)
        if q is None or q.backlog_pkts is None or q.dropped is None or q.sent_pkts is None:
            continue
        sh = s.get(shaper)
        pts.append(
            QueuePoint(
                t_unix=s.t_unix,
                backlog_pkts=q.backlog_pkts,
                backlog_bytes=q.backlog_bytes or 0,
                drops=q.dropped,
                sent_pkts=q.sent_pkts,
                overlimits=sh.overlimits if sh is not None else None,
                limit_pkts=q.limit_pkts,
                limit_bytes=q.limit_bytes,
            )
        )
    return pts


def queue_stats(
    pts: list[QueuePoint],
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

    - full: backlog >= limit - 1 packets (pfifo), or within one frame of a byte limit
      (bfifo); None for a queue without a limit reading.
    - drop bursts: sampling intervals in which the drop counter rose; `burst_max` the
      largest rise in one interval.
    - drops cross-check: the series counts last - first; tc-before/after count the whole
      run. They differ only by drops before the first or after the last sample, which
      the counters show; `consistent` is False only when that does not explain the
      difference (counters that went backwards: the qdisc was replaced).
    """
    notes: list[str] = []
    win = [p for p in pts if t0 <= p.t_unix <= t0 + traffic_s]
    backlog = sorted(p.backlog_pkts for p in win)
    steps = [b.t_unix - a.t_unix for a, b in zip(pts, pts[1:], strict=False)]
    win_steps = [b.t_unix - a.t_unix for a, b in zip(win, win[1:], strict=False)]
    achieved = (win[-1].t_unix - win[0].t_unix) / (len(win) - 1) if len(win) > 1 else None
    out: dict[str, Any] = {
        "sampled": True,
        "samples": len(pts),
        "samples_in_traffic": len(win),
        "interval_s": interval_s,
        "interval_achieved_s": _r(achieved, 6),
        "max_gap_s": _r(max(win_steps), 6) if win_steps else None,
        "first_s": _r(pts[0].t_unix - t0, 4) if pts else None,
        "last_s": _r(pts[-1].t_unix - t0, 4) if pts else None,
    }
    if achieved is not None and achieved > 1.5 * interval_s:
        notes.append(f"the sampler took a sample every {achieved * 1e3:.1f} ms on average, "
                     f"not every {interval_s * 1e3:g} ms (a busy router CPU)")  # fmt: skip
    limit_pkts = next((p.limit_pkts for p in pts if p.limit_pkts is not None), None)
    limit_bytes = next((p.limit_bytes for p in pts if p.limit_bytes is not None), None)
    if limit_pkts is not None:
        full = [p.backlog_pkts >= limit_pkts - 1 for p in win]
    elif limit_bytes is not None:
        full = [p.backlog_bytes >= limit_bytes - frame_bytes for p in win]
    else:
        full = []
    rises = [b.drops - a.drops for a, b in zip(win, win[1:], strict=False)]
    out.update(
        limit_pkts=limit_pkts,
        limit_bytes=limit_bytes,
        backlog_mean_pkts=_r(sum(backlog) / len(backlog), 3) if backlog else None,
        backlog_p95_pkts=percentile(backlog, 95) if backlog else None,
        backlog_max_pkts=backlog[-1] if backlog else None,
        backlog_mean_bytes=_r(sum(p.backlog_bytes for p in win) / len(win), 1) if win else None,
        full_share=_r(sum(full) / len(full), 4) if full else None,
        drop_intervals=sum(1 for r in rises if r > 0),
        drop_burst_max=max(rises, default=0),
        drops_in_traffic=(win[-1].drops - win[0].drops) if win else None,
    )
    out["drops_check"] = _drops_check(pts, steps, before, after, t0)
    if out["drops_check"].get("note"):
        notes.append(out["drops_check"]["note"])
    out["notes"] = notes
    return out


def _drops_check(
    pts: list[QueuePoint], steps: list[float], before: QdiscStats | None,
    after: QdiscStats | None, t0: float,
) -> dict[str, Any]:  # fmt: skip
    series = pts[-1].drops - pts[0].drops if pts else None
    chk: dict[str, Any] = {"series": series, "counters": None, "equal": None,
                           "before_first_sample": None, "after_last_sample": None,
                           "consistent": True, "note": None}  # fmt: skip
    if not pts or before is None or after is None or before.dropped is None \
            or after.dropped is None:  # fmt: skip
        chk["note"] = "drops not cross-checked: no samples or no before/after counters"
        return chk
    assert series is not None
    counters = after.dropped - before.dropped
    pre = pts[0].drops - before.dropped
    post = after.dropped - pts[-1].drops
    backwards = any(b.drops < a.drops or b.sent_pkts < a.sent_pkts
                    for a, b in zip(pts, pts[1:], strict=False))  # fmt: skip
    chk.update(counters=counters, equal=series == counters, before_first_sample=pre,
               after_last_sample=post)  # fmt: skip
    if backwards or pre < 0 or post < 0:
        chk["consistent"] = False
        chk["note"] = (
            "queue counters disagree: the sampled drop counter went backwards "
            "or outside tc-before/after (the qdisc was replaced during the run)"
        )
    elif series != counters:
        parts = []
        if pre:
            parts.append(f"{pre} before the first sample ({pts[0].t_unix - t0:+.3f} s)")
        if post:
            parts.append(f"{post} after the last sample ({pts[-1].t_unix - t0:+.3f} s)")
        chk["note"] = (f"series counts {series} of {counters} drops: " + ", ".join(parts)
                       + " (outside the sampled span)")  # fmt: skip
    return chk


def _r(x: float | None, nd: int) -> float | None:
    return None if x is None else round(x, nd)
