"""Integration: the real Snakemake DAG on the tiny .test config (2 variants x 2
repetitions x 3 s on a real local dumbbell), then the PDF's numbers are recomputed
from the raw iperf3 JSON of every run and found in the PDF's text and in the HTML.

The comparison is run here, unless test_crash_resume already ran it to its end in this
session (killed, resumed, finished: conftest.offer_test_comparison); its work directory
is then the one asserted on, and nothing is measured twice."""

from __future__ import annotations

import json
import math
import shutil
import statistics
import subprocess
from pathlib import Path

import pytest
import yaml

from ccbench import metrics
from ccbench.report.fmt import fmt, fmt_ci
from tests.conftest import REPO
from tests.integration.conftest import (
    TEST_CONFIG,
    finished_test_comparison,
    measure_fidelity,
    namespaces,
    run_snakemake,
)

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = finished_test_comparison() or tmp_path_factory.mktemp("pipeline")
    # The workflow profile lives beside the Snakefile's working directory.
    shutil.copytree(REPO / "profiles", work / "profiles", dirs_exist_ok=True)
    cfg = work / "test.yaml"
    shutil.copy(TEST_CONFIG, cfg)
    res = work / "results-test"

    def any_valid() -> bool:
        return any(json.loads(p.read_text())["valid"] for p in res.glob("runs/*/summary.json"))

    def comparison() -> None:
        # A try whose every run the VM stalled (each in both attempts) has nothing to
        # check against the PDF: it is measured again. An offered comparison has nothing
        # left to do.
        if res.exists() and not any_valid():
            shutil.rmtree(res)
            shutil.rmtree(work / "reports", ignore_errors=True)
        cp = run_snakemake(work, cfg)
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert any_valid(), "no run of the comparison is valid"

    measure_fidelity(comparison)
    m = json.loads((work / "results-test" / "matrix.json").read_text())
    for tb in m["testbeds"]:  # taken down at the end
        assert namespaces(f"ccb-{tb}-") == []
    return work


def test_pdf_numbers_are_the_raw_iperf3_numbers(pipeline: Path) -> None:
    pdf = pipeline / "reports" / "pipeline-test.pdf"
    html = (pipeline / "reports" / "pipeline-test.html").read_text()
    assert pdf.stat().st_size > 10_000
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    m = json.loads((pipeline / "results-test" / "matrix.json").read_text())
    runs_dir = pipeline / "results-test" / "runs"
    by_variant: dict[str, dict[str, list[float]]] = {}
    for rid, r in m["runs"].items():
        s = json.loads((runs_dir / rid / "summary.json").read_text())
        if not s["valid"]:
            continue
        per_flow, total_bytes = [], 0
        for k in (1, 2):
            doc = json.loads((runs_dir / rid / "raw" / f"iperf3-{k}.json").read_text())
            per_flow.append(doc["end"]["sum_received"]["bits_per_second"] / 1e6)
            total_bytes += doc["end"]["sum_received"]["bytes"]
        v = by_variant.setdefault(r["variant"], {"f1": [], "f2": [], "sum": []})
        v["f1"].append(per_flow[0])
        v["f2"].append(per_flow[1])
        v["sum"].append(total_bytes * 8 / 3.0 / 1e6)
    assert by_variant, "no valid run at all"
    for variant, vals in by_variant.items():
        assert variant in text
        for key in ("f1", "f2", "sum"):
            ci = metrics.mean_ci(vals[key])
            cell = fmt_ci(ci.mean, ci.half_width, 1)
            assert cell in text, f"{variant} {key}: {cell} not in the PDF"
            assert cell in html, f"{variant} {key}: {cell} not in the HTML"
        # utilization of the 50 Mbit/s bottleneck, same recomputation
        util = [x / 50 * 100 for x in vals["sum"]]
        assert fmt(statistics.mean(util), 1) in text
    assert "two-flows" in text


def test_tables_trace_to_raw_files(pipeline: Path) -> None:
    import pandas as pd

    runs = pd.read_csv(pipeline / "results-test" / "tables" / "runs.csv")
    assert len(runs) == 4 and set(runs["variant"]) == {"cubic", "bbr"}
    for r in runs.itertuples():
        raw = pipeline / "results-test" / "runs" / r.run_id / "raw"
        assert (raw / "iperf3-1.json").exists() and (raw / "spec.json").exists()
        if r.valid:
            assert not math.isnan(r.throughput_sum_mbps)
    assert (pipeline / "results-test" / "tables" / "summary.parquet").exists()
    assert list(runs["order"]) == sorted(runs["order"])


def test_report_rebuilds_from_cached_raw_and_gate_fails_loudly(pipeline: Path) -> None:
    shutil.rmtree(pipeline / "reports")
    cfg = yaml.safe_load((pipeline / "test.yaml").read_text())
    cfg["expectations"] = [
        {"name": "impossible fairness", "metric": "jain", "op": ">", "value": 1.0, "gate": True}
    ]
    (pipeline / "gated.yaml").write_text(yaml.safe_dump(cfg))
    cp = run_snakemake(pipeline, pipeline / "gated.yaml")
    assert cp.returncode != 0
    assert "gate failed: impossible fairness" in (cp.stderr + (
        pipeline / "results-test" / "logs" / "gate.log").read_text())  # fmt: skip
    # No run was repeated: only tables, report and gate were rebuilt from raw data.
    assert "rule run:" not in cp.stdout + cp.stderr
    assert (pipeline / "reports" / "pipeline-test.pdf").exists()
    m = json.loads((pipeline / "results-test" / "matrix.json").read_text())
    assert all(namespaces(f"ccb-{tb}-") == [] for tb in m["testbeds"])


def test_changing_one_variant_reruns_only_its_runs(pipeline: Path) -> None:
    cfg = yaml.safe_load((pipeline / "test.yaml").read_text())
    cfg["variants"][1]["cc"] = "reno"  # the 'bbr' variant now runs reno
    (pipeline / "changed.yaml").write_text(yaml.safe_dump(cfg))
    cp = run_snakemake(pipeline, pipeline / "changed.yaml", "--dry-run", "--quiet", "rules")
    assert cp.returncode == 0, cp.stderr[-2000:]
    counts = {}
    for line in cp.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    # Two repetitions of the changed variant; the baseline's runs are kept.
    assert counts.get("run") == 2 and counts.get("parse") == 2
    assert "testbed_up" not in counts
