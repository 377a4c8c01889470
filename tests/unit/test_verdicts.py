"""Expectations against a summary table (values hand-made; the evaluation is pure)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from ccbench.verdicts import evaluate, failed_gates

SUMMARY = pd.DataFrame(
    [
        {"scenario": "s", "variant": "before", "utilization_pct_mean": 80.0, "jain_mean": 0.99},
        {"scenario": "s", "variant": "after", "utilization_pct_mean": 85.0, "jain_mean": 0.90},
        {"scenario": "t", "variant": "after", "utilization_pct_mean": math.nan,
         "jain_mean": math.nan},
    ]
)  # fmt: skip


def test_value_and_than_comparisons() -> None:
    v = evaluate(
        SUMMARY,
        [
            {"name": "util", "scenario": "s", "metric": "utilization_pct", "op": ">=",
             "value": 82},
            {"name": "after>=before", "scenario": "s", "metric": "utilization_pct",
             "op": ">=", "than": "before", "gate": True},
        ],
    )  # fmt: skip
    by = {(r.expectation, r.variant): r for r in v.itertuples()}
    assert not by[("util", "before")].passed and by[("util", "after")].passed
    assert by[("after>=before", "after")].passed
    assert by[("after>=before", "after")].target == 80.0
    assert failed_gates(v) == []


def test_no_valid_runs_fails_and_gate_message_survives_csv(tmp_path: Path) -> None:
    v = evaluate(SUMMARY, [{"name": "fair", "metric": "jain", "op": ">=", "value": 0.95,
                            "gate": True}])  # fmt: skip
    v.to_csv(tmp_path / "v.csv", index=False)
    msgs = failed_gates(pd.read_csv(tmp_path / "v.csv"))
    assert msgs == [
        "fair: s/after: jain >= 0.95 failed (measured 0.9)",
        "fair: t/after: jain >= 0.95 failed (measured n/a) - no valid runs to judge",
    ]
