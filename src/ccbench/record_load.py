"""Reading a run's record: its summary.json brought forward (ccbench.upgrade) and
checked against the record's model (ccbench.record, which is data only).

A version 1 summary lacks what only its run's files give back; this module reads them
(the time series for srtt, convergence and Mathis; raw/ for `recorded` and the probe's
samples), the way the parse that writes summaries now computes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccbench import jsonio, layout, upgrade
from ccbench.errors import CcbenchError
from ccbench.run_record import RunRecord
from ccbench.spec import RunSpec
from ccbench.summarize.probe import read_probe
from ccbench.summarize.run_metrics import run_metrics
from ccbench.summarize.runfiles import recorded


def load(run_dir: Path) -> RunRecord:
    """A run directory's summary.json in the current layout; CcbenchError (one line)
    when it is missing or not a run record."""
    path = run_dir / layout.SUMMARY
    doc = jsonio.read_json(path)
    if not isinstance(doc, dict):
        raise CcbenchError(f"{path}: missing or not a JSON object")
    try:
        return RunRecord.from_dict(upgrade.summary(doc, run_dir, recompute))
    except ValueError as e:
        first = str(e).splitlines()[:3]
        raise CcbenchError(f"{path}: not a run record ({'; '.join(first)})") from None


def recompute(d: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A version 1 summary `d` with what it lacks computed from run `run_dir`'s files
    (upgrade.Recompute)."""
    d = dict(d)
    if not all(k in d for k in ("srtt", "convergence_s", "mathis")):
        import pandas as pd  # only old summaries need the time series

        ts = run_dir / layout.TIMESERIES
        df = upgrade.timeseries(pd.read_parquet(ts)) if ts.exists() else None
        d.update(run_metrics(RunSpec.from_dict(d["spec"]), d.get("throughput_sum_bps"), df))
    if "recorded" not in d and not d.get("skipped"):
        d["recorded"] = recorded(run_dir / layout.RAW)
    probe = d.get("probe")
    if isinstance(probe, dict) and not isinstance(probe.get("samples_us"), list):
        try:
            p = read_probe(run_dir / layout.RAW)
        except ValueError:
            p = None
        probe["samples_us"] = list(p.rtts_us) if p else []
    return d
