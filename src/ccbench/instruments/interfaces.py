"""Every interface's counters on every Linux node of the dumbbell (senders, receivers,
routers) just before and after the traffic (`ip -s -s -j link show`, read by
ccbench.parse.drops.links): what each interface carried and what it dropped, errored or
missed over the run. summary.json `interfaces`: node -> interface -> the increase.

These drops are not added to the loss ledger again: the ledger already counts every
node's interface drops from the same counters, read in the testbed's drop snapshots
(drops-before/after.json, ccbench.ledger.collect, on every node of every testbed kind),
around the whole run rather than its traffic; adding these would count each drop twice.
Where the two disagree, the ledger's window (servers and probe included) is the wider."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ccbench.instruments.base import NodeReads, SummaryPart, read_pair
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.needs import Needs
from ccbench.parse.drops import links
from ccbench.part import Part, d
from ccbench.reasons import Code
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

READ = ["ip", "-s", "-s", "-j", "link", "show"]  # -s -s: rx missed_errors too


def file(node: str, when: str) -> str:
    """Its raw file of `node` `when` (layout.BEFORE or AFTER)."""
    return f"interfaces-{node}-{when}.json"


class InterfaceCounters(Part):
    """One interface's counters over the traffic (after minus before)."""

    rx_packets: int = d("packets received")
    tx_packets: int = d("packets sent")
    rx_dropped: int = d("received packets the kernel dropped (backlog full, no handler)")
    tx_dropped: int = d("packets dropped on the way out (a veth peer refused them, ...)")
    rx_errors: int = d("receive errors")
    tx_errors: int = d("transmit errors")
    rx_over_errors: int = d("receive ring overruns")
    rx_missed_errors: int = d("packets the NIC missed: its receive ring was full")


@dataclass
class Interfaces(NodeReads[dict[str, dict[str, InterfaceCounters]]]):
    name = "interfaces"
    description = "every interface's counters on every Linux node before and after (ip -s -s)"
    raw_files = (RawFile(file, "every interface's counters on Linux node NODE"),)
    read = tuple(READ)
    raw_name = staticmethod(file)
    oses = ()  # every node's, not only the senders'
    needs = {"linux": Needs(("ip",))}
    summary_key = "interfaces"
    summary_doc = (
        "every Linux node: interface -> its counters over the traffic (the loss ledger "
        "counts the same drops from its own snapshots)"
    )

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = [n for n, os in tb.node_os().items() if os in cls.needs]
        return cls(nodes=nodes) if nodes else None

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """node -> interface -> after minus before, for the interfaces in both reads. A
        node's reads missing or not parsing are one problem naming them; an interface
        whose counters went down is one, and is left out."""
        out: dict[str, Any] = {}
        for node in self.nodes:
            names = [file(node, BEFORE), file(node, AFTER)]
            texts = read_pair(rd, *names)
            if texts is None:
                continue
            try:
                before, after = (links(t) for t in texts)
            except ValueError as e:
                rd.problem(f"{names[0]}/{names[1]}", str(e))
                continue
            deltas = {}
            for dev in sorted(before.keys() & after.keys()):
                delta = {k: after[dev][k] - before[dev][k] for k in after[dev]}
                went_down = sorted(k for k, v in delta.items() if v < 0)
                if went_down:
                    rd.problem(names[1], f"{dev}: {', '.join(went_down)} went down",
                               Code.PLAUSIBILITY)  # fmt: skip
                    continue
                deltas[dev] = delta
            out[node] = deltas
        return SummaryPart(out)
