"""The delay element's statistics over a run (summary.json `delay_element`)."""

from __future__ import annotations

from typing import Any

from ccbench import layout
from ccbench.jsonio import is_number
from ccbench.layout import AFTER, BEFORE, RawDir


def delay_element(rd: RawDir, needed: bool) -> dict[str, Any] | None:
    """The delay element's statistics over the run (after minus before); `needed`:
    the run's delay element writes them (ccdelay), so they must be there."""
    after = rd.json(layout.delay(AFTER), required=needed)
    before = rd.json(layout.delay(BEFORE), required=needed)
    if after is None or (before is None and rd.exists(layout.delay(BEFORE))):
        return None
    try:
        return delay_between(before or {}, after)
    except (TypeError, ValueError, AttributeError) as e:
        rd.problem(layout.delay(AFTER), f"not ccdelay statistics ({type(e).__name__}: {e})")
        return None


def delay_between(b: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The element's statistics between two of its stats files (as dicts)."""
    la, lb = after.get("lateness", {}), b.get("lateness", {})
    n = la.get("count", 0) - lb.get("count", 0)
    late = la.get("over_threshold", 0) - lb.get("over_threshold", 0)
    kq_a, kq_b = after.get("kernel_queue", {}), b.get("kernel_queue", {})
    cpu_a, cpu_b = after.get("cpu", {}), b.get("cpu", {})
    buckets = [
        x - y
        for x, y in zip(
            la.get("bucket_counts", []),
            lb.get("bucket_counts", [0] * len(la.get("bucket_counts", []))),
            strict=False,
        )
    ]
    if not all(is_number(v) for v in (n, late, *buckets)):
        raise ValueError("lateness counters are not numbers")
    back = [k for k, v in (("lateness.count", n), ("lateness.over_threshold", late)) if v < 0]
    back += ["lateness.bucket_counts"] if any(v < 0 for v in buckets) else []
    if back:
        raise ValueError(f"{', '.join(back)} went backwards from {layout.delay(BEFORE)}")
    return {
        "packets": n,
        "late_5ms": late,
        "late_share": late / n if n else None,
        "max_late_ms_since_start": la.get("max_ms"),
        "bucket_edges_ms": la.get("bucket_edges_ms"),
        "bucket_counts": buckets,
        "queue_full_drops": max(
            0, (kq_a.get("queue_full_drops") or 0) - (kq_b.get("queue_full_drops") or 0)
        ),
        # Packets the element never saw (netlink socket overflow) or chose to drop.
        "lost": max(0, (after.get("id_gaps") or 0) - (b.get("id_gaps") or 0))
        + max(0, (after.get("packets_dropped_late") or 0) - (b.get("packets_dropped_late") or 0)),
        "cpu_s": (cpu_a.get("user_s", 0) + cpu_a.get("system_s", 0))
        - (cpu_b.get("user_s", 0) + cpu_b.get("system_s", 0)),
        "clock_source": after.get("clock_source"),
    }
