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

from ccbench import runmeta
from ccbench.layout import RawDir

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


def _bench_s(work: Path, rule: str) -> list[float]:
    """The `s` column of Snakemake's benchmark files of `rule`'s jobs."""
    results = next(work.glob("results*"))
    files = [*results.glob(f"benchmarks/{rule}.tsv"), *results.glob(f"benchmarks/{rule}/*.tsv")]
    out = []
    for f in sorted(files):
        lines = f.read_text().splitlines()
        if len(lines) > 1:
            out.append(float(lines[1].split("\t")[0]))
    return out


def where_the_time_goes(work: Path) -> list[tuple[str, float]]:
    """Seconds by part: the runs' traffic and their own set-up and wrap-up (meta.json
    phases_s), the run jobs beyond that (process start, imports, the verdict), the
    testbeds' set-up, and the analysis after the last run."""
    results = next(work.glob("results*"))
    traffic = prepare = start = end = 0.0
    for raw in results.glob("runs/*/raw"):
        m = runmeta.load(RawDir(raw))
        traffic += m.traffic_wall_s or 0
        ph = m.phases_s or {}
        prepare += ph.get("prepare", 0)
        start += ph.get("start", 0)
        end += ph.get("end", 0)
    run_jobs = sum(_bench_s(work, "run"))
    return [
        ("traffic (iperf3's own wall time)", traffic),
        ("run: prepare (spec, calibration, facts, snapshots)", prepare),
        ("run: start (servers, samplers, clients, probe)", start),
        ("run: end (snapshots, samplers stopped, logs)", end),
        ("run jobs beyond that (process, imports, verdict)",
         run_jobs - traffic - prepare - start - end),
        ("testbed_up (build + calibration)", sum(_bench_s(work, "testbed_up"))),
        ("aggregate, figures, verdicts, report, gate",
         sum(sum(_bench_s(work, r)) for r in ("aggregate", "figures", "verdicts", "report",
                                              "gate"))),
    ]  # fmt: skip


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
        parts = where_the_time_goes(work)  # before the rebuild rewrites the benchmarks
        shutil.rmtree(work / "reports")
        regen = snakemake(work, cfg)
        print(f"\nPipeline, {cfg.name}: {len(m['runs'])} runs, {time.strftime('%Y-%m-%d')}\n")
        print("| measure | value |")
        print("|---|---|")
        print(f"| configured traffic | {traffic:.0f} s |")
        print(f"| wall time of `snakemake --cores 4 all` | {full:.0f} s |")
        print(f"| wall ÷ traffic (goal ≤ 1.05) | {full / traffic:.3f} |")
        print(f"| report rebuilt from cached raw data (reports/ deleted; goal ≤ 30 s) "
              f"| {regen:.1f} s |")  # fmt: skip
        print("\n| where the wall time went | s |")
        print("|---|---|")
        for what, sec in parts:
            print(f"| {what} | {sec:.1f} |")
        if a.keep:
            print(f"\nkept: {work}")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
