"""rt1's bottleneck during a run: its queue and shaper counters, tc before and after the
traffic (summary.json `bottleneck`; the queue sampled over time, `queue`, is the qdisc
instrument's part: ccbench.instruments.qdisc)."""

from __future__ import annotations

import json
from typing import Any

from ccbench import layout
from ccbench.layout import AFTER, BEFORE, RawDir
from ccbench.parse.tc import parse_tc_qdisc_json


def _configured(qdiscs: list[Any]) -> dict[str, Any]:
    """rt1's queue and shaper as the kernel had them when the run started."""
    q = next((x for x in qdiscs if x.handle == "10:"), None)
    shaper = next((x for x in qdiscs if x.handle == "1:"), None)
    return {
        "queue_kind": q.kind if q else None,
        "queue_limit_pkts": q.limit_pkts if q else None,
        "queue_limit_bytes": q.limit_bytes if q else None,
        "shaper_rate_bps": shaper.rate_bps if shaper else None,
    }


def bottleneck_of(rd: RawDir) -> dict[str, Any]:
    """Counters of the child queue (handle 10:) and the shaper, after minus before."""
    out: dict[str, Any] = {}
    stats = []
    for name in (layout.tc(BEFORE), layout.tc(AFTER)):
        text = rd.text(name, required=True)
        if text is None:
            return {"drops": None}
        try:
            stats.append(parse_tc_qdisc_json(text))
        except json.JSONDecodeError as e:
            rd.problem(name, f"not valid JSON ({e})")
        except ValueError as e:
            rd.problem(name, str(e))
    if len(stats) < 2:
        return {"drops": None}
    before, after = stats
    out["configured"] = _configured(before)
    by_handle = {q.handle: q for q in before}
    for q in after:
        b = by_handle.get(q.handle)
        if b is None:
            continue
        name = {"10:": "queue", "1:": "shaper"}.get(q.handle, q.handle)
        out[name] = {
            "kind": q.kind,
            "sent_pkts": (q.sent_pkts or 0) - (b.sent_pkts or 0),
            "sent_bytes": (q.sent_bytes or 0) - (b.sent_bytes or 0),
            "dropped": (q.dropped or 0) - (b.dropped or 0),
            "overlimits": (q.overlimits or 0) - (b.overlimits or 0),
        }
    if "queue" not in out:
        rd.problem(layout.tc(AFTER), "no bottleneck queue (handle 10:) in both snapshots")
    out["drops"] = out.get("queue", {}).get("dropped")
    return out
