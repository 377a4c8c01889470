"""How ./test.sh's first part is best scheduled: the unit tests at idle priority beside
the integration tests marked shares_cpu, for each way of running the latter (workers,
module order), measured in one sitting, alternating, and printed as a table.

    sudo .venv/bin/python bench/shares_part.py [--trials 2]

Each trial is the part as test.sh runs it (its own pytest processes, real namespaces):
about 4 minutes. Nothing else may run meanwhile: the part is bound by the CPU.
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
    workers: int  # the shares_cpu tests' (the unit tests: one per CPU, as test.sh)


WAYS = (Way("2 workers (./test.sh)", 2), Way("3 workers", 3))


def one_trial(way: Way) -> tuple[float, float, int]:
    """Seconds until the shares_cpu tests ended, until the unit tests ended; the worse
    of the two pytest exit statuses."""
    t0 = time.monotonic()
    unit = subprocess.Popen(
        ["chrt", "--idle", "0", sys.executable, "-m", "pytest", "-q", "-n", str(os.cpu_count()),
         "--dist", "loadfile", "-p", "no:cacheprovider", "tests/unit"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    shares = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", str(way.workers), "--dist", "loadfile",
         "-p", "no:cacheprovider", "-m", "shares_cpu and not slow", "tests/integration"],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    t_shares = time.monotonic() - t0
    unit_rc = unit.wait()
    return t_shares, time.monotonic() - t0, max(shares.returncode, unit_rc)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2)
    args = ap.parse_args()
    got: dict[str, list[tuple[float, float, int]]] = {w.name: [] for w in WAYS}
    for k in range(args.trials):
        for way in WAYS:  # alternating: a slow hour weighs on both alike
            got[way.name].append(one_trial(way))
            t, u, rc = got[way.name][-1]
            print(f"trial {k + 1}: {way.name}: part {t:.0f} s, unit tests {u:.0f} s, rc {rc}",
                  file=sys.stderr, flush=True)  # fmt: skip
    print("| way | part (s), each trial | median | unit tests (s) | rc |")
    print("|---|---|---|---|---|")
    for way in WAYS:
        rows = got[way.name]
        each = ", ".join(f"{t:.0f}" for t, _, _ in rows)
        units = ", ".join(f"{u:.0f}" for _, u, _ in rows)
        med = statistics.median(t for t, _, _ in rows)
        print(f"| {way.name} | {each} | {med:.0f} | {units} | {max(r for _, _, r in rows)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
