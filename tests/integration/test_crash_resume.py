"""A crash costs only what was in flight (issue 20), on real namespaces: the .test
comparison's `snakemake` process group is SIGKILLed (an OOM kill, a closed laptop) as
soon as its first run is done; then Snakemake's own `--unlock`, and the same command
again. Every run ends measured and judged (valid, or invalid only because the VM
stalled: conftest.assert_judged), the run finished before the crash is not measured again,
and when the comparison is done no process of the killed run and no namespace is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.conftest import (
    assert_judged,
    in_namespaces,
    namespaces,
    offer_test_comparison,
    run_snakemake,
    still_running,
)

pytestmark = pytest.mark.netns

CONFIG = REPO / ".test" / "config" / "config.yaml"


def _ccbench_processes() -> set[str]:
    """Live processes of ccbench runs and their tools on this machine (pid and command).
    A zombie has ended: a killed run's tool waits there until init reaps it, which
    this VM's init does in its own time."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True)
    tools = ("iperf3", "ccdelay", "ccbench run", "ccbench-ss", "ccbench-qdisc", "ping -n -D")
    live = []
    for line in out.stdout.splitlines():
        pid, stat, args = (line.split(None, 2) + ["", ""])[:3]
        if not stat.startswith("Z") and any(t in args for t in tools):
            live.append(f"{pid} {args}")
    return set(live)


def _start(work: Path) -> subprocess.Popen[bytes]:
    """The .test comparison in `work`, in a session of its own (its process group)."""
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(work), "--cores", "2", "--configfile", str(CONFIG)]  # fmt: skip
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
    locked = run_snakemake(work, CONFIG)  # (a dry run does not take Snakemake's lock)
    # Snakemake refuses its lock, or first the outputs of a job the kill cut short (a
    # `parse` of the finished run that had written part of its outputs)
    cut = "--rerun-incomplete" in locked.stdout + locked.stderr  # IncompleteFilesException
    assert run_snakemake(work, CONFIG, "--unlock").returncode == 0
    again = run_snakemake(work, CONFIG, *(["--rerun-incomplete"] if cut else []))
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


@pytest.mark.shares_cpu
def test_a_killed_comparison_resumes_without_measuring_again(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    before = _ccbench_processes()  # anyone else's, left out of the check
    others = set(namespaces("ccb-"))
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
    measured = json.loads((first / "raw" / "meta.json").read_text())["started_unix"]

    locked, cut = _resume(work)
    said = locked.stdout + locked.stderr
    assert locked.returncode != 0 and ("unlock" in said or cut), said[-2000:]

    each_valid = _all_judged(runs)
    # the run finished before the crash kept its raw data: not measured again
    assert json.loads((first / "raw" / "meta.json").read_text())["started_unix"] == measured
    assert not list(runs.glob("*/.raw.tmp-*"))  # the killed attempt's files are gone
    assert set(namespaces("ccb-")) <= others  # this comparison's are gone
    assert _ccbench_processes() - before == set()
    if each_valid:  # done: test_pipeline asserts on it, not on a second run
        offer_test_comparison(work)


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
