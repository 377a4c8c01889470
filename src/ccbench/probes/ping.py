"""ping: ICMP echo (iputils or FreeBSD ping), one line per reply, stopped after the flows."""

from __future__ import annotations

from pathlib import Path

from ccbench.layout import open_text
from ccbench.needs import Needs
from ccbench.parse.ping import read_ping
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeRun, ProbeSettings, ProbeTool


class Ping(ProbeTool):
    name = "ping"
    raw_file = "probe-ping.txt"
    oses = ("linux", "freebsd")
    description = "ICMP echo"
    client_needs = Needs(("ping",))

    def plan(self, s: ProbeSettings, sender_os: str) -> ProbePlan:
        from ccbench.hosts import driver_for

        return ProbePlan(self.name, driver_for(sender_os).probe_ping(s.dst, s.interval_s),
                         self.raw_file, ends_by_itself=False)  # fmt: skip

    def read(self, path: Path, run: ProbeRun) -> ProbeResult:
        with open_text(path) as lines:  # plain or compressed, as a stream
            p = read_ping(lines)
        return ProbeResult(self.name, "ping (ICMP echo)", list(p.rtts_us), p.sent, p.received,
                           self.raw_file)  # fmt: skip
