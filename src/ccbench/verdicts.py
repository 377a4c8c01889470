"""Pass/fail expectations (transperf style) evaluated on the summary table.

Each expectation compares a variant's mean of a metric, over its valid repetitions,
with a number (`value`) or with another variant's mean in the same scenario (`than`).
A metric with no valid runs fails: an expectation never passes by default.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import pandas as pd

OPS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}


def evaluate(summary: pd.DataFrame, expectations: list[dict[str, Any]]) -> pd.DataFrame:
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
            if "than" in e:
                ref = summary[(summary["scenario"] == r["scenario"])
                              & (summary["variant"] == e["than"])]  # fmt: skip
                target = float(ref[metric].iloc[0]) if len(ref) else math.nan
                target_text = f"{e['than']} ({_fmt(target)})"
            else:
                target = float(e["value"])
                target_text = _fmt(target)
            ok: bool | None
            if math.isnan(measured) or math.isnan(target):
                ok, note = False, "no valid runs to judge"
            else:
                ok, note = bool(OPS[e["op"]](measured, target)), ""
            rows.append(
                {
                    "expectation": e.get("name") or f"#{i + 1}",
                    "scenario": r["scenario"],
                    "variant": r["variant"],
                    "metric": e["metric"],
                    "check": f"{e['metric']} {e['op']} {target_text}",
                    "measured": measured,
                    "target": target,
                    "passed": ok,
                    "gate": bool(e.get("gate", False)),
                    "note": note,
                }
            )
    cols = ["expectation", "scenario", "variant", "metric", "check", "measured", "target",
            "passed", "gate", "note"]  # fmt: skip
    return pd.DataFrame(rows, columns=cols)


def failed_gates(verdicts: pd.DataFrame) -> list[str]:
    bad = verdicts[verdicts["gate"] & ~verdicts["passed"].astype(bool)]
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
