"""srtt, convergence_s and the Mathis prediction are computed once, by `ccbench parse`
(summary.run_metrics), stored in summary.json, and only read by aggregate; a summary.json
from before they were stored aggregates through the same function."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from ccbench import aggregate, metrics, timeseries
from ccbench.spec import TCP_IP_HEADER_BYTES, RunSpec
from ccbench.summarize.judge import judge, parse_run_dir
from ccbench.summarize.run_metrics import run_metrics
from tests.conftest import damaged_files

TESTS = Path(__file__).resolve().parents[1]
RAW = TESTS / "captures" / "run-local-2cubic"
SMALL = TESTS / "fixtures" / "results-small"
LOSS = TESTS / "fixtures" / "results-loss"
KEYS = ("srtt", "convergence_s", "mathis")


def _old_aggregate(s: dict[str, Any], ts: pd.DataFrame) -> dict[str, float]:
    """What aggregate.run_rows computed itself before these were stored (as it was)."""
    src = timeseries.finest_source(ts)
    rtts = ts.loc[(ts["source"] == src) & ts["rtt_us"].notna(), "rtt_us"].tolist()
    srtt = metrics.srtt_stats(rtts)
    spec = RunSpec.from_dict(s["spec"])
    times, jains = timeseries.jain_series(ts, spec.flows, spec.interval_s)
    conv = metrics.convergence_time_s(times, jains, 0.95, 2.0) if times else None
    return {"srtt_mean_ms": srtt.mean_us / 1e3, "srtt_p95_ms": srtt.p95_us / 1e3,
            "srtt_max_ms": srtt.max_us / 1e3,
            "convergence_s": math.nan if conv is None else conv}  # fmt: skip


def _copy_run(src: Path, dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("summary.json", "timeseries.parquet"):
        shutil.copy(src / name, dst / name)
    return dst


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_parse_stores_what_aggregate_computed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(RAW, run / "raw")
    parse_run_dir(run)
    text = (run / "summary.json").read_text()
    s = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in summary.json"))
    assert s["srtt"]["source"] == "ss" and s["srtt"]["samples"] > 50
    assert s["convergence_s"] == 0.5  # two cubic flows, Jain >= 0.95 for 2 s from 0.5 s
    assert s["mathis"] is None  # no configured loss
    old = _old_aggregate(s, pd.read_parquet(run / "timeseries.parquet"))
    assert s["srtt"]["mean_us"] / 1e3 == old["srtt_mean_ms"]
    assert s["srtt"]["p95_us"] / 1e3 == old["srtt_p95_ms"]
    assert s["srtt"]["max_us"] / 1e3 == old["srtt_max_ms"]
    assert s["convergence_s"] == old["convergence_s"]
    row, _ = aggregate.run_rows(run)
    for col, want in old.items():
        assert row[col] == want, col


def test_mathis_from_the_configured_path() -> None:
    run = LOSS / "runs" / "random-1-cubic-r1-3fdc04b2"
    s = json.loads((run / "summary.json").read_text())
    tb = s["spec"]["topology"]
    per_flow = metrics.mathis_bps(tb["mtu"] - TCP_IP_HEADER_BYTES, tb["rtt_ms"] / 1e3,
                                  tb["loss_rate"]) / 1e6  # fmt: skip
    got = run_metrics(RunSpec.from_dict(s["spec"]), s["throughput_sum_bps"], None)["mathis"]
    assert got == {"mbps_per_flow": per_flow,
                   "ratio": s["throughput_sum_bps"] / 1e6 / per_flow}  # fmt: skip
    assert s["mathis"] == got  # the fixture's stored record (scripts/rederive_fixture.py)


@pytest.mark.parametrize("fixture", [SMALL, LOSS], ids=["small", "loss"])
def test_stored_and_recomputed_rows_are_the_same(fixture: Path, tmp_path: Path) -> None:
    """A summary.json without the keys (made before them) aggregates through the same
    function: every run's row equals the one read from the stored keys, and the
    fixture's runs table."""
    table = pd.read_csv(fixture / "tables" / "runs.csv").set_index("run_id")
    for run in sorted((fixture / "runs").iterdir()):
        stored, _ = aggregate.run_rows(run)
        old = _copy_run(run, tmp_path / run.name)
        s = json.loads((old / "summary.json").read_text())
        assert all(k in s for k in KEYS)
        for k in KEYS:
            del s[k]
        (old / "summary.json").write_text(json.dumps(s))
        recomputed, _ = aggregate.run_rows(old)
        cols = ("srtt_mean_ms", "srtt_p95_ms", "srtt_max_ms", "convergence_s",
                "mathis_mbps_per_flow", "mathis_ratio")  # fmt: skip
        for col in cols:
            assert _same(stored[col], recomputed[col]), (run.name, col)
            assert _same(stored[col], float(table.loc[stored["run_id"], col])), (run.name, col)


def test_aggregate_reads_the_summary(tmp_path: Path) -> None:
    """The table shows what summary.json says, not a recomputation from the parquet."""
    run = _copy_run(SMALL / "runs" / "two-flows-bbr-r2-2154e325", tmp_path / "run")
    s = json.loads((run / "summary.json").read_text())
    s["srtt"] = {**s["srtt"], "mean_us": 12345.0, "p95_us": 23456.0, "max_us": 34567.0}
    s["convergence_s"] = 1.5
    s["mathis"] = {"mbps_per_flow": 7.0, "ratio": 0.25}
    (run / "summary.json").write_text(json.dumps(s))
    row, _ = aggregate.run_rows(run)
    assert (row["srtt_mean_ms"], row["srtt_p95_ms"], row["srtt_max_ms"]) == (12.345, 23.456,
                                                                             34.567)  # fmt: skip
    assert row["convergence_s"] == 1.5
    assert (row["mathis_mbps_per_flow"], row["mathis_ratio"]) == (7.0, 0.25)
    s["srtt"] = s["convergence_s"] = s["mathis"] = None  # null: no samples, never, no loss
    (run / "summary.json").write_text(json.dumps(s))
    row, _ = aggregate.run_rows(run)
    cols = ("srtt_mean_ms", "convergence_s", "mathis_mbps_per_flow", "mathis_ratio")
    assert all(math.isnan(row[c]) for c in cols)


def test_a_skipped_run_has_the_configured_mathis_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "raw").mkdir(parents=True)
    spec = json.loads((LOSS / "runs" / "random-1-cubic-r1-3fdc04b2" / "raw" / "spec.json")
                      .read_text())  # fmt: skip
    (run / "raw" / "spec.json").write_text(json.dumps(spec))
    (run / "raw" / "skipped.json").write_text(json.dumps({"reason": "no netem here"}))
    s = parse_run_dir(run).to_dict()
    assert s["skipped"] and s["srtt"] is None and s["convergence_s"] is None
    assert s["mathis"]["mbps_per_flow"] > 0 and s["mathis"]["ratio"] is None
    row, _ = aggregate.run_rows(run)
    assert row["mathis_mbps_per_flow"] == s["mathis"]["mbps_per_flow"]
    assert math.isnan(row["mathis_ratio"])


def test_the_run_and_parse_reach_one_verdict(tmp_path: Path) -> None:
    """`ccbench run` decides whether to retry on summarize.judge.judge, the function `parse`
    writes: the same summary (rtt_excess and the time series' problems included), so
    attempts.json's valid flag and summary.json's cannot disagree."""
    run = tmp_path / "run"
    shutil.copytree(RAW, run / "raw")
    written = parse_run_dir(run)
    judged, df = judge(run / "raw")
    assert judged == written and len(df) > 0
    assert judged.rtt_excess is not None
    # cut an ss capture short: a problem only the time series sees, and judge sees it
    ss = sorted((run / "raw").glob("ss-s*.txt"))[0]
    ss.write_text(ss.read_text()[: len(ss.read_text()) // 4])
    cut, _ = judge(run / "raw")
    assert not cut.valid and ss.name in damaged_files(cut.reasons), cut.reasons
