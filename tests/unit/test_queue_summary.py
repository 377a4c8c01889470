"""summary.json's `queue` and timeseries.parquet's "qdisc" rows from raw files: a
fixture run's raw/ with the real sampler capture (tests/captures/qdisc/) put in, as a
run with queue sampling writes it; and the run ids of configs that leave
qdisc_interval_s at its default."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccbench import timeseries
from ccbench.spec import QDISC_INTERVAL_DEFAULT_S, RunSpec
from ccbench.summarize import summarize
from ccbench.summarize.judge import parse_run_dir
from tests.conftest import damaged_files
from tests.raw_meta import edit_meta

TESTS = Path(__file__).resolve().parents[1]
FIX_RUN = TESTS / "fixtures" / "results-small" / "runs" / "two-flows-cubic-r1-71654894"
CAP = TESTS / "captures" / "qdisc"
T0 = 1795445065.5215516  # the capture's run: meta.json's started_unix


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(FIX_RUN / "raw", d / "raw")
    raw = d / "raw"
    shutil.copy(CAP / "qdisc-rt1-2cubic-100m.txt", raw / "qdisc-rt1.txt")
    shutil.copy(CAP / "tc-before-2cubic-100m.json", raw / "tc-before.json")
    shutil.copy(CAP / "tc-after-2cubic-100m.json", raw / "tc-after.json")
    edit_meta(raw, {"qdisc": {"node": "rt1", "dev": "to-dl", "interval_s": 0.05,
                              "argv": ["ccbench-qdisc", "50000", "to-dl"]}},
              started_unix=T0)  # fmt: skip
    return d


def test_summary_queue_from_the_capture(run_dir: Path) -> None:
    s = summarize(run_dir / "raw")
    q = s["queue"]
    assert q["sampled"] and q["samples"] == 250 and q["file"] == "qdisc-rt1.txt"
    assert q["drops_check"]["equal"] and q["drops_check"]["counters"] == 318
    assert s["bottleneck"]["drops"] == 318
    assert not [f for f in damaged_files(s["reasons"]) if f.startswith("qdisc-")]


def test_parse_rebuilds_the_qdisc_rows(run_dir: Path) -> None:
    parse_run_dir(run_dir)
    import pandas as pd

    ts = pd.read_parquet(run_dir / "timeseries.parquet")
    q = ts[ts["source"] == "qdisc"]
    assert len(q) == 250 and (q["flow"] == 0).all()
    assert q["drops"].iloc[0] == 0 and q["drops"].iloc[-1] == 318
    assert q["backlog_pkts"].max() == 48
    assert list(ts.columns) == timeseries.COLUMNS
    # other sources keep their columns; the queue columns are empty there
    assert ts.loc[ts["source"] != "qdisc", "backlog_pkts"].isna().all()
    assert set(ts["source"]) >= {"iperf3", "qdisc"}


def test_damaged_sampler_file_is_a_reason(run_dir: Path) -> None:
    (run_dir / "raw" / "qdisc-rt1.txt").write_text("garbage\n[]\n")
    s = summarize(run_dir / "raw")
    assert not s["valid"]
    assert "qdisc-rt1.txt" in damaged_files(s["reasons"])


def test_missing_sampler_file_is_a_reason(run_dir: Path) -> None:
    (run_dir / "raw" / "qdisc-rt1.txt").unlink()
    s = summarize(run_dir / "raw")
    assert "qdisc-rt1.txt" in damaged_files(s["reasons"])


def test_run_before_queue_sampling_says_so() -> None:
    s = summarize(FIX_RUN / "raw")
    assert s["queue"]["sampled"] is False
    assert "before ccbench sampled" in s["queue"]["notes"][0]


def test_default_interval_keeps_run_ids() -> None:
    spec = RunSpec.from_dict(json.loads((FIX_RUN / "raw" / "spec.json").read_text()))
    assert spec.qdisc_interval_s == QDISC_INTERVAL_DEFAULT_S
    assert spec.run_id == "two-flows-cubic-r1-71654894"
    off = RunSpec.from_dict({**spec.to_dict(), "qdisc_interval_s": 0.0})
    faster = RunSpec.from_dict({**spec.to_dict(), "qdisc_interval_s": 0.01})
    assert len({spec.run_id, off.run_id, faster.run_id}) == 3
