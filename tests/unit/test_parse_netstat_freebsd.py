"""Tests of ccbench.parse.netstat_freebsd on `netstat -s -p tcp` text and libxo JSON
written from FreeBSD's usr.bin/netstat/inet.c tcp_stats() (no real FreeBSD output is
available: tests/captures/freebsd/README-netstat.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse.netstat_freebsd import (
    freebsd_retransmit_causes,
    parse_netstat_tcp,
    parse_netstat_tcp_json,
    parse_netstat_tcp_text,
)
from ccbench.parse.nstat import RetransmitCauses, counter_delta

FREEBSD = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
TEXT = (FREEBSD / "netstat-s-p-tcp-written-from-inet-c.txt").read_text()
JSON = (FREEBSD / "netstat-s-p-tcp-written-from-inet-c.json").read_text()


def test_text_written_from_inet_c_every_line_read() -> None:
    s = parse_netstat_tcp_text(TEXT)
    assert s.unknown_lines == []
    # 117 lines: the title, 105 counter lines, the states title, 11 states;
    # p2/p2a lines hold two counters
    assert len(s.counters) == 126
    c = s.counters
    assert (c["sent-packets"], c["sent-data-packets"], c["sent-data-bytes"]) == (
        90412, 86390, 125092757)  # fmt: skip
    # "\t\t212 data packets (306976 bytes) retransmitted"
    assert (c["sent-retransmitted-packets"], c["sent-retransmitted-bytes"]) == (212, 306976)
    # "\t\t1 data packet unnecessarily retransmitted" (singular)
    assert c["sent-unnecessary-retransmitted-packets"] == 1
    assert (c["sent-ack-only-packets"], c["sent-packets-delayed"]) == (3998, 3)
    assert (c["received-ack-packets"], c["received-ack-bytes"]) == (43880, 125092771)
    assert (c["segments-updated-rtt"], c["segment-update-attempts"]) == (43870, 43870)
    assert c["retransmit-timeouts"] == 3
    assert (c["connections-closed"], c["connection-drops"]) == (4, 0)
    assert c["connections-updated-ssthresh-on-close"] == 1
    assert (c["hostcache.entries-added"], c["syncache.entries-added"]) == (1, 0)
    assert (c["sack.recovery-episodes"], c["sack.segment-retransmits"]) == (11, 205)
    assert (c["sack.byte-retransmits"], c["sack.lost-retransmissions"]) == (296840, 2)
    assert (c["received-with-dsack-packets"], c["received-with-dsack-bytes"]) == (4, 4344)
    assert c["syncache.receivd-cookies"] == 0  # sic, the libxo name
    # "\t1 connection  in ESTABLISHED state"
    assert {k: v for k, v in c.items() if k.startswith("states.") and v} == {
        "states.LISTEN": 2, "states.ESTABLISHED": 1, "states.TIME_WAIT": 2}  # fmt: skip


def test_json_holds_the_same_counters() -> None:
    j = parse_netstat_tcp_json(JSON)
    assert j.counters == parse_netstat_tcp_text(TEXT).counters
    assert parse_netstat_tcp(JSON).counters == parse_netstat_tcp(TEXT).counters


def test_lines_printed_twice_go_to_the_right_counter() -> None:
    # "N window update packets" is printed for sent and received, "N bucket overflow"
    # for syncache and hostcache: the order of inet.c decides.
    assert parse_netstat_tcp_text(TEXT).counters["receive-window-update-packets"] == 3
    text = TEXT.replace("\t\t0 window update packets\n", "\t\t5 window update packets\n", 1)
    text = text.replace("\t1 hostcache entry added\n\t\t0 bucket overflow\n",
                        "\t1 hostcache entry added\n\t\t7 bucket overflow\n")  # fmt: skip
    c = parse_netstat_tcp_text(text).counters
    assert (c["sent-window-update-packets"], c["receive-window-update-packets"]) == (5, 3)
    assert (c["syncache.bucket-overflow"], c["hostcache.buffer-overflows"]) == (0, 7)


def test_ss_omits_zero_counters() -> None:
    # `netstat -ss` prints only the counters that are not zero
    nonzero = [ln for ln in TEXT.splitlines() if not ln.startswith("\t") or
               any(w.isdigit() and int(w) for w in ln.split()[:1])]  # fmt: skip
    s = parse_netstat_tcp_text("\n".join(nonzero) + "\n")
    assert s.unknown_lines == []
    full = parse_netstat_tcp_text(TEXT).counters
    assert s.counters == {k: v for k, v in full.items() if k in s.counters}
    assert s.counters["receive-window-update-packets"] == 3
    assert "sent-window-update-packets" not in s.counters
    assert "ecn.handshakes" not in s.counters
    # 32 lines whose first number is not zero, 7 of them with a second number
    assert len(s.counters) == 39


def test_whole_netstat_s_and_unknown_lines() -> None:
    text = ("udp:\n\t12 datagrams received\n" + TEXT.replace(
        "\t3 retransmit timeouts\n", "\t3 retransmit timeouts\n\t9 frobnicated segments\n")
        + "udp:\n\t12 datagrams received\nip:\n\t3 total packets received\n")  # fmt: skip
    s = parse_netstat_tcp(text)
    assert s.unknown_lines == ["\t9 frobnicated segments"]
    assert s.counters == parse_netstat_tcp_text(TEXT).counters


def test_causes() -> None:
    # after `netstat -sz`, the snapshot after the run is the run's increase
    after = parse_netstat_tcp_text(TEXT).counters
    c = freebsd_retransmit_causes(after)
    assert c == RetransmitCauses(
        os="freebsd",
        retransmitted_segments=212,
        retransmitted_bytes=306976,
        timeouts=3,
        after_timeout_segments=None,
        fast_retransmit_segments=205,
        recovery_episodes=11,
        recoveries_ended_by_timeout=None,
        loss_probes=None,
        loss_probe_recoveries=None,
        lost_retransmits=2,
        spurious_rtos=1,
        dsacks_received=4,
        dsack_segments=None,
        dsack_bytes=4344,
        undos=None,
    )
    assert c.causes == ["timeout", "fast-retransmit", "lost-retransmit", "spurious-rto",
                          "dsack"]  # fmt: skip
    # from two snapshots without -z: the delta
    before = {k: v // 2 for k, v in after.items()}
    d = counter_delta(before, after)
    assert freebsd_retransmit_causes(d).retransmitted_segments == 106
    assert freebsd_retransmit_causes({}).causes == []


def test_errors() -> None:
    with pytest.raises(ValueError, match="no 'tcp:' section"):
        parse_netstat_tcp_text("udp:\n\t1 datagram received\n")
    with pytest.raises(ValueError, match="counter retransmit-timeouts appears twice"):
        twice = "\t3 retransmit timeouts\n\t4 retransmit timeouts\n"
        parse_netstat_tcp_text(TEXT.replace("\t3 retransmit timeouts\n", twice))
    with pytest.raises(ValueError, match="no statistics.tcp"):
        parse_netstat_tcp_json('{"statistics": {"udp": {}}}')
    with pytest.raises(ValueError, match="sack.recovery-episodes = -1 is not a count"):
        parse_netstat_tcp_json('{"statistics": {"tcp": {"sack": {"recovery-episodes": -1}}}}')
    with pytest.raises(ValueError, match="does not parse"):
        parse_netstat_tcp_json("{")
