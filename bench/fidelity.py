"""Fidelity of the local emulated dumbbell: does it behave like the configured path?

For 100 Mbit/s, 500 Mbit/s and 1 Gbit/s at 40 ms RTT it runs, for real:
  - one cubic flow through a 1-BDP pfifo (utilization should approach the 95.6 %
    wire limit of goodput over 1514-byte frames),
  - 2 x bbr and 2 x cubic through the seeds' 48-packet pfifo,
and prints one table: utilization, Jain, mean RTT vs configured, share of packets
the delay element released > 5 ms late, its CPU, and machine CPU. A case that could
not be measured (e.g. the testbed failed calibration every try) is a row saying why;
the other cases go on.

Run as root: sudo .venv/bin/python bench/fidelity.py [--duration 10] [--rates 100,500,1000]
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

from ccbench.config import TestbedConfig
from ccbench.errors import CcbenchError
from ccbench.run import execute
from ccbench.spec import Flow, RunSpec, Topology, bdp_packets
from ccbench.testbed import local


def cpu_times() -> tuple[float, float]:
    parts = [float(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = parts[3] + parts[4]
    return sum(parts), idle


def one(rate: int, queue: int, ccs: list[str], duration: float, out: Path) -> dict:
    topo = Topology(pairs=2, rate_mbit=rate, rtt_ms=40, queue_kind="pfifo",
                    queue_limit_pkts=queue)  # fmt: skip
    tb = local.LocalTestbed(TestbedConfig(id="bench"), topo)
    local.down("bench")
    tb.up()
    try:
        flows = tuple(Flow(pair=i + 1, cc=cc, duration_s=duration) for i, cc in enumerate(ccs))
        spec = RunSpec(topology=topo, flows=flows, interval_s=1.0, ss_interval_s=0.0,
                       scenario="bench", variant="+".join(ccs))  # fmt: skip
        t0, i0 = cpu_times()
        s = execute(tb, spec, out, attempts=1)
        t1, i1 = cpu_times()
    finally:
        local.down("bench")
    rtts = [f["rtt_mean_us"] for f in s["flows"] if f["rtt_mean_us"]]
    d = s.get("delay_element") or {}
    return {
        "util": s["utilization_pct"],
        "jain": s["jain"],
        "rtt": sum(rtts) / len(rtts) / 1000 if rtts else float("nan"),
        "late": (d.get("late_share") or 0.0) * 100 if d else float("nan"),
        "elem_cpu": d.get("cpu_s", float("nan")) / duration * 100 if d else float("nan"),
        "cpu": 100 * (1 - (i1 - i0) / (t1 - t0)),
        "valid": s["valid"],
        "reasons": s["reasons"],
        "method": (s.get("calibration") or {}).get("delay_method"),
    }


def failed(reason: str) -> dict:
    """The row of a case that could not be measured: no numbers, the reason."""
    nan = math.nan
    return {"util": nan, "jain": nan, "rtt": nan, "late": nan, "elem_cpu": nan, "cpu": nan,
            "valid": False, "reasons": [f"not measured: {reason}"], "method": None}  # fmt: skip


def cell(x: float, digits: int) -> str:
    return "" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rates", default="100,500,1000")
    a = ap.parse_args()
    rates = [int(r) for r in a.rates.split(",")]
    work = Path(tempfile.mkdtemp(prefix="ccb-fidelity-"))
    rows = []
    try:
        for rate in rates:
            bdp = bdp_packets(rate, 40, 1500)
            for label, queue, ccs in (
                (f"1 x cubic, 1 BDP ({bdp} pkts)", bdp, ["cubic"]),
                ("2 x bbr, 48 pkts", 48, ["bbr", "bbr"]),
                ("2 x cubic, 48 pkts", 48, ["cubic", "cubic"]),
            ):
                print(f"# {rate} Mbit/s: {label} ...", file=sys.stderr, flush=True)
                try:
                    r = one(rate, queue, ccs, a.duration, work / f"{rate}-{len(rows)}")
                except Exception as e:  # e.g. calibration failed every try: go on
                    why = str(e) if isinstance(e, CcbenchError) else f"{type(e).__name__}: {e}"
                    print(f"#   not measured: {why}", file=sys.stderr, flush=True)
                    r = failed(why)
                rows.append((rate, label, r))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    method = next((r["method"] for _, _, r in rows if r["method"]), "n/a")
    print(f"\nFidelity, 40 ms RTT, {a.duration:g} s per run, delay via {method}, "
          f"{time.strftime('%Y-%m-%d')}\n")  # fmt: skip
    print("| rate | scenario | util % | Jain | mean RTT ms (cfg 40) | late >5 ms % "
          "| element CPU % | machine CPU % | valid |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, label, r in rows:
        jain = "" if label.startswith("1 x") else cell(r["jain"], 3)
        print(f"| {rate} Mbit/s | {label} | {cell(r['util'], 1)} | {jain} | {cell(r['rtt'], 1)} | "
              f"{cell(r['late'], 2)} | {cell(r['elem_cpu'], 0)} | {cell(r['cpu'], 0)} | "
              f"{'yes' if r['valid'] else 'no: ' + '; '.join(r['reasons'])} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
