"""Whether ./test.sh's idle-priority job (linters, unit tests) may run beside the
fidelity tests: the fidelity part (not shares_cpu, not quiet) run alone and with the
unit tests looping at idle priority beside it (`chrt --idle 0`, as test.sh starts
them), alternating, and printed as a table: wall time, outcomes, tries measured again
(FidelityRetry) and how much longer each test took than alone.

    sudo .venv/bin/python bench/fidelity_beside.py [--trials 1]

About 5 minutes a way and trial (real traffic in namespaces). Nothing else may run
meanwhile.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIDELITY = "not shares_cpu and not quiet and not slow"


@dataclass(frozen=True)
class Outcome:
    wall_s: float
    passed: int
    failed: int
    skipped: int
    retries: int  # FidelityRetry warnings: tries measured again
    durations: dict[str, float]  # test id -> seconds (setup + call + teardown)


def _beside() -> subprocess.Popen[bytes]:
    """The unit tests at idle priority, again and again, in a session of their own."""
    loop = (f"while :; do {sys.executable} -m pytest -q -n {os.cpu_count()} --dist loadfile "
            "-p no:cacheprovider tests/unit; done")  # fmt: skip
    return subprocess.Popen(["chrt", "--idle", "0", "bash", "-c", loop], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # fmt: skip


def one_trial(beside: bool) -> Outcome:
    job = _beside() if beside else None
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        t0 = time.monotonic()
        cp = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
             f"--junitxml={xml}", "-m", FIDELITY, "tests/integration"],
            cwd=REPO, capture_output=True, text=True,
        )  # fmt: skip
        wall = time.monotonic() - t0
        if job is not None:
            os.killpg(job.pid, signal.SIGTERM)
            job.wait()
        durations: dict[str, float] = {}
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        for case in ET.parse(xml).iter("testcase"):
            name = f"{case.get('classname')}::{case.get('name')}"
            durations[name] = float(case.get("time", 0))
            if case.find("skipped") is not None:
                counts["skipped"] += 1
            elif case.find("failure") is not None or case.find("error") is not None:
                counts["failed"] += 1
            else:
                counts["passed"] += 1
    retries = cp.stdout.count("FidelityRetry:")
    return Outcome(wall, retries=retries, durations=durations, **counts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1)
    args = ap.parse_args()
    ways = {"alone": False, "beside the unit tests at idle priority": True}
    got: dict[str, list[Outcome]] = {w: [] for w in ways}
    for k in range(args.trials):
        for way, beside in ways.items():  # alternating: a slow hour weighs on both alike
            o = one_trial(beside)
            got[way].append(o)
            print(f"trial {k + 1}: {way}: {o.wall_s:.0f} s, {o.passed} passed, {o.failed} "
                  f"failed, {o.skipped} skipped, {o.retries} retried",
                  file=sys.stderr, flush=True)  # fmt: skip
    alone = got["alone"]
    print("| way | wall (s), each trial | passed | failed | skipped | tries measured again "
          "| each test's time / alone, median (max) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for way, rows in got.items():
        ratios = [o.durations[t] / a.durations[t] for o, a in zip(rows, alone, strict=True)
                  for t in o.durations
                  if t in a.durations and a.durations[t] >= 1.0
                  and o.durations[t] >= 1.0]  # fmt: skip
        walls = ", ".join(f"{o.wall_s:.0f}" for o in rows)
        print(f"| {way} | {walls} | {sum(o.passed for o in rows)} | "
              f"{sum(o.failed for o in rows)} | {sum(o.skipped for o in rows)} | "
              f"{sum(o.retries for o in rows)} | "
              f"{statistics.median(ratios):.2f} ({max(ratios):.2f}) |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
