"""A crash costs only what was in flight (issue 20), on real namespaces: the .test
comparison's `snakemake` process group is SIGKILLed (an OOM kill, a closed laptop) as
soon as its first run is done; then Snakemake's own `--unlock`, and the same command
again. Every run ends valid, the run finished before the crash is not measured again,
and when the comparison is done no process of the killed run and no namespace is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.integration.conftest import namespaces, run_snakemake

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


def test_a_killed_comparison_resumes_without_measuring_again(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    before = _ccbench_processes()  # anyone else's, left out of the check
    others = set(namespaces("ccb-"))
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
           "--directory", str(work), "--cores", "2", "--configfile", str(CONFIG)]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip
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

    locked = run_snakemake(work, CONFIG)  # (a dry run does not take Snakemake's lock)
    said = locked.stdout + locked.stderr
    # Snakemake refuses its lock, or first the outputs of a job the kill cut short (a
    # `parse` of the finished run that had written part of its outputs; docs/workflow.md,
    # "Recovering after a crash": then --rerun-incomplete)
    cut = "--rerun-incomplete" in said  # IncompleteFilesException's advice
    assert locked.returncode != 0 and ("unlock" in said or cut), said[-2000:]
    assert run_snakemake(work, CONFIG, "--unlock").returncode == 0
    again = run_snakemake(work, CONFIG, *(["--rerun-incomplete"] if cut else []))
    assert again.returncode == 0, again.stderr[-3000:]

    summaries = [json.loads(p.read_text()) for p in runs.glob("*/summary.json")]
    assert len(summaries) == 4 and all(s["valid"] for s in summaries), [
        s["reasons"] for s in summaries
    ]
    # the run finished before the crash kept its raw data: not measured again
    assert json.loads((first / "raw" / "meta.json").read_text())["started_unix"] == measured
    assert not list(runs.glob("*/.raw.tmp-*"))  # the killed attempt's files are gone
    assert set(namespaces("ccb-")) <= others  # this comparison's are gone
    assert _ccbench_processes() - before == set()
