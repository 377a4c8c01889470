"""Why a run is invalid, as data: each reason has a class (`Code`), the words for people
(`text`, what the report and the tables print) and the numbers its check used
(`evidence`). Tests, `attempts` and tools select reasons by their code, never by their
words, so rewording a reason changes no verdict and breaks no test.

A new kind of reason is one new `Code` member with its meaning; a check returns
`Reason.of(Code.X, "words", number=...)`. Data only: the checks are ccbench.validity's
and the readers' (summarize, the instruments)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from ccbench.part import Part, d


class Code(StrEnum):
    """A reason's class, stored in summary.json by its value; `meaning` says what it is."""

    _value_: str
    meaning: str

    def __new__(cls, value: str, meaning: str) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.meaning = meaning
        return member

    RUN_FAILED = "run_failed", "the run itself failed before its end (raw/error.txt says how)"
    SKIPPED = "skipped", "not run: its testbed could not be built or lacks what it asks"
    WAITING = "waiting", "not run yet: waiting for the kernel or boot tunables it needs"
    FLOW_NO_OUTPUT = "flow_no_output", "a flow's iperf3 client wrote no report"
    FLOW_ERROR = "flow_error", "a flow's iperf3 reported an error or exited non-zero"
    CC_MISMATCH = (
        "cc_mismatch",
        "a flow ran another congestion control than asked, or none was reported",
    )
    STACK_MISMATCH = "stack_mismatch", "a flow or sender ran another TCP stack than asked"
    STACK_UNVERIFIED = (
        "stack_unverified",
        "sockstat saw no connection of a flow: its stack and CC are not known",
    )
    SHORT_RUN = "short_run", "a flow ran less than 90 % of its duration"
    NO_BYTES = "no_bytes", "a flow's receiver got no bytes"
    HIDDEN_QUEUE = (
        "hidden_queue",
        "a flow's mean RTT exceeds RTT + a full queue: packets held outside the bottleneck",
    )
    DELAY_NOT_APPLIED = "delay_not_applied", "a flow's lowest RTT is below the RTT asked"
    RWND_LIMITED = "rwnd_limited", "the receiver's window, not the CC, limited a flow"
    CALIBRATION = "calibration", "the testbed's calibration failed or was not recorded"
    BOTTLENECK_CONFIG = (
        "bottleneck_config",
        "rt1's queue or shaper was not the one asked when the run started",
    )
    DELAY_ELEMENT = (
        "delay_element",
        "the delay element kept no statistics, saw no packets, lost or overflowed",
    )
    DELAY_LATE = "delay_late", "the delay element released too many packets late (a host stall)"
    RTT_EXCESS = "rtt_excess", "too many RTT samples above what the path can give (a host stall)"
    STEAL = "steal", "the hypervisor took the router's CPU while the flows ran (a host stall)"
    TRACE_LOST = "trace_lost", "the per-ACK trace's kernel buffer dropped events (a host stall)"
    PROBE_FAILED = "probe_failed", "the latency probe left no data, failed, or took no samples"
    PROBE_SHORT = "probe_short", "the latency probe's samples cover too little of the traffic"
    PLAUSIBILITY = "plausibility", "a number no run can produce: the raw files are damaged"
    LOSS_OUTSIDE = "loss_outside", "packets were lost outside the bottleneck and the loss rules"
    LOSS_UNCOUNTED = "loss_uncounted", "more retransmissions than counted drops"
    KERNEL_MISMATCH = "kernel_mismatch", "a sender runs another kernel than the variant needs"
    HOST_SETTING = (
        "host_setting",
        "a setting the run asked of a host (MTU, offload, sysctl, firewall, loader tunable) "
        "was not in force",
    )
    HOST_SETTING_UNREAD = "host_setting_unread", "a host's settings or firewall were not read"
    SUPER_PACKETS = (
        "super_packets",
        "the bottleneck queue held super-packets an endpoint's offloads made",
    )
    FILE_DAMAGED = (
        "file_damaged",
        "a file of the run is missing, unreadable, not its writer's format or cut short (the "
        "words start with its name)",
    )
    UNCLASSIFIED = (
        "unclassified",
        "a reason recorded before reasons had codes whose words match no known class",
    )


# The machine, not the path, failed the run (a stalled vCPU): host_stalled_only; the
# report counts such runs apart, and the integration tests accept a run invalid for
# these alone (their conftest's assert_judged).
HOST_STALLS = frozenset({Code.DELAY_LATE, Code.RTT_EXCESS, Code.STEAL, Code.TRACE_LOST})

Evidence = dict[str, int | float | str | bool | None]


class Reason(Part):
    """One reason a run is invalid (or, for a run not run, why)."""

    code: Code = d("the reason's class (the codes and their meaning: below)")
    text: str = d("the reason in words, as the report prints it")
    evidence: Evidence = d("the numbers the check used, by name (empty: none recorded)", {})

    @classmethod
    def of(cls, code: Code, text: str, **evidence: Any) -> Reason:
        return cls(code=code, text=text, evidence=evidence)


def codes(reasons: Iterable[Reason]) -> list[Code]:
    return [r.code for r in reasons]


def texts(reasons: Iterable[Reason]) -> list[str]:
    return [r.text for r in reasons]


def host_stalled_only(reasons: Iterable[Reason]) -> bool:
    """Every one of a run's reasons (at least one) is a host stall's (HOST_STALLS): the
    machine, not the path, failed the run, and measuring it again may pass."""
    got = list(reasons)
    return bool(got) and all(r.code in HOST_STALLS for r in got)
