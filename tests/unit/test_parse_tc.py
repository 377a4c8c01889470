"""Golden tests of ccbench.parse.tc on real `tc -s qdisc show` output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccbench.parse.tc import (
    QdiscStats,
    parse_tc_qdisc_json,
    parse_tc_qdisc_text,
    parse_tc_rate_bps,
    parse_tc_size_bytes,
)

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def read(name: str) -> str:
    return (CAPTURES / name).read_text()


# The after-traffic snapshot, identical in both formats (no traffic in between).
AFTER = [
    QdiscStats(
        kind="tbf",
        handle="1:",
        parent="root",
        dev=None,
        sent_bytes=282395735,
        sent_pkts=186642,
        dropped=6643,
        overlimits=300070,
        requeues=0,
        backlog_bytes=0,
        backlog_pkts=0,
        rate_bps=100e6,
        burst_bytes=15137,  # asked for 15140: the kernel keeps burst as time
        latency_us=50000.0,
    ),
    QdiscStats(
        kind="pfifo",
        handle="10:",
        parent="1:1",
        dev=None,
        sent_bytes=282395735,
        sent_pkts=186642,
        dropped=6643,
        overlimits=0,
        requeues=0,
        backlog_bytes=0,
        backlog_pkts=0,
        limit_pkts=48,
    ),
]


def test_after_traffic_json() -> None:
    assert parse_tc_qdisc_json(read("tc-tbf-pfifo48-after.json")) == AFTER


def test_after_traffic_text() -> None:
    assert parse_tc_qdisc_text(read("tc-tbf-pfifo48-after.txt")) == AFTER


# The same qdiscs as iproute2 4.20 prints them with -j (written from its print code,
# tests/captures/README.md): tbf's options are text inside the JSON, which is then not
# JSON; read from that text they are what a current tc prints as JSON.
TC_420 = "tc-tbf-pfifo48-after-iproute2-4.20-written-from-q_tbf-c.json"


def test_iproute2_4_20_text_options_inside_json() -> None:
    text = read(TC_420)
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    assert '"options":{rate 100Mbit burst 15137b lat 50.0ms }' in text
    assert parse_tc_qdisc_json(text) == AFTER


def test_text_options_beside_json_options() -> None:
    # Should 4.20's pfifo have printed its limit as JSON, only tbf's options are text.
    text = read(TC_420).replace('"options":{limit 48p}', '"options":{"limit":48}')
    assert parse_tc_qdisc_json(text) == AFTER
    # Byte sizes, details' burst/cell and a bare limit read as the text format's.
    tbf_text = '"options":{rate 1Gbit burst 1Mb/8 mpu 0b lat 1.2s limit 3000b }'
    (tbf,) = parse_tc_qdisc_json(
        '[{"kind":"tbf","handle":"1:","root":true,' + tbf_text + ',"bytes":1}]'
    )
    assert (tbf.rate_bps, tbf.burst_bytes, tbf.latency_us, tbf.limit_bytes) == (
        1e9,
        1024**2,
        1.2e6,
        3000,
    )


def test_classic_text_where_json_was_asked_is_read_as_text() -> None:
    assert parse_tc_qdisc_json(read("tc-tbf-pfifo48-after.txt")) == AFTER
    with pytest.raises(ValueError):
        parse_tc_qdisc_json('Option "-j" is unknown, try "tc -help".\n')
    with pytest.raises(ValueError):  # broken elsewhere than in an options object
        parse_tc_qdisc_json(read(TC_420).replace('"qlen":0}]', '"qlen":0'))


def test_during_traffic_backlog() -> None:
    # text and JSON were taken a moment apart while two flows were running
    tbf, fifo = parse_tc_qdisc_text(read("tc-tbf-pfifo48-during.txt"))
    assert (tbf.sent_bytes, tbf.sent_pkts, tbf.dropped, tbf.overlimits) == (
        232838179,
        153902,
        6431,
        259500,
    )
    assert (fifo.backlog_bytes, fifo.backlog_pkts, fifo.limit_pkts) == (13626, 1, 48)
    jtbf, jfifo = parse_tc_qdisc_json(read("tc-tbf-pfifo48-during.json"))
    assert (jtbf.sent_bytes, jtbf.sent_pkts, jtbf.dropped) == (233060737, 154049, 6431)
    assert jtbf.rate_bps == 100e6 and jtbf.burst_bytes == 15137
    assert jfifo.parent == "1:1" and jfifo.limit_pkts == 48 and jfifo.limit_bytes is None


def test_seed001_emulab_rt1_text() -> None:
    # Real output copied from seed 001 (Emulab rt1), including prompt lines and a
    # "<<< bottleneck drops" annotation after the counters.
    q = parse_tc_qdisc_text(read("tc-seed001-emulab-rt1.txt"))
    assert [x.handle for x in q] == ["8007:", "8009:", "800a:"]
    assert all(x.kind == "pfifo" and x.parent == "root" for x in q)
    assert [x.limit_pkts for x in q] == [256, 256, 48]
    bottleneck = q[2]
    assert bottleneck.sent_bytes == 20842988722
    assert bottleneck.sent_pkts == 13766899
    assert bottleneck.dropped == 789
    assert bottleneck.requeues == 58847
    assert bottleneck.rate_bps is None


def test_text_without_stats_and_other_kinds() -> None:
    # Lines copied from seeds 000/001 (netem without -s; EdgeRouter pfifo_fast).
    text = (
        "qdisc netem 8001: root refcnt 2 limit 1000 delay 40ms\n"
        "qdisc pfifo_fast 0: root refcnt 2 bands 3 priomap  1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n"
        " Sent 18826039239 bytes 18571902 pkt (dropped 0, overlimits 0 requeues 530)     "
        "<<< if it is dropped here\n"
        " backlog 0b 0p requeues 530\n"
    )
    netem, fast = parse_tc_qdisc_text(text)
    assert (netem.kind, netem.limit_pkts, netem.sent_bytes, netem.dropped) == (
        "netem",
        1000,
        None,
        None,
    )
    assert (fast.kind, fast.sent_pkts, fast.requeues, fast.limit_pkts) == (
        "pfifo_fast",
        18571902,
        530,
        None,
    )


def test_written_variants_dev_bfifo_sizes() -> None:
    # Hand-written in tc's formats (not captures): `dev` shown when no dev filter,
    # a bfifo byte limit, a rounded Kb backlog, a tbf with -iec rate.
    text = (
        "qdisc bfifo 20: dev eth1 parent 1:1 limit 60000b\n"
        " Sent 10 bytes 1 pkt (dropped 2, overlimits 0 requeues 0)\n"
        " backlog 58Kb 40p requeues 0\n"
        "qdisc tbf 1: dev eth1 root refcnt 2 rate 1Gibit burst 1Mb lat 1s\n"
    )
    bfifo, tbf = parse_tc_qdisc_text(text)
    assert (bfifo.dev, bfifo.limit_bytes, bfifo.limit_pkts) == ("eth1", 60000, None)
    assert (bfifo.backlog_bytes, bfifo.backlog_pkts) == (58 * 1024, 40)
    assert (tbf.rate_bps, tbf.burst_bytes, tbf.latency_us) == (1024.0**3, 1024**2, 1e6)
    js = (
        '[{"kind":"bfifo","handle":"20:","dev":"eth1","parent":"1:1",'
        '"options":{"limit":60000},"bytes":10,"packets":1,"drops":2,"overlimits":0,'
        '"requeues":0,"backlog":0,"qlen":0}]'
    )
    (jb,) = parse_tc_qdisc_json(js)
    assert (jb.dev, jb.limit_bytes, jb.limit_pkts, jb.dropped) == ("eth1", 60000, None, 2)


def test_empty_output() -> None:
    assert parse_tc_qdisc_text("") == []
    assert parse_tc_qdisc_json("") == []
    assert parse_tc_qdisc_json("[]") == []
    with pytest.raises(ValueError):
        parse_tc_qdisc_json('{"kind": "tbf"}')


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("100Mbit", 100e6),
        ("500Kbit", 500e3),
        ("1Gbit", 1e9),
        ("64bit", 64.0),
        ("1Mibit", 1024.0**2),
        ("1Mbps", 8e6),  # tc's bps is bytes per second
    ],
)
def test_rates(text: str, bps: float) -> None:
    assert parse_tc_rate_bps(text) == pytest.approx(bps)


def test_sizes_and_bad_tokens() -> None:
    assert parse_tc_size_bytes("15137b") == 15137
    assert parse_tc_size_bytes("2Mb") == 2 * 1024**2
    with pytest.raises(ValueError):
        parse_tc_size_bytes("48p")
    with pytest.raises(ValueError):
        parse_tc_rate_bps("fast")
