"""SSH testbeds: the bottleneck NIC's transmit queues' BQL state (limit, limit_max,
inflight) before and after the traffic; BQL's limit grows with the traffic from 0
(lib/dynamic_queue_limits.c dql_completed), so the one after the run is the layer-2
buffer the run had (summarize.hosts attaches both to rt1's NIC record)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ccbench import layout
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments.base import BeforeAfter, Cost, Recording, need
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind


@dataclass
class TxQueueLimits(BeforeAfter):
    name = "tx_queue_limits"
    description = "BQL of the bottleneck NIC's transmit queues before and after (sysfs)"
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
