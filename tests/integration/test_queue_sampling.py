"""Integration: the bottleneck queue sampled during a real run (issue 13).

CUBIC and BBR through the seeds' 48-packet pfifo at 100 Mbit x 40 ms fill the queue and
drop (the shared traced run, shared_runs.TRACED_Q48, sampled at the default 0.05 s):
the series must cover the traffic at that interval, its drops must equal the
before/after counters (or the summary says why not), `ccbench parse` must rebuild the
same series from raw/, and a run with qdisc_interval_s 0 must sample nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.conftest import ccbench
from tests.integration.shared_runs import TRACED_Q48, SharedRun

pytestmark = pytest.mark.netns


def test_queue_series_and_summary(
    traced_q48_run: SharedRun, q48_testbed: tuple[str, Path], tmp_path: Path
) -> None:
    s = traced_q48_run.summary
    duration_s = TRACED_Q48["duration_s"]
    q = s["queue"]
    assert q["sampled"] and q["samples_in_traffic"] >= 0.8 * duration_s / 0.05, q
    assert q["interval_achieved_s"] == pytest.approx(0.05, rel=0.3), q
    assert q["limit_pkts"] == 48 and 0 <= q["backlog_mean_pkts"] <= 48
    chk = q["drops_check"]
    assert chk["consistent"], chk
    assert chk["counters"] == s["bottleneck"]["drops"]
    assert chk["equal"] or chk["note"], chk  # equal, or the run says why not
    out = tmp_path / "run"  # a copy: parsed again below, the shared run's files as they were
    shutil.copytree(traced_q48_run.out, out)
    ts = pd.read_parquet(out / "timeseries.parquet")
    qrows = ts[ts["source"] == "qdisc"]
    assert len(qrows) == q["samples"] and (qrows["flow"] == 0).all()
    # The statistics cover the samples taken while the flows ran (0 .. 10 s); the
    # series also keeps the drain after them.
    inw = qrows[(qrows["t_s"] >= 0) & (qrows["t_s"] <= duration_s)]
    assert len(inw) == q["samples_in_traffic"]
    assert inw["backlog_pkts"].max() == q["backlog_max_pkts"]
    assert set(ts["source"]) >= {"iperf3", "ss", "qdisc"}
    # ccbench parse rebuilds the same series and statistics from raw/ every time.
    before = ts.copy()
    ccbench("parse", str(out))
    again = json.loads((out / "summary.json").read_text())
    assert again["queue"] == q
    pd.testing.assert_frame_equal(pd.read_parquet(out / "timeseries.parquet"), before)

    # not sampled at all: a second of traffic shows it
    doc = yaml.safe_load(q48_testbed[1].read_text())
    doc["run"].update(qdisc_interval_s=0, duration_s=1)
    cfg = tmp_path / "off.yaml"
    cfg.write_text(yaml.safe_dump(doc))
    off = tmp_path / "off"
    ccbench("run", "--config", str(cfg), "--out", str(off))
    assert not list((off / "raw").glob("qdisc-rt1*"))
    assert json.loads((off / "summary.json").read_text())["queue"] is None
