"""Same raw data, two versions of ccbench: are the tables equal?

The proof a refactoring changed no number (issue 11): each version parses every run of
a results directory from its raw/ (`ccbench parse`), aggregates (`ccbench aggregate`)
and judges (`ccbench verdicts`) in a copy of its own, then every table CSV is compared
cell by cell. Prints one table: per CSV, rows, columns, and the columns that differ
(with the largest difference), so an intended change (e.g. a definition made one) is
named, and anything else stands out.

    .venv/bin/python bench/same_numbers.py RESULTS --old /path/to/old/.venv/bin/ccbench \
        [--new .venv/bin/ccbench]

Each ccbench is run as a program, so the old one can be a git worktree at the commit
before the change with a venv of its own.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

TABLES = ("runs.csv", "flows.csv", "summary.csv", "verdicts.csv")


def rebuild(ccbench: str, results: Path, work: Path) -> Path:
    """A copy of `results` with only raw data, matrix and attempts; then parse,
    aggregate and verdicts by `ccbench`. Returns the tables directory."""
    shutil.copy(results / "matrix.json", work / "matrix.json")
    summaries = []
    for run in sorted((results / "runs").iterdir()):
        if not (run / "raw").is_dir():
            continue
        dst = work / "runs" / run.name
        shutil.copytree(run / "raw", dst / "raw")
        for name in ("attempts.json",):
            if (run / name).exists():
                shutil.copy(run / name, dst / name)
        subprocess.run([ccbench, "parse", str(dst)], check=True, capture_output=True)
        summaries.append(str(dst / "summary.json"))
    tables = work / "tables"
    subprocess.run([ccbench, "aggregate", "--matrix", str(work / "matrix.json"), "--out",
                    str(tables), *summaries], check=True, capture_output=True)  # fmt: skip
    subprocess.run([ccbench, "verdicts", "--matrix", str(work / "matrix.json"), "--tables",
                    str(tables), "--out", str(tables / "verdicts.csv")],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([ccbench, "figures", "--matrix", str(work / "matrix.json"), "--tables",
                    str(tables), "--runs", str(work / "runs"), "--out", str(work / "figures")],
                   check=True, capture_output=True)  # fmt: skip
    return tables


def png_differences(old: Path, new: Path) -> list[str]:
    """The report's figures (PNG) that are not byte-identical, or only on one side."""
    a = {p.name: p.read_bytes() for p in old.glob("*.png")}
    b = {p.name: p.read_bytes() for p in new.glob("*.png")}
    return sorted(n for n in set(a) | set(b) if a.get(n) != b.get(n))


def differences(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """Columns whose cells differ (NaN equals NaN), each with its largest difference."""
    out = []
    for col in sorted(set(a.columns) | set(b.columns)):
        if col not in a.columns or col not in b.columns:
            out.append(f"{col} ({'only new' if col in b.columns else 'only old'})")
            continue
        x, y = a[col], b[col]
        same = (x == y) | (x.isna() & y.isna())
        if bool(same.all()):
            continue
        numeric = [pd.api.types.is_numeric_dtype(c) and not pd.api.types.is_bool_dtype(c)
                   for c in (x, y)]  # fmt: skip
        if all(numeric):
            out.append(f"{col} (max |Δ| {(x - y).abs().max():.6g}, {int((~same).sum())} cells)")
        else:
            out.append(f"{col} ({int((~same).sum())} cells)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path)
    ap.add_argument("--old", required=True, help="the ccbench program before the change")
    # default: the ccbench beside this interpreter (this checkout's venv), not PATH's
    ap.add_argument("--new", default=str(Path(sys.executable).parent / "ccbench"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ccb-same-") as tmp:
        got = {}
        for side, prog in (("old", a.old), ("new", a.new)):
            print(f"# {side}: {prog} ...", file=sys.stderr, flush=True)
            (Path(tmp) / side).mkdir()
            got[side] = rebuild(prog, a.results, Path(tmp) / side)
        print(f"\nSame raw data ({a.results}), old {a.old} vs new {a.new}\n")
        print("| table | rows old/new | columns | differing columns |")
        print("|---|---|---|---|")
        for name in TABLES:
            old = pd.read_csv(got["old"] / name)
            new = pd.read_csv(got["new"] / name)
            diff = ["row count"] if len(old) != len(new) else differences(old, new)
            print(f"| {name} | {len(old)}/{len(new)} | {len(new.columns)} | "
                  f"{', '.join(diff) or 'none: identical'} |")  # fmt: skip
        figs = [Path(tmp) / side / "figures" for side in ("old", "new")]
        n = len(list(figs[1].glob("*.png")))
        diff = png_differences(*figs)
        print(
            f"| figures (PNG) | {len(list(figs[0].glob('*.png')))}/{n} | | "
            f"{', '.join(diff) + ' differ' if diff else 'none: byte-identical'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
