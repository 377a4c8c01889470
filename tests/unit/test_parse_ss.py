"""Golden tests of ccbench.parse.ss on real sampler captures, plus format variants."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccbench.parse.ss import FIELDS, parse_rate_bps, parse_ss_samples

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def read(name: str) -> str:
    return (CAPTURES / name).read_text()


def test_cubic_capture_shape() -> None:
    recs = parse_ss_samples(read("ss-cubic-5s.txt"))
    # 51 TS blocks; the first holds only the control connection, the rest two sockets
    assert len(recs) == 101
    assert len({r["t_s"] for r in recs}) == 51
    assert all(set(r) == set(FIELDS) for r in recs)
    data = [r for r in recs if r["local"] == "198.18.251.1:42918"]
    control = [r for r in recs if r["local"] == "198.18.251.1:42910"]
    assert len(data) == 50 and len(control) == 51
    assert {r["cc"] for r in data} == {"cubic"}
    # iperf3 -C sets the data socket only; the control socket keeps the default (bbr)
    assert {r["cc"] for r in control} == {"bbr"}
    assert [r["t_s"] for r in recs] == sorted(r["t_s"] for r in recs)
    # counters only grow
    acked = [r["bytes_acked"] for r in data]
    assert acked == sorted(acked)
    assert data[-1]["retrans_total"] == 51


def test_cubic_capture_one_socket_exact() -> None:
    # The block at `TS 1795308228.954697094`, data socket (file lines 17-18).
    recs = parse_ss_samples(read("ss-cubic-5s.txt"))
    (r,) = [
        x
        for x in recs
        if x["t_s"] == pytest.approx(1795308228.954697094, abs=1e-6)
        and x["local"].endswith(":42918")
    ]
    assert r == {
        "t_s": pytest.approx(1795308228.954697094, abs=1e-6),
        "local": "198.18.251.1:42918",
        "peer": "198.18.251.2:5201",
        "recv_q_bytes": 0,
        "send_q_bytes": 218648,
        "cc": "cubic",
        "cwnd_pkts": 35,
        "mss_bytes": 1448,
        "cwnd_bytes": 35 * 1448,
        "ssthresh_pkts": 35,
        "rtt_us": 3269.0,
        "rttvar_us": 255.0,
        "minrtt_us": 6.0,
        "send_bps": 124025696.0,
        "delivery_rate_bps": 60299680.0,
        "pacing_rate_bps": 382634704.0,
        "bytes_sent": 2781645,
        "bytes_retrans": 5792,
        "bytes_acked": 2645534,
        "unacked": 90,
        "notsent_bytes": 88328,
        "delivered": 1895,
        "snd_wnd_bytes": 728064,
        "retrans_now": 2,
        "retrans_total": 4,
        "lost": 2,
        "reordering": None,
        "reord_seen": None,
        "dsack_dups": None,
        "bbr_bw_bps": None,
        "bbr_mrtt_us": None,
        "bbr_pacing_gain": None,
        "bbr_cwnd_gain": None,
    }


def test_bbr_capture_one_socket_exact() -> None:
    # The block at `TS 1795308233.939677267`, data socket (file lines 14-15).
    recs = parse_ss_samples(read("ss-bbr-5s.txt"))
    (r,) = [
        x
        for x in recs
        if x["t_s"] == pytest.approx(1795308233.939677267, abs=1e-6)
        and x["local"].endswith(":42936")
    ]
    assert r["cc"] == "bbr"
    assert (r["cwnd_pkts"], r["cwnd_bytes"], r["ssthresh_pkts"]) == (5, 7240, 136)
    assert (r["rtt_us"], r["rttvar_us"]) == (8800.0, 472.0)
    assert r["bbr_bw_bps"] == 95952560.0
    assert r["bbr_mrtt_us"] == 6.0
    assert (r["bbr_pacing_gain"], r["bbr_cwnd_gain"]) == (1.0, 2.0)
    assert (r["retrans_now"], r["retrans_total"], r["lost"]) == (0, 440, 58)
    assert r["send_bps"] == 6581818.0
    assert r["pacing_rate_bps"] == 94993032.0
    assert r["delivery_rate_bps"] == 56565680.0
    assert r["bytes_acked"] == 1043278
    assert r["send_q_bytes"] == 1036088
    assert (r["unacked"], r["minrtt_us"], r["snd_wnd_bytes"]) == (137, 6.0, 1848320)


def test_bbr_capture_agrees_with_iperf3_json_of_same_run() -> None:
    recs = parse_ss_samples(read("ss-bbr-5s.txt"))
    data = [r for r in recs if r["local"] == "198.18.251.1:42936"]
    assert len(data) == 72
    doc = json.loads(read("iperf3.12-bbr-5s.json"))
    assert doc["start"]["connected"][0]["local_port"] == 42936
    sent = doc["end"]["sum_sent"]["bytes"]
    # the last sample came after the transfer: everything acked, plus iperf3's
    # 37-byte cookie and the FIN's sequence number
    assert data[-1]["bytes_acked"] == sent + 37 + 1


SYNTHETIC = """TS 1700000000.5
ESTAB 0      0      [2001:db8::1]:43210 [2001:db8::2]:5201
\t cubic wscale:7,7 rto:244 rtt:40.5/0.3 ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 \
cwnd:10 ssthresh:20 bytes_sent:1000 bytes_acked:900 segs_out:10 send 2.86Mbps lastsnd:4 \
pacing_rate 5.72Mbps delivery_rate 1.2Mbps delivered:9 busy:10ms unacked:1 retrans:0/12 \
lost:3 reordering:5 reord_seen:2 rcv_space:14480 notsent:0 minrtt:40
TS 1700000000.6
0      0      10.0.0.1:1 10.0.0.2:5201
\t ts sack bbr wscale:7,7 rto:204 rtt:41/2 mss:1448 cwnd:80 \
bbr:(bw:1.5Gbps,mrtt:40.123,pacing_gain:2.88672,cwnd_gain:2.88672) send 900Kbps \
pacing_rate 12bps delivery_rate 1.2Mbps app_limited minrtt:40.123
0      0      10.0.0.1:2 10.0.0.2:5201
"""


def test_format_variants_written_by_hand() -> None:
    # Hand-written lines in ss(8)'s format (not a capture), for cases the captures
    # lack: a state column, IPv6, K/M/Gbps units, lost/reord_seen, slow start
    # (no ssthresh), flags before the CC name, a socket without an info line.
    a, b, c = parse_ss_samples(SYNTHETIC)
    assert (a["t_s"], a["local"], a["peer"]) == (
        1700000000.5,
        "[2001:db8::1]:43210",
        "[2001:db8::2]:5201",
    )
    assert (a["cc"], a["rtt_us"], a["rttvar_us"], a["minrtt_us"]) == (
        "cubic",
        40500.0,
        300.0,
        40000.0,
    )
    assert a["send_bps"] == pytest.approx(2.86e6)
    assert a["pacing_rate_bps"] == pytest.approx(5.72e6)
    assert a["delivery_rate_bps"] == pytest.approx(1.2e6)
    assert (a["cwnd_bytes"], a["retrans_total"], a["lost"]) == (14480, 12, 3)
    assert (a["reordering"], a["reord_seen"]) == (5, 2)
    assert b["cc"] == "bbr" and b["ssthresh_pkts"] is None
    assert b["bbr_bw_bps"] == pytest.approx(1.5e9)
    assert b["bbr_mrtt_us"] == 40123.0
    assert b["send_bps"] == pytest.approx(9e5) and b["pacing_rate_bps"] == 12.0
    assert b["retrans_total"] is None and b["lost"] is None
    assert c["local"] == "10.0.0.1:2" and c["cc"] is None and c["rtt_us"] is None


def test_incomplete_last_line_is_dropped() -> None:
    text = read("ss-cubic-5s.txt")
    full = parse_ss_samples(text)
    cut = parse_ss_samples(text[: text.rindex("cwnd:") + 6])  # cut mid-value
    assert len(cut) == len(full)
    assert cut[-1]["cwnd_pkts"] is None  # the partial info line was not trusted
    assert cut[-2] == full[-2]


def test_empty_and_errors() -> None:
    assert parse_ss_samples("") == []
    assert parse_ss_samples("TS 1.0\n") == []
    with pytest.raises(ValueError, match="before the first TS"):
        parse_ss_samples("0 0 1.1.1.1:1 2.2.2.2:2\n")
    with pytest.raises(ValueError, match="bad TS"):
        parse_ss_samples("TS yesterday\n")


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("95615800bps", 95615800.0),
        ("1.2Kbps", 1200.0),
        ("2.5Mbps", 2.5e6),
        ("1.1Gbps", 1.1e9),
        ("fast", None),
    ],
)
def test_rate_units(text: str, bps: float | None) -> None:
    assert parse_rate_bps(text) == (pytest.approx(bps) if bps is not None else None)


SOCK = "0 0 10.0.0.1:5201 10.0.0.2:40000\n\t cubic rtt:40.5/1 cwnd:10 mss:1448\n"


def test_a_block_is_stamped_when_ss_returned() -> None:
    """SS_LOOP writes TE once ss returned: ss read the sockets before it, so the block's
    records carry TE; a block without TE (older files, a sampler stopped inside ss)
    keeps its TS."""
    text = f"TS 10.000000\n{SOCK}{SOCK}TE 10.042000\nTS 10.100000\n{SOCK}"
    recs = parse_ss_samples(text)
    assert [r["t_s"] for r in recs] == [10.042, 10.042, 10.1]
    assert recs[0]["cwnd_pkts"] == 10 and recs[1]["rtt_us"] == 40500.0
    with pytest.raises(ValueError, match="TE 9.0 before its TS 10.0"):
        parse_ss_samples(f"TS 10.0\n{SOCK}TE 9.0\n")


def test_the_sampler_loop_writes_ts_and_te_around_each_ss() -> None:
    """The real SS_LOOP on this machine for 0.35 s: TS, ss's lines, TE, in turn, TE never
    before its TS, and the file reads."""
    import signal
    import subprocess

    from ccbench.hosts.linux import LinuxHost

    proc = subprocess.Popen(LinuxHost().ss_sampler(0.1) or [], stdout=subprocess.PIPE, text=True)
    try:
        out, _ = proc.communicate(timeout=0.35)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=5)
    marks = [ln.split() for ln in out.splitlines() if ln[:3] in ("TS ", "TE ")]
    assert len(marks) >= 4, out[:400]
    kinds = [m[0] for m in marks]
    whole = kinds[: len(kinds) - len(kinds) % 2]
    assert whole == ["TS", "TE"] * (len(whole) // 2), kinds
    for ts, te in zip(marks[0::2], marks[1::2], strict=False):
        assert float(te[1]) >= float(ts[1])
    parse_ss_samples(out[: out.rindex("\n") + 1])


ONELINE = CAPTURES / "ss-oneline"  # its make_capture.sh: `ss -O`, tcp_info on the address line


def _blocks(text: str) -> list[list[str]]:
    """The lines of each TS ... TE block."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("TS "):
            out.append([line])
        else:
            out[-1].append(line)
    return out


def test_ss_oneline_is_read_as_the_two_line_form() -> None:
    """ss-both.txt: each `ss -tinHO` block beside the same moment's `ss -tinH` (10 ms
    later). The one-line records have every field the two-line ones have; the same
    lines split in ss's two-line form give the same records exactly."""
    blocks = _blocks((ONELINE / "ss-both.txt").read_text())
    assert len(blocks) == 6
    for one, two in zip(blocks[::2], blocks[1::2], strict=True):
        a = parse_ss_samples("\n".join(one) + "\n")
        b = parse_ss_samples("\n".join(two) + "\n")
        assert [r["local"] for r in a] == [r["local"] for r in b] and len(a) == 2
        for x, y in zip(a, b, strict=True):
            assert {k for k, v in x.items() if v is None} == {k for k, v in y.items() if v is None}
            assert (x["cc"], x["mss_bytes"]) == (y["cc"], y["mss_bytes"])
        data = next(r for r in a if r["cc"] == "cubic")
        assert data["cwnd_bytes"] == data["cwnd_pkts"] * 1448 and data["rtt_us"] > 0
        assert data["delivery_rate_bps"] and data["snd_wnd_bytes"] and data["minrtt_us"]
        split = []
        for line in one:
            cols = line.split()
            two_lines = [" ".join(cols[:4]), "\t " + " ".join(cols[4:])]
            split += [line] if line[:2] in ("TS", "TE") else two_lines
        assert parse_ss_samples("\n".join(split) + "\n") == a


def test_ss_oneline_with_its_header_and_state_column() -> None:
    """`ss -tinO` (no -H, no state filter): the header names no socket; the state
    column is skipped as in the two-line form."""
    lines = (ONELINE / "ss-tinO.txt").read_text().splitlines()
    assert lines[0].startswith("State") and lines[1].startswith("ESTAB")
    recs = parse_ss_samples("\n".join(["TS 1.0", *lines, "TE 1.1"]) + "\n")
    assert [r["cc"] for r in recs] == ["bbr", "cubic"]
    assert recs[1]["send_q_bytes"] == 254848 and recs[1]["cwnd_pkts"] == 36
    assert recs[1]["ssthresh_pkts"] == 35 and recs[1]["rtt_us"] == 3365.0
