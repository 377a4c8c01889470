"""SSH testbeds: the bottleneck NIC's transmit queues' BQL state (limit, limit_max,
inflight) before and after the traffic; BQL's limit grows with the traffic from 0
(lib/dynamic_queue_limits.c dql_completed), so the one after the run is the layer-2
buffer the run had. Its part of the summary is on that NIC's record in summary.json
`nics` (`bql_before`, `bql_after`: SummaryPart.nics)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ccbench import layout
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments.base import BeforeAfter, Cost, Recording, SummaryPart, need
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.parse.bql import parse_bql
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind


@dataclass
class TxQueueLimits(BeforeAfter):
    name = "tx_queue_limits"
    description = "BQL of the bottleneck NIC's transmit queues before and after (sysfs)"
    raw_files = (RawFile(layout.bql, "the bottleneck NIC's BQL state (SSH testbeds)"),)
    cost = Cost.SNAPSHOT
    oses = ()  # the router's

    node: str = ""
    dev: str = ""

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if tb.roles.bottleneck is None:
            return None  # no router of ccbench's (a lab's own network)
        node, dev = tb.bottleneck
        if not kind(tb.kind).caps.nic_records or tb.driver(node).os != "linux":
            return None  # namespaces have veths, not NICs
        return cls(node=node, dev=dev)

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        return [(self.node, LinuxHost().tx_queue_state(self.dev), layout.bql(when))]

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("node"), str)
             and isinstance(d.get("dev"), str), "not {node, dev}")  # fmt: skip
        return cls(node=d["node"], dev=d["dev"])

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """Each read's queues (parse_bql: one entry per queue) as `bql_before` and
        `bql_after` of the NIC record of its node and interface; a read that does not
        parse is a problem naming its file, one not taken says nothing."""
        nics: dict[tuple[str, str], dict[str, Any]] = {}
        for when in (BEFORE, AFTER):
            name = layout.bql(when)
            text = rd.text(name) if rd.exists(name) else None
            if text is None:
                continue
            try:
                per_dev = parse_bql(text)
            except ValueError as e:
                rd.problem(name, str(e))
                continue
            for dev, queues in per_dev.items():
                nics.setdefault((self.node, dev), {})[f"bql_{when}"] = queues
        return SummaryPart(None, nics=nics)
