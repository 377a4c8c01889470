"""Per-run checks: did the run do what was asked? Each failed check is one reason.

An invalid run is kept (its raw files and reasons are shown in the report) but never
averaged into a result.
"""

from __future__ import annotations

from typing import Any

from ccbench.parse.iperf3 import Iperf3Result
from ccbench.spec import RunSpec

RTT_TOLERANCE_MS = 1.0  # idle RTT vs configured
LATE_SHARE_MAX = 0.01  # share of packets the delay element released > 5 ms late
PROBE_COVERAGE_MIN = 0.9  # share of the traffic a self-starting probe (flent) must span
MIN_DURATION_SHARE = 0.9  # a flow must run at least 90 % of what was asked
# A flow's mean RTT may exceed the configured RTT + a full bottleneck queue by this
# much (delayed ACKs, the delay element's release quantum, scheduling) and no more.
HIDDEN_QUEUE_MS = 5.0


def _os_cc_name(cc: str, os_name: str | None) -> str:
    """FreeBSD calls Linux's reno newreno; iperf3 reports the OS's own name."""
    return "newreno" if os_name == "freebsd" and cc == "reno" else cc


def check_flow(
    k: int, spec: RunSpec, res: Iperf3Result | None, rc: int | None, stack_cc: bool = False
) -> list[str]:
    """`stack_cc`: the CC is the TCP stack's own (FreeBSD tcp_bbr), not a socket option."""
    f = spec.flows[k - 1]
    if res is None:
        return [f"flow {k}: no iperf3 output (exit {rc})"]
    if res.error:
        return [f"flow {k}: iperf3 error: {res.error}"]
    reasons = []
    if rc not in (0, None):
        reasons.append(f"flow {k}: iperf3 exited {rc}")
    if stack_cc:
        pass  # FreeBSD's bbr stack does its own CC: verified from functions_available
    elif res.cc_sender is not None and res.cc_sender != _os_cc_name(f.cc, res.os):
        reasons.append(f"flow {k}: CC used {res.cc_sender}, asked for {f.cc}")
    elif res.cc_sender is None:
        reasons.append(f"flow {k}: iperf3 did not report the CC used")
    if res.duration_s is None or res.duration_s < MIN_DURATION_SHARE * f.duration_s:
        reasons.append(f"flow {k}: ran {res.duration_s or 0:.1f}s of {f.duration_s:g}s")
    rtt_ms = spec.topology.rtt_ms
    if res.min_rtt_us is not None and res.min_rtt_us / 1000 < rtt_ms - RTT_TOLERANCE_MS:
        reasons.append(
            f"flow {k}: min RTT {res.min_rtt_us / 1000:.2f} ms below the configured "
            f"{rtt_ms:g} ms (delay not applied)"
        )
    if not res.throughput_bps:
        reasons.append(f"flow {k}: no bytes received")
    reasons += _hidden_queue(k, spec, res)
    return reasons


def _hidden_queue(k: int, spec: RunSpec, res: Iperf3Result) -> list[str]:
    """Packets held anywhere but the bottleneck queue (an emulator that fell behind, a
    backlog on a busy CPU, a NIC ring) give the flow a bigger buffer than asked for:
    its throughput and RTT are then not the configured path's."""
    full_queue = spec.topology.full_queue_ms
    if full_queue is None or res.mean_rtt_us is None:
        return []
    bound = spec.topology.rtt_ms + full_queue
    mean_ms = res.mean_rtt_us / 1000
    if mean_ms <= bound + HIDDEN_QUEUE_MS:
        return []
    return [
        f"flow {k}: mean RTT {mean_ms:.1f} ms above the {bound:.1f} ms the path can give "
        f"(RTT + a full queue): packets were held outside the bottleneck"
    ]


def check_calibration(cal: dict[str, Any]) -> list[str]:
    if not cal:
        return ["no calibration of the testbed recorded"]
    return [f"calibration: {p}" for p in cal.get("problems", [])]


def check_probe(probe: dict[str, Any] | None, tool: str) -> list[str]:
    """The latency-under-load probe was asked for: it must have measured the traffic,
    not the idle path before or after it (a tool that started late, e.g. flent stalled
    on a name lookup, measures the wrong thing)."""
    if probe is None:
        return [f"probe: the {tool} probe left no data"]
    if probe.get("error"):
        return [f"probe: {probe['error']}"]
    if not probe.get("samples"):
        return [f"probe: {probe['tool']} took no RTT samples while the flows ran"]
    cov = probe.get("coverage")
    if cov is not None and cov < PROBE_COVERAGE_MIN:
        return [
            f"probe: {probe['tool']} sampled only {cov * 100:.0f}% of the traffic "
            f"(need {PROBE_COVERAGE_MIN * 100:g}%)"
        ]
    return []


def check_delay(delay: dict[str, Any] | None, method: str | None) -> list[str]:
    if method != "ccdelay":
        return []
    if delay is None:
        return ["delay element: no statistics for this run"]
    reasons = []
    n = delay.get("packets", 0)
    late = delay.get("late_share")
    if n == 0:
        reasons.append("delay element: saw no packets during the run")
    elif late is not None and late > LATE_SHARE_MAX:
        reasons.append(
            f"delay element late: {late * 100:.2f}% of packets > 5 ms late "
            f"(limit {LATE_SHARE_MAX * 100:g}%)"
        )
    if delay.get("lost", 0) > 0:
        reasons.append(f"delay element: {delay['lost']} packets lost inside it")
    if delay.get("queue_full_drops", 0) > 0:
        reasons.append(f"delay element: kernel queue overflowed ({delay['queue_full_drops']})")
    return reasons
