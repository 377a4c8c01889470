"""Integration: before/after a kernel patch across a "reboot" (issue 14).

Locally the senders' kernel is this machine's (`uname -r -v`). Variant `before` needs a
regex that matches it and `after` one that does not: `snakemake all` runs `before` and
reports `after` as waiting for its kernel (not failed, not invalid). Then the test
"reboots" by swapping the regexes (a config change that changes no run id): the same
command runs only the waiting runs, keeps the finished ones, and the report compares
both sides with paired deltas, naming the kernels. A third invocation has nothing to do.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from markupsafe import escape as html_escape

from ccbench.reasons import Code
from tests.conftest import REPO, ccbench, codes
from tests.integration.conftest import assert_judged, job_counts, namespaces, run_snakemake

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]

NOT_BOOTED = "^this-kernel-is-not-booted$"


def _config(before: str, after: str) -> dict:
    return {
        "title": "kernel loop",
        "report_name": "kernel-loop",
        "results_dir": "results-kernel",
        "testbed": {"kind": "local"},
        # A topology of its own, so its testbed id is no other test's.
        "topology": {"pairs": 1, "rate_mbit": 40, "rtt_ms": 24, "queue": {"limit_pkts": 40}},
        "scenarios": {"one": {"description": "one flow", "flows": 1}},
        "variants": [
            {
                "label": "before",
                "cc": "cubic",
                "baseline": True,
                "kernel": {"label": "before patch", "match": before},
            },
            {"label": "after", "cc": "cubic", "kernel": {"label": "after patch", "match": after}},
        ],  # fmt: skip
        "repetitions": 2,
        "duration_s": 2,
        "interval_s": 0.5,
        "probe_interval_s": 0,
        "qdisc_interval_s": 0,
        "attempts": 1,
        "resolve_target_pct": 2,
    }


def _tree(root: Path) -> dict[str, tuple[str, int]]:
    """Every file under `root`: its content's sha256 and modification time (ns)."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(),
                                       p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def test_runs_pending_then_run_then_compared(tmp_path: Path) -> None:
    work = tmp_path / "wf"
    work.mkdir()
    shutil.copytree(REPO / "profiles", work / "profiles")
    here = subprocess.run(["uname", "-r", "-v"], capture_output=True, text=True, check=True)
    booted = "^" + re.escape(" ".join(here.stdout.split()))  # this kernel, from the start
    cfg_path = work / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(_config(booted, NOT_BOOTED)))
    m1 = json.loads(ccbench("matrix", "--config", str(cfg_path), "--json").stdout)
    ids = {v: sorted(r for r in m1["runs"] if m1["runs"][r]["variant"] == v)
           for v in ("before", "after")}  # fmt: skip
    tb = next(iter(m1["testbeds"]))
    res = work / "results-kernel"

    # 1. Booted into the "before" kernel: before runs, after waits.
    cp = run_snakemake(work, cfg_path, env=dict(os.environ), timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    runs = pd.read_csv(res / "tables" / "runs.csv").set_index("run_id")
    assert (runs.loc[ids["after"], "status"] == "waiting").all()
    assert (runs.loc[ids["after"], "not_run_reason"] == "waiting for kernel 'after patch'").all()
    assert runs.loc[ids["before"], "status"].isin(["valid", "invalid"]).all()  # it ran
    for rid in ids["before"]:  # valid, or invalid only because the VM stalled
        s_before = json.loads((res / "runs" / rid / "summary.json").read_text())
        assert Code.KERNEL_MISMATCH not in codes(s_before["reasons"])
        assert_judged(s_before)
    s_after = json.loads((res / "runs" / ids["after"][0] / "summary.json").read_text())
    assert s_after["skipped"] and s_after["waiting"]["match"] == NOT_BOOTED
    assert list(s_after["waiting"]["senders"]) == ["s1"]
    assert re.search(booted, s_after["waiting"]["senders"]["s1"])
    s_before = json.loads((res / "runs" / ids["before"][0] / "summary.json").read_text())
    assert s_before["kernel"]["label"] == "before patch"
    assert s_before["kernel"]["match"] == booted
    ident = s_before["kernel"]["senders"]["s1"]["identity"]
    assert ident.startswith(" ".join(here.stdout.split()))
    summary = pd.read_csv(res / "tables" / "summary.csv").set_index("variant")
    assert summary.loc["after", "n_waiting"] == 2 and summary.loc["after", "n_invalid"] == 0
    html = (work / "reports" / "kernel-loop.html").read_text()
    assert "waiting for kernel &#39;after patch&#39;" in html
    # the Conditions table counts them apart from runs that could not run (valid/ran: a
    # run the VM stalled is counted as ran, not valid)
    n_valid = int((runs.loc[ids["before"], "status"] == "valid").sum())
    assert f"{n_valid}/2 (2 waiting for their kernel)" in html
    started = runs.loc[ids["before"], "started_unix"]

    # 2. "Reboot" into the "after" kernel: the regexes swap, no run id changes, and the
    # same command runs the waiting runs only.
    cfg_path.write_text(yaml.safe_dump(_config(NOT_BOOTED, booted)))
    m2 = json.loads(ccbench("matrix", "--config", str(cfg_path), "--json").stdout)
    assert sorted(m2["runs"]) == sorted(m1["runs"])
    before_dry = _tree(res)
    dry = run_snakemake(work, cfg_path, "--dry-run", "--quiet", "rules", timeout=600)
    assert dry.returncode == 0, dry.stderr[-2000:]
    # reading the workflow changed nothing: every file's bytes and times as they were
    assert _tree(res) == before_dry
    counts = job_counts(dry)
    assert counts.get("run") == 2 and counts.get("parse") == 2, dry.stdout
    cp = run_snakemake(work, cfg_path, env=dict(os.environ), timeout=600)
    assert cp.returncode == 0, cp.stderr[-3000:]
    runs2 = pd.read_csv(res / "tables" / "runs.csv").set_index("run_id")
    assert runs2["status"].isin(["valid", "invalid"]).all(), runs2["reasons"].tolist()
    assert (runs2.loc[ids["before"], "started_unix"] == started).all()  # kept, not rerun
    s_after = json.loads((res / "runs" / ids["after"][0] / "summary.json").read_text())
    assert s_after.get("waiting") is None and s_after["kernel"]["match"] == booted
    summary = pd.read_csv(res / "tables" / "summary.csv").set_index("variant")
    after = summary.loc["after"]
    assert after["n_waiting"] == 0
    if after["n_valid"] == 2 and summary.loc["before", "n_valid"] == 2:
        # Paired by repetition, with the smallest change 2 repetitions resolve. Its CI may
        # be 0: both repetitions of a variant can deliver the same bytes (a CI run's did,
        # 9,361,320 each: the shaper is exact and the client stops on time), and then the
        # paired deltas agree.
        assert after["throughput_sum_mbps_delta_paired"]
        assert after["throughput_sum_mbps_delta_ci95_pct"] >= 0
    html = (work / "reports" / "kernel-loop.html").read_text()
    short = " ".join(here.stdout.split()[:2])  # "6.1.0-18-amd64 #1"
    # each side names the kernel its valid runs' senders ran (none if the VM stalled them all)
    sides = [f"{v} patch ({short})" if summary.loc[v, "n_valid"] else f"{v} patch"
             for v in ("after", "before")]  # fmt: skip
    assert " vs ".join(sides) in html
    assert "What 2 repetitions resolve" in html
    assert "waiting for kernel" not in html
    # "before" ran under the regex of step 1, not the one its config has now: said so
    assert f'judged on <span class="mono">/{html_escape(booted)}/ (2 runs)</span>' in html

    # 3. Nothing is left to do.
    again = run_snakemake(work, cfg_path, "--dry-run", "--quiet", "rules", timeout=600)
    assert again.returncode == 0 and not job_counts(again), again.stdout
    assert namespaces(f"ccb-{tb}-") == []
