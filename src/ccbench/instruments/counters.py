"""TCP counters before and after the traffic on every sender: Linux `nstat` in the
sender's network namespace (its own counters), FreeBSD `netstat -s -p tcp` as libxo
JSON (usr.bin/netstat/inet.c, tcp_stats). After minus before names the causes of the
run's retransmissions (timeouts, fast retransmits, loss probes, spurious ones): summary.json
`retransmit_causes`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Self

from ccbench import layout
from ccbench.instruments.base import BeforeAfter, Cost, Recording, SummaryPart, need, read_pair
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Needs
from ccbench.parse.netstat_freebsd import freebsd_retransmit_causes, parse_netstat_tcp
from ccbench.parse.nstat import (
    RetransmitCauses,
    counter_delta,
    linux_retransmit_causes,
    parse_nstat,
)
from ccbench.part import d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

# Per OS: every counter, absolute (-a), zeros too (-z), the history file untouched (-s).
PLANS: dict[str, list[str]] = {
    "linux": ["nstat", "-asz", "--json"],
    "freebsd": ["netstat", "-s", "-p", "tcp", "--libxo", "json"],
}
# Per OS: the snapshot's counters, and the causes their increase names.
_READERS = {
    "linux": (lambda t: parse_nstat(t).counters, linux_retransmit_causes),
    "freebsd": (lambda t: parse_netstat_tcp(t).counters, freebsd_retransmit_causes),
}


class SenderRetransmits(RetransmitCauses):
    """A sender's part of summary.json `retransmit_causes`."""

    raw: list[str] = d("the counter snapshots it came from (before, after)")


@dataclass
class TcpCounters(BeforeAfter[dict[str, SenderRetransmits]]):
    name = "tcp_counters"
    description = "TCP counters on every sender before and after (nstat, netstat -s)"
    raw_files = (RawFile(layout.tcp_counters, "sender NODE's TCP counters (nstat, netstat -s)"),)
    cost = Cost.SNAPSHOT
    oses = tuple(PLANS)
    summary_key = "retransmit_causes"
    summary_doc = ("every sender's TCP counters over the run (nstat, netstat -s): node -> the "
                   "causes of its retransmissions")  # fmt: skip
    summary_after = "siftr"
    needs = {os: Needs((argv[0],)) for os, argv in PLANS.items()}

    nodes: dict[str, str] = field(default_factory=dict)  # node -> its OS

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = {n: tb.driver(n).os for n in spec.senders if tb.driver(n).os in PLANS}
        return cls(nodes=nodes) if nodes else None

    def hosts(self) -> list[str]:
        return list(self.nodes)

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        return [(n, PLANS[o], layout.tcp_counters(n, when)) for n, o in self.nodes.items()]

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("nodes"), dict)
             and all(isinstance(v, str) for v in d["nodes"].values()), "not {nodes}")  # fmt: skip
        return cls(nodes=dict(d["nodes"]))

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """node -> its counters' causes. A snapshot that is missing or does not parse is
        one problem naming it."""
        out: dict[str, Any] = {}
        for node, os_name in self.nodes.items():
            names = [layout.tcp_counters(node, w) for w in (layout.BEFORE, layout.AFTER)]
            texts = read_pair(rd, *names)
            if texts is None:
                continue
            read, causes_of = _READERS[os_name]
            try:
                snaps = [read(t) for t in texts]
            except ValueError as e:
                rd.problem(f"{names[0]}/{names[1]}", f"not {os_name} TCP counters ({e})")
                continue
            try:
                delta = counter_delta(snaps[0], snaps[1])
            except ValueError as e:
                rd.problem(names[1], str(e))
                continue
            c: RetransmitCauses = causes_of(delta)
            out[node] = {**c.model_dump(), "raw": names}
        return SummaryPart(out)
