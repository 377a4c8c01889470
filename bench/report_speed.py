"""How long the workflow's last two steps take: `ccbench figures` and `ccbench report`.

Every workflow run ends with them, so every rerun and every integration test pays them.
Each is timed as a program (its imports count), median of --repeat runs, the sides
interleaved so that a busy moment hits all of them alike:

- serial:  `figures --workers 1` (one figure after another)
- default: as the workflow runs them (figures drawn by one process per CPU)
- old:     with --old, the ccbench before a change (a program, e.g. a wrapper that runs a
  checkout of the commit before with this venv); it gets no --workers.

The report has no workers: its serial and default columns time the same command, so
their difference is the noise of the machine.

    .venv/bin/python bench/report_speed.py RESULTS [--old /path/to/old/ccbench] [--repeat 3]

RESULTS is a results directory of the workflow (matrix.json, tables/, runs/); nothing in
it is written. Prints one table and whether the sides drew the same figure bytes. On a
machine busy with other work the workers gain nothing: the load average is printed too.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STEPS = ("figures", "report")


def timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t


def one_run(prog: str, results: Path, out: Path, workers: list[str]) -> dict[str, float]:
    """Seconds of figures (with `workers`), then of the report from those figures."""
    common = [f"--matrix={results}/matrix.json", f"--tables={results}/tables",
              f"--runs={results}/runs"]  # fmt: skip
    figs = f"{out}/figures"
    report = [f"--figures={figs}", f"--pdf={out}/report.pdf", f"--html={out}/report.html"]
    return {
        "figures": timed([prog, "figures", *common, f"--out={figs}", *workers]),
        "report": timed([prog, "report", *common, *report]),
    }


def same_files(a: Path, b: Path) -> bool:
    names = sorted(p.name for p in a.iterdir())
    if names != sorted(p.name for p in b.iterdir()):
        return False
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    return not mismatch and not errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--old", help="the ccbench program before the change")
    # default: the ccbench beside this interpreter (this checkout's venv), not PATH's
    ap.add_argument("--new", default=str(Path(sys.executable).parent / "ccbench"))
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    a.results = a.results.resolve()
    if not (a.results / "matrix.json").is_file():
        print(f"report_speed: {a.results}: no matrix.json (not a results directory)",
              file=sys.stderr)  # fmt: skip
        return 2
    sides = {"serial": (a.new, ["--workers", "1"]), "default": (a.new, [])}
    if a.old:
        sides = {"old": (a.old, []), **sides}
    load0 = os.getloadavg()[0]
    got: dict[str, dict[str, list[float]]] = {s: {k: [] for k in STEPS} for s in sides}
    with tempfile.TemporaryDirectory(prefix="ccb-speed-") as tmp:
        for i in range(a.repeat):
            for side, (prog, workers) in sides.items():
                out = Path(tmp) / side / str(i)
                out.mkdir(parents=True)
                print(f"# {side} {i + 1}/{a.repeat} ...", file=sys.stderr, flush=True)
                for step, s in one_run(prog, a.results, out, workers).items():
                    got[side][step].append(s)
        drawn = Path(tmp, "default", "0", "figures")
        same = same_files(Path(tmp, "serial", "0", "figures"), drawn)
        same_old = bool(a.old) and same_files(Path(tmp, "old", "0", "figures"), drawn)
    med = {s: {k: statistics.median(v) for k, v in steps.items()} for s, steps in got.items()}
    print(f"\n{a.results}: median of {a.repeat}, seconds, {os.cpu_count()} CPUs "
          f"(load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after)\n")  # fmt: skip
    cols = list(sides)
    refs = [r for r in ("old", "serial") if r in sides]
    print(f"| step | {' | '.join(cols)} | {' | '.join(f'default vs {r}' for r in refs)} |")
    print("|---" * (len(cols) + len(refs) + 1) + "|")
    for k in (*STEPS, "both"):
        v = {s: sum(med[s].values()) if k == "both" else med[s][k] for s in cols}
        ratios = " | ".join(f"{v[r] / v['default']:.2f}x" for r in refs)
        print(f"| {k} | {' | '.join(f'{v[s]:.2f}' for s in cols)} | {ratios} |")
    vs_old = f"; old vs default: {'byte-identical' if same_old else 'DIFFER'}" if a.old else ""
    print(f"\nfigures serial vs default: {'byte-identical' if same else 'DIFFER'}{vs_old}")
    return 0 if same and (not a.old or same_old) else 1


if __name__ == "__main__":
    sys.exit(main())
