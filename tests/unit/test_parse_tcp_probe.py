"""Golden tests of ccbench.parse.tcp_probe on real tracefs captures of this machine's
kernel (tests/captures/tracefs/README.md), plus format variants of older kernels."""

from __future__ import annotations

import dataclasses
import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from ccbench.parse.nstat import counter_delta, parse_nstat
from ccbench.parse.tcp_probe import (
    CONG_STATE_SCHEMA,
    PROBE_SCHEMA,
    RETRANSMIT_SCHEMA,
    CongStateChange,
    FastTrace,
    ProbeSample,
    Retransmit,
    TcpTraceReader,
    event_fields,
    parse_tcp_trace,
    port_filter,
)

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
TRACEFS = CAPTURES / "tracefs"
NOLOSS = TRACEFS / "trace_pipe-cubic-2M-noloss.txt"
LOSS = TRACEFS / "trace_pipe-cubic-2M-loss5.txt"
HEAD = TRACEFS / "trace-cubic-2M-noloss-head.txt"

SENDER = ("10.250.0.1:54876", "10.250.0.2:5201")  # the no-loss data connection
RECEIVER = ("10.250.0.2:5201", "10.250.0.1:54876")
LOSSY = ("10.250.0.1:54894", "10.250.0.2:5201")  # the loss capture's data connection


def read(path: Path) -> str:
    return path.read_text()


def flow(probes: list[ProbeSample], key: tuple[str, str]) -> list[ProbeSample]:
    return [p for p in probes if (p.local, p.peer) == key]


def test_noloss_capture_counts_and_flows() -> None:
    t = parse_tcp_trace(read(NOLOSS))
    assert (len(t.probes), len(t.cong_states), len(t.retransmits)) == (381, 4, 0)
    assert (t.lost_events, t.other_lines) == (0, 0)
    # both ends of both connections: the receiver's socket is AF_INET6 (v4-mapped, as
    # iperf3 listens on ::) and is read as plain IPv4
    assert Counter((p.local, p.peer) for p in t.probes) == {
        RECEIVER: 273,
        SENDER: 86,
        ("10.250.0.2:5201", "10.250.0.1:54870"): 11,
        ("10.250.0.1:54870", "10.250.0.2:5201"): 11,
    }
    assert {p.family for p in flow(t.probes, RECEIVER)} == {"AF_INET6"}
    assert {p.family for p in flow(t.probes, SENDER)} == {"AF_INET"}
    # the sender's tcp_probe fires on ACKs, the receiver's on data: 4 iperf3 blocks of
    # 128 KiB (2 Mbit/s x 2 s, rounded up to whole blocks) + the 37-byte cookie
    assert {p.data_len for p in flow(t.probes, SENDER)} == {0}
    assert sum(p.data_len or 0 for p in flow(t.probes, RECEIVER)) == 4 * 131072 + 37
    assert [p.t_s for p in t.probes] == sorted(p.t_s for p in t.probes)


def test_noloss_first_line_exact() -> None:
    # file line 2: iperf3-7226 [001] ..s2. 421.360898: tcp_probe: family=AF_INET6
    # src=[::ffff:10.250.0.2]:5201 dest=[::ffff:10.250.0.1]:54870 mark=0x0 data_len=37
    # snd_nxt=0xe2997b11 snd_una=0xe2997b11 snd_cwnd=10 ssthresh=2147483647
    # snd_wnd=64512 srtt=75 rcv_wnd=65160 sock_cookie=1009 ...
    first = parse_tcp_trace(read(NOLOSS)).probes[0]
    assert first == ProbeSample(
        t_s=421.360898,
        local="10.250.0.2:5201",
        peer="10.250.0.1:54870",
        family="AF_INET6",
        data_len=37,
        cwnd_pkts=10,
        ssthresh_pkts=None,  # 2147483647: TCP_INFINITE_SSTHRESH
        srtt_us=75.0,
        snd_wnd_bytes=64512,
        rcv_wnd_bytes=65160,
        snd_nxt=0xE2997B11,
        snd_una=0xE2997B11,
        inflight_bytes=0,
        mss_bytes=None,
        cwnd_bytes=None,
        mark=0,
        sock_cookie="1009",
        skaddr="00000000b682c339",
    )


def test_noloss_sender_cwnd_first_last() -> None:
    snd = flow(parse_tcp_trace(read(NOLOSS)).probes, SENDER)
    assert (snd[0].t_s, snd[0].cwnd_pkts, snd[0].inflight_bytes) == (421.361389, 10, 37)
    assert snd[0].srtt_us == 18.0
    # last: snd_cwnd=76 ssthresh=87 srtt=201 snd_wnd=970752, all acked
    last = snd[-1]
    assert (last.t_s, last.cwnd_pkts, last.ssthresh_pkts) == (423.366002, 76, 87)
    assert (last.srtt_us, last.snd_wnd_bytes, last.inflight_bytes) == (201.0, 970752, 0)
    assert max(p.cwnd_pkts or 0 for p in snd) == 87


def test_noloss_cong_states() -> None:
    t = parse_tcp_trace(read(NOLOSS))
    got = [(c.t_s, c.local, c.state, c.prev_state) for c in t.cong_states]
    assert got == [
        (421.360817, "10.250.0.2:5201", "TCP_CA_Open", None),
        (421.361351, "10.250.0.2:5201", "TCP_CA_Open", None),
        (422.415459, "10.250.0.1:54876", "TCP_CA_Disorder", None),
        (422.415551, "10.250.0.1:54876", "TCP_CA_Open", "TCP_CA_Disorder"),
    ]
    assert t.cong_states[2].state_code == 1


def test_trace_file_with_header_same_events_as_pipe() -> None:
    # `cat trace` of a second instance of the same flow: 12 '#' lines, then events
    head = parse_tcp_trace(read(HEAD))
    assert (len(head.probes), len(head.cong_states), head.other_lines) == (87, 2, 0)
    pipe = parse_tcp_trace(read(NOLOSS)).probes[: len(head.probes)]
    # the same events (the instances' timestamps differ by a few microseconds)
    strip = [dataclasses.replace(p, t_s=0.0) for p in head.probes]
    assert strip == [dataclasses.replace(p, t_s=0.0) for p in pipe]
    assert all(abs(a.t_s - b.t_s) < 1e-4 for a, b in zip(head.probes, pipe, strict=True))


def test_loss_capture_counts() -> None:
    t = parse_tcp_trace(read(LOSS))
    assert (len(t.probes), len(t.cong_states), len(t.retransmits)) == (686, 88, 50)
    # tcp_probe filtered to `dport == 5201`: the sender's sockets only
    assert Counter((p.local, p.peer) for p in t.probes) == {
        LOSSY: 674,
        ("10.250.0.1:54884", "10.250.0.2:5201"): 12,
    }
    assert Counter(c.state for c in t.cong_states) == {
        "TCP_CA_Open": 43,
        "TCP_CA_Recovery": 39,
        "TCP_CA_Disorder": 2,
        "TCP_CA_CWR": 2,
        "TCP_CA_Loss": 2,
    }
    assert Counter((r.local, r.tcp_state) for r in t.retransmits) == {
        ("10.250.0.1:54894", "TCP_ESTABLISHED"): 47,
        ("10.250.0.1:54884", "TCP_ESTABLISHED"): 2,
        ("10.250.0.1:54884", "TCP_FIN_WAIT1"): 1,
    }
    assert {r.err for r in t.retransmits} == {0}
    assert t.retransmits[0] == Retransmit(424.752497, "10.250.0.1:54884", "10.250.0.2:5201",
                                          "AF_INET", "TCP_ESTABLISHED", 0,
                                          "00000000750c074d")  # fmt: skip


def test_loss_capture_rto_and_recovery() -> None:
    t = parse_tcp_trace(read(LOSS))
    rtos = [c for c in t.cong_states if c.state == "TCP_CA_Loss"]
    # the second RTO fired while still in Loss (backoff)
    assert [(c.t_s, c.local, c.prev_state) for c in rtos] == [
        (428.364431, "10.250.0.1:54894", "TCP_CA_Recovery"),
        (428.79242, "10.250.0.1:54894", "TCP_CA_Loss"),
    ]
    data = [c for c in t.cong_states if (c.local, c.peer) == LOSSY]
    assert Counter((c.prev_state, c.state) for c in data) == {
        ("TCP_CA_Recovery", "TCP_CA_Open"): 37,
        ("TCP_CA_Open", "TCP_CA_Recovery"): 36,
        ("TCP_CA_Disorder", "TCP_CA_Recovery"): 2,
        (None, "TCP_CA_Disorder"): 1,
        ("TCP_CA_Open", "TCP_CA_Disorder"): 1,
        ("TCP_CA_Recovery", "TCP_CA_Loss"): 1,
        ("TCP_CA_Loss", "TCP_CA_Loss"): 1,
        ("TCP_CA_Loss", "TCP_CA_Open"): 1,
    }


def test_loss_capture_sender_cwnd() -> None:
    snd = flow(parse_tcp_trace(read(LOSS)).probes, LOSSY)
    # first: snd_nxt=0xfe103219 snd_una=0xfe1031f4 (37 bytes: the cookie) cwnd 10
    assert (snd[0].t_s, snd[0].cwnd_pkts, snd[0].inflight_bytes) == (425.009435, 10, 37)
    assert (snd[0].ssthresh_pkts, snd[0].srtt_us, snd[0].sock_cookie) == (None, 30.0, "c")
    # the first reduction: snd_cwnd=17 ssthresh=13, snd_nxt - snd_una = 0x7120 =
    # 20 segments of 1448
    cut = next(p for p in snd if p.ssthresh_pkts is not None)
    assert (cut.t_s, cut.cwnd_pkts, cut.ssthresh_pkts) == (425.013301, 17, 13)
    assert cut.inflight_bytes == 0xFE10CAD1 - 0xFE1059B1 == 20 * 1448
    # last: after the RTOs, cwnd 2, ssthresh 2
    last = snd[-1]
    assert (last.t_s, last.cwnd_pkts, last.ssthresh_pkts, last.srtt_us) == (
        429.01318, 2, 2, 35.0)  # fmt: skip
    assert max(p.cwnd_pkts or 0 for p in snd) == 19


def test_loss_trace_agrees_with_nstat_counters() -> None:
    # The nstat snapshots were taken in the sender's namespace around the same flow.
    t = parse_tcp_trace(read(LOSS))
    before = parse_nstat((CAPTURES / "nstat" / "nstat-before-loss5.json").read_text())
    after = parse_nstat((CAPTURES / "nstat" / "nstat-after-loss5.json").read_text())
    d = counter_delta(before.counters, after.counters)
    assert len(t.retransmits) == d["TcpRetransSegs"] == 50
    entered = Counter(c.state for c in t.cong_states if c.state != c.prev_state)
    assert entered["TCP_CA_Recovery"] == d["TcpExtTCPSackRecovery"] == 39
    assert Counter(c.state for c in t.cong_states)["TCP_CA_Loss"] == d["TcpExtTCPTimeouts"] == 2


def test_reader_streams_a_file_and_batches() -> None:
    with LOSS.open() as f:
        reader = TcpTraceReader(f)
        got = list(reader.batches(rows=100))
    assert [(ev, b.num_rows) for ev, b in got] == [("tcp_probe", 100)] * 6 + [
        ("tcp_probe", 86), ("tcp_cong_state_set", 88), ("tcp_retransmit_skb", 50)]  # fmt: skip
    assert reader.counts == {"tcp_probe": 686, "tcp_cong_state_set": 88,
                             "tcp_retransmit_skb": 50}  # fmt: skip
    schemas = {ev: b.schema for ev, b in got}
    assert schemas == {"tcp_probe": PROBE_SCHEMA, "tcp_cong_state_set": CONG_STATE_SCHEMA,
                       "tcp_retransmit_skb": RETRANSMIT_SCHEMA}  # fmt: skip
    probes = pa.Table.from_batches([b for ev, b in got if ev == "tcp_probe"])
    whole = parse_tcp_trace(read(LOSS))
    assert probes.to_pylist() == [dataclasses.asdict(p) for p in whole.probes]
    assert PROBE_SCHEMA.field("srtt_us").type == pa.float64()
    assert PROBE_SCHEMA.field("cwnd_pkts").type == pa.int64()
    assert PROBE_SCHEMA.field("sock_cookie").type == pa.string()
    with pytest.raises(RuntimeError):
        list(reader.records())


def test_cut_last_line_is_dropped() -> None:
    text = read(NOLOSS)
    cut = text[: text.rindex("sock_cookie=")]  # the reader was stopped mid-line
    reader = TcpTraceReader(io.StringIO(cut))
    assert sum(1 for _ in reader) == 384
    assert len(parse_tcp_trace(cut).probes) == 380


def test_mss_fills_cwnd_bytes() -> None:
    t = parse_tcp_trace(read(NOLOSS), mss_bytes=1448)
    assert {(p.cwnd_bytes, p.mss_bytes) for p in t.probes[:1]} == {(10 * 1448, 1448)}
    per_flow = parse_tcp_trace(read(NOLOSS), mss_bytes={SENDER: 1448})
    snd = flow(per_flow.probes, SENDER)
    assert snd[-1].cwnd_bytes == 76 * 1448
    assert {p.cwnd_bytes for p in flow(per_flow.probes, RECEIVER)} == {None}


def test_lost_events_comments_and_other_events() -> None:
    line = read(LOSS).splitlines()[2]  # a tcp_probe line (ksoftirqd/0-14)
    text = "\n".join([
        "# tracer: nop",
        "#",
        "CPU:1 [LOST 1234 EVENTS]",
        line,
        "          <idle>-0       [001] ..s2.   500.000001: sched_switch: prev_comm=x",
        "CPU:0 [LOST 6 EVENTS]",
        "",
    ])  # fmt: skip
    t = parse_tcp_trace(text)
    assert (len(t.probes), t.lost_events, t.other_lines) == (1, 1240, 1)


def test_older_kernel_formats() -> None:
    # 4.19 (no family=, skbaddr=, skaddr=), an IPv6 flow, a line without data_len=,
    # and a retransmit without family= and err= (4.19).
    text = (
        "  iperf3-1 [000] ..s1 10.000001: tcp_probe: src=[2001:db8::1]:40000 "
        "dest=[2001:db8::2]:5201 mark=0x0 data_len=0 snd_nxt=0x10 snd_una=0xfffffff0 "
        "snd_cwnd=12 ssthresh=8 snd_wnd=1000 srtt=250 rcv_wnd=2000 sock_cookie=7\n"
        "  iperf3-1 [000] ..s1 10.000002: tcp_probe: src=10.0.0.1:40001 dest=10.0.0.2:5201 "
        "mark=0x0 snd_nxt=0x5 snd_una=0x5 snd_cwnd=3 ssthresh=2 snd_wnd=1 "
        "srtt=1 rcv_wnd=1 sock_cookie=8\n"
        "  <idle>-0 [001] ..s2 10.000003: tcp_retransmit_skb: skbaddr=0000000011 "
        "skaddr=0000000022 sport=40000 dport=5201 saddr=0.0.0.0 daddr=0.0.0.0 "
        "saddrv6=2001:db8::1 daddrv6=2001:db8::2 state=TCP_ESTABLISHED\n"
    )
    t = parse_tcp_trace(text)
    v6, old = t.probes
    assert (v6.local, v6.peer, v6.family, v6.skaddr) == (
        "[2001:db8::1]:40000", "[2001:db8::2]:5201", None, None)  # fmt: skip
    assert v6.inflight_bytes == 0x20  # snd_nxt wrapped past 2^32
    assert (old.data_len, old.cwnd_pkts, old.ssthresh_pkts) == (None, 3, 2)
    (r,) = t.retransmits
    assert (r.local, r.peer, r.err, r.tcp_state) == (
        "[2001:db8::1]:40000", "[2001:db8::2]:5201", None, "TCP_ESTABLISHED")  # fmt: skip


def test_the_length_field_in_both_spellings() -> None:
    """The first form of the event printed the payload as `length=`: the line Linux's
    Documentation/trace/histogram.rst shows (its onchange()/snapshot() example), as
    printed there; and a line of this kernel's (`data_len=`)."""
    doc = (
        "          <idle>-0     [004] ..s7    49.823798: tcp_probe: src=10.0.0.10:54326 "
        "dest=23.215.104.193:80 mark=0x0 length=32 snd_nxt=0xe3ae2ff5 snd_una=0xe3ae2ecd "
        "snd_cwnd=10 ssthresh=2147483647 snd_wnd=28960 srtt=19604 rcv_wnd=29312\n"
    )
    (old,) = parse_tcp_trace(doc).probes
    assert (old.data_len, old.local, old.peer) == (32, "10.0.0.10:54326", "23.215.104.193:80")
    assert (old.inflight_bytes, old.snd_wnd_bytes, old.ssthresh_pkts) == (0x128, 28960, None)
    (new,) = parse_tcp_trace(read(LOSS).splitlines(keepends=True)[2]).probes
    assert (new.data_len, new.snd_wnd_bytes) == (0, 65160)
    # the fast reader takes either spelling too
    (b,) = FastTrace(io.StringIO(doc)).probe_batches()
    assert b.column("snd_wnd_bytes").to_pylist() == [28960]


def test_bad_value_names_the_line() -> None:
    lines = read(NOLOSS).splitlines(keepends=True)[:3]
    lines[2] = lines[2].replace("snd_cwnd=", "snd_cwnd=x")
    with pytest.raises(ValueError, match=r"^line 3: bad tcp_probe event: snd_cwnd="):
        list(TcpTraceReader(lines))
    cong = read(NOLOSS).splitlines(keepends=True)[:1]
    cong[0] = cong[0].replace(" sport=5201", "")
    with pytest.raises(ValueError, match=r"^line 1: bad tcp_cong_state_set event"):
        list(TcpTraceReader(cong))


def test_record_types() -> None:
    t = parse_tcp_trace(read(LOSS))
    assert all(isinstance(c, CongStateChange) for c in t.cong_states)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.probes[0].cwnd_pkts = 1  # type: ignore[misc]


# --- the filter the plumbing writes ------------------------------------------------
def test_event_fields_of_this_kernel() -> None:
    fields = event_fields((TRACEFS / "format-tcp_probe-6.18.txt").read_text())
    assert list(fields)[4:] == ["saddr", "daddr", "sport", "dport", "family", "mark",
                                "data_len", "snd_nxt", "snd_una", "snd_cwnd", "ssthresh",
                                "snd_wnd", "srtt", "rcv_wnd", "sock_cookie", "skbaddr",
                                "skaddr"]  # fmt: skip
    assert (fields["sport"], fields["saddr"], fields["skaddr"]) == ("__u16", "__u8",
                                                                    "const void *")  # fmt: skip
    for ev in ("tcp_cong_state_set", "tcp_retransmit_skb"):
        have = event_fields((TRACEFS / f"format-{ev}-6.18.txt").read_text())
        assert {"sport", "dport", "family", "saddr_v6"} <= set(have)


def test_port_filter() -> None:
    fmt = (TRACEFS / "format-tcp_probe-6.18.txt").read_text()
    # the expression the captures were made with (accepted by this kernel)
    assert port_filter([5201], format_text=fmt) == "sport == 5201 || dport == 5201"
    assert port_filter([5201], fields=("dport",)) == "dport == 5201"
    # consecutive ports become ranges (this form was also written to a filter file
    # of this kernel and read back unchanged)
    assert port_filter([5205, 5201, 5202, 5203], fields=("dport",)) == (
        "(dport >= 5201 && dport <= 5203) || dport == 5205")  # fmt: skip
    with pytest.raises(ValueError, match="no field 'port'"):
        port_filter([5201], fields=("port",), format_text=fmt)
    with pytest.raises(ValueError, match="no ports"):
        port_filter([])
    with pytest.raises(ValueError, match="not a TCP port: 0"):
        port_filter([0, 5201])
    with pytest.raises(ValueError, match="longer than a tracefs filter"):
        port_filter(range(1000, 3000, 2))
