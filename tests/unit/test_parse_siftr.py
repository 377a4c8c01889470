"""Golden tests of ccbench.parse.siftr.

No real siftr/siftr2 log was found in public repositories: every log here was WRITTEN FROM
THE DOCUMENTED FORMATS (sys/netinet/siftr.c, siftr_process_pkt; siftr(4);
tests/captures/freebsd/README.md), hence the test names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccbench.parse.siftr import (
    ROW_KEYS,
    SiftrFlow,
    check_siftr2_flows,
    layout_key,
    parse_header,
)
from ccbench.parse.siftr_stream import parse_siftr

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
DATA = "a5b6c7d8"  # the iperf3 data flow's flowid in every sample log
CTRL = "1c2d3e4f"  # iperf3's control connection (siftr2 samples only)


def read(name: str) -> str:
    return (CAPTURES / name).read_text()


# The data flow's samples shared by all four logs (t_s, direction, cwnd, ssthresh,
# srtt_us, rto_us, inflight): slow start, then a halving after a loss.
DATA_SAMPLES = [
    (0.5, "out", 14480, 1073725440, 40250.0, 241000.0, 1448),
    (0.540125, "in", 15928, 1073725440, 40250.0, 241000.0, 0),
    (0.540210, "out", 15928, 1073725440, 40250.0, 241000.0, 2896),
    (1.25, "out", 2896000, 1073725440, 41875.0, 243000.0, 2800000),
    (1.2904, "in", 1448000, 1448000, 44062.0, 250000.0, 1300000),
    (2.0, "out", 1520400, 1448000, 40500.0, 241000.0, 1500000),
]


def data_samples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (r["t_s"], r["direction"], r["cwnd_bytes"], r["ssthresh_bytes"], r["srtt_us"],
         r["rto_us"], r["inflight_bytes"])
        for r in rows
        if r["flowid"] == DATA
    ]  # fmt: skip


def test_siftr13_sample_written_from_docs() -> None:
    log = parse_siftr(read("siftr-1.3.0-written-from-docs.log"))
    assert (log.logger, log.version, log.complete) == ("siftr", "1.3.0", True)
    assert log.enable_time_s == 1745600000.012345
    assert log.disable_time_s == 1745600010.512345
    assert (log.hz, log.tcp_rtt_scale, log.sysver) == (None, None, "1402000")
    assert log.header["sysname"] == "FreeBSD" and log.header["ipmode"] == "4"
    assert log.footer is not None and log.footer["total_tcp_pkts"] == "6"
    assert log.flows == [SiftrFlow("10.1.1.11:54321", "10.1.3.21:5201", flowid=DATA, records=6)]
    assert data_samples(log.records) == DATA_SAMPLES
    first = log.records[0]
    assert list(first) == list(ROW_KEYS)
    assert first == {
        "t_s": 0.5,
        "direction": "out",
        "flowid": DATA,
        "local": "10.1.1.11:54321",
        "peer": "10.1.3.21:5201",
        "cwnd_bytes": 14480,
        "ssthresh_bytes": 1073725440,
        "srtt_us": 40250.0,
        "rto_us": 241000.0,
        "snd_wnd_bytes": 65160,
        "rcv_wnd_bytes": 65700,
        "inflight_bytes": 1448,
        "mss_bytes": 1448,
        "state": 4,
        "t_flags": 0x20000A4,
        "t_flags2": 0x400,
        "snd_buf_hiwat_bytes": 43520,
        "snd_buf_used_bytes": 43520,
        "rcv_buf_hiwat_bytes": 131072,
        "rcv_buf_used_bytes": 0,
        "reass_segs": 0,
        "th_seq": None,  # only some 1.3 builds log these three
        "th_ack": None,
        "data_bytes": None,
    }
    assert log.records[4]["reass_segs"] == 3


def test_siftr12_sample_written_from_docs_converts_ticks() -> None:
    log = parse_siftr(read("siftr-1.2.4-written-from-docs.log"))
    assert (log.logger, log.version) == ("siftr", "1.2.4")
    assert (log.hz, log.tcp_rtt_scale, log.sysver) == (1000, 32, "1303000")
    # srtt 1288 "ticks x 32" at hz 1000 = 1288 / 32 ms = 40.25 ms; rto 241 ticks = 241 ms.
    assert log.records[0]["srtt_us"] == 40250.0
    assert log.records[0]["rto_us"] == 241000.0
    # 1410 / 32 ms: siftr 1.2 resolves srtt to 1/32 tick, so the .5 is real.
    assert log.records[4]["srtt_us"] == 44062.5
    expected = [s if s[0] != 1.2904 else (*s[:4], 44062.5, *s[5:]) for s in DATA_SAMPLES]
    assert data_samples(log.records) == expected
    assert log.records[0]["t_flags2"] is None  # 1.2 logs bwnd (always 0) there instead
    assert log.records[0]["flowid"] == DATA  # 1.2.4 appends flowid (decimal in the log)
    assert log.flows == [SiftrFlow("10.1.1.11:54321", "10.1.3.21:5201", flowid=DATA, records=6)]
    assert log.footer is not None and log.footer["num_inbound_skipped_pkts_mtx"] == "0"


def test_siftr12_without_optional_tail_written_from_docs() -> None:
    # siftr 1.2.2/1.2.3 records stop after the in-flight bytes (25 fields), as in the
    # siftr(4) man page example.
    text = (
        "enable_time_secs=1238556193\tenable_time_usecs=462104\tsiftrver=1.2.2\thz=1000\t"
        "tcp_rtt_scale=32\tsysname=FreeBSD\tsysver=604000\tipmode=4\n"
        "o,0xbec491a5,1238556193.463551,172.16.7.28,22,172.16.2.5,55931,"
        "1073725440,172312,6144,66560,66608,8,1,4,1448,936,1,996,255,"
        "33304,208,66608,0,208\n"
    )
    log = parse_siftr(text)
    assert not log.complete and log.footer is None and log.disable_time_s is None
    (row,) = log.records
    assert row["t_s"] == 0.001447
    assert (row["local"], row["peer"], row["flowid"]) == (
        "172.16.7.28:22",
        "172.16.2.5:55931",
        None,
    )
    assert (row["ssthresh_bytes"], row["cwnd_bytes"]) == (1073725440, 172312)
    assert row["srtt_us"] == 936 * 1e6 / 32000  # 29.25 ms
    assert row["rto_us"] == 255000.0
    assert row["reass_segs"] is None
    # Without a footer the flows come from the records.
    assert log.flows == [SiftrFlow("172.16.7.28:22", "172.16.2.5:55931", records=1)]


def test_siftr13_with_seq_fields_written_from_docs() -> None:
    # Some 1.3.0 builds (ccfbsd/siftr) append th_seq, th_ack, payload size and more.
    header = read("siftr-1.3.0-written-from-docs.log").splitlines()[0]
    record = (
        "o,1745600000.512345,10.1.1.11,54321,10.1.3.21,5201,1073725440,14480,1024,"
        "65160,65700,7,7,4,1448,40250,1,33554596,241000,43520,43520,131072,0,1448,0,"
        "2780219352,2,1000001,2000001,1448,0,14480,14480,0"
    )
    (row,) = parse_siftr(f"{header}\n{record}\n").records
    assert (row["th_seq"], row["th_ack"], row["data_bytes"]) == (1000001, 2000001, 1448)
    assert row["flowid"] == DATA


def test_siftr2_24_sample_written_from_docs() -> None:
    log = parse_siftr(read("siftr2-2.4-written-from-docs.log"))
    assert (log.logger, log.version, log.complete) == ("siftr2", "2.4", True)
    # sysver is the kernel's version line: a patched ("-dirty") kernel shows here.
    assert log.sysver is not None and "-dirty" in log.sysver
    assert log.footer is not None and log.footer["global_flow_cnt"] == "2"
    assert log.flows == [
        SiftrFlow("10.1.1.11:54320", "10.1.3.21:5201", flowid=CTRL, records=2, stack="rack",
                  cc="cubic", stack_code=1, cc_code=0, mss_bytes=1448, sack=True,
                  snd_scale=7, rcv_scale=7, transfers=2),
        SiftrFlow("10.1.1.11:54321", "10.1.3.21:5201", flowid=DATA, records=6, stack="rack",
                  cc="cubic", stack_code=1, cc_code=0, mss_bytes=1448, sack=True,
                  snd_scale=7, rcv_scale=7, transfers=6),
    ]  # fmt: skip
    assert len(log.records) == 8
    # 2.4 stamps whole milliseconds since enable: 0.540125 s is logged as 0x21c = 540 ms.
    ms = [(round(t, 3), *rest) for t, *rest in DATA_SAMPLES]
    assert data_samples(log.records) == ms
    ctrl = log.records[0]
    assert ctrl == {
        **dict.fromkeys(ROW_KEYS),
        "t_s": 0.4,
        "direction": "out",
        "flowid": CTRL,
        "local": "10.1.1.11:54320",  # from the footer: records carry no addresses
        "peer": "10.1.3.21:5201",
        "cwnd_bytes": 14480,
        "ssthresh_bytes": 1073725440,
        "srtt_us": 40125.0,
        "rto_us": 241000.0,
        "snd_wnd_bytes": 65160,
        "rcv_wnd_bytes": 65700,
        "inflight_bytes": 37,
        "mss_bytes": 1448,  # from the footer too
        "t_flags": 0x20000A4,
        "t_flags2": 0x400,
        "snd_buf_hiwat_bytes": 43520,
        "snd_buf_used_bytes": 0,
        "rcv_buf_hiwat_bytes": 131072,
        "rcv_buf_used_bytes": 0,
        "reass_segs": 0,
        "data_bytes": 37,
    }


def test_siftr2_22_sample_written_from_docs() -> None:
    log = parse_siftr(read("siftr2-2.2-written-from-docs.log"))
    assert (log.logger, log.version, log.sysver) == ("siftr2", "2.2", "1500035")
    assert data_samples(log.records) == DATA_SAMPLES
    row = log.records[2]
    assert (row["flowid"], row["state"], row["th_seq"], row["th_ack"], row["data_bytes"]) == (
        DATA, 4, 1000001, 2000001, 1448,
    )  # fmt: skip
    assert row["local"] == "10.1.1.11:54321"
    assert [f.flowid for f in log.flows] == [CTRL, DATA]


def test_all_versions_agree_on_the_data_flow_written_from_docs() -> None:
    logs = [parse_siftr(read(n)) for n in sorted(p.name for p in CAPTURES.glob("*.log"))]
    assert len(logs) == 4
    for log in logs:
        rows = [r for r in log.records if r["flowid"] == DATA]
        assert [r["cwnd_bytes"] for r in rows] == [14480, 15928, 15928, 2896000, 1448000, 1520400]
        assert {r["local"] for r in rows} == {"10.1.1.11:54321"}
        assert {r["mss_bytes"] for r in rows} == {1448}


def test_check_siftr2_flows_written_from_docs() -> None:
    log = parse_siftr(read("siftr2-2.4-written-from-docs.log"))
    assert check_siftr2_flows(log, "rack", "cubic", port=5201) == []
    assert check_siftr2_flows(log, "rack", "cubic") == []
    assert check_siftr2_flows(log, "default", "cubic", port=5201) == [
        "flow 1c2d3e4f (10.1.1.11:54320 -> 10.1.3.21:5201) ran on stack code 1, not 'freebsd'",
        "flow a5b6c7d8 (10.1.1.11:54321 -> 10.1.3.21:5201) ran on stack code 1, not 'freebsd'",
    ]
    assert check_siftr2_flows(log, "rack", "reno", port=54321) == [
        "flow a5b6c7d8 (10.1.1.11:54321 -> 10.1.3.21:5201) ran with CC code 0, not 'newreno'"
    ]
    # siftr2 cannot name the bbr stack or htcp: nothing to contradict.
    assert check_siftr2_flows(log, "bbr", "bbr") == []
    assert check_siftr2_flows(log, "rack", "htcp") == []
    assert check_siftr2_flows(log, "rack", "cubic", port=5999) == [
        "no flow on port 5999 in the siftr2 footer"
    ]


def test_check_siftr2_flows_needs_siftr2_footer() -> None:
    siftr = parse_siftr(read("siftr-1.3.0-written-from-docs.log"))
    assert check_siftr2_flows(siftr, "rack", "cubic") == [
        "a siftr log names no stack or CC per flow; only siftr2 logs do"
    ]
    no_footer = "\n".join(read("siftr2-2.4-written-from-docs.log").splitlines()[:-1])
    log = parse_siftr(no_footer)
    assert not log.complete
    assert log.records[0]["local"] is None  # addresses only come with the footer
    assert [f.flowid for f in log.flows] == [CTRL, DATA]
    assert check_siftr2_flows(log, "rack", "cubic") == [
        "siftr2 log has no footer (logging not disabled?): stacks/CCs unknown"
    ]


@pytest.mark.parametrize(
    ("version", "key"), [("1.2.2", "1.2"), ("1.2.4", "1.2"), ("1.3.0", "1.3"), ("1.3.7", "1.3"),
                         ("2.2", "2.2"), ("2.4", "2.4")]
)  # fmt: skip
def test_layout_key(version: str, key: str) -> None:
    assert layout_key(version) == key


@pytest.mark.parametrize("version", ["1.4.0", "2.3", "3.0", "x"])
def test_unknown_version_is_named(version: str) -> None:
    text = f"enable_time_secs=1\tenable_time_usecs=000000\tsiftrver={version}\tipmode=4\n"
    with pytest.raises(ValueError, match=f"unsupported siftr log version '{version}'"):
        parse_siftr(text)


def test_not_a_siftr_log() -> None:
    with pytest.raises(ValueError, match="not a siftr log"):
        parse_siftr("o,1,2,3\n")
    with pytest.raises(ValueError, match="no siftrver"):
        parse_siftr("enable_time_secs=1\tenable_time_usecs=0\n")


def test_siftr12_needs_hz() -> None:
    text = "enable_time_secs=1\tenable_time_usecs=0\tsiftrver=1.2.4\tipmode=4\n"
    with pytest.raises(ValueError, match="lacks hz/tcp_rtt_scale"):
        parse_siftr(text)


def test_bad_record_names_line_and_count() -> None:
    lines = read("siftr2-2.4-written-from-docs.log").splitlines()
    lines[2] = lines[2] + ",ff"
    with pytest.raises(ValueError, match=r"line 3: bad siftr 2.4 record: 19 fields, expected 18"):
        parse_siftr("\n".join(lines))


def test_second_enable_cycle_is_refused() -> None:
    text = read("siftr-1.3.0-written-from-docs.log")
    with pytest.raises(ValueError, match="second enable/disable cycle"):
        parse_siftr(text + text)


def test_parse_header_keeps_spaces_and_equals() -> None:
    assert parse_header("siftrver=2.4\tsysver=FreeBSD 15.0 #0 a=b\n") == {
        "siftrver": "2.4",
        "sysver": "FreeBSD 15.0 #0 a=b",
    }
