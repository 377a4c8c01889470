"""TCP counters before and after the traffic on every sender: Linux `nstat` in the
sender's network namespace (its own counters), FreeBSD `netstat -s -p tcp` as libxo
JSON (usr.bin/netstat/inet.c, tcp_stats). After minus before names the causes of the
run's retransmissions (timeouts, fast retransmits, loss probes, spurious ones)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from ccbench import layout
from ccbench.instruments.base import BeforeAfter, Cost, Recording, need
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

# Per OS: every counter, absolute (-a), zeros too (-z), the history file untouched (-s).
PLANS: dict[str, list[str]] = {
    "linux": ["nstat", "-asz", "--json"],
    "freebsd": ["netstat", "-s", "-p", "tcp", "--libxo", "json"],
}


@dataclass
class TcpCounters(BeforeAfter):
    name = "tcp_counters"
    description = "TCP counters on every sender before and after (nstat, netstat -s)"
    cost = Cost.SNAPSHOT
    oses = tuple(PLANS)

    nodes: dict[str, str] = field(default_factory=dict)  # node -> its OS

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = {n: tb.driver(n).os for n in spec.senders if tb.driver(n).os in PLANS}
        return cls(nodes=nodes) if nodes else None

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        return [(n, PLANS[o], layout.tcp_counters(n, when)) for n, o in self.nodes.items()]

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("nodes"), dict)
             and all(isinstance(v, str) for v in d["nodes"].values()), "not {nodes}")  # fmt: skip
        return cls(nodes=dict(d["nodes"]))
