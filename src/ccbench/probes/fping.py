"""fping: ICMP echo with a timestamped line per probe, replied or timed out; packaged
for Linux and FreeBSD alike."""

from __future__ import annotations

import math
from pathlib import Path

from ccbench import layout
from ccbench.jsonio import read_json
from ccbench.layout import open_text
from ccbench.needs import Needs
from ccbench.parse.fping import count_asked, read_fping
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeSettings, ProbeTool


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

    def read(self, path: Path, window: tuple[float, float] | None) -> ProbeResult:
        with open_text(path) as lines:  # plain or compressed, as a stream
            fp = read_fping(lines, asked=_asked(path.parent))
        return ProbeResult(self.name, "fping (ICMP echo)", fp.rtts_us, fp.sent, fp.received,
                           self.raw_file)  # fmt: skip


def _asked(raw: Path) -> int | None:
    """The probe count the run asked fping for: its command line as the run recorded it
    (meta.json `probe_argv`, the plan's argv). fping < 5.0 prints nothing for a lost
    probe, so only this tells how many were sent. None: not recorded."""
    meta = read_json(raw / layout.META)
    argv = meta.get("probe_argv") if isinstance(meta, dict) else None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    return count_asked(argv)
