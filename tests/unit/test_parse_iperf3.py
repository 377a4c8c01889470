"""Golden tests of ccbench.parse.iperf3 on real iperf3 -J documents."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from ccbench.parse.iperf3 import (
    Iperf3FormatError,
    is_cwnd_trusted,
    parse_iperf3,
    parse_version,
    udp_received_bps,
)

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
# A real iperf 3.9 Linux sender's document from a public repository (README there).
PUBLIC_39 = CAPTURES / "iperf3.9-linux-sender-cubic-10s-cloudpilot.json"


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((CAPTURES / name).read_text())
    return doc


def test_public_iperf39_linux_cubic() -> None:
    r = parse_iperf3(json.loads(PUBLIC_39.read_text()))
    assert r.version == "3.9"
    assert r.os == "linux"
    assert r.error is None
    assert (r.cc_sender, r.cc_receiver) == ("cubic", "cubic")
    assert r.num_streams == 1 and r.omit_s == 3.0 and r.requested_duration_s == 10.0
    assert r.timestamp_s == 1627930063
    assert r.duration_s == 9.99995
    assert r.bytes_sent == 2093219840
    assert r.bytes_received == 2094000000
    assert r.throughput_bps == 1674679677.0243485  # end.sum_received
    assert r.sender_bps == 1674584244.9212246
    assert r.retransmits == 1664
    assert (r.min_rtt_us, r.mean_rtt_us, r.max_rtt_us) == (1966, 4026.0, 19107)
    assert r.max_snd_cwnd_bytes == 4109952
    assert r.cwnd_trusted is True
    (s,) = r.streams
    assert s.stream == 5
    assert s.local == "10.0.0.12:33732" and s.peer == "168.1.194.92:5500"
    assert s.max_snd_wnd_bytes is None  # snd_wnd arrived in iperf 3.10
    # 3 omitted warm-up seconds, then 10 measured ones
    assert len(r.intervals) == 13
    assert [row["omitted"] for row in r.intervals].count(True) == 3
    first = r.intervals[0]
    assert first == {
        "stream": 5,
        "t_start_s": 0.0,
        "t_end_s": 1.000372,
        "bytes": 199540352,
        "throughput_bps": 1595729121.4814167,
        "retransmits": 0,
        "cwnd_bytes": 4109952,
        "snd_wnd_bytes": None,
        "rtt_us": 19107,
        "rttvar_us": 1062,
        "pmtu_bytes": 1460,
        "reorder": None,
        "omitted": True,
    }
    last = r.intervals[-1]
    assert (last["t_start_s"], last["t_end_s"], last["cwnd_bytes"], last["rtt_us"]) == (
        9.0,
        9.99995,
        815232,
        3116,
    )
    # the measured intervals' retransmits add up to the end summary
    assert sum(row["retransmits"] for row in r.intervals if not row["omitted"]) == 1664


@pytest.mark.parametrize(
    ("name", "cc", "sent", "received", "bps", "retr", "rtts", "cwnd"),
    [
        (
            "iperf3.12-cubic-5s.json",
            "cubic",
            55804472,
            55650984,
            88924567.45414384,
            51,
            (3100, 3821, 4554),
            69504,
        ),
        (
            "iperf3.12-bbr-5s.json",
            "bbr",
            53218776,
            53218776,
            81757953.17743993,
            4922,
            (3498, 6587, 15008),
            205616,
        ),
        (
            "iperf3.12-reno-5s.json",
            "reno",
            55160112,
            54750328,
            87513344.00670053,
            153,
            (2555, 4412, 6002),
            69504,
        ),
    ],
)
def test_local_captures_single_flow(
    name: str,
    cc: str,
    sent: int,
    received: int,
    bps: float,
    retr: int,
    rtts: tuple[int, int, int],
    cwnd: int,
) -> None:
    r = parse_iperf3(load(name))
    assert r.version == "3.12" and r.os == "linux" and r.error is None
    assert r.cc_sender == cc and r.cc_receiver == cc  # -C reached both ends
    assert r.bytes_sent == sent and r.bytes_received == received
    assert r.throughput_bps == bps
    assert r.retransmits == retr
    assert (r.min_rtt_us, r.mean_rtt_us, r.max_rtt_us) == (rtts[0], float(rtts[1]), rtts[2])
    assert r.max_snd_cwnd_bytes == cwnd
    assert len(r.intervals) == 5
    assert all(row["pmtu_bytes"] == 1500 for row in r.intervals)
    # Linux cwnd is cwnd * MSS: every value is a whole number of 1448-byte segments
    assert all(row["cwnd_bytes"] % 1448 == 0 for row in r.intervals)
    assert max(row["cwnd_bytes"] for row in r.intervals) == cwnd
    assert sum(row["retransmits"] for row in r.intervals) == retr


def test_local_capture_cubic_first_interval_exact() -> None:
    r = parse_iperf3(load("iperf3.12-cubic-5s.json"))
    assert r.intervals[0] == {
        "stream": 5,
        "t_start_s": 0.0,
        "t_end_s": 1.000408,
        "bytes": 11812784,
        "throughput_bps": 94463725.75570515,
        "retransmits": 11,
        "cwnd_bytes": 52128,
        "snd_wnd_bytes": 733184,
        "rtt_us": 3591,
        "rttvar_us": 571,
        "pmtu_bytes": 1500,
        "reorder": None,
        "omitted": False,
    }
    assert r.streams[0].local == "198.18.251.1:42918"
    assert r.streams[0].peer == "198.18.251.2:5201"


def test_local_capture_two_streams() -> None:
    r = parse_iperf3(load("iperf3.12-cubic-P2-10s.json"))
    assert r.num_streams == 2
    assert [s.stream for s in r.streams] == [5, 7]
    assert [s.local for s in r.streams] == ["198.18.251.1:37828", "198.18.251.1:37838"]
    assert [s.bytes_sent for s in r.streams] == [53218832, 53507944]
    assert r.bytes_sent == 106726776 == sum(s.bytes_sent or 0 for s in r.streams)
    assert r.throughput_bps == 84966187.8875353
    # per-stream receiver rates, and they add up to the receiver-side sum
    assert [s.throughput_bps for s in r.streams] == [42368090.20427912, 42598097.68325618]
    assert [s.bytes_received for s in r.streams] == [52988600, 53276264]
    assert sum(s.throughput_bps or 0 for s in r.streams) == pytest.approx(r.throughput_bps)
    assert r.retransmits == 516 == 244 + 272
    # across streams: min of mins, max of maxes, plain mean of the means
    assert r.min_rtt_us == 3405 and r.max_rtt_us == 7271
    assert r.mean_rtt_us == pytest.approx((5454 + 5417) / 2)
    assert r.max_snd_cwnd_bytes == 63712
    assert len(r.intervals) == 20
    assert {row["stream"] for row in r.intervals} == {5, 7}
    last = r.intervals[-1]
    assert (last["stream"], last["bytes"], last["retransmits"], last["cwnd_bytes"]) == (
        7,
        6581160,
        33,
        41992,
    )


def test_local_capture_100ms_intervals() -> None:
    r = parse_iperf3(load("iperf3.12-cubic-i0.1-3s.json"))
    assert len(r.intervals) == 30
    widths = [row["t_end_s"] - row["t_start_s"] for row in r.intervals]
    assert all(0.09 < w < 0.11 for w in widths)
    first = r.intervals[0]
    assert (first["bytes"], first["retransmits"], first["cwnd_bytes"], first["rtt_us"]) == (
        1571832,
        81,
        56472,
        3251,
    )
    assert r.retransmits == 111
    assert r.duration_s == 3.000119


def test_local_capture_connection_refused() -> None:
    r = parse_iperf3(load("iperf3.12-error-refused.json"))
    assert r.error == "unable to connect to server: Connection refused"
    assert r.version == "3.12" and r.os == "linux"
    assert r.streams == [] and r.intervals == []
    assert r.throughput_bps is None and r.bytes_sent is None and r.retransmits is None
    assert r.cc_sender is None and r.max_snd_cwnd_bytes is None


# Not a real capture: a FreeBSD-sender document written by hand from the format
# esnet/iperf src/tcp_info.c documents (FreeBSD: snd_cwnd already in bytes,
# retransmits = tcpi_snd_rexmitpack, pmtu and reorder -1). No
# real FreeBSD-sender JSON could be found. Numbers are invented but consistent.
FREEBSD_SAMPLE: dict[str, Any] = {
    "start": {
        "connected": [
            {
                "socket": 5,
                "local_host": "10.1.1.2",
                "local_port": 54321,
                "remote_host": "10.1.4.3",
                "remote_port": 5201,
            }
        ],
        "version": "iperf 3.17.1",
        "system_info": "FreeBSD s1 15.0-CURRENT FreeBSD 15.0-CURRENT #0 main-d4763484f911: "
        "Mon Apr 21 2025 amd64",
        "timestamp": {"time": "Tue, 22 Apr 2025 10:00:00 UTC", "timesecs": 1745316000},
        "tcp_mss_default": 1448,
        "test_start": {
            "protocol": "TCP",
            "num_streams": 1,
            "blksize": 1048576,
            "omit": 0,
            "duration": 2,
            "reverse": 0,
        },
    },
    "intervals": [
        {
            "streams": [
                {
                    "socket": 5,
                    "start": 0,
                    "end": 1.0,
                    "seconds": 1.0,
                    "bytes": 24117248,
                    "bits_per_second": 192937984.0,
                    "retransmits": 12,
                    "snd_cwnd": 1203200,
                    "snd_wnd": 4194304,
                    "rtt": 41250,
                    "rttvar": 1875,
                    "pmtu": -1,
                    "reorder": -1,
                    "omitted": False,
                    "sender": True,
                }
            ]
        },
        {
            "streams": [
                {
                    "socket": 5,
                    "start": 1.0,
                    "end": 2.0,
                    "seconds": 1.0,
                    "bytes": 25165824,
                    "bits_per_second": 201326592.0,
                    "retransmits": 0,
                    "snd_cwnd": 1310000,
                    "snd_wnd": 4194304,
                    "rtt": 40875,
                    "rttvar": 1250,
                    "pmtu": -1,
                    "reorder": -1,
                    "omitted": False,
                    "sender": True,
                }
            ]
        },
    ],
    "end": {
        "streams": [
            {
                "sender": {
                    "socket": 5,
                    "start": 0,
                    "end": 2.0,
                    "seconds": 2.0,
                    "bytes": 49283072,
                    "bits_per_second": 197132288.0,
                    "retransmits": 12,
                    "max_snd_cwnd": 1310000,
                    "max_snd_wnd": 4194304,
                    "max_rtt": 41250,
                    "min_rtt": 40875,
                    "mean_rtt": 41062,
                    "sender": True,
                },
                "receiver": {
                    "socket": 5,
                    "start": 0,
                    "end": 2.04,
                    "seconds": 2.0,
                    "bytes": 49283072,
                    "bits_per_second": 193266949.0,
                    "sender": True,
                },
            }
        ],
        "sum_sent": {
            "seconds": 2.0,
            "bytes": 49283072,
            "bits_per_second": 197132288.0,
            "retransmits": 12,
        },
        "sum_received": {"seconds": 2.04, "bytes": 49283072, "bits_per_second": 193266949.0},
        "sender_tcp_congestion": "cubic",
        "receiver_tcp_congestion": "cubic",
    },
}


def test_parse_iperf3_freebsd_sample_written_from_docs() -> None:
    r = parse_iperf3(FREEBSD_SAMPLE)
    assert r.os == "freebsd" and r.version == "3.17.1"
    assert r.cwnd_trusted is True  # fixed in iperf 3.2
    assert r.cc_sender == "cubic"
    # FreeBSD cwnd is bytes already: not a multiple of the MSS, kept as is
    assert [row["cwnd_bytes"] for row in r.intervals] == [1203200, 1310000]
    assert all(row["pmtu_bytes"] is None for row in r.intervals)  # -1 -> None
    assert all(row["reorder"] is None for row in r.intervals)
    assert [row["retransmits"] for row in r.intervals] == [12, 0]
    assert r.throughput_bps == 193266949.0 and r.retransmits == 12
    assert r.max_snd_cwnd_bytes == 1310000


def test_old_iperf3_on_freebsd_cwnd_not_trusted() -> None:
    doc = copy.deepcopy(FREEBSD_SAMPLE)
    doc["start"]["version"] = "iperf 3.1.3"
    assert parse_iperf3(doc).cwnd_trusted is False
    doc["start"]["system_info"] = "Linux box 4.4.0 #1 SMP x86_64"
    assert parse_iperf3(doc).cwnd_trusted is True  # the bug was FreeBSD-only


def test_missing_cc_fields_on_old_versions() -> None:
    doc = copy.deepcopy(FREEBSD_SAMPLE)
    del doc["end"]["sender_tcp_congestion"]
    del doc["end"]["receiver_tcp_congestion"]
    r = parse_iperf3(doc)
    assert r.cc_sender is None and r.cc_receiver is None


def test_os_without_tcp_info_gives_none() -> None:
    doc = copy.deepcopy(FREEBSD_SAMPLE)
    doc["start"]["system_info"] = "Darwin mac 23.0.0 Darwin Kernel Version 23.0.0 arm64"
    for iv in doc["intervals"]:
        for s in iv["streams"]:
            for k in ("snd_cwnd", "snd_wnd", "rtt", "rttvar", "pmtu", "reorder"):
                del s[k]
    rows = parse_iperf3(doc).intervals
    assert parse_iperf3(doc).os == "darwin"
    assert all(row["cwnd_bytes"] is None and row["rtt_us"] is None for row in rows)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("iperf 3.12", (3, 12)),
        ("iperf 3.17.1", (3, 17, 1)),
        ("iperf 3.9+", (3, 9)),
        ("iperf 3-CURRENT", None),
        (None, None),
    ],
)
def test_parse_version(text: str | None, expected: tuple[int, ...] | None) -> None:
    assert parse_version(text) == expected


def test_cwnd_trust_boundary() -> None:
    assert is_cwnd_trusted("freebsd", (3, 1, 7)) is False
    assert is_cwnd_trusted("freebsd", (3, 2)) is True
    assert is_cwnd_trusted("freebsd", None) is False
    assert is_cwnd_trusted("linux", None) is True


# A real iperf 3.9 UDP client document (openwisp-monitoring's test data, see
# tests/captures/README.md): no end.sum_received, only end.sum.
UDP_39 = "iperf3.9-udp-openwisp-monitoring.json"


def test_udp_received_rate_of_iperf39_reads_end_sum() -> None:
    doc = load(UDP_39)
    assert "sum_received" not in doc["end"]
    total = doc["end"]["sum"]
    assert (total["bytes"], total["packets"], total["lost_packets"]) == (1310720, 40, 0)
    # No loss: everything sent arrived, over the receiver's 10.000115 s (end.sum.seconds;
    # the sender's bits_per_second is over its own 10.00006 s).
    assert udp_received_bps(doc) == pytest.approx(1310720 * 8 / 10.000115)
    assert udp_received_bps(doc) != total["bits_per_second"]


def test_udp_received_rate_of_iperf39_takes_off_the_lost_share() -> None:
    doc = load(UDP_39)
    doc["end"]["sum"]["lost_packets"] = 4  # 4 of the 40 datagrams lost
    assert udp_received_bps(doc) == pytest.approx(1310720 * 36 / 40 * 8 / 10.000115)


def test_udp_received_rate_prefers_sum_received_of_iperf311() -> None:
    doc = load(UDP_39)
    doc["end"]["sum_received"] = {"seconds": 10.0, "bytes": 1179648, "bits_per_second": 943718.4}
    assert udp_received_bps(doc) == 943718.4


def test_udp_received_rate_absent_or_malformed() -> None:
    assert udp_received_bps(load("iperf3.12-error-refused.json")) is None
    doc = load(UDP_39)
    doc["end"]["sum"]["packets"] = 0
    assert udp_received_bps(doc) is None
    doc["end"]["sum"] = ["not", "an", "object"]
    with pytest.raises(Iperf3FormatError, match="end.sum"):
        udp_received_bps(doc)
