"""queue_stats in one pass (QueueStats) against the list computation it replaced,
on random series: packet- and byte-limited queues, points outside the traffic window,
counters that go backwards (a replaced qdisc)."""

from __future__ import annotations

import random

import pytest

from ccbench.metrics import percentile
from ccbench.parse.qdisc import QueuePoint, queue_stats


def reference(pts: list[QueuePoint], t0: float, traffic_s: float, frame: int) -> dict:
    win = [p for p in pts if t0 <= p.t_unix <= t0 + traffic_s]
    backlog = sorted(p.backlog_pkts for p in win)
    steps = [b.t_unix - a.t_unix for a, b in zip(win, win[1:], strict=False)]
    limit_pkts = next((p.limit_pkts for p in pts if p.limit_pkts is not None), None)
    limit_bytes = next((p.limit_bytes for p in pts if p.limit_bytes is not None), None)
    if limit_pkts is not None:
        full = [p.backlog_pkts >= limit_pkts - 1 for p in win]
    else:
        full = [p.backlog_bytes >= limit_bytes - frame for p in win] if limit_bytes else []
    rises = [b.drops - a.drops for a, b in zip(win, win[1:], strict=False)]
    return {
        "samples_in_traffic": len(win),
        "interval_achieved_s": round((win[-1].t_unix - win[0].t_unix) / (len(win) - 1), 6)
        if len(win) > 1 else None,
        "max_gap_s": round(max(steps), 6) if steps else None,
        "backlog_mean_pkts": round(sum(backlog) / len(backlog), 3) if backlog else None,
        "backlog_p95_pkts": percentile(backlog, 95) if backlog else None,
        "backlog_max_pkts": backlog[-1] if backlog else None,
        "backlog_mean_bytes": round(sum(p.backlog_bytes for p in win) / len(win), 1)
        if win else None,
        "full_share": round(sum(full) / len(full), 4) if full else None,
        "drop_intervals": sum(1 for r in rises if r > 0),
        "drop_burst_max": max(rises, default=0),
        "drops_in_traffic": win[-1].drops - win[0].drops if win else None,
    }  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_one_pass_equals_the_list_computation(seed: int) -> None:
    rng = random.Random(seed)
    limit_pkts = rng.choice([48, None])
    limit_bytes = None if limit_pkts else rng.choice([72_000, None])
    t, drops, sent, pts = 100.0, 0, 0, []
    for _ in range(rng.randrange(0, 60)):
        t += rng.uniform(0.03, 0.2)
        drops += rng.choice([0, 0, 1, 5]) - (rng.random() < 0.03) * 7  # rarely backwards
        sent += rng.randrange(0, 500)
        b = rng.randrange(0, 49)
        pts.append(QueuePoint(t, b, b * 1514, drops, sent, None, limit_pkts, limit_bytes))
    got = queue_stats(iter(pts), 101.0, 4.0, 0.05, 1514)
    want = reference(pts, 101.0, 4.0, 1514)
    assert {k: got[k] for k in want} == want
    assert got["samples"] == len(pts)
