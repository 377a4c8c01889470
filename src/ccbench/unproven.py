"""What a run on a lab of your own hosts can and cannot prove (testbed.kind: lab).

Its calibration says how the path was judged: per pair the RTT expected (the path's own
idle RTT, measured before anything was emulated, plus the delay asked), and, without a
router of ccbench's, the bottleneck it does not control, named ("the network between s1
and r1; its buffer is not known"). The checks that need that bottleneck's counters or
its buffer then say "not checkable" (summary.json `not_checkable`) instead of passing:
the queue's configuration and drops, the hidden-queue bound, the RTT-excess share, and
whether every retransmission has a counted drop behind it. What stays proven: the RTT
(calibration, and each flow's minimum against its pair's expected RTT), the emulation's
own drops (the loss rules' counters, in the ledger), drops at the hosts' interfaces and
backlogs, the CC and stack, the delay element's own statistics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccbench.reasons import Code, Reason
from ccbench.spec import RTT_TOLERANCE_MS

NOT_CHECKABLE = (
    "the bottleneck queue's configuration, drops and samples",
    "packets held outside the bottleneck (mean RTT against RTT + a full queue)",
    "the share of RTT samples above RTT + a full queue (host stalls)",
    "that every retransmission has a counted drop behind it (the network's drops are not counted)",
)


@dataclass(frozen=True)
class Scope:
    """What a run's calibration says ccbench controlled."""

    uncontrolled: str | None = None  # the bottleneck ccbench does not control, named
    expected_rtt_ms: dict[int, float] | None = None  # per pair (a lab: path RTT + delay)

    @property
    def buffer_known(self) -> bool:
        return self.uncontrolled is None


def scope_of(cal: dict[str, Any] | None) -> Scope:
    """The scope recorded in calibration.json (a dumbbell's: everything controlled)."""
    cal = cal or {}
    b = cal.get("bottleneck")
    where = b.get("where") if isinstance(b, dict) and b.get("controlled") is False else None
    exp = cal.get("expected_rtt_ms")
    expected = None
    if isinstance(exp, dict):
        pairs = {k.removeprefix("pair"): v for k, v in exp.items()}
        expected = {int(k): float(v) for k, v in pairs.items()
                    if isinstance(v, (int, float)) and k.isdigit()}  # fmt: skip
    return Scope(str(where) if where else None, expected)


def not_checkable(scope: Scope) -> list[str]:
    """The checks this run could not make, each one line (empty: it could make all)."""
    if scope.buffer_known:
        return []
    return [f"{what}: not checkable ({scope.uncontrolled})" for what in NOT_CHECKABLE]


def lowest_rtt_us(f: dict[str, Any]) -> tuple[float, str] | None:
    """A flow record's lowest RTT for the base-RTT checks (here and summarize.min_rtt)
    and what it is: the kernel's minimum where sampled, else iperf3's smallest smoothed
    RTT (never below the kernel's minimum, so only more lenient); None: neither."""
    if f.get("min_rtt_us") is not None:
        return float(f["min_rtt_us"]), "min RTT"
    if f.get("srtt_min_us") is not None:
        return float(f["srtt_min_us"]), "min srtt (iperf3)"
    return None


def check_path_rtt(flows: list[dict[str, Any]], scope: Scope) -> list[Reason]:
    """Each flow's lowest RTT is at least its pair's expected RTT (the path's own plus
    the delay asked), within the tolerance calibration uses: below it, the delay was not
    applied to that flow."""
    if not scope.expected_rtt_ms:
        return []
    reasons = []
    for f in flows:
        want = scope.expected_rtt_ms.get(int(f["pair"]))
        got = lowest_rtt_us(f)
        if want is None or got is None:
            continue
        if got[0] / 1000 < want - RTT_TOLERANCE_MS:
            reasons.append(Reason.of(Code.DELAY_NOT_APPLIED,
                f"flow {f['flow']}: {got[1]} {got[0] / 1000:.2f} ms below the {want:.2f} ms "
                "of its path plus the delay asked (delay not applied)",
                flow=f["flow"], source=got[1], rtt_ms=got[0] / 1000, asked_ms=want,
            ))  # fmt: skip
    return reasons


def uncontrolled_bottleneck(scope: Scope) -> dict[str, Any]:
    """summary.json `bottleneck` where ccbench controls none: named, no counters."""
    return {"drops": None, "not_controlled": scope.uncontrolled}
