"""Fidelity of the local emulated dumbbell: does it behave like the configured path,
and what does each forwarded packet cost?

Default (table): for 100 Mbit/s, 500 Mbit/s and 1 Gbit/s at 40 ms RTT it runs, for real,
  - one cubic flow through a 1-BDP pfifo (utilization should approach the 95.6 %
    wire limit of goodput over 1514-byte frames),
  - 2 x bbr and 2 x cubic through the seeds' 48-packet pfifo,
and prints one table: utilization, Jain, mean RTT vs configured, share of packets the
delay element released > 5 ms late, its CPU, machine CPU, machine CPU per packet
through the bottleneck (µs), and validity (every rule, the loss ledger included); then
where that CPU went per packet: user space, kernel for processes, irq + softirq
(forwarding, qdiscs, veth receive), and the hypervisor's steal.

--envelope: for each seed scenario (1 x cubic 1-BDP; 2 x cubic, 2 x bbr, cubic + bbr
through 48 packets) the highest rate of --rates (default 100,200,300,500,750,1000) at
which --reps (3) of 3 runs are valid; a scenario stops climbing at its first rate that
is not all valid (--all-rates measures every rate anyway). One table, plus the runs.

--directions both,reverse: every case with the RTT split both ways (as the seeds' delay
node) and with the whole RTT on the ACK path (testbed.delay_direction), side by side.

A case that could not be measured (e.g. the testbed failed calibration every try) is a
row saying why; the other cases go on.

Run as root: sudo .venv/bin/python bench/fidelity.py [--duration 10] [--rates ...]
             sudo .venv/bin/python bench/fidelity.py --envelope [--reps 3]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ccbench.attempts import execute
from ccbench.errors import CcbenchError
from ccbench.spec import Flow, RunSpec, TestbedConfig, Topology, bdp_packets
from ccbench.testbed import local

USER_HZ = os.sysconf("SC_CLK_TCK")


# /proc/stat's cpu line: user nice system idle iowait irq softirq steal (then guest
# times, already inside user and nice).
STAT_COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def cpu_times() -> dict[str, float]:
    """The machine's CPU time so far by kind, in clock ticks (/proc/stat)."""
    parts = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return dict(zip(STAT_COLUMNS, parts, strict=False))


def cpu_split(before: dict[str, float], after: dict[str, float], pkts: int) -> dict[str, float]:
    """Where the machine's CPU went between two cpu_times(): busy share (%), and µs per
    packet through the bottleneck in user space (iperf3, the delay element's own code,
    ccbench's samplers), the kernel on behalf of processes (sendmsg, the element's
    netlink verdicts) and interrupts with softirqs (forwarding hops, qdiscs, veth
    receive); steal is time the hypervisor gave to other guests (%)."""
    d = {k: after[k] - before[k] for k in STAT_COLUMNS}
    total = sum(d.values()) or math.nan
    per_pkt = 1e6 / USER_HZ / pkts if pkts else math.nan
    return {
        "cpu": 100 * (total - d["idle"] - d["iowait"]) / total,
        "us_per_pkt": (total - d["idle"] - d["iowait"]) * per_pkt,
        "usr_us": (d["user"] + d["nice"]) * per_pkt,
        "sys_us": d["system"] * per_pkt,
        "sirq_us": (d["irq"] + d["softirq"]) * per_pkt,
        "steal": 100 * d["steal"] / total,
    }


def scenarios(rate: int) -> list[tuple[str, int, list[str]]]:
    bdp = bdp_packets(rate, 40, 1500)
    return [
        (f"1 x cubic, 1 BDP ({bdp} pkts)", bdp, ["cubic"]),
        ("2 x cubic, 48 pkts", 48, ["cubic", "cubic"]),
        ("2 x bbr, 48 pkts", 48, ["bbr", "bbr"]),
        ("cubic + bbr, 48 pkts", 48, ["cubic", "bbr"]),
    ]


def measure(
    tb: local.LocalTestbed, topo: Topology, ccs: list[str], duration: float, out: Path
) -> dict[str, Any]:
    """One run on a testbed that is up; its numbers and validity."""
    flows = tuple(Flow(pair=i + 1, cc=cc, duration_s=duration) for i, cc in enumerate(ccs))
    spec = RunSpec(topology=topo, flows=flows, interval_s=1.0, ss_interval_s=0.1,
                   scenario="bench", variant="+".join(ccs))  # fmt: skip
    c0 = cpu_times()
    s = execute(tb, spec, out, attempts=1)
    c1 = cpu_times()
    rtts = [f["rtt_mean_us"] for f in s["flows"] if f["rtt_mean_us"]]
    d = s.get("delay_element") or {}
    pkts = ((s.get("bottleneck") or {}).get("queue") or {}).get("sent_pkts") or 0
    return {
        # Whole-machine CPU (every host, hop, the shaper, the element, the tools) per
        # data packet through the bottleneck, over the run (set-up and parse included),
        # and its split by kind (cpu_split).
        **cpu_split(c0, c1, pkts),
        "util": s["utilization_pct"],
        "jain": s["jain"],
        "rtt": sum(rtts) / len(rtts) / 1000 if rtts else math.nan,
        "late": (d.get("late_share") or 0.0) * 100 if d else math.nan,
        "elem_cpu": d.get("cpu_s", math.nan) / duration * 100 if d else math.nan,
        "valid": s["valid"],
        "reasons": s["reasons"],
        "method": (s.get("calibration") or {}).get("delay_method"),
    }


def with_testbed(rate: int, queue: int, fn: Any, direction: str = "both") -> Any:
    topo = Topology(pairs=2, rate_mbit=rate, rtt_ms=40, queue_kind="pfifo",
                    queue_limit_pkts=queue)  # fmt: skip
    tb = local.LocalTestbed(TestbedConfig(id="bench", delay_direction=direction), topo)
    local.down("bench")
    tb.up()
    try:
        return fn(tb, topo)
    finally:
        local.down("bench")


def failed(reason: str) -> dict[str, Any]:
    """The row of a case that could not be measured: no numbers, the reason."""
    nan = math.nan
    return {"util": nan, "jain": nan, "rtt": nan, "late": nan, "elem_cpu": nan, "cpu": nan,
            "us_per_pkt": nan, "usr_us": nan, "sys_us": nan, "sirq_us": nan, "steal": nan,
            "valid": False, "reasons": [f"not measured: {reason}"], "method": None}  # fmt: skip


def why(e: Exception) -> str:
    return str(e) if isinstance(e, CcbenchError) else f"{type(e).__name__}: {e}"


def cell(x: float | None, digits: int) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def table(a: argparse.Namespace, work: Path) -> int:
    rows = []
    for rate in [int(r) for r in a.rates.split(",")]:
        for label, queue, ccs in scenarios(rate)[:3]:
            # Directions side by side, case by case: the host's noise hits both alike.
            for d in a.directions:
                print(f"# {rate} Mbit/s: {label}, delay {d} ...", file=sys.stderr, flush=True)
                out = work / f"{rate}-{len(rows)}"
                try:
                    r = with_testbed(rate, queue,
                                     lambda tb, topo: measure(tb, topo, ccs, a.duration, out),  # noqa: B023
                                     d)  # fmt: skip
                except Exception as e:  # e.g. calibration failed every try: go on
                    print(f"#   not measured: {why(e)}", file=sys.stderr, flush=True)
                    r = failed(why(e))
                rows.append((rate, label if len(a.directions) == 1 else f"{label}, {d}", r))
    method = next((r["method"] for _, _, r in rows if r["method"]), "n/a")
    print(f"\nFidelity, 40 ms RTT, {a.duration:g} s per run, delay via {method}, "
          f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs\n")  # fmt: skip
    print("| rate | scenario | util % | Jain | mean RTT ms (cfg 40) | late >5 ms % "
          "| element CPU % | machine CPU % | µs CPU/pkt | valid |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate, label, r in rows:
        jain = "" if label.startswith("1 x") else cell(r["jain"], 3)
        print(f"| {rate} Mbit/s | {label} | {cell(r['util'], 1)} | {jain} | {cell(r['rtt'], 1)} | "
              f"{cell(r['late'], 2)} | {cell(r['elem_cpu'], 0)} | {cell(r['cpu'], 0)} | "
              f"{cell(r['us_per_pkt'], 1)} | "
              f"{'yes' if r['valid'] else 'no: ' + '; '.join(r['reasons'])} |")  # fmt: skip
    print_cpu_split(rows)
    return 0


def print_cpu_split(rows: list[tuple[int, str, dict[str, Any]]]) -> None:
    """Where each case's CPU per packet went (cpu_split)."""
    print("\nWhere the CPU went, µs per packet through the bottleneck (/proc/stat over the run)\n")
    print("| rate | scenario | user | kernel (process) | irq + softirq | total | steal % |")
    print("|---|---|---|---|---|---|---|")
    for rate, label, r in rows:
        print(f"| {rate} Mbit/s | {label} | {cell(r['usr_us'], 1)} | {cell(r['sys_us'], 1)} | "
              f"{cell(r['sirq_us'], 1)} | {cell(r['us_per_pkt'], 1)} | "
              f"{cell(r['steal'], 1)} |")  # fmt: skip


def envelope(a: argparse.Namespace, work: Path) -> int:
    rates = [int(r) for r in a.rates.split(",")]
    best: dict[str, int | None] = {}
    runs: list[tuple[str, int, int, dict[str, Any]]] = []
    cases = [(k, label, ccs, d) for k, (label, _, ccs) in enumerate(scenarios(rates[0]))
             for d in a.directions]  # fmt: skip
    for k, label, ccs, d in cases:
        name = label.split(" (")[0] + ("" if len(a.directions) == 1 else f", delay {d}")
        best[name] = None
        for rate in rates:
            queue = scenarios(rate)[k][1]
            print(f"# {name} at {rate} Mbit/s x {a.reps} ...", file=sys.stderr, flush=True)

            def reps(tb: local.LocalTestbed, topo: Topology) -> list[dict[str, Any]]:
                return [measure(tb, topo, ccs, a.duration, work / f"{k}-{d}-{rate}-{i}")  # noqa: B023
                        for i in range(a.reps)]  # fmt: skip

            try:
                results = with_testbed(rate, queue, reps, d)
            except Exception as e:
                print(f"#   not measured: {why(e)}", file=sys.stderr, flush=True)
                results = [failed(why(e))]
            for i, r in enumerate(results, 1):
                runs.append((name, rate, i, r))
            if len(results) == a.reps and all(r["valid"] for r in results):
                best[name] = rate
            elif not a.all_rates:
                break
    print(f"\nEnvelope, 40 ms RTT, {a.duration:g} s per run, {a.reps} runs per rate, "
          f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
          f"kernel {os.uname().release}\n")  # fmt: skip
    print(f"| scenario | highest rate with {a.reps}/{a.reps} valid (of {a.rates} Mbit/s) |")
    print("|---|---|")
    for name, rate in best.items():
        print(f"| {name} | {f'{rate} Mbit/s' if rate else 'none'} |")
    print("\n| scenario | rate | run | util % | mean RTT ms | µs CPU/pkt | valid |")
    print("|---|---|---|---|---|---|---|")
    for name, rate, i, r in runs:
        print(f"| {name} | {rate} | {i} | {cell(r['util'], 1)} | {cell(r['rtt'], 1)} | "
              f"{cell(r['us_per_pkt'], 1)} | "
              f"{'yes' if r['valid'] else 'no: ' + '; '.join(r['reasons'])} |")  # fmt: skip
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rates", help="Mbit/s, comma-separated")
    ap.add_argument("--envelope", action="store_true", help="the envelope table (see above)")
    ap.add_argument("--reps", type=int, default=3, help="with --envelope: runs per rate")
    ap.add_argument("--all-rates", action="store_true",
                    help="with --envelope: every rate, not only up to a failure")  # fmt: skip
    ap.add_argument("--directions", default="both",
                    help="testbed.delay_direction values to measure side by side, "
                         "comma-separated (both, reverse)")  # fmt: skip
    a = ap.parse_args()
    a.directions = a.directions.split(",")
    a.rates = a.rates or ("100,200,300,500,750,1000" if a.envelope else "100,500,1000")
    work = Path(tempfile.mkdtemp(prefix="ccb-fidelity-"))
    try:
        return envelope(a, work) if a.envelope else table(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
