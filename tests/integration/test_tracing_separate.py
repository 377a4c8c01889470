"""`tracing: separate` through the real workflow (the .test config's baseline variant,
2 repetitions of 2 s: the subject is which run records what and which numbers the
report takes, not a steady-state number): twice the runs, the per-packet trace only in
the traced twins, the reported numbers only the untraced runs', and the observer table's numbers
recomputed from the runs table and found in the report. One variant: the twins and the
observer table are made per variant alike (test_pipeline runs both of .test's).

Beside the other shares_cpu tests (./test.sh's first part): every run is judged (valid,
or invalid only because the host stalled it: conftest.assert_judged), and the numbers
are checked against whichever runs are valid, as the report takes them; a side the host
left without a valid run is checked to be reported empty, not averaged."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ccbench import metrics
from ccbench.report.fmt import fmt
from tests.conftest import REPO
from tests.integration.conftest import assert_judged, namespaces, run_snakemake
from tests.raw_meta import read_meta

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]


def test_separate_tracing_doubles_the_runs_and_reports_the_observer_effect(
    tmp_path: Path,
) -> None:
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    cfg = yaml.safe_load((REPO / ".test" / "config" / "config.yaml").read_text())
    cfg.update(tracing="separate", report_name="traced-test", results_dir="results-traced",
               variants=[v for v in cfg["variants"] if v.get("baseline")],
               duration_s=2)  # fmt: skip
    (tmp_path / "traced.yaml").write_text(yaml.safe_dump(cfg))
    cp = run_snakemake(tmp_path, tmp_path / "traced.yaml")
    assert cp.returncode == 0, cp.stderr[-3000:]
    res = tmp_path / "results-traced"
    m = json.loads((res / "matrix.json").read_text())
    assert all(namespaces(f"ccb-{tb}-") == [] for tb in m["testbeds"])
    tracing = {rid: r["spec"]["run"]["tracing"] for rid, r in m["runs"].items()}
    assert len(tracing) == 4 and sorted(set(tracing.values())) == ["traced", "untraced"]
    for rid, how in tracing.items():
        assert_judged(json.loads((res / "runs" / rid / "summary.json").read_text()))
        raw = res / "runs" / rid / "raw"
        assert ("tcp_probe" in read_meta(raw).instruments) == (how == "traced"), rid
        assert (raw / "tcp-probe-host.txt").exists() == (how == "traced"), rid

    runs = pd.read_csv(res / "tables" / "runs.csv")
    summary = pd.read_csv(res / "tables" / "summary.csv")
    obs_csv = res / "tables" / "observer.csv"  # (not written when no run is valid)
    observer = pd.read_csv(obs_csv) if obs_csv.exists() else pd.DataFrame()
    html = (tmp_path / "reports" / "traced-test.html").read_text()
    assert ("Observer effect: traced − untraced" in html) == (not observer.empty)
    for v in ("cubic",):
        mine = runs[(runs["variant"] == v) & runs["valid"]]
        untraced, traced = mine[mine["tracing"] == "untraced"], mine[mine["tracing"] == "traced"]
        # the reported means are the untraced runs' only
        row = summary[summary["variant"] == v].iloc[0]
        assert row["n_valid"] == len(untraced)
        want = metrics.mean_ci(untraced["throughput_sum_mbps"].tolist()).mean
        assert row["throughput_sum_mbps_mean"] == pytest.approx(want, nan_ok=True)
        # the observer table: traced against untraced, paired by repetition
        if traced.empty and untraced.empty:  # the host stalled all four: no row
            assert observer.empty or (observer["variant"] != v).all(), observer
            continue
        o = observer[observer["variant"] == v].iloc[0]
        assert (o["n_traced"], o["n_untraced"]) == (len(traced), len(untraced))
        d = metrics.delta_by_repetition(
            untraced.set_index("repetition")["throughput_sum_mbps"].to_dict(),
            traced.set_index("repetition")["throughput_sum_mbps"].to_dict(),
        )
        if d is None:  # a side without a valid run: no delta, none reported
            assert pd.isna(o["throughput_sum_mbps_delta_pct"]), o
            continue
        assert o["throughput_sum_mbps_delta_pct"] == pytest.approx(d.mean_pct)
        assert f"{fmt(d.mean_pct, 2)} ± {fmt(d.half_width_pct, 2)}" in html
