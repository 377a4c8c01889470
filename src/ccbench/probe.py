"""Latency under load: the RTT probe that runs beside a run's bulk flows, s1 -> r1.

Four tools, chosen per scenario (`probe_tool`):
- ping: ICMP echo (iputils or FreeBSD ping), one line per reply.
- fping: ICMP echo with a timestamped line per probe, replied or timed out.
- irtt: isochronous UDP round trips (irtt client/server), JSON with one-way delays.
- flent: a flent test (`probe_flent_test`, default `ping`: fping ICMP + irtt UDP),
  whose .flent.gz is kept in raw/. Tests other than `ping` add netperf flows of their
  own and need netperf with demo mode (the linux-node image has it).
Plans are argv lists; reading the results back is `read_probe`, on raw/ files only.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.parse.flent import FlentSeries, parse_flent_gz
from ccbench.parse.fping import parse_fping
from ccbench.parse.irtt import parse_irtt
from ccbench.parse.ping import parse_ping

PROBE_TOOLS = ("ping", "fping", "irtt", "flent")
# flent tests ccbench knows, and whether they need netperf (netserver on r1).
FLENT_TESTS = {"ping": False, "tcp_1up": True, "tcp_2up": True, "rrul_be": True}
IRTT_PORT = 2112
NETSERVER_PORT = 12865
# flent writes its data file into a directory; this constant script gives it a temp
# one and prints the file on stdout, so the same argv works locally, in a container
# and over SSH. The flent command comes in as positional arguments.
FLENT_SH = (
    'd=$(mktemp -d) || exit 1; "$@" -D "$d" -q >&2; rc=$?; '
    'cat "$d"/*.flent.gz; rm -rf "$d"; exit $rc'
)
# flent needs ~1.1 s from its start to its first sample (Python, then its runners): it
# is released FLENT_LEAD_S before the first flow so its samples cover the whole traffic,
# runs FLENT_EXTRA_S past it, and only samples taken while the flows ran count
# (read_probe).
FLENT_LEAD_S = 1.5
FLENT_EXTRA_S = 1
RAW_FILES = {
    "ping": "probe-ping.txt",
    "fping": "probe-fping.txt",
    "irtt": "probe-irtt.json",
    "flent": "probe.flent.gz",
}


@dataclass(frozen=True)
class ProbePlan:
    tool: str
    client: list[str]  # runs on s1, stdout -> raw/<out>
    out: str
    servers: list[list[str]] = field(default_factory=list)  # run on r1 for the run
    ends_by_itself: bool = True  # False: stopped with SIGINT after the flows (ping)
    lead_s: float = 0.0  # released this long before the first flow


def plan(
    tool: str, dst: str, interval_s: float, length_s: float, flent_test: str = "ping",
    sender_os: str = "linux",
) -> ProbePlan:  # fmt: skip
    """The probe's commands: from s1 to `dst` (r1) every `interval_s` for `length_s`."""
    if tool == "ping":
        return ProbePlan("ping", ["ping", "-n", "-D", "-i", f"{interval_s:g}", dst],
                         RAW_FILES["ping"], ends_by_itself=False)  # fmt: skip
    ms = max(1, round(interval_s * 1000))
    if tool == "fping":  # fping is packaged for Linux and FreeBSD alike
        count = max(1, math.ceil(length_s / interval_s))
        return ProbePlan("fping", ["fping", "-D", "-p", str(ms), "-c", str(count), dst],
                         RAW_FILES["fping"])  # fmt: skip
    if sender_os != "linux":
        raise ValueError(f"probe_tool {tool}: needs a Linux sender (s1 runs {sender_os})")
    irtt_server = ["irtt", "server", "-b", f"{dst}:{IRTT_PORT}"]
    if tool == "irtt":
        client = ["irtt", "client", "-Q", "-o", "-", "--fill=rand", "-i", f"{ms}ms",
                  "-d", f"{max(1, round(length_s))}s", f"{dst}:{IRTT_PORT}"]  # fmt: skip
        return ProbePlan("irtt", client, RAW_FILES["irtt"], [irtt_server])
    if tool == "flent":
        if flent_test not in FLENT_TESTS:
            raise ValueError(f"probe_flent_test: unknown flent test '{flent_test}'")
        servers = [irtt_server]
        if FLENT_TESTS[flent_test]:
            servers.append(["netserver", "-D", "-p", str(NETSERVER_PORT)])
        flent_s = math.ceil(length_s + FLENT_LEAD_S + FLENT_EXTRA_S)
        flent = ["flent", flent_test, "-H", dst, "-l", str(flent_s),
                 "-s", f"{interval_s:g}", "-t", "ccbench"]  # fmt: skip
        return ProbePlan("flent", ["sh", "-c", FLENT_SH, "ccbench-flent", *flent],
                         RAW_FILES["flent"], servers, lead_s=FLENT_LEAD_S)  # fmt: skip
    raise ValueError(f"probe_tool: unknown tool '{tool}' (one of {', '.join(PROBE_TOOLS)})")


def needs_netperf(tool: str, flent_test: str) -> bool:
    return tool == "flent" and FLENT_TESTS.get(flent_test, False)


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


def _flent_primary(series: list[FlentSeries]) -> FlentSeries | None:
    """The RTT series summaries use: ICMP (as the ping probe) before UDP; netperf's
    TCP series are throughput, not RTT."""
    pings = [s for s in series if s.name.startswith("Ping (ms)") and s.values]
    pings.sort(key=lambda s: (0 if "ICMP" in s.name else 1, s.name))
    return pings[0] if pings else None


def _program(s: FlentSeries) -> str:
    """The program behind a flent series (fping, irtt, netperf), else its runner."""
    first = s.command.split()[0] if s.command.split() else ""
    return first.rsplit("/", 1)[-1] or s.runner


def _traffic_window(raw: Path) -> tuple[float, float] | None:
    """Wall-clock start and end of the run's traffic (raw/meta.json, raw/spec.json)."""
    try:
        meta = json.loads((raw / "meta.json").read_text())
        spec = json.loads((raw / "spec.json").read_text())
        start = float(meta["started_unix"])
        end = max(float(f.get("start_s", 0)) + float(f["duration_s"]) for f in spec["flows"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return start, start + end


def read_probe(raw: Path) -> ProbeResult | None:
    """The probe's samples from whichever raw file the run has (None: no probe)."""
    if (raw / RAW_FILES["ping"]).exists():
        p = parse_ping((raw / RAW_FILES["ping"]).read_text())
        return ProbeResult("ping", "ping (ICMP echo)", list(p.rtts_us), p.sent, p.received,
                           RAW_FILES["ping"])  # fmt: skip
    if (raw / RAW_FILES["fping"]).exists():
        fp = parse_fping((raw / RAW_FILES["fping"]).read_text())
        return ProbeResult("fping", "fping (ICMP echo)", fp.rtts_us, fp.sent, fp.received,
                           RAW_FILES["fping"])  # fmt: skip
    if (raw / RAW_FILES["irtt"]).exists():
        r = parse_irtt(json.loads((raw / RAW_FILES["irtt"]).read_text()))
        return ProbeResult("irtt", "irtt (UDP round trips)", r.rtts_us, r.sent, r.received,
                           RAW_FILES["irtt"])  # fmt: skip
    path = raw / RAW_FILES["flent"]
    if path.exists():
        f = parse_flent_gz(path.read_bytes())
        main = _flent_primary(f.series)
        shown = (
            f"RTT: its '{main.name}' series, measured by {_program(main)}"
            if main
            else "no RTT series"
        )
        others = [f"'{s.name}' ({_program(s)})" for s in f.series
                  if not s.name.startswith("Ping")]  # fmt: skip
        extra = f"; the test also ran its own {', '.join(others)}" if others else ""
        window = _traffic_window(raw)
        rtts = []
        coverage = None
        if main:
            inside = [(t, v) for t, v in zip(main.times, main.values, strict=True)
                      if window is None or window[0] <= t <= window[1]]  # fmt: skip
            rtts = [v * 1e3 for _, v in inside]
            if window is not None:
                coverage = _coverage([t for t, _ in inside], *window)
        return ProbeResult(
            f"flent {f.test}",
            f"flent {f.version} {f.test} test ({shown}; only samples taken while the flows "
            f"ran{extra})",
            rtts,
            None,
            None,
            RAW_FILES["flent"],
            series=[
                {
                    "name": s.name,
                    "runner": s.runner,
                    "command": s.command,
                    "samples": len(s.values),
                    "units": s.units,
                }  # fmt: skip
                for s in f.series
            ],
            coverage=coverage,
        )
    return None


def _coverage(times: list[float], start: float, end: float) -> float:
    """Share of [start, end] covered by the samples inside it, each standing for one
    sampling step (0 when there are none)."""
    if not times or end <= start:
        return 0.0
    span = max(times) - min(times)
    step = span / (len(times) - 1) if len(times) > 1 else 0.0
    return round(min(1.0, (span + step) / (end - start)), 3)
