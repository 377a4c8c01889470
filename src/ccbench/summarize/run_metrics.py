"""Per-run metrics computed from the time series when a run is parsed: srtt statistics,
convergence time, the Mathis prediction, the RTT-excess share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ccbench import metrics, validity
from ccbench.metrics import JAIN_CONVERGED, JAIN_WINDOW_S
from ccbench.spec import RunSpec

if TYPE_CHECKING:
    import pandas as pd


def rtt_excess(spec: RunSpec, df: Any, probe: dict[str, Any] | None) -> dict[str, Any] | None:
    """Share of RTT samples (sender srtt from ss/siftr, the probe record's) above what
    the configured path can give; None for AQM queues (no fixed bound) or no samples."""
    from ccbench.timeseries import SENDER_SOURCES

    bound = spec.topology.rtt_bound_ms
    if bound is None:
        return None
    timed: dict[str, list[tuple[float, float]]] = {}
    if len(df):
        rows = df[df["source"].isin(SENDER_SOURCES)].dropna(subset=["rtt_us"])
        for flow, g in rows.groupby("flow"):
            timed[f"flow {flow}"] = list(zip(g["t_s"], g["rtt_us"], strict=True))
    untimed = list((probe or {}).get("samples_us") or [])
    ex = metrics.rtt_excess(bound + validity.HIDDEN_QUEUE_MS, timed, untimed)
    return ex if ex["samples"] else None


def run_metrics(
    spec: RunSpec, throughput_sum_bps: float | None, df: pd.DataFrame | None
) -> dict[str, Any]:
    """summary.json's `srtt`, `convergence_s` and `mathis` of a run of `spec` from its
    throughput sum and its time series `df` (timeseries.parquet's rows; None: the run
    has none). The one computation of them: parse stores them, and ccbench.upgrade
    calls this for a summary.json written before they existed.

    - srtt: mean, p95 and max of the sender's RTT samples from the finest source
      (timeseries.finest_source); None without samples.
    - convergence_s: seconds from the last flow's start until Jain's index over iperf3
      intervals (timeseries.jain_series) reaches JAIN_CONVERGED and stays there for
      JAIN_WINDOW_S; None with one flow, or never.
    - mathis: the Mathis et al. throughput per flow for the configured MSS, RTT and
      loss, and the measured sum over it times the flows; None without configured loss.
    """
    from ccbench import timeseries

    srtt = conv = None
    if df is not None:
        src = timeseries.finest_source(df)
        rtts = df.loc[(df["source"] == src) & df["rtt_us"].notna(), "rtt_us"].tolist()
        if rtts:
            st = metrics.srtt_stats(rtts)
            srtt = {"source": src, "samples": len(rtts), "mean_us": st.mean_us,
                    "p95_us": st.p95_us, "max_us": st.max_us}  # fmt: skip
        if len(spec.flows) > 1:
            times, jains = timeseries.jain_series(df, spec.flows, spec.interval_s)
            if times:
                conv = metrics.convergence_time_s(times, jains, JAIN_CONVERGED, JAIN_WINDOW_S)
    t = spec.topology
    mathis = None
    if t.has_loss and t.rtt_ms > 0:
        per_flow = metrics.mathis_bps(t.mss_bytes, t.rtt_ms / 1e3, t.loss_rate) / 1e6
        total = throughput_sum_bps
        ratio = None if total is None else float(total) / 1e6 / (per_flow * len(spec.flows))
        mathis = {"mbps_per_flow": per_flow, "ratio": ratio}
    return {"srtt": srtt, "convergence_s": conv, "mathis": mathis}
