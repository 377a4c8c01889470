"""The loss ledger of a run (summary.json `loss_ledger`): the account of its drop
snapshots (ledger.read), the segments its receivers got twice, and the totals the
account is held against (its check: validity.check_ledger)."""

from __future__ import annotations

from typing import Any

from ccbench import layout
from ccbench.layout import RawDir
from ccbench.parse.ss import SsReader


def loss_ledger(
    rd: RawDir, account: dict[str, Any], flows: list[dict[str, Any]], bneck: dict[str, Any]
) -> dict[str, Any]:
    """The ledger's record: the `account` with the bottleneck's drops and the flows'
    retransmissions it is held against (None where one is not known), and the D-SACK
    count (dsack_dups)."""
    retx = [f["retransmits"] for f in flows]
    # tbf/htb count their child queue's drops in their own: the larger is the total.
    parts = [bneck.get(k, {}).get("dropped") for k in ("queue", "shaper") if k in bneck]
    return {
        **account,
        "bottleneck_pkts": max(parts) if parts and None not in parts else None,
        "retransmits": sum(retx) if retx and None not in retx else None,
        "spurious_retransmits": dsack_dups(rd),
    }


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
