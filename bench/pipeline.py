"""Pipeline overhead: wall time of `snakemake --cores 4 all` on a comparison config
÷ the traffic seconds it configures, and the time to rebuild the report from cached
raw data (reports/ deleted). Prints one table. Run as root:

    sudo .venv/bin/python bench/pipeline.py [--config config/config.yaml]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def snakemake(work: Path, config: Path) -> float:
    t0 = time.monotonic()
    cp = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(work), "--cores", "4", "all", "--configfile", str(config)],
        capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    dt = time.monotonic() - t0
    if cp.returncode != 0:
        sys.stderr.write(cp.stderr[-4000:])
        raise SystemExit(f"snakemake failed after {dt:.0f}s")
    return dt


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ccb-pipeline-"))
    try:
        cfg = Path(a.config).resolve()
        full = snakemake(work, cfg)
        results = next(work.glob("results*/matrix.json"))
        m = json.loads(results.read_text())
        traffic = sum(r["traffic_s"] for r in m["runs"].values())
        shutil.rmtree(work / "reports")
        regen = snakemake(work, cfg)
        print(f"\nPipeline, {cfg.name}: {len(m['runs'])} runs, {time.strftime('%Y-%m-%d')}\n")
        print("| measure | value |")
        print("|---|---|")
        print(f"| configured traffic | {traffic:.0f} s |")
        print(f"| wall time of `snakemake --cores 4 all` | {full:.0f} s |")
        print(f"| wall ÷ traffic (goal ≤ 1.10) | {full / traffic:.3f} |")
        print(f"| report rebuilt from cached raw data (reports/ deleted; goal ≤ 30 s) "
              f"| {regen:.1f} s |")  # fmt: skip
        if a.keep:
            print(f"\nkept: {work}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
