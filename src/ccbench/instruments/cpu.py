"""The bottleneck router's CPU counters (/proc/stat) just before and after the traffic
(locally the whole machine's), so a run that shared its CPU with a hypervisor's other
guests (steal) says so."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self

from ccbench import layout
from ccbench.instruments.base import BeforeAfter, Cost, Recording, SummaryPart, need, read_pair
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.parse.procstat import usage_between
from ccbench.part import Part, d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed


class RouterCpuUsage(Part):
    busy_pct: float | None = d("busy share of the bottleneck router's CPU over the traffic")
    softirq_pct: float | None = d("softirq share")
    steal_pct: float | None = d("time a hypervisor gave the vCPU to other guests")
    jiffies: int = d("CPU time counted")


@dataclass
class RouterCpu(BeforeAfter[RouterCpuUsage]):
    name = "router_cpu"
    description = "/proc/stat on the bottleneck router before and after"
    raw_files = (RawFile(layout.cpu, "the bottleneck router's CPU counters"),)
    cost = Cost.SNAPSHOT
    oses = ()  # the router's
    summary_key = "router_cpu"
    summary_doc = "CPU of the bottleneck router over the traffic"
    summary_after = "probe"

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

    @classmethod
    def without_record(cls, rd: RawDir, spec: RunSpec) -> Self | None:
        return cls() if any(rd.exists(layout.cpu(w)) for w in (BEFORE, AFTER)) else None

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """CPU use at the bottleneck router over the traffic, from the two reads; None
        where one is missing or they do not read (a problem naming them)."""
        before_name, after_name = layout.cpu(BEFORE), layout.cpu(AFTER)
        pair = read_pair(rd, before_name, after_name)
        if pair is None:
            return SummaryPart(None)
        try:
            return SummaryPart(usage_between(*pair))
        except ValueError as e:
            where = after_name if "backwards" in str(e) else f"{before_name}/{after_name}"
            rd.problem(where, str(e))
            return SummaryPart(None)
