"""What sampling the bottleneck queue costs, measured here (for qdisc_interval_s).

1. Sampler CPU: on an idle local dumbbell's rt1, each sampler design runs for
   --seconds at each interval; its CPU (user + system of the whole process tree, from
   /proc, children included) per second of wall time, and the interval it kept:
   - "coproc": the plan ccbench uses (LinuxHost.qdisc_sampler): bash builtins and one
     long-lived `tc -s -j -batch -`, no process started per sample;
   - "fork": a plain loop starting date, tc and sleep for every sample (like SS_LOOP).
2. Effect on the flows: real runs of one cubic flow through a 1-BDP pfifo at each
   --rates, with qdisc sampling off and at each --intervals, interleaved (off, a, b,
   off, a, b, ...) --reps times; each run's utilization, their mean (all runs, valid
   or not), its ratio to "off" (same rate, same bench run), the interval the sampler
   achieved, how many runs were valid, and why the others were not. Progress lines
   go to stderr (2>/dev/null for the tables alone).

The machine has 2 cores shared with whatever else runs: repeat before trusting a
difference of a percent or two.

Run as root: sudo .venv/bin/python bench/qdisc_cost.py [--rates 100,500] [--reps 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ccbench.attempts import execute
from ccbench.hosts.linux import LinuxHost
from ccbench.parse.qdisc import parse_qdisc_samples
from ccbench.spec import Flow, RunSpec, Topology, bdp_packets
from ccbench.testbed import local
from ccbench.testbed.kinds import TestbedConfig

HZ = os.sysconf("SC_CLK_TCK")
FORK_LOOP = 'while :; do echo "TS $(date +%s.%N)"; tc -s -j qdisc show dev "$2"; sleep "$1"; done'


def tree_cpu_s(sid: int) -> float:
    """utime+stime+cutime+cstime of every live process in session `sid`."""
    total = 0
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(f[3]) == sid:  # field 6 (session), after pid and comm
            total += sum(int(x) for x in f[11:15])
    return total / HZ


def sampler_cpu(ns: str, dev: str, design: str, interval: float, seconds: float) -> dict[str, Any]:
    if design == "coproc":
        argv = LinuxHost().qdisc_sampler(dev, interval)
    else:
        argv = ["sh", "-c", FORK_LOOP, "fork", f"{interval:g}", dev]
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=out,
                             start_new_session=True)  # fmt: skip
        time.sleep(seconds)
        cpu = tree_cpu_s(p.pid)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait()
        out.seek(0)
        samples = parse_qdisc_samples(out.read())
    n = len(samples)
    achieved = (samples[-1].t_unix - samples[0].t_unix) / (n - 1) if n > 1 else float("nan")
    return {"cpu_pct": cpu / seconds * 100, "samples": n, "achieved_ms": achieved * 1e3,
            "us_per_sample": cpu / max(n, 1) * 1e6}  # fmt: skip


def part1(a: argparse.Namespace) -> None:
    topo = Topology(pairs=1, rate_mbit=100, rtt_ms=40, queue_kind="pfifo", queue_limit_pkts=48)
    tb = local.LocalTestbed(TestbedConfig(id="qbench"), topo)
    local.down("qbench")
    tb.up()
    try:
        node, dev = tb.bottleneck
        print(f"\n1. Sampler CPU on an idle rt1 ({a.seconds:g} s each)\n")
        print(f"{'design':8} {'interval ms':>11} {'CPU %':>7} {'us/sample':>10} "
              f"{'achieved ms':>11} {'samples':>7}")  # fmt: skip
        for interval in (0.01, 0.05, 0.1):
            for design in ("coproc", "fork"):
                r = sampler_cpu(tb.ns(node), dev, design, interval, a.seconds)
                print(f"{design:8} {interval * 1e3:11g} {r['cpu_pct']:7.2f} "
                      f"{r['us_per_sample']:10.0f} {r['achieved_ms']:11.2f} "
                      f"{r['samples']:7d}")  # fmt: skip
    finally:
        local.down("qbench")


def part2(a: argparse.Namespace, work: Path) -> None:
    settings = [0.0, *a.intervals]
    print(f"\n2. One cubic flow, 1-BDP pfifo, 40 ms, {a.duration:g} s runs, {a.reps} rep(s), "
          "interleaved\n")  # fmt: skip
    print(f"{'Mbit/s':>6} {'qdisc_interval_s':>16} {'util % (each)':>22} {'mean':>6} "
          f"{'÷ off':>6} {'achieved ms':>11} {'valid':>5}")  # fmt: skip
    for rate in a.rates:
        topo = Topology(pairs=1, rate_mbit=rate, rtt_ms=40, queue_kind="pfifo",
                        queue_limit_pkts=bdp_packets(rate, 40, 1500))  # fmt: skip
        tb = local.LocalTestbed(TestbedConfig(id="qbench"), topo)
        local.down("qbench")
        tb.up()
        res: dict[float, list[dict[str, Any]]] = {s: [] for s in settings}
        try:
            for rep in range(a.reps):
                for s in settings:
                    spec = RunSpec(topology=topo, flows=(Flow(1, "cubic", duration_s=a.duration),),
                                   qdisc_interval_s=s, scenario="qcost", variant=f"q{s:g}",
                                   repetition=rep + 1)  # fmt: skip
                    out = work / f"{rate}-{s:g}-{rep}"
                    res[s].append(execute(tb, spec, out, attempts=1))
        finally:
            local.down("qbench")
        base = _mean([x["utilization_pct"] for x in res[0.0]])
        bad = [f"{x['variant']} rep {x['repetition']}: {'; '.join(x['reasons'])[:160]}"
               for s in settings for x in res[s] if not x["valid"]]  # fmt: skip
        for s in settings:
            utils = [x["utilization_pct"] for x in res[s]]
            ach = [((x.get("queue") or {}).get("interval_achieved_s") or 0) * 1e3 for x in res[s]]
            m = _mean(utils)
            print(f"{rate:6g} {s:16g} {' '.join(f'{u:.1f}' for u in utils):>22} {m:6.1f} "
                  f"{m / base:6.3f} {(_mean(ach) if s else 0):11.2f} "
                  f"{sum(x['valid'] for x in res[s])}/{len(res[s])}")  # fmt: skip
        for b in bad:
            print(f"{'':6} invalid: {b}")


def _mean(xs: list[Any]) -> float:
    v = [x for x in xs if x is not None]
    return sum(v) / len(v) if v else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="part 1: seconds per sampler")
    ap.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[100, 500])
    ap.add_argument("--intervals", type=lambda s: [float(x) for x in s.split(",")],
                    default=[0.05, 0.01])  # fmt: skip
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--only", choices=["cpu", "flows"])
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("qdisc_cost: run as root (it builds a local dumbbell)", file=sys.stderr)
        return 2
    if a.only != "flows":
        part1(a)
    if a.only != "cpu":
        with tempfile.TemporaryDirectory(prefix="ccbench-qcost-") as work:
            part2(a, Path(work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
