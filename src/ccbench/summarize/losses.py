"""The loss ledger of a run (summary.json `loss_ledger`, ccbench.ledger)."""

from __future__ import annotations

from typing import Any

from ccbench import layout, ledger
from ccbench.layout import RawDir
from ccbench.parse.ss import SsReader
from ccbench.reasons import Reason


def loss_ledger(rd: RawDir) -> dict[str, Any] | None:
    """The loss ledger (ccbench.ledger) from drops-before/after.json; None for runs
    recorded before ccbench took these snapshots."""
    names = layout.drops(layout.BEFORE), layout.drops(layout.AFTER)
    if not any(rd.exists(n) for n in names):
        return None
    before, after = (rd.json(n, required=True) for n in names)
    if before is None or after is None:
        return None
    try:
        return ledger.account(before, after)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        rd.problem(names[1], f"drop counters unreadable ({e})")
        return None


def ledger_reasons(
    led: dict[str, Any], flows: list[dict[str, Any]], bneck: dict[str, Any],
    delay: dict[str, Any] | None, spurious: int | None = None,
) -> list[Reason]:  # fmt: skip
    retx = [f["retransmits"] for f in flows]
    # tbf/htb count their child queue's drops in their own: the larger is the total.
    parts = [bneck.get(k, {}).get("dropped") for k in ("queue", "shaper") if k in bneck]
    bottleneck = max(parts) if parts and None not in parts else None
    delay_pkts = ((delay or {}).get("queue_full_drops") or 0) + ((delay or {}).get("lost") or 0)
    total_retx = sum(retx) if retx and None not in retx else None
    led["bottleneck_pkts"] = bottleneck
    led["retransmits"] = total_retx
    led["spurious_retransmits"] = spurious
    return ledger.check(led, bottleneck, delay_pkts, total_retx, spurious)


def dsack_dups(rd: RawDir) -> int | None:
    """Segments the receivers reported as received twice (D-SACK; ss's `dsack_dups`, a
    per-connection counter since kernel 5.x), summed over the senders' connections at
    their last sample: retransmissions that had no loss behind them. None without ss
    samples (FreeBSD senders, runs without them); read as a stream."""
    names = rd.glob(layout.SS_GLOB)
    if not names:
        return None
    total = 0
    for name in names:
        p = layout.stored(rd.path, name)
        if p is None:
            continue
        last: dict[tuple[str, str], int] = {}
        try:
            with layout.open_text(p) as fh:
                for rec in SsReader(fh):
                    if rec.get("dsack_dups") is not None:
                        last[(str(rec["local"]), str(rec["peer"]))] = int(rec["dsack_dups"])
        except (OSError, ValueError, EOFError):
            continue  # what is wrong with the file is said where its samples are read
        total += sum(last.values())
    return total
