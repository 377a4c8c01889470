"""reasons.host_stalled_only: the tests that accept a run the VM stalled (integration
conftest.assert_judged) read the reasons' class from their codes (reasons.HOST_STALLS),
not from their words."""

from __future__ import annotations

from ccbench import validity
from ccbench.reasons import HOST_STALLS, Code, Reason, host_stalled_only


def test_the_stall_reasons_carry_their_codes_and_others_do_not() -> None:
    excess = validity.check_rtt_excess({"share": 0.059, "bound_ms": 85.1, "max_excess_ms": 10.6,
                                        "longest_above_s": 0.11})  # fmt: skip
    late = validity.check_delay({"packets": 1000, "late_share": 0.03}, "ccdelay")
    lost = validity.check_delay({"packets": 1000, "late_share": 0.0, "lost": 3}, "ccdelay")
    assert len(excess) == len(late) == len(lost) == 1
    assert host_stalled_only(excess) and host_stalled_only(late)
    assert host_stalled_only([*excess, *late])
    # a reason of the path or the tool is not a stall, alone or beside one
    assert not host_stalled_only(lost)
    assert not host_stalled_only([*excess, *lost])
    assert not host_stalled_only([])  # a valid run has no reasons: not "stalled"
    assert [excess[0].code, late[0].code, lost[0].code] == [
        Code.RTT_EXCESS, Code.DELAY_LATE, Code.DELAY_ELEMENT]  # fmt: skip


def test_the_code_decides_not_the_words() -> None:
    """A stall's code with any words is a stall; a stall's words under another code are not."""
    assert {Code.DELAY_LATE, Code.RTT_EXCESS, Code.STEAL, Code.TRACE_LOST} == HOST_STALLS
    assert host_stalled_only([Reason.of(Code.STEAL, "reworded")])
    words = validity.check_steal({"steal_pct": 50.0})[0].text
    assert not host_stalled_only([Reason.of(Code.UNCLASSIFIED, words)])
