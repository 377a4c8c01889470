"""The longer test target: every local miniature in config/examples/ through the real
Snakemake DAG (minutes each). Not in the default run; `sudo ./test.sh -m slow`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.netns, pytest.mark.slow]

MINIATURES = sorted(p.name for p in (REPO / "config" / "examples").glob("local-*.yaml"))


@pytest.mark.parametrize("name", MINIATURES)
def test_miniature_runs_and_reports(tmp_path: Path, name: str) -> None:
    shutil.copytree(REPO / "profiles", tmp_path / "profiles")
    cp = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(tmp_path), "--cores", "4", "--configfile",
         str(REPO / "config" / "examples" / name)],
        capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr[-3000:]
    pdfs = list((tmp_path / "reports").glob("*.pdf"))
    assert len(pdfs) == 1 and pdfs[0].stat().st_size > 10_000
    runs = pd.read_csv(next(tmp_path.glob("results-*/tables/runs.csv")))
    if name == "local-aqm.yaml":
        # This kernel has no AQM: those scenarios are skipped with the reason.
        skipped = runs[runs["scenario"].isin(["fq_codel", "codel", "pie", "red"])]
        assert (skipped["status"] == "not run").all()
    if name == "local-loss.yaml":
        # Mathis models loss-based AIMD: reno, not bbr (which ignores random loss).
        rnd = runs[(runs["scenario"] == "random-1") & (runs["variant"] == "reno") & runs["valid"]]
        assert len(rnd) and ((rnd["mathis_ratio"] > 0.5) & (rnd["mathis_ratio"] < 2.0)).all()
    if name == "local-latency.yaml":
        # every probe tool measured its scenario, and the queue's delay on top of 40 ms
        ok = runs[runs["valid"]]
        assert set(ok["scenario"]) == {"ping", "fping", "irtt", "flent"}
        assert ((ok["probe_rtt_p50_ms"] >= 39.5) & (ok["probe_rtt_p95_ms"] <= 60)).all()
