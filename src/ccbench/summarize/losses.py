"""The loss ledger of a run (summary.json `loss_ledger`, ccbench.ledger)."""

from __future__ import annotations

from typing import Any

from ccbench import ledger
from ccbench.layout import RawDir


def loss_ledger(rd: RawDir) -> dict[str, Any] | None:
    """The loss ledger (ccbench.ledger) from drops-before/after.json; None for runs
    recorded before ccbench took these snapshots."""
    if not (rd.exists("drops-before.json") or rd.exists("drops-after.json")):
        return None
    before = rd.json("drops-before.json", required=True)
    after = rd.json("drops-after.json", required=True)
    if before is None or after is None:
        return None
    try:
        return ledger.account(before, after)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        rd.problem("drops-after.json", f"drop counters unreadable ({e})")
        return None


def ledger_reasons(
    led: dict[str, Any], flows: list[dict[str, Any]], bneck: dict[str, Any],
    delay: dict[str, Any] | None,
) -> list[str]:  # fmt: skip
    retx = [f["retransmits"] for f in flows]
    # tbf/htb count their child queue's drops in their own: the larger is the total.
    parts = [bneck.get(k, {}).get("dropped") for k in ("queue", "shaper") if k in bneck]
    bottleneck = max(parts) if parts and None not in parts else None
    delay_pkts = ((delay or {}).get("queue_full_drops") or 0) + ((delay or {}).get("lost") or 0)
    total_retx = sum(retx) if retx and None not in retx else None
    led["bottleneck_pkts"] = bottleneck
    led["retransmits"] = total_retx
    return ledger.check(led, bottleneck, delay_pkts, total_retx)
