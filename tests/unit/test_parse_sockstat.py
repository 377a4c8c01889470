"""FreeBSD per-flow truth: `sockstat -46 -CS -P tcp` parsed and judged against the
variant (captures written from sockstat(1) and from FreeBSD 14's and main's print code,
tests/captures/freebsd/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse import join_hostport, split_hostport
from ccbench.parse.sockstat import connections_to, parse_sockstat
from ccbench.reasons import Code
from ccbench.validity import check_sockstat

CAP = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
TEXT = (CAP / "sockstat-CS-written-from-docs.txt").read_text()
# The previous run's two connections to 10.1.3.21:5202 in TIME_WAIT (freebsd/newreno),
# then this run's iperf3 control (fd 5) and data (fd 7) connections (rack/cubic).
TIMEWAIT_14 = (CAP / "sockstat-CS-14-timewait-written-from-sockstat-c.txt").read_text()
TIMEWAIT_15 = (CAP / "sockstat-CS-15-main-timewait-written-from-main-c.txt").read_text()


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


@pytest.mark.parametrize(
    ("text", "unheld"), [(TIMEWAIT_14, "?"), (TIMEWAIT_15, "??")], ids=["14", "15-main"]
)
def test_written_from_source_timewait_of_previous_run_is_not_this_runs(
    text: str, unheld: str
) -> None:
    rows = parse_sockstat(text)
    assert len(rows) == 7
    old = [r for r in rows if not r.held]
    assert [(r.user, r.command, r.pid, r.fd) for r in old] == [(unheld,) * 4] * 2
    assert [(r.local, r.stack, r.cc) for r in old] == [
        ("10.1.1.11:54198", "freebsd", "newreno"),
        ("10.1.1.11:54197", "freebsd", "newreno"),
    ]
    assert all(r.held for r in rows[:5])
    conns = connections_to(rows, "10.1.3.21", 5202)
    assert [(c.pid, c.fd, c.local) for c in conns] == [
        ("2411", "5", "10.1.1.11:54320"),
        ("2411", "7", "10.1.1.11:54321"),
    ]
    # This run ran what it asked; the old connections would have made it invalid.
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack") == []


def test_held_is_the_pid_not_the_command() -> None:
    # main.c getprocname(): "??" for a process that exited while sockstat ran; its PID
    # and FD are still printed, so the socket is held.
    lines = TIMEWAIT_15.splitlines(keepends=True)
    row = lines[2].replace("iperf3    ", "??        ")
    (sock,) = parse_sockstat(lines[0] + row)
    assert sock.command == "??" and sock.held


def test_written_from_docs_matches_rack_cubic_only() -> None:
    conns = connections_to(parse_sockstat(TEXT), "10.1.3.21", 5202)
    assert check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack") == []
    wrong_stack = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "default")
    assert [(r.code, r.evidence) for r in wrong_stack] == 2 * [
        (Code.STACK_MISMATCH, {"flow": 1, "used": "rack", "asked": "freebsd"})]  # fmt: skip
    # each connection named (control and data cannot be told apart)
    assert [r.text.split(" ran ")[0] for r in wrong_stack] == [
        "flow 1: s1 10.1.1.11:54320 -> 10.1.3.21:5202",
        "flow 1: s1 10.1.1.11:54321 -> 10.1.3.21:5202",
    ]
    # reno is FreeBSD's newreno.
    wrong_cc = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "reno", "rack")
    assert [(r.code, r.evidence) for r in wrong_cc] == 2 * [
        (Code.CC_MISMATCH, {"flow": 1, "used": "cubic", "asked": "newreno"})]  # fmt: skip


def test_one_mismatching_connection_is_enough() -> None:
    # Control and data cannot be told apart: if either ran elsewhere, the run is invalid.
    text = TEXT.replace(
        "7 tcp4   10.1.1.11:54321       10.1.3.21:5202        rack    ",
        "7 tcp4   10.1.1.11:54321       10.1.3.21:5202        freebsd ",
    )
    conns = connections_to(parse_sockstat(text), "10.1.3.21", 5202)
    assert [c.stack for c in conns] == ["rack", "freebsd"]
    reasons = check_sockstat(1, "s1", "10.1.3.21:5202", conns, "cubic", "rack")
    assert [(r.code, r.evidence) for r in reasons] == [
        (Code.STACK_MISMATCH, {"flow": 1, "used": "freebsd", "asked": "rack"})]  # fmt: skip
    assert reasons[0].text.startswith("flow 1: s1 10.1.1.11:54321 -> ")  # the one, named


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
    [unseen] = check_sockstat(2, "s2", "10.1.3.22:5203", [], "cubic", "rack")
    assert (unseen.code, unseen.evidence) == (Code.STACK_UNVERIFIED, {"flow": 2})


def test_without_cc_or_stack_column_is_refused() -> None:
    plain = "\n".join(ln[:75].rstrip() for ln in TEXT.splitlines())
    with pytest.raises(ValueError, match="no STACK or CC column"):
        parse_sockstat(plain)
    with pytest.raises(ValueError, match="no sockstat header"):
        parse_sockstat("sockstat: command not found\n")
    with pytest.raises(ValueError, match="does not fit"):
        parse_sockstat(TEXT + "root iperf3 1 2 tcp4 a:1 b:2 rack cubic extra\n")


def test_split_hostport_reads_what_sockstat_prints() -> None:
    """Every address the captures hold splits into an address and a port (or "*") that
    join back to it; IPv6 as sockstat prints it (bare: sockstat.c printaddr(), main.c
    formataddr() "%s:%d" of the numeric host) and as ccbench writes it (bracketed)."""
    ends = [e for t in (TEXT, TIMEWAIT_14, TIMEWAIT_15) for s in parse_sockstat(t)
            for e in (s.local, s.foreign)]  # fmt: skip
    assert {split_hostport(e) for e in ends} >= {
        ("10.1.1.11", "54320"),
        ("*", "22"),
        ("*", "*"),
        ("10.1.3.21", "5202"),
    }
    assert all(join_hostport(*split_hostport(e)) == e for e in ends)
    assert split_hostport("fe80::1%em0:22") == ("fe80::1%em0", "22")
    assert split_hostport("[fe80::1]:22") == split_hostport("fe80::1:22") == ("fe80::1", "22")
    assert join_hostport("fe80::1", 22) == "[fe80::1]:22"
    with pytest.raises(ValueError, match="without a port"):
        split_hostport("nocolon")
