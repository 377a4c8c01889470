"""All runs' summaries -> tidy tables with confidence intervals and deltas.

Tables (CSV and Parquet, units in column names):
- runs:    one row per run (valid or not, with reasons), in the order they ran; a run
           that could not run (its testbed lacks what it asks, or could not be
           calibrated) has status "not run" and its not_run_reason.
- flows:   one row per flow per run.
- summary: per scenario x variant (n_valid, n_invalid, n_not_run) over VALID
           repetitions only: mean and 95 % CI
           half-width (Student t) of each metric, and the % delta vs the baseline
           variant (paired by repetition where both are valid) with its CI.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench import metrics
from ccbench.model import RESOLVE_TARGET_PCT, Matrix  # the target when a config names none
from ccbench.summary import run_metrics

METRICS = {
    # column in runs table -> label used in the summary table
    "throughput_sum_mbps": "throughput sum",
    "utilization_pct": "utilization",
    "jain": "Jain",
    "srtt_mean_ms": "srtt mean",
    "srtt_p95_ms": "srtt p95",
    "srtt_max_ms": "srtt max",
    "retransmits": "retransmits",
    "drops_pkts": "bottleneck drops",
    "queue_backlog_mean_pkts": "queue backlog mean",
    "queue_full_pct": "time queue full",
    "probe_rtt_p50_ms": "RTT under load p50 (ping)",
    "probe_rtt_p95_ms": "RTT under load p95 (ping)",
    "convergence_s": "convergence time",
    "mathis_ratio": "throughput / Mathis",
}


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def run_rows(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's row in the runs table and its flows' rows in the flows table."""
    s = _load_summary(run_dir)
    tb = s["spec"]["topology"]
    run = {
        **_identity_columns(s),
        **_path_columns(tb),
        **_throughput_columns(s),
        **_queue_columns(s),
        **_probe_columns(s),
        **_convergence_loss_columns(s, tb),
        **_status_columns(s),
        **_kernel_columns(s),
    }
    return run, _flow_rows(s)


def _load_summary(run_dir: Path) -> dict[str, Any]:
    s: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    if not all(k in s for k in ("srtt", "convergence_s", "mathis")):
        # A summary.json from before `ccbench parse` stored them: the same computation.
        ts_path = run_dir / "timeseries.parquet"
        s.update(run_metrics(s, pd.read_parquet(ts_path) if ts_path.exists() else None))
    return s


def _identity_columns(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": s["run_id"],
        "scenario": s["scenario"],
        "variant": s["variant"],
        "repetition": s["repetition"],
        "valid": bool(s["valid"]),
        "reasons": "; ".join(s["reasons"]),
        "attempt": s.get("attempt", 1),
        "started_unix": s.get("started_unix"),
        "n_flows": len(s["flows"]),
    }


def _path_columns(tb: dict[str, Any]) -> dict[str, Any]:
    return {
        "rate_mbit": tb["rate_mbit"],
        "rtt_ms": tb["rtt_ms"],
        "queue": f"{tb['queue_kind']} {tb['queue_limit_pkts']}",
        "loss": f"{tb['loss_mode']} {tb['loss_rate']:g}" if tb["loss_mode"] != "none" else "",
    }


def _throughput_columns(s: dict[str, Any]) -> dict[str, Any]:
    """Throughput, fairness, the senders' RTT and the losses."""
    retrans = [f["retransmits"] for f in s["flows"]]
    srtt = s["srtt"] or {}
    return {
        "throughput_sum_mbps": _num(s["throughput_sum_bps"]) / 1e6,
        "utilization_pct": _num(s["utilization_pct"]),
        "jain": _num(s["jain"]),
        "srtt_mean_ms": _num(srtt.get("mean_us")) / 1e3,
        "srtt_p95_ms": _num(srtt.get("p95_us")) / 1e3,
        "srtt_max_ms": _num(srtt.get("max_us")) / 1e3,
        "retransmits": math.nan if None in retrans else float(sum(retrans)),
        "drops_pkts": _num((s.get("bottleneck") or {}).get("drops")),
    }


def _queue_columns(s: dict[str, Any]) -> dict[str, Any]:
    """The bottleneck queue, the delay element and the router's CPU while the flows ran."""
    queue = s.get("queue") or {}
    return {
        # The bottleneck queue sampled while the flows ran (summary `queue`; NaN for
        # runs made without sampling).
        "queue_backlog_mean_pkts": _num(queue.get("backlog_mean_pkts")),
        "queue_backlog_p95_pkts": _num(queue.get("backlog_p95_pkts")),
        "queue_full_pct": _num(queue.get("full_share")) * 100,
        "queue_drop_intervals": _num(queue.get("drop_intervals")),
        "queue_drop_burst_max": _num(queue.get("drop_burst_max")),
        "queue_interval_achieved_ms": _num(queue.get("interval_achieved_s")) * 1e3,
        "delay_late_share": _num((s.get("delay_element") or {}).get("late_share")),
        "router_busy_pct": _num((s.get("router_cpu") or {}).get("busy_pct")),
        "router_steal_pct": _num((s.get("router_cpu") or {}).get("steal_pct")),
    }


def _probe_columns(s: dict[str, Any]) -> dict[str, Any]:
    probe = s.get("probe") or {}
    return {
        "probe_rtt_p50_ms": _num(probe.get("rtt_p50_us")) / 1e3,
        "probe_rtt_p95_ms": _num(probe.get("rtt_p95_us")) / 1e3,
        "probe_rtt_p99_ms": _num(probe.get("rtt_p99_us")) / 1e3,
    }


def _convergence_loss_columns(s: dict[str, Any], tb: dict[str, Any]) -> dict[str, Any]:
    """Convergence time, and the configured loss with the Mathis prediction for it."""
    mathis = s["mathis"] or {}
    return {
        "convergence_s": _num(s["convergence_s"]),
        "loss_rate": tb["loss_rate"] if tb["loss_mode"] != "none" else 0.0,
        "mathis_mbps_per_flow": _num(mathis.get("mbps_per_flow")),
        "mathis_ratio": _num(mathis.get("ratio")),
    }


def _status_columns(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "skipped": bool(s.get("skipped", False)),
        # valid / invalid (ran, failed a check) / not run (the testbed lacks what it
        # asks, or could not be calibrated: see not_run_reason) / waiting (for the
        # kernel its variant needs: not run yet, and run once the senders boot it)
        "status": "waiting" if s.get("waiting") else _status(s),
        "not_run_reason": "; ".join(r.removeprefix("skipped: ") for r in s["reasons"])
        if s.get("skipped")
        else "",
    }


def _kernel_columns(s: dict[str, Any]) -> dict[str, Any]:
    ksenders = sorted(((s.get("kernel") or {}).get("senders") or {}).items())
    return {
        # The kernel the variant waits for (runs recorded as waiting), and every sender's
        # kernel identity as the run read it ("s1: 6.1.0-18-amd64 #1 SMP ...").
        "waiting_kernel": (s.get("waiting") or {}).get("label", ""),
        "kernel": "; ".join(f"{n}: {k['identity']}" for n, k in ksenders),
        "kernel_short": " / ".join(dict.fromkeys(k["short"] for _, k in ksenders)),
        # the regex this run's sender kernels were judged on (the config's may change
        # between reboots; a finished run keeps the one it was measured under)
        "kernel_match": str((s.get("kernel") or {}).get("match") or ""),
    }


def _flow_rows(s: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "run_id": s["run_id"],
            "scenario": s["scenario"],
            "variant": s["variant"],
            "repetition": s["repetition"],
            "valid": bool(s["valid"]),
            "flow": f["flow"],
            "pair": f["pair"],
            "cc_requested": f["cc_requested"],
            "cc_used": f["cc_used"],
            "throughput_mbps": _num(f["throughput_bps"]) / 1e6,
            "retransmits": _num(f["retransmits"]),
            "rtt_mean_ms": _num(f["rtt_mean_us"]) / 1e3,
            "rtt_max_ms": _num(f["rtt_max_us"]) / 1e3,
        }
        for f in s["flows"]
    ]


def _status(s: dict[str, Any]) -> str:
    return "not run" if s.get("skipped") else "valid" if s["valid"] else "invalid"


def summarize_groups(runs: pd.DataFrame, flows: pd.DataFrame, baseline: str,
                     variant_order: list[str],
                     resolve_target_pct: float = RESOLVE_TARGET_PCT) -> pd.DataFrame:  # fmt: skip
    """Per scenario x variant: means with CIs, and per metric the delta vs the baseline
    with its CI; `_delta_mde_pct` is the smallest change these repetitions resolve (the
    delta's 95 % CI half-width, t*s/sqrt(n) of the paired deltas: a true change smaller
    than it leaves the CI straddling 0), `_delta_reps_to_resolve` how many paired
    repetitions would bring that half-width below `resolve_target_pct`."""
    rows = []
    valid = runs[runs["valid"]]
    for scen in runs["scenario"].drop_duplicates():
        for var in variant_order:
            grp_all = runs[(runs["scenario"] == scen) & (runs["variant"] == var)]
            if grp_all.empty:
                continue
            grp = valid[(valid["scenario"] == scen) & (valid["variant"] == var)]
            base = valid[(valid["scenario"] == scen) & (valid["variant"] == baseline)]
            row: dict[str, Any] = {
                "scenario": scen,
                "variant": var,
                "baseline": var == baseline,
                "n_valid": len(grp),
                # runs that ran and failed a check; runs not run are counted apart
                "n_invalid": int((~grp_all["valid"] & ~grp_all["skipped"]).sum()),
                "n_not_run": int(grp_all["skipped"].sum()),
                # of those, waiting for the kernel the variant needs
                "n_waiting": int((grp_all["status"] == "waiting").sum()),
                "kernel_short": " / ".join(dict.fromkeys(k for k in grp["kernel_short"] if k)),
            }
            for col in METRICS:
                ci = metrics.mean_ci(grp[col].dropna().tolist())
                row[f"{col}_mean"] = ci.mean
                row[f"{col}_ci95"] = ci.half_width
                delta = _delta(base, grp, col) if var != baseline else None
                row[f"{col}_delta_pct"] = delta.mean_pct if delta else math.nan
                row[f"{col}_delta_ci95_pct"] = delta.half_width_pct if delta else math.nan
                row[f"{col}_delta_paired"] = delta.paired if delta else None
                row[f"{col}_delta_mde_pct"] = delta.half_width_pct if delta else math.nan
                reps = (
                    metrics.repetitions_to_resolve(delta.deltas_pct, resolve_target_pct)
                    if delta and delta.paired
                    else None
                )
                row[f"{col}_delta_reps_to_resolve"] = math.nan if reps is None else reps
            fl = flows[(flows["run_id"].isin(grp["run_id"]))]
            for k, g in fl.groupby("flow"):
                ci = metrics.mean_ci(g["throughput_mbps"].dropna().tolist())
                row[f"flow{k}_throughput_mbps_mean"] = ci.mean
                row[f"flow{k}_throughput_mbps_ci95"] = ci.half_width
                row[f"flow{k}_cc"] = ",".join(sorted(set(g["cc_requested"])))
            rows.append(row)
    return pd.DataFrame(rows)


def _delta(base: pd.DataFrame, var: pd.DataFrame, col: str) -> metrics.DeltaPct | None:
    b = base.set_index("repetition")[col].dropna()
    v = var.set_index("repetition")[col].dropna()
    return metrics.delta_by_repetition(b.to_dict(), v.to_dict())


def aggregate(run_dirs: list[Path], matrix: Matrix, out: Path) -> dict[str, pd.DataFrame]:
    runs, flows = [], []
    for d in run_dirs:
        r, f = run_rows(d)
        runs.append(r)
        flows += f
    runs_df = pd.DataFrame(runs).sort_values("started_unix", kind="stable").reset_index(drop=True)
    runs_df.insert(0, "order", range(1, len(runs_df) + 1))
    flows_df = pd.DataFrame(flows)
    target = float(matrix.resolve_target_pct)
    summary_df = summarize_groups(runs_df, flows_df, matrix.baseline, matrix.variant_labels, target)
    out.mkdir(parents=True, exist_ok=True)
    tables = {"runs": runs_df, "flows": flows_df, "summary": summary_df}
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False)
        df.to_parquet(out / f"{name}.parquet", index=False)
    return tables
