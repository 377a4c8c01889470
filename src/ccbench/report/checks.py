"""Formatted rows of the report's checks: the expectations' verdicts (ccbench.verdicts)
and the published references shown beside the measured means."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ccbench.metric_catalog import BY_KEY, digits
from ccbench.model import Matrix
from ccbench.report.fmt import DIGITS, fmt, fmt_ci


def _expectation(matrix: Matrix, name: str) -> dict[str, Any]:
    for i, e in enumerate(matrix.expectations):
        if (e.get("name") or f"#{i + 1}") == name:
            return dict(e)
    return {}


def verdict_rows(verdicts: pd.DataFrame, matrix: Matrix) -> list[dict[str, Any]]:
    """One row per verdict: the check rebuilt from the config's expectation (so every
    number goes through fmt), the measured mean, PASS/FAIL and whether it gates."""
    rows = []
    for _, v in verdicts.iterrows():
        e = _expectation(matrix, v["expectation"])
        metric = str(v["metric"])
        # verdicts.csv has `op` since 2026-11-23; before, the config's expectation has it
        op = str(v["op"]) if isinstance(v.get("op"), str) else str(e.get("op", "?"))
        d = digits(metric)
        if e.get("than") is not None:
            target = f"{e['than']} ({fmt(v['target'], d)})"
            tol = float(e.get("tolerance_pct") or 0)
            if tol:  # the threshold the paired delta is judged against
                target += f" {'−' if op in ('>=', '>') else '+'} {fmt(tol, None)} %"
        elif e.get("value") is not None:
            target = fmt(e["value"], None)
        else:
            target = fmt(v["target"], d)
        rows.append(
            {
                "expectation": v["expectation"],
                "scenario": v["scenario"],
                "variant": v["variant"],
                "metric": metric,
                "metric_label": BY_KEY[metric].label if metric in BY_KEY else "",
                "op": op,
                "target": target,
                "measured": fmt(v["measured"], d),
                "delta": _verdict_delta(v),
                "passed": bool(v["passed"]),
                "status": str(v.get("status") or ("pass" if v["passed"] else "fail")),
                "gate": bool(v["gate"]),
                "note": v["note"],
            }
        )
    return rows


def _verdict_delta(v: pd.Series) -> str:
    """The paired delta a `than` verdict was judged on, with its CI ('' for `value`)."""
    d, h = v.get("delta_pct"), v.get("delta_ci95_pct")
    if d is None or pd.isna(d):
        return ""
    return f"{d:+.1f} %" + ("" if h is None or pd.isna(h) else f" ± {h:.1f}")


def verdict_summary(verdicts: pd.DataFrame) -> str:
    """One line for the title page, e.g. "3 expectations: 1 passed, 1 failed, 1 not
    resolved (1 gated failure)"."""
    from ccbench.verdicts import FAIL, PASS, UNRESOLVED, status_of

    if verdicts.empty:
        return "No expectations configured."
    n = len(verdicts)
    n_exp = verdicts["expectation"].nunique()
    st = status_of(verdicts)
    passed, failed, open_ = (int((st == k).sum()) for k in (PASS, FAIL, UNRESOLVED))
    gated = int((verdicts["gate"].astype(bool) & (st == FAIL)).sum())
    exps = f"{n_exp} expectation{'s' if n_exp != 1 else ''}"
    what = exps if n == n_exp else f"{n} checks of {exps}"
    s = f"{what}: {passed} passed, {failed} failed" + (f", {open_} not resolved" if open_ else "")
    return s + (f" ({gated} gated failure{'s' if gated != 1 else ''})." if gated else ".")


def _metric_words(metric: str) -> tuple[str, str]:
    """(label, unit) of a reference's metric ("flow2_throughput_mbps": flow 2)."""
    if metric.startswith("flow") and metric.endswith("_throughput_mbps"):
        return f"flow {metric[4:].split('_', 1)[0]} throughput", "Mbit/s"
    m = BY_KEY.get(metric)
    return (m.label, m.unit) if m else (metric, "")


def reference_rows(summary: pd.DataFrame, matrix: Matrix) -> list[dict[str, Any]]:
    """One row per `references` entry of the config: the published value, the measured
    mean ± 95 % CI over valid runs (summary table) and measured / reference (± CI / ref).
    A scenario/variant without valid runs reads n/a."""
    rows = []
    for r in matrix.references:
        metric, ref = r.metric, float(r.value)
        d = digits(metric)
        g = summary[(summary["scenario"] == r.scenario) & (summary["variant"] == r.variant)]
        mean = ci = float("nan")
        if len(g) and f"{metric}_mean" in g.columns:
            mean = float(g.iloc[0][f"{metric}_mean"])
            ci = float(g.iloc[0].get(f"{metric}_ci95", float("nan")))
        ratio = mean / ref if ref else float("nan")
        ratio_ci = ci / abs(ref) if ref else float("nan")
        label, unit = _metric_words(metric)
        rows.append(
            {
                "scenario": r.scenario,
                "variant": r.variant,
                "metric": metric,
                "metric_label": label,
                "unit": unit,
                "source": r.source,
                "note": r.note or "",
                "reference": fmt(ref, d),
                "measured": fmt_ci(mean, ci, d),
                "ratio": fmt_ci(ratio, ratio_ci, DIGITS["ratio"]),
            }
        )
    return rows
