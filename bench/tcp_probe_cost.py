"""What tracing every ACK costs: tcp_probe (plus ss, as a traced run has both) against
ss alone, paired by repetition, on the local dumbbell.

Per rate (100 Mbit/s in the default routed layout, 1 Gbit/s in the macvlan layout:
where each is faithful here, docs/fidelity.md) it runs the seed's 2 x cubic through a
48-packet pfifo --reps times each way, the two ways interleaved (rep 1 untraced, rep 1
traced, ...) on one testbed, every run `ccbench run` with all its validity rules. From
each run's raw/: utilization (summary.json), the machine's CPU per packet through the
bottleneck (cpu-before/after.txt: locally the router's CPU is the whole machine's, over
tc's sent packets), the trace's size and how long its parse took. Prints one table: the
means each way, and traced - untraced paired by repetition with its 95 % CI
(ccbench.metrics.mean_ci of the per-repetition differences).

Run as root: sudo .venv/bin/python bench/tcp_probe_cost.py [--reps 5] [--duration 20]
             [--rates 100,1000] [--log cost.jsonl] [--from-log cost.jsonl]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity_runs import cpu_split  # noqa: E402

from ccbench import metrics  # noqa: E402

CCBENCH = str(Path(sys.executable).with_name("ccbench"))
LAYOUT = {100: "routed", 1000: "macvlan"}


def config(path: Path, rate: int, duration: float, traced: bool) -> Path:
    layout = LAYOUT.get(rate, "routed")
    tb = {"id": f"tpc{rate}", "layout": layout}
    if layout == "macvlan":
        tb["delay_direction"] = "reverse"  # the macvlan layout's only one
    cfg = {
        "testbed": tb,
        "topology": {"pairs": 2, "rate_mbit": rate, "rtt_ms": 40, "queue": {"limit_pkts": 48}},
        "run": {"duration_s": duration, "interval_s": 1, "record": ["tcp_probe"] if traced else [],
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "cubic", "pair": 2}]},
    }  # fmt: skip
    path.write_text(yaml.safe_dump(cfg))
    return path


def one(rate: int, duration: float, traced: bool, rep: int, work: Path) -> dict[str, Any]:
    cfg = config(work / f"{rate}-{traced}.yaml", rate, duration, traced)
    out = work / f"{rate}-{'tp' if traced else 'ss'}-{rep}"
    cp = subprocess.run([CCBENCH, "run", "--config", str(cfg), "--out", str(out)],
                        capture_output=True, text=True)  # fmt: skip
    if cp.returncode != 0:
        raise SystemExit(f"ccbench run: {cp.stderr.strip().splitlines()[-1]}")
    t0 = time.monotonic()
    subprocess.run([CCBENCH, "parse", str(out)], check=True, capture_output=True)
    parse_s = time.monotonic() - t0
    s = json.loads((out / "summary.json").read_text())
    raw = out / "raw"
    pkts = int((s["bottleneck"].get("queue") or {}).get("sent_pkts") or 0)
    cpu = cpu_split((raw / "cpu-before.txt").read_text(), (raw / "cpu-after.txt").read_text(),
                    pkts)  # fmt: skip
    trace = sum(p.stat().st_size for p in raw.glob("tcp-probe-*.txt"))
    return {"rate": rate, "traced": traced, "rep": rep, "valid": s["valid"],
            "reasons": [r["text"] for r in s["reasons"]], "util": s["utilization_pct"],
            "jain": s["jain"],
            "us_per_pkt": cpu["us_per_pkt"], "steal": cpu["steal"], "trace_mb": trace / 1e6,
            "parse_s": parse_s}  # fmt: skip


def table(recs: list[dict[str, Any]]) -> None:
    print(
        "| rate | reps valid (ss / tcp_probe) | utilization % ss | tcp_probe | Δ pp ± CI "
        "| CPU µs/pkt ss | tcp_probe | Δ µs ± CI | trace MB/run | parse s/run |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rate in sorted({r["rate"] for r in recs}):
        mine = [r for r in recs if r["rate"] == rate]
        by = {(r["traced"], r["rep"]): r for r in mine}
        reps = sorted({r["rep"] for r in mine})
        pairs = [(by[(False, k)], by[(True, k)]) for k in reps
                 if (False, k) in by and (True, k) in by
                 and by[(False, k)]["valid"] and by[(True, k)]["valid"]]  # fmt: skip

        def mean(key: str, traced: bool, mine: list[dict[str, Any]] = mine) -> float:
            xs = [r[key] for r in mine if r["traced"] == traced and r["valid"]]
            return sum(xs) / len(xs) if xs else math.nan

        def delta(key: str, pairs: list[tuple[dict[str, Any], ...]] = pairs) -> str:
            ci = metrics.mean_ci([t[key] - u[key] for u, t in pairs])
            return f"{ci.mean:+.2f} ± {ci.half_width:.2f}"

        n_ss = sum(1 for r in mine if not r["traced"] and r["valid"])
        n_tp = sum(1 for r in mine if r["traced"] and r["valid"])
        n = len(reps)
        print(
            f"| {rate} Mbit/s ({LAYOUT.get(rate, 'routed')}) | {n_ss}/{n} / {n_tp}/{n} "
            f"| {mean('util', False):.2f} | {mean('util', True):.2f} | {delta('util')} "
            f"| {mean('us_per_pkt', False):.2f} | {mean('us_per_pkt', True):.2f} "
            f"| {delta('us_per_pkt')} | {mean('trace_mb', True):.1f} "
            f"| {mean('parse_s', True):.2f} (ss only {mean('parse_s', False):.2f}) |"
        )
    bad = [f"{r['rate']} {'tp' if r['traced'] else 'ss'} rep {r['rep']}: {r['reasons'][:1]}"
           for r in recs if not r["valid"]]  # fmt: skip
    if bad:
        print("invalid: " + "; ".join(bad))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--log", type=Path)
    ap.add_argument("--from-log", type=Path)
    a = ap.parse_args()
    if a.from_log:
        table([json.loads(x) for x in a.from_log.read_text().splitlines() if x.strip()])
        return 0
    recs = []
    with tempfile.TemporaryDirectory(prefix="ccb-tpcost-") as d:
        for rate in (int(x) for x in a.rates.split(",")):
            try:
                for rep in range(1, a.reps + 1):
                    for traced in (False, True):
                        r = one(rate, a.duration, traced, rep, Path(d))
                        recs.append(r)
                        print(f"# {rate} Mbit/s rep {rep} {'tcp_probe' if traced else 'ss'}: "
                              f"util {r['util'] or math.nan:.1f} %, {r['us_per_pkt']:.2f} µs/pkt, "
                              f"valid {r['valid']}", file=sys.stderr, flush=True)  # fmt: skip
                        if a.log:
                            with a.log.open("a") as fh:
                                fh.write(json.dumps(r) + "\n")
            finally:
                subprocess.run([CCBENCH, "testbed", "down", "--id", f"tpc{rate}"],
                               capture_output=True)  # fmt: skip
    table(recs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
