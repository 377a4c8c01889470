"""Results written by earlier versions of ccbench, brought forward in one step each.

Every reader of a file that outlives a version (matrix.json, summary.json, the tables)
passes it through the function here for its kind first, and from then on sees only
the current layout; no other module knows what older versions wrote. Raw files are
not upgraded: a run's raw/ is what its tools wrote, and a raw file a run made before
ccbench recorded it is simply absent (summarize reads it as not recorded). The one raw
file ccbench itself writes in a layout that changed, meta.json, is read forward by
ccbench.runmeta (its `upgrade`).

Standard library only (ccbench.model reads matrices before anything heavy is loaded);
what needs more imports it where it is used.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

# --- matrix.json --------------------------------------------------------------------
# The resolution (%) asked of a delta when the config names none: the schema's default
# of resolve_target_pct, and what a matrix written before the key means.
RESOLVE_TARGET_PCT = 2.0
# Top-level keys of matrix.json added after results existed, with what their absence
# meant.
MATRIX_DEFAULTS: dict[str, Any] = {
    "resolve_target_pct": RESOLVE_TARGET_PCT,
    "expectations": [],
    "references": [],
}


def matrix(d: Any) -> Any:
    """A matrix.json's content in the current layout (a copy; not a mapping: as is, for
    the model to refuse). Run specs missing sampling keys added since are read with
    their defaults by spec.RunSpec.from_dict, which leaves the run ids unchanged."""
    if not isinstance(d, dict):
        return d
    return {**copy.deepcopy(MATRIX_DEFAULTS), **d}


# --- run specs (raw/spec.json, matrix.json runs) --------------------------------------
# A spec's fields added since read as the defaults runs were made with before, and keep
# the run's id: the rule is the id's own (spec.FIELDS_ADDED, RunSpec.run_id).


# --- summary.json -------------------------------------------------------------------
SUMMARY_SCHEMA = "ccbench.summary/2"


def summary(d: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """A summary.json's content in the current layout (ccbench.record.RunRecord).

    Version 1 (`"schema": "ccbench.summary/1"`, or no schema) summaries may lack what
    later versions computed when parsing: srtt, convergence_s and mathis (computed here,
    the same way, from the run's timeseries.parquet), rtt_excess (not recorded), and
    `recorded` (copied from raw/ as those versions read it)."""
    d = dict(d)
    if d.get("schema") == SUMMARY_SCHEMA:
        return d
    if not all(k in d for k in ("srtt", "convergence_s", "mathis")):
        import pandas as pd

        from ccbench.spec import RunSpec
        from ccbench.summarize.run_metrics import run_metrics

        ts = run_dir / "timeseries.parquet"
        df = pd.read_parquet(ts) if ts.exists() else None
        d.update(run_metrics(RunSpec.from_dict(d["spec"]), d.get("throughput_sum_bps"), df))
    if "recorded" not in d and not d.get("skipped"):
        from ccbench.summarize.runfiles import recorded

        d["recorded"] = recorded(run_dir / "raw")
    probe = d.get("probe")
    if isinstance(probe, dict) and probe.get("tool") == "ping" and not probe.get("what"):
        probe["what"] = "ping (ICMP echo)"  # summaries before `what` named only the tool
    if isinstance(probe, dict) and not isinstance(probe.get("samples_us"), list):
        from ccbench import probes

        try:
            p = probes.read(run_dir / "raw")
        except ValueError:
            p = None
        probe["samples_us"] = list(p.rtts_us) if p else []
    d.setdefault("rtt_excess", None)
    d["schema"] = SUMMARY_SCHEMA
    return d


# --- the runs table (tables/runs.csv, .parquet) ---------------------------------------
# Columns a runs table made before they existed lacks: read as "not measured" (NaN) or
# "not skipped", so an older results set still renders.
RUN_COLUMNS: dict[str, Any] = {
    "skipped": False,
    "probe_rtt_p50_ms": math.nan,
    "probe_rtt_p95_ms": math.nan,
    "probe_rtt_p99_ms": math.nan,
    "convergence_s": math.nan,
    "loss_rate": math.nan,
    "mathis_mbps_per_flow": math.nan,
    "mathis_ratio": math.nan,
    "queue_backlog_mean_pkts": math.nan,
    "queue_backlog_p95_pkts": math.nan,
    "queue_full_pct": math.nan,
    "queue_drop_intervals": math.nan,
    "queue_drop_burst_max": math.nan,
    "queue_interval_achieved_ms": math.nan,
    "status": "",
    "waiting_kernel": "",
    "kernel": "",
    "kernel_short": "",
    "tracing": "inline",
}
# Text columns: a CSV reads their empty cells as NaN.
TEXT_COLUMNS = ("status", "waiting_kernel", "kernel", "kernel_short", "tracing")


def runs_table(runs: Any) -> tuple[Any, frozenset[str]]:
    """A runs table (pandas) in the current layout, and the columns it lacked."""
    absent = frozenset(c for c in RUN_COLUMNS if c not in runs.columns)
    for col in absent:
        runs[col] = RUN_COLUMNS[col]
    for col in TEXT_COLUMNS:
        runs[col] = runs[col].fillna("").astype(str)
    return runs, absent


# Metrics of the summary table added after results existed (their columns read as
# not measured).
SUMMARY_METRICS_ADDED = ("probe_rtt_p50_ms", "probe_rtt_p95_ms", "convergence_s",
                         "mathis_ratio", "queue_backlog_mean_pkts", "queue_full_pct")  # fmt: skip


def summary_table(summary: Any) -> Any:
    """A summary table (pandas) in the current layout."""
    if "kernel_short" in summary.columns:
        summary["kernel_short"] = summary["kernel_short"].fillna("").astype(str)
    for m in SUMMARY_METRICS_ADDED:
        for suffix in ("mean", "ci95", "delta_pct", "delta_ci95_pct", "delta_paired"):
            if f"{m}_{suffix}" not in summary.columns:
                summary[f"{m}_{suffix}"] = None if suffix == "delta_paired" else math.nan
    return summary
