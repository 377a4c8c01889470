"""How ./test.sh's first part is best run: the integration tests marked shares_cpu, alone
(as test.sh runs them, the idle-priority job after them) or with the unit tests beside
them at idle priority (the schedule before), for each number of workers; measured in one
sitting, alternating, and printed as a table.

    sudo .venv/bin/python bench/shares_part.py [--trials 2]

Each trial is the part as test.sh runs it (its own pytest processes, real namespaces):
about 3-4 minutes. Nothing else may run meanwhile: the part is bound by the CPU, and
idle priority does not make work beside it free (bench/fidelity_beside.py measures the
idle job beside the fidelity tests, where test.sh runs it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Way:
    name: str
    workers: int  # the shares_cpu tests'
    units_beside: bool  # the unit tests at idle priority, one worker per CPU


WAYS = (
    Way("3 workers, alone (./test.sh)", 3, False),
    Way("4 workers, alone", 4, False),
    Way("3 workers, unit tests beside", 3, True),
)


def one_trial(way: Way) -> tuple[float, int]:
    """Seconds until the shares_cpu tests ended; the worse pytest exit status."""
    t0 = time.monotonic()
    unit = None
    if way.units_beside:
        unit = subprocess.Popen(
            ["chrt", "--idle", "0", sys.executable, "-m", "pytest", "-q", "-n",
             str(os.cpu_count()), "--dist", "loadfile", "-p", "no:cacheprovider", "tests/unit"],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
    shares = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", str(way.workers), "--dist", "loadfile",
         "-p", "no:cacheprovider", "-m", "shares_cpu and not slow", "tests/integration"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    t_shares = time.monotonic() - t0
    unit_rc = unit.wait() if unit is not None else 0
    return t_shares, max(shares.returncode, unit_rc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2)
    args = ap.parse_args()
    got: dict[str, list[tuple[float, int]]] = {w.name: [] for w in WAYS}
    for k in range(args.trials):
        for way in WAYS:  # alternating: a slow hour weighs on every way alike
            got[way.name].append(one_trial(way))
            t, rc = got[way.name][-1]
            print(f"trial {k + 1}: {way.name}: part {t:.0f} s, rc {rc}", file=sys.stderr,
                  flush=True)  # fmt: skip
    print("| way | part (s), each trial | median | rc |")
    print("|---|---|---|---|")
    for way in WAYS:
        rows = got[way.name]
        each = ", ".join(f"{t:.0f}" for t, _ in rows)
        med = statistics.median(t for t, _ in rows)
        print(f"| {way.name} | {each} | {med:.0f} | {max(r for _, r in rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
