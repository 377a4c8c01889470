"""The bottleneck router's CPU counters (/proc/stat) just before and after the traffic
(locally the whole machine's), so a run that shared its CPU with a hypervisor's other
guests (steal) says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ccbench import layout
from ccbench.instruments.base import BeforeAfter, Cost, Recording, need
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed


@dataclass
class RouterCpu(BeforeAfter):
    name = "router_cpu"
    description = "/proc/stat on the bottleneck router before and after"
    cost = Cost.SNAPSHOT
    oses = ()  # the router's

    node: str = ""

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if tb.roles.bottleneck is None:
            return None  # no router of ccbench's (a lab's own network)
        return cls(node=tb.bottleneck[0])

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        return [(self.node, rec.tb.driver(self.node).cpu_counters(), layout.cpu(when))]

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("node"), str), "not {node}")
        return cls(node=d["node"])
