"""FreeBSD per-flow truth: `sockstat -46 -CS -P tcp` parsed and judged against the
variant (fixture written from sockstat(1), tests/captures/freebsd/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse.sockstat import connections_to, parse_sockstat, split_addr
from ccbench.validity import check_sockstat

CAP = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
TEXT = (CAP / "sockstat-CS-written-from-docs.txt").read_text()


def test_written_from_docs_rows_and_columns() -> None:
    rows = parse_sockstat(TEXT)
    assert len(rows) == 6
    data = rows[1]
    assert (data.command, data.pid, data.fd, data.proto) == ("iperf3", "2411", "7", "tcp4")
    assert (data.local, data.foreign) == ("10.1.1.11:54321", "10.1.3.21:5202")
    assert (data.stack, data.cc) == ("rack", "cubic")
    assert rows[3].foreign == "*:*"


def test_written_from_docs_flow_connections_are_control_and_data_only() -> None:
    conns = connections_to(parse_sockstat(TEXT), "10.1.3.21", 5202)
    # iperf3's control (fd 5) and data (fd 7) connection; the closed one that no process
    # holds (the previous run's, TIME_WAIT, "?" columns) is left out.
    assert [c.fd for c in conns] == ["5", "7"]
    assert connections_to(parse_sockstat(TEXT), "10.1.3.21", 5203) == []
    assert connections_to(parse_sockstat(TEXT), "10.1.3.22", 5201) == []


def test_written_from_docs_matches_rack_cubic_only() -> None:
    conns = connections_to(parse_sockstat(TEXT), "10.1.3.21", 5202)
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack") == []
    wrong_stack = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "default")
    assert wrong_stack == [
        "flow 1: s1 10.1.1.11:54320 -> 10.1.3.21:5202 ran on TCP stack rack, asked freebsd",
        "flow 1: s1 10.1.1.11:54321 -> 10.1.3.21:5202 ran on TCP stack rack, asked freebsd",
    ]
    # reno is FreeBSD's newreno.
    wrong_cc = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "reno", "rack")
    assert len(wrong_cc) == 2 and all("ran CC cubic, asked newreno" in r for r in wrong_cc)


def test_one_mismatching_connection_is_enough() -> None:
    # Control and data cannot be told apart: if either ran elsewhere, the run is invalid.
    text = TEXT.replace(
        "7 tcp4   10.1.1.11:54321       10.1.3.21:5202        rack    ",
        "7 tcp4   10.1.1.11:54321       10.1.3.21:5202        freebsd ",
    )
    conns = connections_to(parse_sockstat(text), "10.1.3.21", 5202)
    assert [c.stack for c in conns] == ["rack", "freebsd"]
    reasons = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack")
    assert reasons == [
        "flow 1: s1 10.1.1.11:54321 -> 10.1.3.21:5202 ran on TCP stack freebsd, asked rack"
    ]


def test_bbr_stack_checks_the_stack_not_the_cc() -> None:
    text = TEXT.replace("rack    ", "bbr     ")
    conns = connections_to(parse_sockstat(text), "10.1.3.21", 5202)
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "bbr", "default") == []
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "bbr", "bbr") == []


def test_stack_alias_is_the_stack() -> None:
    text = TEXT.replace("rack    ", "rack_18q21")
    conns = connections_to(parse_sockstat(text), "10.1.3.21", 5202)
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack") == []


def test_no_connection_seen_is_a_reason() -> None:
    assert check_sockstat(2, "s2", "10.1.3.22:5203", [], "cubic", "rack") == [
        "flow 2: sockstat on s2 lists no connection to 10.1.3.22:5203 while it ran"
    ]


def test_without_cc_or_stack_column_is_refused() -> None:
    plain = "\n".join(ln[:75].rstrip() for ln in TEXT.splitlines())
    with pytest.raises(ValueError, match="no STACK or CC column"):
        parse_sockstat(plain)
    with pytest.raises(ValueError, match="no sockstat header"):
        parse_sockstat("sockstat: command not found\n")
    with pytest.raises(ValueError, match="does not fit"):
        parse_sockstat(TEXT + "root iperf3 1 2 tcp4 a:1 b:2 rack cubic extra\n")


def test_split_addr() -> None:
    assert split_addr("10.1.3.2:5201") == ("10.1.3.2", "5201")
    assert split_addr("[fe80::1]:22") == ("fe80::1", "22")
    assert split_addr("*:*") == ("*", "*")
    with pytest.raises(ValueError):
        split_addr("nocolon")
