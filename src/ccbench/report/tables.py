"""Formatted rows of the report's tables (strings ready for the template).

Every number passes through fmt.fmt with the digits of its Metric, so the PDF, the
HTML and a test that recomputes a value all agree on the exact string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ccbench.report import data
from ccbench.report.fmt import DIGITS, fmt, fmt_ci, significant


@dataclass(frozen=True)
class Metric:
    key: str  # column stem in the runs and summary tables
    header: str
    unit: str
    digits: int


METRICS = [
    Metric("throughput_sum_mbps", "sum", "Mbit/s", DIGITS["mbps"]),
    Metric("utilization_pct", "util.", "%", DIGITS["pct"]),
    Metric("jain", "Jain", "", DIGITS["jain"]),
    Metric("srtt_mean_ms", "srtt avg", "ms", DIGITS["ms"]),
    Metric("srtt_p95_ms", "srtt p95", "ms", DIGITS["ms"]),
    Metric("srtt_max_ms", "srtt max", "ms", DIGITS["ms"]),
    Metric("retransmits", "retrans.", "segs", DIGITS["count"]),
    Metric("drops_pkts", "drops", "pkts", DIGITS["count"]),
]
# Utilization is the throughput sum over a fixed rate: its delta would repeat it.
DELTA_METRICS = [m for m in METRICS if m.key != "utilization_pct"]
BY_KEY = {m.key: m for m in METRICS}


def _flow_count(df: pd.DataFrame) -> int:
    ks = [
        int(c[4:].split("_", 1)[0])
        for c in df.columns
        if c.startswith("flow") and c.endswith("_throughput_mbps_mean")
    ]
    return max(ks, default=0)


def variant_detail(v: dict[str, Any]) -> str:
    parts = [
        v.get("os", ""),
        f"{v.get('stack', '')} stack" if v.get("stack") else "",
        f"cc {v.get('cc', '')}",
        v.get("kernel", ""),
    ]
    return " · ".join(p for p in parts if p)


def results_table(
    summary: pd.DataFrame, matrix: dict[str, Any], colours: dict[str, str]
) -> dict[str, Any]:
    """Seed-style table of one scenario: rows = variants, each mean as "mean ± ci95"."""
    n_flows = _flow_count(summary)
    heads = [(f"flow {k}", "Mbit/s") for k in range(1, n_flows + 1)]
    heads += [("sum", "Mbit/s"), ("Δ sum", "%")]
    heads += [(m.header, m.unit) for m in METRICS[1:]] + [("n", "valid/runs")]
    vmeta = {v["label"]: v for v in matrix.get("variants", [])}
    rows = []
    for _, r in summary.iterrows():
        cells = [
            fmt_ci(
                r.get(f"flow{k}_throughput_mbps_mean"),
                r.get(f"flow{k}_throughput_mbps_ci95"),
                DIGITS["mbps"],
            )
            for k in range(1, n_flows + 1)
        ]
        m0 = METRICS[0]
        cells.append(fmt_ci(r[f"{m0.key}_mean"], r[f"{m0.key}_ci95"], m0.digits))
        cells.append(
            "baseline"
            if r["baseline"]
            else fmt_ci(
                r[f"{m0.key}_delta_pct"], r[f"{m0.key}_delta_ci95_pct"], DIGITS["pct"], sign=True
            )
        )
        cells += [fmt_ci(r[f"{m.key}_mean"], r[f"{m.key}_ci95"], m.digits) for m in METRICS[1:]]
        n_total = int(r["n_valid"]) + int(r["n_invalid"])
        cells.append(f"{int(r['n_valid'])}/{n_total}")
        label = str(r["variant"])
        sig_at = n_flows + 1  # the delta column
        sig = significant(r[f"{m0.key}_delta_pct"], r[f"{m0.key}_delta_ci95_pct"])
        rows.append(
            {
                "label": label,
                "baseline": bool(r["baseline"]),
                "colour": colours.get(label, "#999999"),
                "detail": variant_detail(vmeta.get(label, {})),
                "cells": [{"text": c, "sig": sig and i == sig_at} for i, c in enumerate(cells)],
            }
        )
    return {"heads": heads, "rows": rows}


def delta_table(summary: pd.DataFrame, colours: dict[str, str]) -> dict[str, Any]:
    """Per non-baseline variant: % delta of every metric vs the baseline ± 95 % CI;
    `sig` marks deltas whose CI excludes 0."""
    rows = []
    for _, r in summary[~summary["baseline"].astype(bool)].iterrows():
        cells = []
        for m in DELTA_METRICS:
            d, c = r[f"{m.key}_delta_pct"], r[f"{m.key}_delta_ci95_pct"]
            cells.append({"text": fmt_ci(d, c, DIGITS["pct"], sign=True), "sig": significant(d, c)})
        label = str(r["variant"])
        rows.append({"label": label, "colour": colours.get(label, "#999999"), "cells": cells})
    return {"heads": [(m.header, "%") for m in DELTA_METRICS], "rows": rows}


def largest_delta_sentence(summary: pd.DataFrame, baseline: str) -> str:
    """The largest |delta| vs the baseline whose 95 % CI excludes 0 -- computed, no verdict."""
    best: tuple[float, str, Metric, float, float] | None = None
    n_sig = n_all = 0
    for _, r in summary[~summary["baseline"].astype(bool)].iterrows():
        for m in DELTA_METRICS:
            d, c = r[f"{m.key}_delta_pct"], r[f"{m.key}_delta_ci95_pct"]
            if pd.notna(d):
                n_all += 1
            if significant(d, c):
                n_sig += 1
                if best is None or abs(d) > best[0]:
                    best = (abs(d), str(r["variant"]), m, float(d), float(c))
    if n_all == 0:
        return f"No delta vs the baseline {baseline} could be computed (too few valid runs)."
    if best is None:
        return (
            f"None of the {n_all} deltas vs the baseline {baseline} has a 95 % CI that excludes 0."
        )
    _, var, m, d, c = best
    return (
        f"Largest delta vs the baseline {baseline} whose 95 % CI excludes 0: {var}, {m.header} "
        f"{fmt(d, DIGITS['pct'], sign=True)} % ± {fmt(c, DIGITS['pct'])} % "
        f"({n_sig} of {n_all} deltas have a CI excluding 0)."
    )


def invalid_rows(runs: pd.DataFrame) -> list[dict[str, str]]:
    bad = runs[~runs["valid"]]
    return [
        {
            "run_id": str(r["run_id"]),
            "variant": str(r["variant"]),
            "repetition": str(r["repetition"]),
            "attempt": str(r.get("attempt", "")),
            "reasons": str(r["reasons"]) or "(no reason recorded)",
        }
        for _, r in bad.iterrows()
    ]


def per_run_table(
    runs: pd.DataFrame, flows: pd.DataFrame, colours: dict[str, str]
) -> dict[str, Any]:
    """One row per run (valid or not) of a scenario, in executed order: the numbers every
    mean above is built from, each traceable to the run's raw directory."""
    n_flows = int(runs["n_flows"].max()) if not runs.empty else 0
    heads = [("#", ""), ("run id", ""), ("variant", ""), ("rep", ""), ("valid", "")]
    heads += [(f"flow {k}", "Mbit/s") for k in range(1, n_flows + 1)]
    heads += [(m.header, m.unit) for m in METRICS] + [("delay late", "%")]
    rows = []
    for _, r in runs.sort_values("order").iterrows():
        fl = flows[flows["run_id"] == r["run_id"]].set_index("flow")["throughput_mbps"]
        cells = [
            str(r["order"]),
            str(r["run_id"]),
            str(r["variant"]),
            str(r["repetition"]),
            "yes" if r["valid"] else "NO",
        ]
        cells += [fmt(fl.get(k), DIGITS["mbps"]) for k in range(1, n_flows + 1)]
        cells += [fmt(r[m.key], m.digits) for m in METRICS]
        cells.append(fmt(r.get("delay_late_share", float("nan")) * 100, DIGITS["pct"]))
        rows.append(
            {
                "cells": cells,
                "valid": bool(r["valid"]),
                "colour": colours.get(str(r["variant"]), "#999999"),
            }
        )
    return {"heads": heads, "rows": rows}


def scenario_counts(runs: pd.DataFrame, scenario: str) -> tuple[int, int]:
    g = data.group(runs, scenario)
    return int(g["valid"].sum()), len(g)
