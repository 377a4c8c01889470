"""What a latency-under-load probe tool is: its plan (argv lists, nothing runs), the raw
file it writes (named here, once: `raw_file`), the sender OSes it runs on, the servers it
needs, and how its raw file is read back. One subclass per tool (ccbench.probes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ccbench.needs import NOTHING, Needs


@dataclass(frozen=True)
class ProbePlan:
    tool: str
    client: list[str]  # runs on s1, stdout -> raw/<out>
    out: str
    servers: list[list[str]] = field(default_factory=list)  # run on r1 for the run
    listen: list[tuple[int, str]] = field(default_factory=list)  # (port, proto) to wait for
    ends_by_itself: bool = True  # False: stopped with SIGINT after the flows (ping)
    lead_s: float = 0.0  # released this long before the first flow


@dataclass
class ProbeResult:
    tool: str  # as named in summaries, e.g. "ping", "irtt", "flent ping"
    what: str  # which program measured what, for the report
    rtts_us: list[float]
    sent: int | None
    received: int | None
    raw: str
    series: list[dict[str, Any]] = field(default_factory=list)
    # Share of the traffic window between the first and last sample, where the samples
    # carry times and the tool starts on its own schedule (flent); None: not known.
    coverage: float | None = None
    # Seconds from the traffic's start to the tool's first sample (< 0: before it), for
    # the same tools: what tells a late start from gaps; None: not known.
    first_sample_s: float | None = None


@dataclass(frozen=True)
class ProbeRun:
    """What the run recorded that reading its probe's file needs (meta.json, read by
    ccbench.runmeta: RunMeta.probe_run): the traffic's wall-clock start and end, for
    tools whose samples carry times, and the probe's command line as the run started it
    (None: not recorded)."""

    window: tuple[float, float] | None = None
    argv: list[str] | None = None


@dataclass(frozen=True)
class ProbeSettings:
    """What a run asks of its probe: s1 -> `dst` every `interval_s` for `length_s`."""

    dst: str
    interval_s: float
    length_s: float
    flent_test: str = "ping"
    testbed: str = field(kw_only=True)  # its id: where a tool's files go on a node


class ProbeTool:
    name: ClassVar[str]
    raw_file: ClassVar[str]  # in raw/
    oses: ClassVar[tuple[str, ...]] = ("linux",)  # sender OSes it runs on
    description: ClassVar[str]
    # What the sender (client) and the receiver (its servers) need (ccbench.needs).
    client_needs: ClassVar[Needs] = NOTHING
    server_needs: ClassVar[Needs] = NOTHING
    # What it writes on a node outside raw/, under /var/tmp/ccbench* (leftovers.node_path):
    # a run killed before the tool cleaned up leaves it, and a remote `down` removes it.
    node_files: ClassVar[tuple[str, ...]] = ()

    def node_dirs(self, tb_id: str) -> tuple[str, ...]:
        """Directories of testbed `tb_id`'s own on a node, each entry named by the pid of
        the tool's process that made it (leftovers.PIDS): its `down` removes the entries
        of ended processes, on a node and on this machine; none by default."""
        return ()

    def needs(self, flent_test: str) -> tuple[Needs, Needs]:
        """(the client's, the servers') needs for a run asking `flent_test`."""
        return self.client_needs, self.server_needs

    def plan(self, s: ProbeSettings, sender_os: str) -> ProbePlan:
        raise NotImplementedError

    def needs_netperf(self, flent_test: str) -> bool:
        return False

    def read(self, path: Path, run: ProbeRun) -> ProbeResult:
        """raw/<raw_file> as a result; `run`: what the run recorded about it. Raises on
        a file that is not the tool's output (ValueError and what reading it may raise)."""
        raise NotImplementedError
