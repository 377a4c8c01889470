"""Pass/fail expectations (transperf style) evaluated on the tables.

`value`: the variant's mean over its valid repetitions against a number.

`than`: a comparison of two variants is a question about their difference, so it is
judged on the paired delta (metrics.delta_by_repetition: repetition i with i) and its
95 % CI, never on two means. With `tolerance_pct` t (default 0), "X >= than Y" asks
delta >= -t and "X <= than Y" asks delta <= +t:
- pass: the whole CI is on the asked side of the threshold;
- fail: the whole CI is on the other side (a resolved failure);
- not resolved: the CI straddles the threshold; the note says how many repetitions
  (at the observed spread) would resolve it.
Only a resolved failure fails a gate. No valid runs to judge is a failure.

A verdict built on valid runs that ran while the hypervisor took a large share of the
CPU (a VM's steal, runs.csv's `router_steal_pct`) says so in its note: such a run
passes the validity checks when its RTT samples stay within the bound, yet may carry
less (a quick start here, tests/captures/quickstart-tables: single-bdp's bbr runs at 10.7
and 10.8 % steal filled the 1-BDP queue to 88.7 and 88.9 %, the one at 5.4 % to 91.6 %).
The note informs; it changes no status.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import pandas as pd

from ccbench import metrics

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
PASS, FAIL, UNRESOLVED = "pass", "fail", "not resolved"
# `check` is the text for people; `metric`, `op` and `target` are the same check as data
# (the report reads those, never the text).
COLUMNS = ["expectation", "scenario", "variant", "metric", "op", "check", "measured",
           "target", "delta_pct", "delta_ci95_pct", "passed", "status", "gate",
           "note"]  # fmt: skip


def _valid_rows(runs: pd.DataFrame, scenario: str, variants: list[str]) -> pd.DataFrame:
    sel = runs[(runs["scenario"] == scenario) & runs["variant"].isin(variants)]
    return sel[sel["valid"].astype(str).str.lower() == "true"]  # CSV or parquet


def _valid(runs: pd.DataFrame, scenario: str, variant: str, metric: str) -> dict[Any, float]:
    sel = _valid_rows(runs, scenario, [variant])
    if metric not in sel:
        return {}
    vals = sel.set_index("repetition")[metric].dropna()
    return {k: float(v) for k, v in vals.items()}


# The steal at which a verdict names its runs (a busy hour on the 2-vCPU VM this was
# measured on: idle 0.3-1 %, busy 10-26 %).
STEAL_NOTE_PCT = 10.0


def steal_note(runs: pd.DataFrame, scenario: str, variants: list[str]) -> str:
    """'' or, e.g., "1 of its 6 valid runs ran at >= 10 % CPU steal (15.0 %)": the
    valid runs of `variants` in `scenario` (a `than` verdict judges two variants')."""
    if "router_steal_pct" not in runs:
        return ""  # a table from before router CPU was recorded
    sel = _valid_rows(runs, scenario, variants)
    steal = pd.to_numeric(sel["router_steal_pct"], errors="coerce").dropna()
    high = steal[steal >= STEAL_NOTE_PCT]
    if high.empty:
        return ""
    worst = ", ".join(f"{x:.1f} %" for x in sorted(high, reverse=True)[:3])
    return (
        f"{len(high)} of its {len(sel)} valid runs ran at >= {STEAL_NOTE_PCT:g} % CPU "
        f"steal ({worst}): the hypervisor took the CPU mid-run (the run table's CPU steal)"
    )


def judge_delta(delta: metrics.DeltaPct | None, op: str, tolerance_pct: float) -> tuple[str, str]:
    """(status, note) of "delta op -/+tolerance" from a delta and its CI."""
    if delta is None or math.isnan(delta.mean_pct):
        return FAIL, "no valid runs to judge"
    higher = op in (">=", ">")
    threshold = (-tolerance_pct if higher else tolerance_pct) + 0.0  # no "-0"
    h = delta.half_width_pct
    if math.isnan(h):
        return UNRESOLVED, "one repetition: no confidence interval"
    lo, hi = delta.mean_pct - h, delta.mean_pct + h
    if (lo >= threshold) if higher else (hi <= threshold):
        return PASS, ""
    if (hi < threshold) if higher else (lo > threshold):
        return FAIL, ""
    need = metrics.repetitions_to_resolve(delta.deltas_pct, abs(delta.mean_pct - threshold))
    return UNRESOLVED, (
        f"the 95 % CI [{lo:+.1f} %, {hi:+.1f} %] straddles {threshold:+g} %: "
        + (
            f"about {need} paired repetitions would resolve it"
            if need
            else "more repetitions will not resolve it at this spread"
        )  # fmt: skip
    )


def evaluate(
    summary: pd.DataFrame, expectations: list[dict[str, Any]], runs: pd.DataFrame | None = None
) -> pd.DataFrame:
    rows = []
    for i, e in enumerate(expectations):
        metric = f"{e['metric']}_mean"
        sel = summary
        if "scenario" in e:
            sel = sel[sel["scenario"] == e["scenario"]]
        if "variant" in e:
            sel = sel[sel["variant"] == e["variant"]]
        elif "than" in e:
            sel = sel[sel["variant"] != e["than"]]
        for _, r in sel.iterrows():
            measured = float(r.get(metric, math.nan))
            delta = None
            if "than" in e:
                ref = summary[(summary["scenario"] == r["scenario"])
                              & (summary["variant"] == e["than"])]  # fmt: skip
                target = float(ref[metric].iloc[0]) if len(ref) else math.nan
                tol = float(e.get("tolerance_pct", 0))
                target_text = f"{e['than']} ({_fmt(target)})" + (f" ± {tol:g} %" if tol else "")
                if runs is not None:
                    delta = metrics.delta_by_repetition(
                        _valid(runs, r["scenario"], e["than"], e["metric"]),
                        _valid(runs, r["scenario"], r["variant"], e["metric"]),
                    )
                    status, note = judge_delta(delta, e["op"], tol)
                else:  # no run table: the means only (older callers)
                    status, note = _by_means(measured, target, e["op"])
            else:
                target = float(e["value"])
                target_text = _fmt(target)
                status, note = _by_means(measured, target, e["op"])
            if runs is not None:
                judged = [r["variant"], *([e["than"]] if "than" in e else [])]
                note = "; ".join(n for n in (note, steal_note(runs, r["scenario"], judged)) if n)
            rows.append(
                {
                    "expectation": e.get("name") or f"#{i + 1}",
                    "scenario": r["scenario"],
                    "variant": r["variant"],
                    "metric": e["metric"],
                    "op": e["op"],
                    "check": f"{e['metric']} {e['op']} {target_text}",
                    "measured": measured,
                    "target": target,
                    "delta_pct": delta.mean_pct if delta else math.nan,
                    "delta_ci95_pct": delta.half_width_pct if delta else math.nan,
                    "passed": status == PASS,
                    "status": status,
                    "gate": bool(e.get("gate", False)),
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _by_means(measured: float, target: float, op: str) -> tuple[str, str]:
    if math.isnan(measured) or math.isnan(target):
        return FAIL, "no valid runs to judge"
    return (PASS if OPS[op](measured, target) else FAIL), ""


def status_of(verdicts: pd.DataFrame) -> pd.Series:
    """Each verdict's status; verdicts.csv files written before `status` existed
    have only `passed`."""
    if "status" in verdicts:
        return verdicts["status"].fillna(FAIL)
    return verdicts["passed"].astype(bool).map({True: PASS, False: FAIL})


def failed_gates(verdicts: pd.DataFrame) -> list[str]:
    """Gated expectations with a resolved failure (not resolved never fails a gate)."""
    bad = verdicts[verdicts["gate"].astype(bool) & (status_of(verdicts) == FAIL)]
    out = []
    for r in bad.itertuples():
        note = r.note if isinstance(r.note, str) and r.note else ""  # CSV: empty -> NaN
        out.append(
            f"{r.expectation}: {r.scenario}/{r.variant}: {r.check} failed "
            f"(measured {_fmt(float(r.measured))}){' - ' + note if note else ''}"
        )
    return out


def _fmt(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.3g}"
