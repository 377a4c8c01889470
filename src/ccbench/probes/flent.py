"""flent: a flent test (`probe_flent_test`, default `ping`: fping ICMP + irtt UDP), whose
.flent.gz is kept in raw/. Tests other than `ping` add netperf flows of their own and
need netperf with demo mode (the linux-node image has it)."""

from __future__ import annotations

import math
from pathlib import Path

from ccbench import leftovers, safe
from ccbench.errors import CcbenchError
from ccbench.needs import Needs
from ccbench.parse.flent import FlentSeries, parse_flent_gz
from ccbench.probes.base import ProbePlan, ProbeResult, ProbeRun, ProbeSettings, ProbeTool
from ccbench.probes.irtt import IRTT_PORT, irtt_server

# flent tests ccbench knows, and whether they need netperf (netserver on r1).
FLENT_TESTS = {"ping": False, "tcp_1up": True, "tcp_2up": True, "rrul_be": True}
NETSERVER_PORT = 12865
# flent writes its data file into a directory: this constant script gives it one of
# its own, named by the script's pid, in the testbed's directory (node_dir; on a node
# several testbeds' runs may be sharing), and prints the file on stdout, so the same
# argv works locally, in a container and over SSH. /var/tmp is world-writable: each
# level below it (ccbench's ROOT_DIR, flent/, the testbed's) is made 0700 when missing
# and checked to be the running user's own (leftovers.LEVELS_SH) before flent runs; one
# that is not (another user's, a link, writable by others) is refused in one line,
# probe.err's last, which the run's probe error and validity reason quote. Arguments
# ($1 NODE_TMP, $2 the testbed's directory, then the flent command) stay positional. A
# run killed while flent runs leaves its directory: the testbed's `down` removes it
# (ProbeTool.node_dirs), over SSH and on this machine alike.
FLENT_SH = (
    leftovers.LEVELS_SH
    + r"""top=$1; dir=$2; shift 2
# a level another testbed's `down` removed (empty) between two steps is made again
if ! levels "$top" "$dir" make && ! levels "$top" "$dir" make; then
  what=$(ls -ldn "$bad" 2>/dev/null | awk '{print $1, "uid", $3}')
  echo "ccbench-flent: refused $bad (${what:-could not be made}): not a directory of" \
    "uid $(id -u)'s own that no one else may write" >&2
  exit 2
fi
d=$dir/$$
rm -rf "$d"; mkdir -m 700 "$d" || exit 1
"$@" -D "$d" -q >&2; rc=$?
cat "$d"/*.flent.gz; rm -rf "$d"; rmdir "$dir" 2>/dev/null; exit $rc"""
)
FLENT_ROOT = f"{leftovers.ROOT_DIR}/flent"


def node_dir(tb_id: str) -> str:
    """Where testbed `tb_id`'s flent data directories are on a node (one per flent, by
    pid): its `down` removes these, never another testbed's."""
    return f"{FLENT_ROOT}/{safe.testbed_id(tb_id)}"


# flent needs ~1.1 s from its start to its first sample (Python, then its runners): it
# is released FLENT_LEAD_S before the first flow so its samples cover the whole traffic,
# runs FLENT_EXTRA_S past it, and only samples taken while the flows ran count (read).
FLENT_LEAD_S = 1.5
FLENT_EXTRA_S = 1
# A netperf test's own flows start flent's `--delay` (default 5 s; flent/settings.py)
# after its pings, 3.5 s into the run's flows, and its pings run LENGTH + 2 delays
# (tests/netperf_definitions.inc, TOTAL_LENGTH): the run waits for them. Left as flent
# sets it: with `--delay 0` the netperf flow joins the run's flows from their start, and
# on a 2-vCPU machine with the tools in containers over SSH that held packets outside
# the bottleneck (the run invalid).


class Flent(ProbeTool):
    name = "flent"
    raw_file = "probe.flent.gz"
    description = "a flent test (ping: fping ICMP + irtt UDP)"
    client_needs = Needs(("flent", "fping", "irtt"))
    server_needs = Needs(("irtt",))

    def node_dirs(self, tb_id: str) -> tuple[str, ...]:
        return (node_dir(tb_id),)

    def needs_netperf(self, flent_test: str) -> bool:
        return FLENT_TESTS.get(flent_test, False)

    def needs(self, flent_test: str) -> tuple[Needs, Needs]:
        if not self.needs_netperf(flent_test):
            return self.client_needs, self.server_needs
        return (self.client_needs | Needs(("netperf",)),
                self.server_needs | Needs(("netserver",)))  # fmt: skip

    def plan(self, s: ProbeSettings, sender_os: str) -> ProbePlan:
        if s.flent_test not in FLENT_TESTS:
            raise CcbenchError(f"probe_flent_test: unknown flent test '{s.flent_test}'")
        servers = [irtt_server(s.dst)]
        listen = [(IRTT_PORT, "udp")]
        if FLENT_TESTS[s.flent_test]:
            servers.append(["netserver", "-D", "-p", str(NETSERVER_PORT)])
            listen.append((NETSERVER_PORT, "tcp"))
        flent_s = math.ceil(s.length_s + FLENT_LEAD_S + FLENT_EXTRA_S)
        flent = ["flent", s.flent_test, "-H", s.dst, "-l", str(flent_s),
                 "-s", f"{s.interval_s:g}", "-t", "ccbench"]  # fmt: skip
        sh = ["sh", "-c", FLENT_SH, "ccbench-flent", leftovers.NODE_TMP, node_dir(s.testbed)]
        return ProbePlan(self.name, [*sh, *flent], self.raw_file, servers, listen,
                         lead_s=FLENT_LEAD_S)  # fmt: skip

    def read(self, path: Path, run: ProbeRun) -> ProbeResult:
        f = parse_flent_gz(path.read_bytes())
        main = _primary(f.series)
        shown = f"RTT: its '{main.name}' series, measured by {_program(main)}" if main else (
            "no RTT series")  # fmt: skip
        others = [f"'{s.name}' ({_program(s)})" for s in f.series
                  if not s.name.startswith("Ping")]  # fmt: skip
        extra = f"; the test also ran its own {', '.join(others)}" if others else ""
        rtts: list[float] = []
        coverage = first = None
        window = run.window
        if main:
            inside = [(t, v) for t, v in zip(main.times, main.values, strict=True)
                      if window is None or window[0] <= t <= window[1]]  # fmt: skip
            rtts = [v * 1e3 for _, v in inside]
            if window is not None:
                coverage = _coverage([t for t, _ in inside], *window)
                if main.times:
                    first = round(min(main.times) - window[0], 3)
        return ProbeResult(
            f"flent {f.test}",
            f"flent {f.version} {f.test} test ({shown}; only samples taken while the flows "
            f"ran{extra})",
            rtts,
            None,
            None,
            self.raw_file,
            series=[
                {
                    "name": s.name,
                    "runner": s.runner,
                    "command": s.command,
                    "samples": len(s.values),
                    "units": s.units,
                }
                for s in f.series
            ],  # fmt: skip
            coverage=coverage,
            first_sample_s=first,
        )


def _primary(series: list[FlentSeries]) -> FlentSeries | None:
    """The RTT series summaries use: ICMP (as the ping probe) before UDP; netperf's
    TCP series are throughput, not RTT."""
    pings = [s for s in series if s.name.startswith("Ping (ms)") and s.values]
    pings.sort(key=lambda s: (0 if "ICMP" in s.name else 1, s.name))
    return pings[0] if pings else None


def _program(s: FlentSeries) -> str:
    """The program behind a flent series (fping, irtt, netperf), else its runner."""
    first = s.command.split()[0] if s.command.split() else ""
    return first.rsplit("/", 1)[-1] or s.runner


def _coverage(times: list[float], start: float, end: float) -> float:
    """Share of [start, end] covered by the samples inside it, each standing for one
    sampling step (0 when there are none)."""
    if not times or end <= start:
        return 0.0
    span = max(times) - min(times)
    step = span / (len(times) - 1) if len(times) > 1 else 0.0
    return round(min(1.0, (span + step) / (end - start)), 3)
