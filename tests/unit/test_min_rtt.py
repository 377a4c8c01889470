"""The base-RTT checks (summarize.min_rtt.reasons against the configured RTT,
unproven.check_path_rtt against a lab pair's expected RTT) judge each flow by one rule,
unproven.lowest_rtt_us: the kernel's minimum where sampled, else iperf3's smallest
smoothed RTT, and say which one they judged."""

from __future__ import annotations

from typing import Any

from ccbench.reasons import Code, Reason
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.summarize import min_rtt
from ccbench.unproven import Scope, check_path_rtt, lowest_rtt_us

SPEC = RunSpec(topology=Topology(pairs=1, rtt_ms=40.0), flows=(Flow(pair=1, cc="cubic"),))
LAB = Scope("the network between s1 and r1; its buffer is not known", {1: 50.0})


def flow(**rtts: float | None) -> dict[str, Any]:
    return {"flow": 1, "pair": 1, **rtts}


def judged(reasons: list[Reason]) -> list[tuple[Any, ...]]:
    """(flow, what was judged, its ms, the ms asked) of each delay-not-applied reason."""
    assert all(r.code == Code.DELAY_NOT_APPLIED for r in reasons)
    return [tuple(r.evidence[k] for k in ("flow", "source", "rtt_ms", "asked_ms")) for r in reasons]


def test_the_kernels_minimum_wins_over_iperf3s_srtt() -> None:
    assert lowest_rtt_us(flow(min_rtt_us=38_000, srtt_min_us=41_000)) == (38_000.0, "min RTT")
    assert lowest_rtt_us(flow(min_rtt_us=None, srtt_min_us=41_000)) == (
        41_000.0,
        "min srtt (iperf3)",
    )
    assert lowest_rtt_us(flow(min_rtt_us=None, srtt_min_us=None)) is None
    assert lowest_rtt_us(flow()) is None


def test_both_checks_judge_the_kernels_minimum() -> None:
    f = flow(min_rtt_us=38_000, srtt_min_us=60_000)
    assert judged(min_rtt.reasons(SPEC, [f], Scope())) == [(1, "min RTT", 38.0, 40.0)]
    assert judged(check_path_rtt([f], LAB)) == [(1, "min RTT", 38.0, 50.0)]


def test_without_a_sampler_both_checks_judge_iperf3s_srtt() -> None:
    f = flow(min_rtt_us=None, srtt_min_us=38_500)
    lab_reasons = check_path_rtt([f], LAB)
    assert min_rtt.reasons(SPEC, [f], LAB)[1:] == lab_reasons
    assert judged(min_rtt.reasons(SPEC, [f], LAB)) == [
        (1, "min srtt (iperf3)", 38.5, 40.0),
        (1, "min srtt (iperf3)", 38.5, 50.0),
    ]


def test_a_flow_at_its_rtt_or_with_no_rtt_passes_both() -> None:
    flows = [flow(min_rtt_us=49_100), {"flow": 2, "pair": 1}]
    assert min_rtt.reasons(SPEC, flows, LAB) == []
    assert check_path_rtt(flows, LAB) == []
