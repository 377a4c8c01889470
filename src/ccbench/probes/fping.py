"""fping: ICMP echo with a timestamped line per probe, replied or timed out; packaged
for Linux and FreeBSD alike."""

from __future__ import annotations

import math
from pathlib import Path

from ccbench.layout import open_text
from ccbench.needs import Needs
from ccbench.parse.fping import count_asked, read_fping
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeRun, ProbeSettings, ProbeTool


class Fping(ProbeTool):
    name = "fping"
    raw_file = "probe-fping.txt"
    oses = ("linux", "freebsd")
    description = "ICMP echo, a timestamped line per probe"
    client_needs = Needs(("fping",))

    def plan(self, s: ProbeSettings, sender_os: str) -> ProbePlan:
        ms = max(1, round(s.interval_s * 1000))
        count = max(1, math.ceil(s.length_s / s.interval_s))
        return ProbePlan(self.name, ["fping", "-D", "-p", str(ms), "-c", str(count), s.dst],
                         self.raw_file)  # fmt: skip

    def read(self, path: Path, run: ProbeRun) -> ProbeResult:
        # fping < 5.0 prints nothing for a lost probe: only the count the run asked for
        # (its argv, as recorded) tells how many were sent; without it, the gaps only.
        with open_text(path) as lines:  # plain or compressed, as a stream
            fp = read_fping(lines, asked=count_asked(run.argv) if run.argv else None)
        return ProbeResult(self.name, "fping (ICMP echo)", fp.rtts_us, fp.sent, fp.received,
                           self.raw_file)  # fmt: skip
