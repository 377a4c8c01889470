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
import re
from collections.abc import Callable
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
SUMMARY_SCHEMA = "ccbench.summary/4"
# Version 4 typed each reason: {code, text, evidence} (ccbench.reasons.Reason) where
# earlier versions wrote the words alone. An old reason keeps its words; its code is the
# first class in OLD_REASONS whose pattern its words match (the words every version
# wrote for that class), else "unclassified"; its evidence is empty (the numbers were
# never recorded apart from the words).
OLD_REASONS: tuple[tuple[str, str], ...] = (
    ("run_failed", r"^run failed: "),
    ("waiting", r"^skipped: waiting for "),
    ("skipped", r"^skipped: "),
    ("flow_no_output", r"^flow \d+: no iperf3 output"),
    ("flow_error", r"^flow \d+: iperf3 (error|exited)"),
    ("cc_mismatch", r"^flow \d+: (CC used |iperf3 did not report the CC)|^flow \d+: .* ran CC "),
    ("stack_mismatch", r"^flow \d+: .* ran on TCP stack |^[\w.-]+: stack [\w.-]+: "),
    ("stack_unverified", r"^flow \d+: (sockstat on .* lists no connection|no sockstat sample)"),
    ("short_run", r"^flow \d+: ran [\d.]+s of "),
    ("no_bytes", r"^flow \d+: no bytes received$"),
    ("hidden_queue", r"packets were held outside the bottleneck"),
    ("delay_not_applied", r"\(delay not applied\)$"),
    ("rwnd_limited", r"receive buffer \(.*\), not the CC$"),
    ("calibration", r"^(no calibration of the testbed recorded$|calibration: )"),
    ("bottleneck_config", r"^rt1's (queue was|shaper ran at) "),
    ("delay_late", r"^delay element late: "),
    ("delay_element", r"^delay element: "),
    ("rtt_excess", r"% of RTT samples above the .*: the host stalled$"),
    ("steal", r"^router CPU: .* stolen by the hypervisor"),
    ("trace_lost", r": the kernel's trace buffer dropped \d+ events"),
    ("probe_short", r"^probe: .* sampled only \d+% of the traffic"),
    ("probe_failed", r"^probe: "),
    ("loss_outside", r"^\d+ packets were lost outside the bottleneck"),
    ("loss_uncounted", r"retransmissions have no counted drop behind them"),
    ("kernel_mismatch", r" runs kernel '.*', variant '.*' needs /"),
    ("host_setting_unread", r"^\S+: (host settings not read|firewall not read before)"),
    ("host_setting", r"^\S+: (MTU|offload \S+|sysctl \S+|firewall \S+|loader \S+) asked[ ,]"),
    ("super_packets", r"made super-packets, so "),
    ("plausibility", r"^flow \d+: (negative |receiver got \d+ bytes, more than|\d+ bytes "
                     r"received, more than|throughput .* above the )|^utilization .* above the "
                     r"|^bottleneck \w+: counters went backwards|^flows received \d+ bytes, "
                     r"more than|^\S+: \S+: .* went down$"),
    ("file_damaged", r"^[\w.-]+\.(json|txt|log|csv|pcapng|gz|xz)(/[\w.-]+)?: "),
)  # fmt: skip
UNCLASSIFIED = "unclassified"
# Version 3 named each flow's RTT fields by their source: iperf3's smoothed-RTT
# statistics became srtt_*; min_rtt_us is the kernel's own minimum, which earlier
# versions did not read (null: not recorded).
FLOW_RTT_RENAMED = {"rtt_min_us": "srtt_min_us", "rtt_mean_us": "srtt_mean_us",
                    "rtt_max_us": "srtt_max_us"}  # fmt: skip


# What a version-1 summary lacks that only its run's files give back: the summary
# (with the run directory) -> it with srtt, convergence_s, mathis, `recorded` and the
# probe's samples filled in. ccbench.record_load supplies it (it reads the run's time
# series and raw files); this module stays standard library only.
Recompute = Callable[[dict[str, Any], Path], dict[str, Any]]


def summary(d: dict[str, Any], run_dir: Path, recompute: Recompute | None = None) -> dict[str, Any]:
    """A summary.json's content in the current layout (ccbench.run_record.RunRecord).

    Version 1 (`"schema": "ccbench.summary/1"`, or no schema) summaries may lack what
    later versions computed when parsing: srtt, convergence_s and mathis (computed by
    `recompute`, the same way, from the run's timeseries.parquet), rtt_excess (not
    recorded), and `recorded` (copied from raw/ as those versions read it). Versions 1
    and 2 name iperf3's RTT statistics rtt_* (FLOW_RTT_RENAMED). Versions 1 to 3 wrote
    each reason as its words alone (OLD_REASONS). ValueError for a version 1 summary
    without `recompute`."""
    d = dict(d)
    if d.get("schema") == SUMMARY_SCHEMA:
        return d
    if d.get("schema") != "ccbench.summary/3":
        d = _summary_v3(d, run_dir, recompute)
    if isinstance(d.get("reasons"), list):
        d["reasons"] = [_reason_v4(r) for r in d["reasons"]]
    d["schema"] = SUMMARY_SCHEMA
    return d


def _reason_v4(r: Any) -> Any:
    """An old reason (its words) as a typed one (not a string: as is, for the model to
    refuse)."""
    if not isinstance(r, str):
        return r
    code = next((c for c, pattern in OLD_REASONS if re.search(pattern, r)), UNCLASSIFIED)
    return {"code": code, "text": r, "evidence": {}}


def _summary_v3(d: dict[str, Any], run_dir: Path, recompute: Recompute | None) -> dict[str, Any]:
    if isinstance(d.get("flows"), list):
        d["flows"] = [_flow_v3(f) for f in d["flows"]]
    if d.get("schema") == "ccbench.summary/2":
        return d
    if recompute is None:
        raise ValueError("a version 1 summary needs its run's files read (ccbench.record_load)")
    d = recompute(d, run_dir)
    probe = d.get("probe")
    if isinstance(probe, dict) and probe.get("tool") == "ping" and not probe.get("what"):
        probe["what"] = "ping (ICMP echo)"  # summaries before `what` named only the tool
    d.setdefault("rtt_excess", None)
    return d


def _flow_v3(f: Any) -> Any:
    if not isinstance(f, dict):
        return f
    f = {FLOW_RTT_RENAMED.get(k, k): v for k, v in f.items()}
    f.setdefault("min_rtt_us", None)
    f.setdefault("min_rtt_source", None)
    return f


# --- a run's time series (timeseries.parquet) ----------------------------------------
# Files written before the sender's writes had their own column held them in
# `throughput_bps` (rows of source "iperf3"), beside what crossed the wire (the
# receiver's intervals, ss's delivery rate). The names are timeseries.WRITTEN and
# timeseries.WRITTEN_COLUMN (tests/unit/test_series_columns.py holds them equal).
WRITTEN_SOURCE = "iperf3"
WRITTEN_COLUMN = "app_written_bps"


def timeseries(df: Any) -> Any:
    """A run's time-series rows (a DataFrame read from its timeseries.parquet) in the
    current layout: in a file without WRITTEN_COLUMN, the iperf3 rows' throughput_bps
    (what the application wrote) moves to it and throughput_bps holds only what crossed
    the wire. A frame already current, or read without throughput_bps, is as is."""
    if WRITTEN_COLUMN in df.columns or "throughput_bps" not in df.columns:
        return df
    written = df["source"] == WRITTEN_SOURCE
    return df.assign(**{WRITTEN_COLUMN: df["throughput_bps"].where(written),
                        "throughput_bps": df["throughput_bps"].mask(written)})  # fmt: skip


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
    "reason_codes": "",  # tables from before the codes were stored: words only
    "host_stalled": False,
}
# Text columns: a CSV reads their empty cells as NaN.
TEXT_COLUMNS = ("status", "waiting_kernel", "kernel", "kernel_short", "tracing", "reason_codes")


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
