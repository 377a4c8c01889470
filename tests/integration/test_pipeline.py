"""Integration: the .test comparison (2 variants x 2 repetitions x 3 s on a real local
dumbbell) through the real Snakemake DAG, twice over in one module, so that it is
measured once (./test.sh's workers take a module each):

1. A crash costs only what was in flight (issue 20): the comparison's `snakemake`
   process group is SIGKILLed (an OOM kill, a closed laptop) as soon as its first run is
   done; then Snakemake's own `--unlock`, and the same command again. Every run ends
   measured and judged (valid, or invalid only because the VM stalled:
   conftest.assert_judged), the run finished before the crash is not measured again, and
   when the comparison is done no process of the killed run and no namespace is left.
2. The PDF's numbers are recomputed from the raw iperf3 JSON of every run and found in
   the PDF's text and in the HTML; the report rebuilds from raw data; a changed variant
   reruns only its runs. They assert on the comparison 1 finished
   (conftest.offer_test_comparison), or run it themselves when 1 did not finish it with a
   valid run of each variant (or was not selected).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ccbench import metrics
from ccbench.report.fmt import fmt, fmt_ci
from tests.conftest import REPO
from tests.integration.conftest import (
    TEST_CONFIG,
    assert_judged,
    finished_test_comparison,
    in_namespaces,
    measure_fidelity,
    namespaces,
    offer_test_comparison,
    run_snakemake,
    still_running,
)
from tests.raw_meta import read_meta

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]


def _start(work: Path) -> subprocess.Popen[bytes]:
    """The .test comparison in `work`, in a session of its own (its process group)."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(work), "--cores", "2", "--configfile", str(TEST_CONFIG)]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip


def _in(work: Path) -> list[str]:
    """Live processes working in `work`: a comparison's jobs run there, and every tool
    they start (iperf3, ccdelay, samplers) inherits it; others on this machine may run
    ccbench too, elsewhere."""
    left = []
    for d in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError):
            there = d.name.isdigit() and (d / "cwd").resolve().is_relative_to(work.resolve())
            if there and (d / "stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX":
                left.append(f"{d.name} {(d / 'cmdline').read_bytes()!r}")
    return left


def _jobs(work: Path) -> list[str]:
    """`pgrep -af 'ccbench '` (docs/workflow.md), of this comparison's."""
    out = subprocess.run(["pgrep", "-af", "ccbench "], capture_output=True, text=True)
    mine = {line.split()[0] for line in _in(work)}
    return [line for line in out.stdout.splitlines() if line.split()[0] in mine]


def _resume(work: Path) -> tuple[subprocess.CompletedProcess[str], bool]:
    """docs/workflow.md, "Recovering after a crash": (1) no job of the comparison is
    left (none outlives its process group's SIGKILL), (2) --unlock, (3) the same
    command again, with --rerun-incomplete if Snakemake names files a job the kill cut
    short had written. Returns the refused first try (what Snakemake said) and whether
    it named such files."""
    assert _jobs(work) == []
    locked = run_snakemake(work, TEST_CONFIG)  # (a dry run does not take Snakemake's lock)
    # Snakemake refuses its lock, or first the outputs of a job the kill cut short (a
    # `parse` of the finished run that had written part of its outputs)
    cut = "--rerun-incomplete" in locked.stdout + locked.stderr  # IncompleteFilesException
    assert run_snakemake(work, TEST_CONFIG, "--unlock").returncode == 0
    again = run_snakemake(work, TEST_CONFIG, *(["--rerun-incomplete"] if cut else []))
    assert again.returncode == 0, again.stderr[-3000:]
    return locked, cut


def _all_judged(runs: Path) -> bool:
    """All 4 runs measured and judged; whether each variant has a valid run (what
    test_pipeline's checks read: the valid runs' numbers, per variant)."""
    summaries = [json.loads(p.read_text()) for p in runs.glob("*/summary.json")]
    assert len(summaries) == 4, [p.parent.name for p in runs.glob("*/summary.json")]
    for s in summaries:
        assert_judged(s)
    variants = {s["variant"] for s in summaries}
    return variants == {s["variant"] for s in summaries if s["valid"]}


def test_a_killed_comparison_resumes_without_measuring_again(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    proc = _start(work)
    runs = work / "results-test" / "runs"
    try:
        deadline = time.monotonic() + 300
        while not list(runs.glob("*/attempts.json")):
            assert proc.poll() is None and time.monotonic() < deadline, "no run finished"
            time.sleep(0.2)
        first = next(runs.glob("*/attempts.json")).parent
        time.sleep(2)  # into the next run's traffic
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    measured = read_meta(first / "raw").started_unix

    locked, cut = _resume(work)
    said = locked.stdout + locked.stderr
    assert locked.returncode != 0 and ("unlock" in said or cut), said[-2000:]

    each_valid = _all_judged(runs)
    # the run finished before the crash kept its raw data: not measured again
    assert measured is not None and read_meta(first / "raw").started_unix == measured
    assert not list(runs.glob("*/.raw.tmp-*"))  # the killed attempt's files are gone
    # this comparison's namespaces and processes are gone (other tests may run beside it:
    # ./test.sh runs the shares_cpu modules on two workers)
    testbeds = json.loads((work / "results-test" / "matrix.json").read_text())["testbeds"]
    assert [n for tb in testbeds for n in namespaces(f"ccb-{tb}-")] == []
    assert _in(work) == []
    if each_valid:  # done: test_pipeline asserts on it, not on a second run
        offer_test_comparison(work)


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


# The .test comparison takes about 80 s here (testbed up, 4 runs of 3 s, parses, report).
WHOLE_S = 80.0


@pytest.mark.slow
def test_ten_kills_at_random_moments_leave_no_process(tmp_path: Path) -> None:
    """Issue 32: ten times, the comparison's process group SIGKILLed at a random moment
    (a build, a calibration, a run's traffic, a parse...), then the documented resume:
    every run done, and no process of the killed invocation left anywhere."""
    rng = random.Random(32)
    others = set(namespaces("ccb-"))
    for k in range(10):
        work = tmp_path / f"w{k}"
        work.mkdir()
        proc = _start(work)
        moment = rng.uniform(1.0, WHOLE_S)
        deadline = time.monotonic() + moment
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        killed = in_namespaces(sorted(set(namespaces("ccb-")) - others))
        if proc.poll() is None:  # (done before its moment: nothing to kill)
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _resume(work)
        where = f"kill {k + 1} at {moment:.1f} s"
        # every run done (whether valid is the short case's check: here a busy machine
        # may stall a run, which says nothing about what a kill leaves)
        assert len(list((work / "results-test" / "runs").glob("*/summary.json"))) == 4, where
        assert still_running(killed) == [], where
        assert _in(work) == [], where
        assert set(namespaces("ccb-")) <= others, where
