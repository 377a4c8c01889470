"""Re-derive a results fixture's summaries and tables from its raw files with the
current code, when a definition changes (e.g. the percentile, 2026-11-23) or summary.json
gains what `ccbench parse` computes (srtt, convergence_s, mathis, 2026-11-23).

The fixtures under tests/fixtures/ keep raw/ without the ss captures (their samples are
in timeseries.parquet), so `ccbench parse` cannot remake them whole. This remakes what
the change touches through the package's own functions, never by hand: each run's
summary.json `probe` record from raw/probe-*.txt (summary.probe_record), its
`recorded` provenance (summary.recorded) and its `srtt`, `convergence_s` and `mathis`
from its timeseries.parquet (summary.run_metrics), then the
tables (`ccbench aggregate`) and verdicts (`ccbench verdicts`) from those summaries.

    .venv/bin/python scripts/rederive_fixture.py tests/fixtures/results-small
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd

from ccbench.layout import RawDir
from ccbench.summarize.probe import probe_record, recorded_run
from ccbench.summarize.run_metrics import run_metrics
from ccbench.summarize.runfiles import recorded


def main(fixture: Path) -> int:
    runs = sorted(p for p in (fixture / "runs").iterdir() if (p / "summary.json").exists())
    for run in runs:
        path = run / "summary.json"
        s = json.loads(path.read_text())
        probe = probe_record(RawDir(run / "raw"), recorded_run(run / "raw"))
        if probe != s.get("probe"):
            print(f"{run.name}: probe {s.get('probe', {}).get('rtt_p50_us')} -> "
                  f"{(probe or {}).get('rtt_p50_us')} (p50 us)")  # fmt: skip
            s["probe"] = probe
        if not s.get("skipped"):
            s["recorded"] = recorded(run / "raw")
        ts = run / "timeseries.parquet"
        s.update(run_metrics(s, pd.read_parquet(ts) if ts.exists() else None))
        path.write_text(json.dumps(s, indent=2) + "\n")
    matrix, tables = fixture / "matrix.json", fixture / "tables"
    # this interpreter's ccbench, not whichever one PATH finds first
    ccbench = [sys.executable, "-m", "ccbench.cli"]
    subprocess.run([*ccbench, "aggregate", "--matrix", str(matrix), "--out", str(tables),
                    *[str(r / "summary.json") for r in runs]], check=True)  # fmt: skip
    subprocess.run([*ccbench, "verdicts", "--matrix", str(matrix), "--tables", str(tables),
                    "--out", str(tables / "verdicts.csv")], check=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
