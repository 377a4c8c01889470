"""Expectations against a summary table (values hand-made; the evaluation is pure), and
against a real quick start's tables (tests/captures/quickstart-tables)."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import yaml

from ccbench.verdicts import evaluate, failed_gates
from tests.conftest import REPO

QUICKSTART = REPO / "tests" / "captures" / "quickstart-tables"

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


def _runs(
    before: list[float], after: list[float], metric: str = "throughput_sum_mbps"
) -> pd.DataFrame:
    rows = [{"scenario": "s", "variant": var, "repetition": i, "valid": True, metric: x}
            for var, xs in (("before", before), ("after", after))
            for i, x in enumerate(xs, 1)]  # fmt: skip
    return pd.DataFrame(rows)


def _summary(runs: pd.DataFrame, metric: str = "throughput_sum_mbps") -> pd.DataFrame:
    return (
        runs.groupby(["scenario", "variant"], as_index=False)[metric]
        .mean()
        .rename(columns={metric: f"{metric}_mean"})
    )


NO_WORSE = {"name": "no worse", "scenario": "s", "metric": "throughput_sum_mbps", "op": ">=",
            "than": "before", "gate": True}  # fmt: skip


def test_than_is_judged_on_the_paired_delta_and_noise_is_not_resolved() -> None:
    """Issue 14: the default comparison showed FAIL for 'reno no worse than cubic' at
    -0.3 % +- 6.5 % (93.6 vs 93.9 Mbit/s): noise, so not resolved, never a gate failure."""
    runs = _runs([100.0, 100.0, 100.0], [97.0, 102.0, 96.5])  # -1.5 % +- 7.6 %
    v = evaluate(_summary(runs), [NO_WORSE], runs)
    r = v.iloc[0]
    assert r["status"] == "not resolved" and not r["passed"]
    assert r["delta_pct"] < 0 and r["delta_ci95_pct"] > abs(r["delta_pct"])
    assert "straddles +0 %" in r["note"] and "paired repetitions would resolve it" in r["note"]
    assert failed_gates(v) == []


def test_than_passes_fails_with_tolerance() -> None:
    runs = _runs([100.0, 101.0, 99.0], [98.0, 99.5, 97.0])  # about -2 %, tight
    tol = {**NO_WORSE, "tolerance_pct": 5}
    assert evaluate(_summary(runs), [tol], runs).iloc[0]["status"] == "pass"
    worse = _runs([100.0, 101.0, 99.0], [80.0, 81.0, 79.5])  # about -20 %, tight
    v = evaluate(_summary(worse), [tol], worse)
    assert v.iloc[0]["status"] == "fail"
    assert failed_gates(v) and "no worse" in failed_gates(v)[0]


def test_repetitions_to_resolve_shrink_with_distance() -> None:
    from ccbench import metrics

    deltas = [-3.0, 1.0, -1.5]
    far, near = (metrics.repetitions_to_resolve(deltas, d) for d in (5.0, 1.0))
    assert far is not None and near is not None and far < near
    assert metrics.repetitions_to_resolve([1.0], 1.0) is None  # no spread known


def test_a_verdict_carries_its_check_as_data() -> None:
    """metric, op and target are columns; `check` is only the text for people (the report
    reads the columns, never parses the text)."""
    v = evaluate(SUMMARY, [{"name": "j", "scenario": "s", "metric": "jain", "op": "<",
                            "value": 0.95}])  # fmt: skip
    r = v.iloc[0]
    assert (r["metric"], r["op"], r["target"]) == ("jain", "<", 0.95)
    assert r["check"] == "jain < 0.95"


def test_a_verdict_names_its_valid_runs_at_high_steal() -> None:
    """The default config's expectations on a real quick start's tables: the statuses
    and means are the ones that quick start wrote; a verdict whose valid runs ran at
    >= 10 % steal says which (a `than` verdict: both variants' runs; an invalid run at
    16.4 % is not counted, it is in no mean)."""
    runs = pd.read_csv(QUICKSTART / "runs.csv")
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    v = evaluate(pd.read_csv(QUICKSTART / "summary.csv"), cfg["expectations"], runs)
    written = pd.read_csv(QUICKSTART / "verdicts.csv")
    assert v["status"].tolist() == written["status"].tolist()
    assert v["measured"].tolist() == written["measured"].tolist()
    note = {(r.expectation, r.variant): r.note for r in v.itertuples()}
    assert note[("fills a 1-BDP queue", "bbr")] == (
        "2 of its 3 valid runs ran at >= 10 % CPU steal (10.8 %, 10.7 %): the hypervisor "
        "took the CPU mid-run (the run table's CPU steal)"
    )
    assert note[("fills a 1-BDP queue", "cubic")] == ""  # 2.0-6.4 %
    assert note[("two flows share fairly", "reno")].startswith("1 of its 3 valid runs")
    straddles, steal = note[("no worse than cubic (within 2 %)", "reno")].split("; ")
    assert straddles == written["note"].iloc[6]  # the CI's note first, as it was
    assert steal.startswith("1 of its 5 valid runs ran at >= 10 % CPU steal (10.9 %)")
