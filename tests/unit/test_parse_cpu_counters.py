"""Golden tests of the CPU counters' parsers (ccbench.parse.procstat: Linux /proc/stat
captured on this machine, FreeBSD `sysctl -n kern.cp_time kern.cp_times` written from
the kernel's source) and of iperf3's own CPU figures (ccbench.parse.iperf3, real -J
documents)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccbench.parse.iperf3 import Iperf3Cpu, Iperf3FormatError, parse_iperf3
from ccbench.parse.procstat import (
    parse_counters,
    parse_cp_times,
    parse_cpu_lines,
    usage_between,
    window,
)

CAP = Path(__file__).resolve().parents[1] / "captures"
LOCAL = CAP / "host-cpu" / "local-2cubic"
FBSD = CAP / "freebsd" / "sysctl-n-kern.cp_time-cp_times-4cpu-{}-written-from-kern-clock-c.txt"


def _linux(name: str) -> dict[str, dict[str, int]]:
    return parse_cpu_lines((CAP / name).read_text())


def _freebsd(when: str) -> dict[str, dict[str, int]]:
    return parse_cp_times(Path(str(FBSD).format(when)).read_text())


def test_proc_stat_every_cpu_line() -> None:
    got = _linux("procstat-before.txt")
    assert set(got) == {"cpu", "cpu0", "cpu1"}
    assert got["cpu1"] == {"user": 228669, "nice": 1480, "system": 114636, "idle": 580405,
                           "iowait": 1764, "irq": 0, "softirq": 54692, "steal": 51000}  # fmt: skip


def test_proc_stat_window_all_cpus_and_the_busiest() -> None:
    """Two `yes` loading both vCPUs for 3 s: the aggregate line's deltas are user 261,
    system 335, idle 1, softirq 1, steal 5 of 603; cpu0 user 129, system 170, steal 2
    (301), cpu1 user 132, system 166, steal 2 (300)."""
    w = window(_linux("procstat-before.txt"), _linux("procstat-after.txt"))
    assert w.cpus == 2
    a = w.all_cpus
    assert a is not None and a.ticks == 603
    assert (a.user_pct, a.system_pct, a.irq_pct) == pytest.approx(
        (100 * 261 / 603, 100 * 335 / 603, 0.0))  # fmt: skip
    assert (a.softirq_pct, a.steal_pct) == pytest.approx((100 * 1 / 603, 100 * 5 / 603))
    old = usage_between(*((CAP / f"procstat-{w}.txt").read_text() for w in ("before", "after")))
    assert a.busy_pct == pytest.approx(old["busy_pct"]) == pytest.approx(100 * 597 / 603)
    assert w.busiest is not None
    cpu, top = w.busiest
    assert cpu == "cpu0" and top.ticks == 301 and top.busy_pct == pytest.approx(100 * 299 / 301)


def test_the_local_runs_machine_window() -> None:
    """The machine over a run's traffic (the capture's note: other work kept it busy):
    all CPUs user 635 + nice 9, system 135, idle 2, softirq 98 of 879 ticks; cpu0 never
    idle (softirq 81 of 439)."""
    w = window(*(parse_counters((LOCAL / f"host-cpu-machine-{x}.txt").read_text(), "linux")
                 for x in ("before", "after")))  # fmt: skip
    assert w.cpus == 2 and w.all_cpus is not None and w.all_cpus.ticks == 879
    assert w.all_cpus.user_pct == pytest.approx(100 * 644 / 879)
    assert w.all_cpus.softirq_pct == pytest.approx(100 * 98 / 879)
    assert w.all_cpus.busy_pct == pytest.approx(100 * 877 / 879)
    assert w.busiest is not None and w.busiest[0] == "cpu0"
    assert w.busiest[1].busy_pct == 100.0
    assert w.busiest[1].softirq_pct == pytest.approx(100 * 81 / 439)


def test_freebsd_cp_time_and_cp_times_written_from_source() -> None:
    """CP_USER CP_NICE CP_SYS CP_INTR CP_IDLE (sys/sys/resource.h): the first line all
    CPUs, the second 5 per CPU; intr is read as irq, and FreeBSD has no softirq or steal."""
    before = _freebsd("before")
    assert set(before) == {"cpu", "cpu0", "cpu1", "cpu2", "cpu3"}
    assert before["cpu"] == {"user": 431677, "nice": 17, "system": 343085, "irq": 30863,
                             "idle": 39579467}  # fmt: skip
    assert before["cpu2"] == {"user": 99876, "nice": 5, "system": 76543, "irq": 20987,
                              "idle": 9900456}  # fmt: skip
    # kern.cp_time is the sum of the CPUs' (read_cpu_time in kern_clock.c)
    assert all(before["cpu"][k] == sum(before[f"cpu{i}"][k] for i in range(4))
               for k in before["cpu"])  # fmt: skip
    w = window(before, _freebsd("after"))
    assert w.cpus == 4
    a = w.all_cpus
    assert a is not None and a.ticks == 5080  # 1270 a CPU
    assert (a.user_pct, a.system_pct, a.irq_pct, a.busy_pct) == pytest.approx(
        (100 * 200 / 5080, 100 * 1000 / 5080, 100 * 935 / 5080, 100 * 2135 / 5080))  # fmt: skip
    assert a.softirq_pct is None and a.steal_pct is None
    assert w.busiest is not None and w.busiest[0] == "cpu2"
    assert w.busiest[1].busy_pct == pytest.approx(100 * 1230 / 1270)
    assert w.busiest[1].irq_pct == pytest.approx(100 * 900 / 1270)


def test_freebsd_an_absent_cpu_is_not_counted() -> None:
    """kern.cp_times has a row of zeros for each absent CPU up to mp_maxid."""
    before = parse_cp_times("20 0 20 0 160\n10 0 10 0 80 0 0 0 0 0 10 0 10 0 80\n")
    after = parse_cp_times("40 0 40 0 320\n20 0 20 0 160 0 0 0 0 0 20 0 20 0 160\n")
    w = window(before, after)
    assert w.cpus == 2 and w.all_cpus is not None and w.all_cpus.busy_pct == 20.0


@pytest.mark.parametrize(
    ("text", "what"),
    [
        ("sysctl: unknown oid 'kern.cp_times'\n", "1 lines, 2 expected"),
        ("1 2 3 4 5\n1 2 3 4 x\n", "not `sysctl -n kern.cp_time kern.cp_times` output"),
        ("1 2 3 4 5 6\n1 2 3 4 5\n", "6 and 5 counters"),
        ("1 2 3 4 5\n1 2 3 4 5 6\n", "5 and 6 counters"),
    ],
)
def test_freebsd_output_that_is_not_the_counters(text: str, what: str) -> None:
    with pytest.raises(ValueError, match=what):
        parse_cp_times(text)


def test_a_counter_going_backwards_names_the_cpu_and_field() -> None:
    after, before = _linux("procstat-before.txt"), _linux("procstat-after.txt")
    with pytest.raises(ValueError, match=r"cpu\d? counters went backwards \(user, system"):
        window(before, after)
    with pytest.raises(ValueError, match="no aggregate 'cpu' counters"):
        window({}, after)


# --- iperf3's own CPU (end.cpu_utilization_percent) ----------------------------------


def _doc(name: str) -> dict:
    doc: dict = json.loads((CAP / name).read_text())
    return doc


def test_iperf3_cpu_of_a_client_here() -> None:
    """The client (the sender) is host_*, its server (the receiver) remote_*."""
    cpu = parse_iperf3(_doc("iperf3.12-cubic-5s.json")).cpu
    assert cpu == Iperf3Cpu(
        host_total=0.6649609022426225,
        host_user=0.3595010658732488,
        host_system=0.3052040897426717,
        remote_total=6.18400453481948,
        remote_user=1.1696175084298825,
        remote_system=5.01436705273086,
    )


def test_iperf3_cpu_of_a_server_and_of_a_public_39_client() -> None:
    """A server's document has its own CPU as host_* and zeros for its client's."""
    srv = parse_iperf3(_doc("run-local-wire-cubic-bdp/raw/server-1.json")).cpu
    assert srv is not None and srv.host_total == 13.536937508124183 and srv.remote_total == 0
    cli = parse_iperf3(_doc("run-local-wire-cubic-bdp/raw/iperf3-1.json")).cpu
    assert cli is not None and cli.remote_total == srv.host_total  # exchanged at the end
    pub = parse_iperf3(_doc("iperf3.9-linux-sender-cubic-10s-cloudpilot.json")).cpu
    assert pub is not None
    assert (pub.host_total, pub.remote_total) == (5.92963188151532, 0.1849832330482606)


def test_iperf3_cpu_absent_or_wrong() -> None:
    assert parse_iperf3(_doc("iperf3.12-error-refused.json")).cpu is None
    bad = {"end": {"cpu_utilization_percent": {"host_total": "high"}}}
    with pytest.raises(Iperf3FormatError, match=r"end\.cpu_utilization_percent\.host_total"):
        parse_iperf3(bad)
