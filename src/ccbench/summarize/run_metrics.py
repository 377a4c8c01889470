"""Per-run metrics computed from the time series when a run is parsed: srtt statistics,
convergence time, the Mathis prediction, the RTT-excess share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ccbench import metrics, timeseries_stats
from ccbench.metrics import JAIN_CONVERGED, JAIN_WINDOW_S
from ccbench.spec import RunSpec
from ccbench.timeseries_stats import SeriesStats

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


def rtt_excess(
    st: SeriesStats, probe: dict[str, Any] | None,
    reread: Callable[[int], Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]],
) -> dict[str, Any] | None:  # fmt: skip
    """Share of RTT samples (sender srtt from ss/siftr, the probe record's) above what
    the configured path can give (metrics.rtt_excess, from the statistics gathered as
    the time series was written: `st`, with the bound it counted against,
    validity.excess_bound; `reread` gives a flow's samples again, see
    timeseries_stats); None without a bound (AQM queues) or without samples."""
    if st.bound is None:
        return None
    untimed = list((probe or {}).get("samples_us") or [])
    ex = timeseries_stats.rtt_excess(st, untimed, reread)
    return ex if ex["samples"] else None


def run_metrics(
    spec: RunSpec, throughput_sum_bps: float | None, df: pd.DataFrame | SeriesStats | None
) -> dict[str, Any]:
    """summary.json's `srtt`, `convergence_s` and `mathis` of a run of `spec` from its
    throughput sum and its time series `df` (timeseries.parquet's rows, or the
    statistics gathered while they were written; None: the run has none). The one
    computation of them: parse stores them, and ccbench.upgrade calls this for a
    summary.json written before they existed.

    - srtt: mean, p95 and max of the sender's RTT samples from the finest source
      (timeseries.finest_source); None without samples.
    - convergence_s: seconds from the last flow's start until Jain's index over iperf3
      intervals (timeseries.jain_series) reaches JAIN_CONVERGED and stays there for
      JAIN_WINDOW_S; None with one flow, or never.
    - mathis: the Mathis et al. throughput per flow for the configured MSS, RTT and
      loss, and the measured sum over it times the flows; None without configured loss.
    """
    from ccbench import timeseries
    from ccbench.instruments import SENDER_SOURCES

    srtt = conv = None
    if df is not None:
        st = df if isinstance(df, SeriesStats) else SeriesStats.from_frame(df, SENDER_SOURCES)
        got = st.srtt()
        if got is not None:
            src, n, s = got
            srtt = {"source": src, "samples": n, "mean_us": s.mean_us,
                    "p95_us": s.p95_us, "max_us": s.max_us}  # fmt: skip
        if len(spec.flows) > 1:
            ip = timeseries.iperf3_frame(st)
            times, jains = timeseries.jain_series(ip, spec.flows, spec.interval_s)
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
