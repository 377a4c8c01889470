"""The loss ledger of a run (summary.json `loss_ledger`, ccbench.ledger; its check is
validity.check_ledger)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccbench import layout, ledger
from ccbench.layout import RawDir
from ccbench.parse.ss import SsReader


@dataclass(frozen=True)
class LossLedger:
    """The drops counted around the run (ledger.account) and the segments the receivers
    got twice (`spurious`: D-SACK, None without ss samples)."""

    account: dict[str, Any]
    spurious: int | None

    def counted(self, flows: list[dict[str, Any]], bneck: dict[str, Any]) -> dict[str, Any]:
        """The ledger's record: the account with the bottleneck's drops and the flows'
        retransmissions it is held against (None where one is not known)."""
        retx = [f["retransmits"] for f in flows]
        # tbf/htb count their child queue's drops in their own: the larger is the total.
        parts = [bneck.get(k, {}).get("dropped") for k in ("queue", "shaper") if k in bneck]
        return {
            **self.account,
            "bottleneck_pkts": max(parts) if parts and None not in parts else None,
            "retransmits": sum(retx) if retx and None not in retx else None,
            "spurious_retransmits": self.spurious,
        }


def loss_ledger(rd: RawDir) -> LossLedger | None:
    """The loss ledger (ccbench.ledger) from drops-before/after.json; None for runs
    recorded before ccbench took these snapshots. Its D-SACK count: the segments the
    receivers reported as received twice (ss's `dsack_dups`, a per-connection counter
    since kernel 5.x), summed over the senders' connections at their last sample:
    retransmissions that had no loss behind them (None without ss samples: FreeBSD
    senders, runs without them); each ss file read as a stream."""
    names = layout.drops(layout.BEFORE), layout.drops(layout.AFTER)
    if not any(rd.exists(n) for n in names):
        return None
    before, after = (rd.json(n, required=True) for n in names)
    if before is None or after is None:
        return None
    try:
        account = ledger.account(before, after)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        rd.problem(names[1], f"drop counters unreadable ({e})")
        return None
    ss_names = rd.glob(layout.SS_GLOB)
    spurious = 0 if ss_names else None
    for name in ss_names:
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
        spurious = (spurious or 0) + sum(last.values())
    return LossLedger(account, spurious)
