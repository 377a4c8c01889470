"""Golden tests of ccbench.parse.nstat on real nstat output of this machine, taken in
a sender's namespace before and after a flow with 5 % loss
(tests/captures/nstat/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse.nstat import (
    RetransmitCauses,
    counter_delta,
    linux_retransmit_causes,
    parse_nstat,
    parse_nstat_json,
    parse_nstat_text,
)

NSTAT = Path(__file__).resolve().parents[1] / "captures" / "nstat"


def snap(name: str) -> dict[str, int]:
    return parse_nstat((NSTAT / name).read_text()).counters


def test_json_and_text_agree() -> None:
    for moment in ("before", "after"):
        j = parse_nstat_json((NSTAT / f"nstat-{moment}-loss5.json").read_text())
        t = parse_nstat_text((NSTAT / f"nstat-{moment}-loss5.txt").read_text())
        assert j.source == t.source == "kernel"
        assert len(j.counters) == 393
        assert j.counters == t.counters
    # nstat leaves out what is not a counter (misc/nstat.c useless_numbers)
    assert "TcpCurrEstab" not in j.counters and "TcpRtoMin" not in j.counters
    # the first and last lines of the text dump
    assert list(t.counters)[0] == "IpInReceives" and list(t.counters)[-1] == "MPTcpExtWinProbe"


def test_known_values() -> None:
    before, after = snap("nstat-before-loss5.txt"), snap("nstat-after-loss5.json")
    # text line 55: "TcpRetransSegs                  50                 0.0"
    assert (before["TcpRetransSegs"], after["TcpRetransSegs"]) == (0, 50)
    assert (before["TcpOutSegs"], after["TcpOutSegs"]) == (382, 1128)
    assert (before["TcpActiveOpens"], after["TcpActiveOpens"]) == (2, 4)
    assert (before["IpExtOutOctets"], after["IpExtOutOctets"]) == (527312, 1681458)


def test_delta_and_causes() -> None:
    d = counter_delta(snap("nstat-before-loss5.json"), snap("nstat-after-loss5.json"))
    assert len(d) == 393
    assert {k: v for k, v in d.items() if v and k.startswith("TcpExtTCP")} == {
        "TcpExtTCPHPHits": 4,
        "TcpExtTCPPureAcks": 672,
        "TcpExtTCPHPAcks": 9,
        "TcpExtTCPSackRecovery": 39,
        "TcpExtTCPLostRetransmit": 5,
        "TcpExtTCPFastRetrans": 46,
        "TcpExtTCPTimeouts": 2,
        "TcpExtTCPLossProbes": 3,
        "TcpExtTCPLossProbeRecovery": 2,
        "TcpExtTCPSackRecoveryFail": 1,
        "TcpExtTCPBacklogCoalesce": 35,
        "TcpExtTCPSackShifted": 18,
        "TcpExtTCPSackMerged": 39,
        "TcpExtTCPSackShiftFallback": 46,
        "TcpExtTCPOrigDataSent": 738,
        "TcpExtTCPDelivered": 740,
    }
    causes = linux_retransmit_causes(d)
    assert causes == RetransmitCauses(
        os="linux",
        retransmitted_segments=50,
        retransmitted_bytes=None,
        timeouts=2,
        after_timeout_segments=0,
        fast_retransmit_segments=46,
        recovery_episodes=39,
        recoveries_ended_by_timeout=1,
        loss_probes=3,
        loss_probe_recoveries=2,
        lost_retransmits=5,
        spurious_rtos=0,
        dsacks_received=0,
        dsack_segments=0,
        dsack_bytes=None,
        undos=0,
    )
    assert causes.causes == ["timeout", "fast-retransmit", "tail-loss-probe", "lost-retransmit"]


def test_causes_with_spurious_and_missing_counters() -> None:
    # An older kernel without TCPDSACKRecvSegs; a run with a spurious RTO and D-SACKs.
    d = {"TcpRetransSegs": 4, "TcpExtTCPTimeouts": 1, "TcpExtTCPSpuriousRTOs": 1,
         "TcpExtTCPDSACKRecv": 2, "TcpExtTCPDSACKOfoRecv": 1, "TcpExtTCPLossUndo": 1}  # fmt: skip
    c = linux_retransmit_causes(d)
    assert (c.dsacks_received, c.dsack_segments, c.undos, c.fast_retransmit_segments) == (
        3, None, 1, None)  # fmt: skip
    assert c.causes == ["timeout", "spurious-rto", "dsack"]
    assert linux_retransmit_causes({}).causes == []


def test_delta_refuses_counters_that_went_down() -> None:
    before, after = snap("nstat-before-loss5.json"), snap("nstat-after-loss5.json")
    with pytest.raises(ValueError, match=r"^counter IpInReceives went down \(982 -> 255\)"):
        counter_delta(after, before)
    # a counter only in the later snapshot counts from 0
    assert counter_delta({}, {"TcpExtNew": 3}) == {"TcpExtNew": 3}


def test_text_variants_and_errors() -> None:
    # an incremental dump's overflow mark and a daemon's source line
    s = parse_nstat_text("#1234.5 sampling_interval=1 time_const=60\n"
                         "TcpRetransSegs                  5                  0.0 (overflow)\n"
                         "TcpOutSegs 7\n")  # fmt: skip
    assert s.source == "1234.5 sampling_interval=1 time_const=60"
    assert s.counters == {"TcpRetransSegs": 5, "TcpOutSegs": 7}
    with pytest.raises(ValueError, match="^line 1: counter before the #source line"):
        parse_nstat_text("TcpOutSegs 7\n")
    with pytest.raises(ValueError, match="^line 3: not an nstat counter line"):
        parse_nstat_text("#kernel\nTcpOutSegs 7 0.0\nTcpRetransSegs x 0.0\n")
    with pytest.raises(ValueError, match="^line 3: a second nstat dump"):
        parse_nstat_text("#kernel\nTcpOutSegs 7\n#kernel\n")
    with pytest.raises(ValueError, match="no #source line"):
        parse_nstat_text("\n")


def test_json_errors() -> None:
    with pytest.raises(ValueError, match="does not parse"):
        parse_nstat_json('{"kernel":{')
    with pytest.raises(ValueError, match="not one"):
        parse_nstat_json('{"a":{}, "b":{}}')
    with pytest.raises(ValueError, match="TcpOutSegs = -1 is not a count"):
        parse_nstat_json('{"kernel":{"TcpOutSegs":-1}}')
    assert parse_nstat(' {"kernel":{"TcpOutSegs":1}}').counters == {"TcpOutSegs": 1}
