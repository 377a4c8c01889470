"""Fidelity of the local emulated dumbbell: does it behave like the configured path,
and what does each forwarded packet cost? Every run is ccbench's own (every validity
rule in force); bench/fidelity_runs.py measures one and says how.

Default (table): for 100 Mbit/s, 500 Mbit/s and 1 Gbit/s at 40 ms RTT it runs
  - one cubic flow through a 1-BDP pfifo (utilization should approach the 95.6 %
    wire limit of goodput over 1514-byte frames),
  - 2 x bbr and 2 x cubic through the seeds' 48-packet pfifo,
and prints one table: utilization, Jain, mean RTT vs configured, share of packets the
delay element released > 5 ms late, its CPU, machine CPU, machine CPU per packet
through the bottleneck (µs), and validity; then where that CPU went per packet: user
space, kernel for processes, irq + softirq, and the hypervisor's steal.

--envelope: for each seed scenario (1 x cubic 1-BDP; 2 x cubic, 2 x bbr, cubic + bbr
through 48 packets) the highest rate of --rates (default 100,200,300,500,750,1000) at
which --reps (3) of 3 runs are valid; a setup stops climbing at its first rate that is
not all valid (--all-rates measures every rate anyway). Per case: valid count,
utilization, Jain, mean RTT, packets lost outside the bottleneck, CPU per packet by
kind, other people's load, and why runs were invalid.

--layouts routed,macvlan / --directions both,reverse: every testbed layout x delay
direction a layout offers (testbed.layout, testbed.delay_direction) is a setup; the
setups of a case are built side by side and their runs interleaved (rep 1 of each,
then rep 2 ...), so the host's noise of the day hits all alike.

--paired: the setups' runs of each case (--rates, --scenarios), paired by repetition,
compared with the report's own delta and CI (ccbench.aggregate.summarize_groups: per
metric the % change vs the first setup, t-interval of the paired deltas).

--log FILE appends one JSON line per run (every number of the tables; the run's
directory if --keep DIR keeps them); --from-log FILE... prints the tables of earlier
logs (an envelope measured in chunks) without running anything.

Run as root: sudo .venv/bin/python bench/fidelity.py [--duration 10] [--rates ...]
             sudo .venv/bin/python bench/fidelity.py --envelope --layouts routed,macvlan \\
                 --directions both,reverse --rates 1000 --reps 3 --log env.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import fidelity_tables as tables  # noqa: E402
from bench.fidelity_runs import (  # noqa: E402
    Accounting,
    Setup,
    failed,
    measure,
    setups,
    testbeds_up,
    why,
)
from ccbench.spec import Topology, bdp_packets  # noqa: E402

# key -> (label, flows' CCs, queue: 0 = 1 BDP)
SCENARIOS = {
    "cubic-1bdp": ("1 x cubic, 1 BDP", ["cubic"], 0),
    "2cubic": ("2 x cubic, 48 pkts", ["cubic", "cubic"], 48),
    "2bbr": ("2 x bbr, 48 pkts", ["bbr", "bbr"], 48),
    "cubic-bbr": ("cubic + bbr, 48 pkts", ["cubic", "bbr"], 48),
}


def queue_of(key: str, rate: int) -> int:
    return SCENARIOS[key][2] or bdp_packets(rate, 40, 1500)


def topo_of(key: str, rate: int) -> Topology:
    return Topology(pairs=2, rate_mbit=rate, rtt_ms=40, queue_kind="pfifo",
                    queue_limit_pkts=queue_of(key, rate))  # fmt: skip


class Runner:
    """Runs cases and logs each run (one JSON line) as it ends."""

    def __init__(self, a: argparse.Namespace, work: Path, acct: Accounting):
        self.a, self.work, self.acct = a, work, acct
        self.records: list[dict[str, Any]] = []
        self.n = 0

    def case(self, key: str, rate: int, todo: list[Setup], reps: int) -> list[dict[str, Any]]:
        """`reps` runs of scenario `key` at `rate` on each setup, interleaved."""
        label, ccs, _ = SCENARIOS[key]
        out: list[dict[str, Any]] = []
        print(f"# {label} at {rate} Mbit/s: {', '.join(s.name for s in todo)} x {reps} ...",
              file=sys.stderr, flush=True)  # fmt: skip
        with testbeds_up(todo, topo_of(key, rate)) as beds:
            for rep in range(1, reps + 1):
                for s, tb in zip(todo, beds, strict=True):
                    self.n += 1
                    if isinstance(tb, Exception):
                        r = failed(why(tb))
                    else:
                        try:
                            r = measure(tb, beds, ccs, self.a.duration, self.work / f"run-{self.n}",
                                        rep, self.acct)  # fmt: skip
                        except Exception as e:  # e.g. a tool failed: the others go on
                            r = failed(why(e))
                    r.update({"scenario": key, "label": label, "rate": rate, "setup": s.name,
                              "rep": rep, "queue": queue_of(key, rate),
                              "duration": self.a.duration})  # fmt: skip
                    if not r["valid"]:
                        print(f"#   {s.name} rep {rep}: invalid: {'; '.join(r['reasons'])[:300]}",
                              file=sys.stderr, flush=True)  # fmt: skip
                    self.log(r)
                    out.append(r)
        return out

    def log(self, r: dict[str, Any]) -> None:
        self.records.append(r)
        if self.a.log:
            with open(self.a.log, "a") as fh:
                fh.write(json.dumps(r, allow_nan=True) + "\n")


def table(a: argparse.Namespace, run: Runner, todo: list[Setup]) -> None:
    for rate in a.rates:
        for key in a.scenarios:
            run.case(key, rate, todo, 1)


def envelope(a: argparse.Namespace, run: Runner, todo: list[Setup]) -> None:
    for key in a.scenarios:
        climbing = list(todo)
        for rate in a.rates:
            if not climbing:
                break
            rows = run.case(key, rate, climbing, a.reps)
            if not a.all_rates:
                climbing = [s for s in climbing
                            if all(r["valid"] for r in rows if r["setup"] == s.name)]  # fmt: skip


def paired(a: argparse.Namespace, run: Runner, todo: list[Setup]) -> None:
    for key in a.scenarios:
        for rate in a.rates:
            run.case(key, rate, todo, a.reps)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--rates", help="Mbit/s, comma-separated")
    ap.add_argument("--envelope", action="store_true", help="the envelope table (see above)")
    ap.add_argument("--paired", action="store_true", help="paired deltas vs the first setup")
    ap.add_argument("--reps", type=int, default=3, help="runs per case (--envelope, --paired)")
    ap.add_argument("--all-rates", action="store_true",
                    help="with --envelope: every rate, not only up to a failure")  # fmt: skip
    ap.add_argument(
        "--directions",
        default="both",
        help="testbed.delay_direction values, comma-separated (both, reverse)",
    )
    ap.add_argument(
        "--layouts",
        default="routed",
        help="testbed.layout values, comma-separated (routed, macvlan)",
    )
    ap.add_argument("--scenarios", help=f"comma-separated, of {', '.join(SCENARIOS)}")
    ap.add_argument("--log", help="append one JSON line per run to this file")
    ap.add_argument("--keep", help="keep every run's directory under this directory")
    ap.add_argument("--from-log", nargs="+", help="print the tables of these logs; run nothing")
    a = ap.parse_args()
    mode = "paired" if a.paired else "envelope" if a.envelope else "table"
    if a.from_log:
        recs = [json.loads(ln) for f in a.from_log for ln in Path(f).read_text().splitlines()
                if ln.strip()]  # fmt: skip
        tables.show(mode, recs, a.reps)
        return 0
    a.rates = [int(r) for r in (a.rates or ("100,200,300,500,750,1000" if a.envelope
                                            else "100,500,1000")).split(",")]  # fmt: skip
    default = list(SCENARIOS) if a.envelope or a.paired else ["cubic-1bdp", "2bbr", "2cubic"]
    a.scenarios = a.scenarios.split(",") if a.scenarios else default
    bad = [s for s in a.scenarios if s not in SCENARIOS]
    if bad:
        ap.error(f"--scenarios: unknown {', '.join(bad)} (of {', '.join(SCENARIOS)})")
    todo, notes = setups(a.layouts.split(","), a.directions.split(","))
    for n in notes:
        print(f"# {n}", file=sys.stderr)
    if not todo:
        ap.error("no setup to measure")
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="ccb-fidelity-"))
    work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=work))
    acct = Accounting()
    run = Runner(a, work, acct)
    try:
        {"table": table, "envelope": envelope, "paired": paired}[mode](a, run, todo)
    finally:
        acct.close()
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M %Z')}, {os.cpu_count()} CPUs, kernel "
          f"{os.uname().release}; " + "; ".join(notes))  # fmt: skip
    tables.show(mode, run.records, a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
