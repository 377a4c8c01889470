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

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench import metric_catalog, metrics, record_load
from ccbench.instruments import host_cpu
from ccbench.instruments.cpu import RouterCpu
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.model import RESOLVE_TARGET_PCT, Matrix  # the target when a config names none
from ccbench.reasons import host_stalled_only, texts
from ccbench.run_record import RunRecord
from ccbench.spec import Topology, run_identity


def _num(x: Any) -> float:
    return math.nan if x is None else float(x)


def run_rows(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One run's row in the runs table and its flows' rows in the flows table."""
    s = record_load.load(run_dir)
    t = s.run_spec.topology
    run = {
        **_identity_columns(s),
        **_path_columns(t),
        **_throughput_columns(s),
        **_queue_columns(s),
        **_cpu_columns(s),
        **_probe_columns(s),
        **_convergence_loss_columns(s, t),
        **_status_columns(s),
        **_kernel_columns(s),
    }
    return run, _flow_rows(s)


def _identity_columns(s: RunRecord) -> dict[str, Any]:
    return {
        **run_identity(s),
        "valid": s.valid,
        "reasons": "; ".join(texts(s.reasons)),
        # each reason's class, in the reasons' order; and whether the host alone failed
        # the run (measured again, it may pass)
        "reason_codes": " ".join(r.code.value for r in s.reasons),
        "host_stalled": not s.valid and host_stalled_only(s.reasons),
        "attempt": s.attempt if s.attempt is not None else 1,
        "started_unix": s.started_unix,
        "n_flows": len(s.flows),
        "tracing": s.run_spec.tracing,
    }


def _path_columns(t: Topology) -> dict[str, Any]:
    return {
        "rate_mbit": t.rate_mbit,
        "rtt_ms": t.rtt_ms,
        "queue": f"{t.queue_kind} {t.queue_limit_pkts}",
        "loss": f"{t.loss_mode} {t.loss_rate:g}" if t.loss_mode != "none" else "",
    }


def _throughput_columns(s: RunRecord) -> dict[str, Any]:
    """Throughput, fairness, the senders' RTT and the losses."""
    retrans = [f.retransmits for f in s.flows]
    return {
        "throughput_sum_mbps": _num(s.throughput_sum_bps) / 1e6,
        "utilization_pct": _num(s.utilization_pct),
        "jain": _num(s.jain),
        "srtt_mean_ms": _num(s.srtt.mean_us if s.srtt else None) / 1e3,
        "srtt_p95_ms": _num(s.srtt.p95_us if s.srtt else None) / 1e3,
        "srtt_max_ms": _num(s.srtt.max_us if s.srtt else None) / 1e3,
        "retransmits": math.nan if None in retrans else float(sum(r or 0 for r in retrans)),
        "drops_pkts": _num(s.bottleneck.drops),
    }


def _queue_columns(s: RunRecord) -> dict[str, Any]:
    """The bottleneck queue, the delay element and the router's CPU while the flows ran
    (NaN for runs made without sampling)."""
    q, cpu = QdiscSampler.part_of(s), RouterCpu.part_of(s)
    return {
        "queue_backlog_mean_pkts": _num(q.backlog_mean_pkts if q else None),
        "queue_backlog_p95_pkts": _num(q.backlog_p95_pkts if q else None),
        "queue_full_pct": _num(q.full_share if q else None) * 100,
        "queue_drop_intervals": _num(q.drop_intervals if q else None),
        "queue_drop_burst_max": _num(q.drop_burst_max if q else None),
        "queue_interval_achieved_ms": _num(q.interval_achieved_s if q else None) * 1e3,
        "delay_late_share": _num(s.delay_element.late_share if s.delay_element else None),
        "router_busy_pct": _num(cpu.busy_pct if cpu else None),
        "router_steal_pct": _num(cpu.steal_pct if cpu else None),
    }


def _cpu_columns(s: RunRecord) -> dict[str, Any]:
    """The senders' and receivers' CPU and service demand (summary `host_cpu`; NaN for
    runs without it), each with the source its figure is (proc_stat, kern_cp_time,
    iperf3_process), and the busiest single CPU of each role's hosts."""
    cpu = host_cpu.of(s)
    out: dict[str, Any] = {}
    for name in ("sender", "receiver"):
        role = getattr(cpu, name) if cpu else None
        out[f"{name}_cpu_pct"] = _num(role.cpu_pct if role else None)
        out[f"{name}_sd_us_per_kb"] = _num(role.sd_us_per_kb if role else None)
        out[f"{name}_busiest_cpu_pct"] = _num(role.busiest_cpu_pct if role else None)
        out[f"{name}_cpu_source"] = (role.source if role else None) or ""
    return out


def _probe_columns(s: RunRecord) -> dict[str, Any]:
    p = s.probe
    return {
        "probe_rtt_p50_ms": _num(p.rtt_p50_us if p else None) / 1e3,
        "probe_rtt_p95_ms": _num(p.rtt_p95_us if p else None) / 1e3,
        "probe_rtt_p99_ms": _num(p.rtt_p99_us if p else None) / 1e3,
    }


def _convergence_loss_columns(s: RunRecord, t: Topology) -> dict[str, Any]:
    """Convergence time, and the configured loss with the Mathis prediction for it."""
    return {
        "convergence_s": _num(s.convergence_s),
        "loss_rate": t.loss_rate if t.loss_mode != "none" else 0.0,
        "mathis_mbps_per_flow": _num(s.mathis.mbps_per_flow if s.mathis else None),
        "mathis_ratio": _num(s.mathis.ratio if s.mathis else None),
    }


def _status_columns(s: RunRecord) -> dict[str, Any]:
    return {
        "skipped": s.skipped,
        # valid / invalid (ran, failed a check) / not run (the testbed lacks what it
        # asks, or could not be calibrated: see not_run_reason) / waiting (for the
        # kernel its variant needs: not run yet, and run once the senders boot it)
        "status": s.status,
        "not_run_reason": "; ".join(r.removeprefix("skipped: ") for r in texts(s.reasons))
        if s.skipped
        else "",
    }


def _kernel_columns(s: RunRecord) -> dict[str, Any]:
    ksenders = sorted(s.kernel.senders.items()) if s.kernel else []
    return {
        # The kernel the variant waits for (runs recorded as waiting), and every sender's
        # kernel identity as the run read it ("s1: 6.1.0-18-amd64 #1 SMP ...").
        "waiting_kernel": s.waiting.label if s.waiting else "",
        "kernel": "; ".join(f"{n}: {k.identity}" for n, k in ksenders),
        "kernel_short": " / ".join(dict.fromkeys(k.short for _, k in ksenders)),
        # the regex this run's sender kernels were judged on (the config's may change
        # between reboots; a finished run keeps the one it was measured under)
        "kernel_match": (s.kernel.match if s.kernel else None) or "",
    }


def _flow_rows(s: RunRecord) -> list[dict[str, Any]]:
    return [
        {
            **run_identity(s),
            "valid": s.valid,
            "flow": f.flow,
            "pair": f.pair,
            "cc_requested": f.cc_requested,
            "cc_used": f.cc_used,
            "throughput_mbps": _num(f.throughput_bps) / 1e6,
            "retransmits": _num(f.retransmits),
            "srtt_mean_ms": _num(f.srtt_mean_us) / 1e3,  # iperf3's per-interval samples
            "srtt_max_ms": _num(f.srtt_max_us) / 1e3,
            "min_rtt_ms": _num(f.min_rtt_us) / 1e3,  # the kernel's minimum
        }
        for f in s.flows
    ]


def summarize_groups(runs: pd.DataFrame, flows: pd.DataFrame, baseline: str,
                     variant_order: list[str],
                     resolve_target_pct: float = RESOLVE_TARGET_PCT) -> pd.DataFrame:  # fmt: skip
    """Per scenario x variant: means with CIs, and per metric the delta vs the baseline
    with its CI (`_delta_ci95_pct`, t*s/sqrt(n) of the paired deltas, is also the
    smallest change these repetitions resolve: a true change smaller than it leaves the CI
    straddling 0), `_delta_reps_to_resolve` how many paired
    repetitions would bring that half-width below `resolve_target_pct`."""
    rows = []
    # `tracing: separate`: the traced twins' numbers are the observer table's only
    runs = runs[runs["tracing"] != "traced"] if "tracing" in runs else runs
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
            for col in metric_catalog.KEYS:
                ci = metrics.mean_ci(grp[col].dropna().tolist())
                row[f"{col}_mean"] = ci.mean
                row[f"{col}_ci95"] = ci.half_width
                delta = _delta(base, grp, col) if var != baseline else None
                row[f"{col}_delta_pct"] = delta.mean_pct if delta else math.nan
                row[f"{col}_delta_ci95_pct"] = delta.half_width_pct if delta else math.nan
                row[f"{col}_delta_paired"] = delta.paired if delta else None
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


OBSERVED = ("throughput_sum_mbps", "utilization_pct", "jain")


def observer_effect(runs: pd.DataFrame, variant_order: list[str]) -> pd.DataFrame:
    """`tracing: separate`: per scenario x variant, the traced runs against the untraced
    ones of the same repetitions (paired; both valid): what tracing every packet cost."""
    if "tracing" not in runs or not (runs["tracing"] == "traced").any():
        return pd.DataFrame()
    valid = runs[runs["valid"]]
    rows = []
    for scen in runs["scenario"].drop_duplicates():
        for var in variant_order:
            g = valid[(valid["scenario"] == scen) & (valid["variant"] == var)]
            traced, untraced = g[g["tracing"] == "traced"], g[g["tracing"] == "untraced"]
            if traced.empty and untraced.empty:
                continue
            row: dict[str, Any] = {
                "scenario": scen,
                "variant": var,
                "n_traced": len(traced),
                "n_untraced": len(untraced),
            }
            for col in OBSERVED:
                d = _delta(untraced, traced, col)
                row[f"{col}_untraced_mean"] = metrics.mean_ci(untraced[col].dropna().tolist()).mean
                row[f"{col}_traced_mean"] = metrics.mean_ci(traced[col].dropna().tolist()).mean
                row[f"{col}_delta_pct"] = d.mean_pct if d else math.nan
                row[f"{col}_delta_ci95_pct"] = d.half_width_pct if d else math.nan
                row[f"{col}_delta_paired"] = d.paired if d else None
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
    observer = observer_effect(runs_df, matrix.variant_labels)
    if not observer.empty:
        tables["observer"] = observer
    for suffix in (".csv", ".parquet"):  # one a config with `tracing: separate` left
        (out / f"observer{suffix}").unlink(missing_ok=True)
    for name, df in tables.items():
        df.to_csv(out / f"{name}.csv", index=False)
        df.to_parquet(out / f"{name}.parquet", index=False)
    return tables
