"""The tables of bench/fidelity.py, from its run records (one dict per run, as logged):
per case (scenario x rate x setup) valid count, utilization, Jain, mean RTT, packets
lost outside the bottleneck, CPU per packet by kind over clean runs, other people's
load, and why runs were invalid; the envelope's highest valid rate per setup; the
paired deltas (the report's own: ccbench.metrics.delta_by_repetition, the delta and CI
the report's tables use)."""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from typing import Any

from bench.fidelity_runs import CLEAN_OTHER_PCT
from ccbench import metrics


def cell(x: float | None, digits: int) -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _num(r: dict[str, Any], k: str) -> float:
    v = r.get(k)
    return math.nan if v is None else float(v)


def _mean(xs: list[float]) -> float:
    xs = [x for x in xs if not math.isnan(x)]
    return statistics.fmean(xs) if xs else math.nan


def _range(xs: list[float], digits: int) -> str:
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return ""
    m = cell(statistics.fmean(xs), digits)
    return m if len(xs) == 1 else f"{m} ({cell(min(xs), digits)}–{cell(max(xs), digits)})"


def cases(recs: list[dict[str, Any]]) -> dict[tuple[str, int, str], list[dict[str, Any]]]:
    """(scenario, rate, setup) -> its runs, in the order measured."""
    out: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    for r in recs:
        out.setdefault((r["scenario"], r["rate"], r["setup"]), []).append(r)
    return out


def _why(runs: list[dict[str, Any]]) -> str:
    """Each invalid run's first reasons, shortened; the same text once with a count."""
    texts = Counter("; ".join(r["reasons"])[:160] for r in runs if not r["valid"])
    return " / ".join(t if n == 1 else f"{n}×: {t}" for t, n in texts.items())


def cpu_text(runs: list[dict[str, Any]]) -> str:
    """usr/sys/irq+softirq = total µs per packet, mean over clean runs."""
    clean = [r for r in runs if _num(r, "other_pct") <= CLEAN_OTHER_PCT]
    if not clean:
        return "no clean run"
    parts = [_mean([_num(r, k) for r in clean]) for k in ("usr_us", "sys_us", "sirq_us",
                                                          "us_per_pkt")]  # fmt: skip
    note = "" if len(clean) == len(runs) else f" ({len(clean)} clean)"
    return (
        f"{cell(parts[0], 1)}/{cell(parts[1], 1)}/{cell(parts[2], 1)} = {cell(parts[3], 1)}{note}"
    )


def case_table(recs: list[dict[str, Any]]) -> None:
    print(
        "| scenario | rate | setup | valid | util % (range) | Jain | mean RTT ms | lost outside "
        "| CPU µs/pkt usr/sys/irq+si = total | CPU0/CPU1 busy % | timers/overlimits per pkt "
        "| other % (max) | why invalid |"
    )
    print("|---" * 13 + "|")
    for (_, rate, setup), runs in cases(recs).items():
        n_ok = sum(1 for r in runs if r["valid"])
        lost = ", ".join("?" if r.get("outside") is None else str(r["outside"]) for r in runs)
        busy = "/".join(cell(_mean([_num(r, f"cpu{k}_busy") for r in runs]), 0) for k in (0, 1))
        jain = (
            "" if runs[0]["label"].startswith("1 x") else _range([_num(r, "jain") for r in runs], 3)
        )
        other = max((_num(r, "other_pct") for r in runs), default=math.nan)
        timers = "/".join(cell(_mean([_num(r, k) for r in runs]), 2)
                          for k in ("timers_per_pkt", "overlimits_per_pkt"))  # fmt: skip
        print(f"| {runs[0]['label']} | {rate} | {setup} | {n_ok}/{len(runs)} "
              f"| {_range([_num(r, 'util') for r in runs], 1)} | {jain} "
              f"| {cell(_mean([_num(r, 'rtt') for r in runs]), 1)} | {lost} | {cpu_text(runs)} "
              f"| {busy} | {timers} | {cell(other, 1)} | {_why(runs)} |")  # fmt: skip


def best_rates(recs: list[dict[str, Any]], reps: int) -> None:
    """Per scenario and setup, the highest rate at which every run (of `reps`) was valid."""
    setups = list(dict.fromkeys(r["setup"] for r in recs))
    print(f"| scenario | {' | '.join(setups)} |")
    print("|---" * (len(setups) + 1) + "|")
    by = cases(recs)
    for label in dict.fromkeys(r["label"] for r in recs):
        cells = []
        for s in setups:
            ok = [rate for (_, rate, st), runs in by.items()
                  if st == s and runs[0]["label"] == label
                  and len(runs) >= reps and all(r["valid"] for r in runs)]  # fmt: skip
            cells.append(f"{max(ok)} Mbit/s" if ok else "none")
        print(f"| {label} | {' | '.join(cells)} |")


PAIRED = (("util", "utilization", 1), ("jain", "Jain", 3), ("rtt", "mean RTT ms", 1))


def paired_table(recs: list[dict[str, Any]]) -> None:
    """Each setup against the first, per scenario and rate: mean ± CI of valid runs and
    the report's paired % delta with its 95 % CI (metrics.delta_by_repetition)."""
    print("| scenario | rate | setup | valid | " + " | ".join(
        f"{name} (± 95 % CI) | Δ {name} % (± CI)" for _, name, _ in PAIRED) + " |")  # fmt: skip
    print("|---" * (4 + 2 * len(PAIRED)) + "|")
    by = cases(recs)
    for (scen, rate, setup), runs in by.items():
        base_setup = next(st for (sc, ra, st) in by if (sc, ra) == (scen, rate))
        base = [r for r in by[scen, rate, base_setup] if r["valid"]]
        ok = [r for r in runs if r["valid"]]
        cols = []
        for key, _, digits in PAIRED:
            if key == "jain" and runs[0]["label"].startswith("1 x"):
                cols += ["", ""]
                continue
            ci = metrics.mean_ci([_num(r, key) for r in ok])
            cols.append(f"{cell(ci.mean, digits)} ± {cell(ci.half_width, digits)}")
            if setup == base_setup:
                cols.append("baseline")
                continue
            d = metrics.delta_by_repetition({r["rep"]: _num(r, key) for r in base},
                                            {r["rep"]: _num(r, key) for r in ok})  # fmt: skip
            if d is None:
                cols.append("")
                continue
            noise = abs(d.mean_pct) <= d.half_width_pct  # the CI holds 0
            note = ("" if d.paired else " (unpaired)") + (" (0 inside)" if noise else "")
            cols.append(f"{d.mean_pct:+.2f} ± {cell(d.half_width_pct, 2)}{note}")
        print(f"| {runs[0]['label']} | {rate} | {setup} | {len(ok)}/{len(runs)} | "
              + " | ".join(cols) + " |")  # fmt: skip


def cpu_split_table(recs: list[dict[str, Any]]) -> None:
    print(
        "| rate | scenario | setup | user | kernel (process) | irq + softirq | total | steal % "
        "| other % |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in recs:
        print(f"| {r['rate']} | {r['label']} | {r['setup']} | {cell(_num(r, 'usr_us'), 1)} "
              f"| {cell(_num(r, 'sys_us'), 1)} | {cell(_num(r, 'sirq_us'), 1)} "
              f"| {cell(_num(r, 'us_per_pkt'), 1)} | {cell(_num(r, 'steal'), 1)} "
              f"| {cell(_num(r, 'other_pct'), 1)} |")  # fmt: skip


def show(mode: str, recs: list[dict[str, Any]], reps: int) -> None:
    if not recs:
        print("no runs")
        return
    first, last = min(r["time"] for r in recs), max(r["time"] for r in recs)
    span = (f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(first))}–"
            f"{time.strftime('%H:%M', time.gmtime(last))} UTC")  # fmt: skip
    dur = sorted({r.get("duration") for r in recs if r.get("duration")})
    print(
        f"\n{len(recs)} runs, {span}, {'/'.join(f'{d:g}' for d in dur)} s each, 40 ms RTT; "
        f"CPU over each run's traffic (raw/cpu-*.txt), clean: other % ≤ {CLEAN_OTHER_PCT:g}\n"
    )
    if mode == "envelope":
        print(f"Highest rate with {reps}/{reps} valid:\n")
        best_rates(recs, reps)
        print()
    if mode == "paired":
        paired_table(recs)
        print()
    case_table(recs)
    if mode == "table":
        print("\nWhere the CPU went, µs per packet through the bottleneck\n")
        cpu_split_table(recs)
