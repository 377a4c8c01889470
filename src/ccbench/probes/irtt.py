"""irtt: isochronous UDP round trips (irtt client/server), JSON with one-way delays."""

from __future__ import annotations

import json
from pathlib import Path

from ccbench.layout import open_text
from ccbench.needs import Needs
from ccbench.parse.irtt import parse_irtt
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeRun, ProbeSettings, ProbeTool

IRTT_PORT = 2112


def irtt_server(dst: str) -> list[str]:
    return ["irtt", "server", "-b", f"{dst}:{IRTT_PORT}"]


class Irtt(ProbeTool):
    name = "irtt"
    raw_file = "probe-irtt.json"
    description = "UDP round trips"
    client_needs = server_needs = Needs(("irtt",))

    def plan(self, s: ProbeSettings, sender_os: str) -> ProbePlan:
        ms = max(1, round(s.interval_s * 1000))
        client = ["irtt", "client", "-Q", "-o", "-", "--fill=rand", "-i", f"{ms}ms",
                  "-d", f"{max(1, round(s.length_s))}s", f"{s.dst}:{IRTT_PORT}"]  # fmt: skip
        return ProbePlan(self.name, client, self.raw_file, [irtt_server(s.dst)],
                         listen=[(IRTT_PORT, "udp")])  # fmt: skip

    def read(self, path: Path, run: ProbeRun) -> ProbeResult:
        with open_text(path) as f:  # plain or compressed
            r = parse_irtt(json.load(f))
        return ProbeResult(self.name, "irtt (UDP round trips)", r.rtts_us, r.sent, r.received,
                           self.raw_file)  # fmt: skip
