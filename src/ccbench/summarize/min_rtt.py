"""Each flow's minimum RTT as its kernel measured it (summary.json flows[].min_rtt_us,
with its source), and the checks that ask "did the flow see the path's base RTT?": the
delay was applied (no flow below the configured RTT), and on a lab, each flow's minimum
against its pair's path RTT plus the delay asked (unproven.check_path_rtt).

The minimum comes from the time series (timeseries_stats.MIN_RTT_SOURCES: ss's minrtt on
Linux, siftr on FreeBSD), so it is known only once the series was read (summarize.judge).
Where no sampler saw the flow, iperf3's smallest smoothed RTT stands in: never below the
kernel's minimum, it can only make these lower-bound checks more lenient, not wrong
(unproven.lowest_rtt_us, the one rule both checks use).
"""

from __future__ import annotations

from typing import Any

from ccbench import unproven
from ccbench.reasons import Code, Reason
from ccbench.spec import RTT_TOLERANCE_MS, RunSpec
from ccbench.timeseries_stats import SeriesStats


def with_kernel_min_rtt(flows: list[dict[str, Any]], st: SeriesStats) -> list[dict[str, Any]]:
    """The flow records with min_rtt_us and min_rtt_source filled from `st`."""
    out = []
    for f in flows:
        got = st.kernel_min_rtt(int(f["flow"]))
        out.append({**f, "min_rtt_us": got[0] if got else None,
                    "min_rtt_source": got[1] if got else None})  # fmt: skip
    return out


def reasons(spec: RunSpec, flows: list[dict[str, Any]], scope: unproven.Scope) -> list[Reason]:
    """A flow below the configured RTT (the delay was not applied), or on a lab below its
    pair's path RTT plus the delay asked."""
    out = []
    rtt_ms = spec.topology.rtt_ms
    for f in flows:
        got = unproven.lowest_rtt_us(f)
        if got is not None and got[0] / 1000 < rtt_ms - RTT_TOLERANCE_MS:
            text = (f"flow {f['flow']}: {got[1]} {got[0] / 1000:.2f} ms below the configured "
                    f"{rtt_ms:g} ms (delay not applied)")  # fmt: skip
            out.append(Reason.of(Code.DELAY_NOT_APPLIED, text, flow=f["flow"], source=got[1],
                                 rtt_ms=got[0] / 1000, asked_ms=rtt_ms))  # fmt: skip
    return out + unproven.check_path_rtt(flows, scope)
