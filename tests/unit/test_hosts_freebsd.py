"""Exact command plans of ccbench.hosts.freebsd (no FreeBSD machine is needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.errors import CcbenchError
from ccbench.hosts import HostDriver, driver_for
from ccbench.hosts.freebsd import (
    FREEBSD_CCS,
    FreeBSDHost,
    Step,
    check_stack,
    parse_functions_available,
    resolve_variant,
)

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
H = FreeBSDHost()

# Seed 002 (freebsd-current, 2018), quoted verbatim: the table after `kldload tcp_rack`.
SEED002_FUNCTIONS_AVAILABLE = """\
net.inet.tcp.functions_available:
Stack                           D Alias                            PCB count
freebsd                         * freebsd                          3
rack                              rack                             0
"""

HPTS = Step(["kldload", "-n", "tcphpts"], allow_fail=True)


def stack_steps(stack: str) -> list[Step]:
    """The expected stack part of a plan, written out literally."""
    if stack == "freebsd":
        return [Step(["sysctl", "net.inet.tcp.functions_default=freebsd"])]
    if stack == "rack":
        return [
            HPTS,
            Step(["kldload", "-n", "tcp_rack"]),
            Step(["sysctl", "net.inet.tcp.functions_default=rack"]),
        ]
    assert stack == "bbr"
    return [
        HPTS,
        Step(["kldload", "-n", "tcp_bbr"]),
        Step(["sysctl", "net.inet.tcp.functions_default=bbr"]),
    ]


def cc_steps(cc: str) -> list[Step]:
    if cc == "newreno":  # built into every kernel: nothing to load
        return [Step(["sysctl", "net.inet.tcp.cc.algorithm=newreno"])]
    return [
        Step(["kldload", "-n", f"cc_{cc}"]),
        Step(["sysctl", f"net.inet.tcp.cc.algorithm={cc}"]),
    ]


def test_driver_for_freebsd_is_a_host_driver() -> None:
    d: HostDriver = driver_for("freebsd")
    assert isinstance(d, FreeBSDHost) and d.os == "freebsd"


def test_tune_is_the_seed_sysctl_conf() -> None:
    # seed 001: `sysctl -f /etc/sysctl.conf` on s1/s2, same values and order.
    expected = [
        ["sysctl", "net.inet.tcp.hostcache.enable=0"],
        ["sysctl", "kern.ipc.maxsockbuf=10485760"],
        ["sysctl", "net.inet.tcp.sendbuf_max=10485760"],
        ["sysctl", "net.inet.tcp.recvbuf_max=10485760"],
    ]
    assert H.tune() == expected
    assert H.tune(netns_local=True) == expected


@pytest.mark.parametrize("cc", FREEBSD_CCS)
def test_set_cc_every_module(cc: str) -> None:
    assert H.set_cc_plan(cc) == cc_steps(cc)
    assert [s.argv for s in H.set_cc_plan(cc)] == [s.argv for s in cc_steps(cc)]


def test_set_cc_cubic_exact() -> None:
    assert [s.argv for s in H.set_cc_plan("cubic")] == [
        ["kldload", "-n", "cc_cubic"],
        ["sysctl", "net.inet.tcp.cc.algorithm=cubic"],
    ]


def test_linux_reno_means_newreno() -> None:
    want = [["sysctl", "net.inet.tcp.cc.algorithm=newreno"]]
    assert [s.argv for s in H.set_cc_plan("reno")] == want


def test_set_cc_unknown_names_it() -> None:
    with pytest.raises(CcbenchError, match="unknown FreeBSD congestion control 'westwood'"):
        [s.argv for s in H.set_cc_plan("westwood")]


def test_set_cc_bbr_points_to_the_stack() -> None:
    with pytest.raises(CcbenchError, match="'bbr' is a TCP stack"):
        [s.argv for s in H.set_cc_plan("bbr")]


def test_set_cc_rack_is_a_stack() -> None:
    with pytest.raises(CcbenchError, match="'rack' is a FreeBSD TCP stack"):
        [s.argv for s in H.set_cc_plan("rack")]


@pytest.mark.parametrize(
    ("stack", "name"), [("default", "freebsd"), ("freebsd", "freebsd"), ("rack", "rack"),
                        ("bbr", "bbr")]
)  # fmt: skip
def test_set_stack_plans(stack: str, name: str) -> None:
    assert H.set_stack_plan(stack) == stack_steps(name)
    assert [s.argv for s in H.set_stack_plan(stack)] == [s.argv for s in stack_steps(name)]


def test_set_stack_rack_exact_and_only_tcphpts_may_fail() -> None:
    plan = H.set_stack_plan("rack")
    assert [(s.argv, s.allow_fail) for s in plan] == [
        (["kldload", "-n", "tcphpts"], True),
        (["kldload", "-n", "tcp_rack"], False),
        (["sysctl", "net.inet.tcp.functions_default=rack"], False),
    ]


def test_set_stack_unknown_names_it() -> None:
    with pytest.raises(CcbenchError, match="unknown FreeBSD TCP stack 'fastpath'"):
        [s.argv for s in H.set_stack_plan("fastpath")]


# Every CC x stack combination a FreeBSD variant can name.
CCS = (*FREEBSD_CCS, "reno", "bbr")
STACKS = ("default", "freebsd", "rack", "bbr")


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("cc", CCS)
def test_variant_plan_every_cc_and_stack(cc: str, stack: str) -> None:
    if cc == "bbr":
        if stack in ("default", "bbr"):
            # cc bbr = the tcp_bbr stack, whose CC is built in: no mod_cc step at all.
            assert resolve_variant(cc, stack) == (None, "bbr")
            assert H.variant_plan(cc, stack) == stack_steps("bbr")
        else:
            with pytest.raises(CcbenchError, match=f"cannot run on stack '{stack}'"):
                H.variant_plan(cc, stack)
        return
    if stack == "bbr":
        # {cc: cubic, stack: bbr} would label a run with a CC the bbr stack ignores.
        with pytest.raises(CcbenchError, match=f"must say cc 'bbr', not '{cc}'"):
            H.variant_plan(cc, stack)
        return
    module = "newreno" if cc == "reno" else cc
    stack_n = "freebsd" if stack == "default" else stack
    assert resolve_variant(cc, stack) == (module, stack_n)
    assert H.variant_plan(cc, stack) == stack_steps(stack_n) + cc_steps(module)


def test_variant_plan_rack_cubic_exact() -> None:
    # seed 001: tcp_rack + tcphpts loaded, functions_default=rack, iperf3 -C cubic.
    assert [(s.argv, s.allow_fail) for s in H.variant_plan("cubic", "rack")] == [
        (["kldload", "-n", "tcphpts"], True),
        (["kldload", "-n", "tcp_rack"], False),
        (["sysctl", "net.inet.tcp.functions_default=rack"], False),
        (["kldload", "-n", "cc_cubic"], False),
        (["sysctl", "net.inet.tcp.cc.algorithm=cubic"], False),
    ]


def test_facts_keys_and_commands() -> None:
    facts = H.facts()
    assert list(facts) == [
        "uname",
        "uname_v",
        "kernel",
        "build_id",
        "cc_available",
        "cc_default",
        "functions_available",
        "functions_default",
        "kern_hz",
        "kldstat",
        "iperf3",
        "hostcache_enable",
        "maxsockbuf",
        "sendbuf_max",
        "recvbuf_max",
    ]
    assert facts["uname"] == ["uname", "-a"]
    assert facts["uname_v"] == ["uname", "-v"]
    assert facts["functions_available"] == ["sysctl", "-n", "net.inet.tcp.functions_available"]
    assert facts["cc_available"] == ["sysctl", "-n", "net.inet.tcp.cc.available"]
    assert facts["cc_default"] == ["sysctl", "-n", "net.inet.tcp.cc.algorithm"]
    assert facts["kern_hz"] == ["sysctl", "-n", "kern.hz"]
    assert facts["kldstat"] == ["kldstat"]
    assert facts["iperf3"] == ["iperf3", "--version"]
    assert facts["maxsockbuf"] == ["sysctl", "-n", "kern.ipc.maxsockbuf"]
    # The kernel identity a variant's kernel.match is searched in (ccbench.kernel).
    assert facts["kernel"] == ["sysctl", "-n", "kern.version", "kern.ident"]
    assert facts["build_id"] == ["sysctl", "-n", "kern.build_id"]
    assert H.kernel_identity() == {k: facts[k] for k in ("kernel", "build_id")}


def test_iperf3_server() -> None:
    assert H.iperf3_server(5201) == ["iperf3", "-s", "-1", "-p", "5201"]
    assert H.iperf3_server(5201, 0.5) == ["iperf3", "-s", "-1", "-p", "5201", "-i", "0.5", "-J"]


def test_iperf3_client_cubic() -> None:
    assert H.iperf3_client("10.1.3.21", 5201, "cubic", 300, 1) == [
        "iperf3", "-c", "10.1.3.21", "-p", "5201", "-C", "cubic", "-l", "1M",
        "-t", "300", "-i", "1", "-J",
    ]  # fmt: skip


def test_iperf3_client_reno_is_newreno_and_streams() -> None:
    assert H.iperf3_client("10.1.3.21", 5202, "reno", 10.5, 0.1, streams=2) == [
        "iperf3", "-c", "10.1.3.21", "-p", "5202", "-C", "newreno", "-l", "1M",
        "-t", "10.5", "-i", "0.1", "-J", "-P", "2",
    ]  # fmt: skip


def test_iperf3_client_bbr_has_no_cc_option() -> None:
    # The bbr stack is host-wide (variant_plan); there is no mod_cc "bbr" for -C.
    assert H.iperf3_client("10.1.3.21", 5201, "bbr", 30, 1) == [
        "iperf3", "-c", "10.1.3.21", "-p", "5201", "-l", "1M", "-t", "30", "-i", "1", "-J",
    ]  # fmt: skip


def test_iperf3_client_unknown_cc() -> None:
    with pytest.raises(CcbenchError, match="'foo'"):
        H.iperf3_client("10.1.3.21", 5201, "foo", 30, 1)


@pytest.mark.parametrize("logger", ["siftr", "siftr2"])
def test_siftr_start_and_stop(logger: str) -> None:
    assert H.siftr_start("/var/tmp/ccbench.siftr.log", 5201, logger=logger) == [
        ["kldload", "-n", logger],
        ["sysctl", f"net.inet.{logger}.logfile=/var/tmp/ccbench.siftr.log"],
        ["sysctl", f"net.inet.{logger}.ppl=1"],
        ["sysctl", f"net.inet.{logger}.port_filter=5201"],
        ["sysctl", f"net.inet.{logger}.enabled=1"],
    ]
    assert H.siftr_stop(logger) == [["sysctl", f"net.inet.{logger}.enabled=0"]]


def test_siftr_defaults_and_bad_arguments() -> None:
    assert H.siftr_start("/tmp/s.log", 0, ppl=10)[2:4] == [
        ["sysctl", "net.inet.siftr.ppl=10"],
        ["sysctl", "net.inet.siftr.port_filter=0"],  # 0: every port
    ]
    with pytest.raises(CcbenchError, match="unknown FreeBSD logger 'dtrace'"):
        H.siftr_start("/tmp/s.log", 5201, logger="dtrace")
    with pytest.raises(CcbenchError, match="absolute path"):
        H.siftr_start("s.log", 5201)
    with pytest.raises(CcbenchError, match="not in 1..65535"):
        H.siftr_start("/tmp/s.log", 70000)
    # siftr keeps its per-flow packet counter in 16 bits (sys/netinet/siftr.c)
    for ppl in (0, 65536):
        with pytest.raises(CcbenchError, match=r"ppl \(packets per log line\) must be 1..65535"):
            H.siftr_start("/tmp/s.log", 5201, ppl=ppl)


def test_offloads_off() -> None:
    assert H.offloads_off("ix1") == [
        Step(["ifconfig", "ix1", "-tso", "-lro", "-txcsum", "-rxcsum"]),
        Step(["ifconfig", "ix1", "-txcsum6", "-rxcsum6"], allow_fail=True),
    ]
    with pytest.raises(CcbenchError, match="bad interface name"):
        H.offloads_off("ix1; reboot")


def test_verify_stack_command() -> None:
    assert H.verify_stack("rack") == ["sysctl", "-n", "net.inet.tcp.functions_available"]


# --- functions_available ------------------------------------------------------
def test_parse_functions_available_seed002_real() -> None:
    expected = {
        "freebsd": {"default": True, "alias": "freebsd", "aliases": ["freebsd"], "pcb_count": 3},
        "rack": {"default": False, "alias": "rack", "aliases": ["rack"], "pcb_count": 0},
    }
    assert parse_functions_available(SEED002_FUNCTIONS_AVAILABLE) == expected
    # The capture file holds the same lines, copied from the seed by sed.
    text = (CAPTURES / "functions_available-seed002.txt").read_text()
    assert text == SEED002_FUNCTIONS_AVAILABLE
    assert parse_functions_available(text) == expected


def test_check_stack_on_seed002() -> None:
    parsed = parse_functions_available(SEED002_FUNCTIONS_AVAILABLE)
    assert check_stack(parsed, "default") == []
    assert check_stack(parsed, "freebsd") == []
    # Before `sysctl net.inet.tcp.functions_default=rack`: loaded but not the default.
    assert check_stack(parsed, "rack") == ["default TCP stack is 'freebsd', not 'rack'"]
    assert check_stack(parsed, "bbr") == [
        "TCP stack 'bbr' is not loaded (functions_available: freebsd, rack)"
    ]


def test_parse_functions_available_rack_default_written_from_source() -> None:
    text = (CAPTURES / "functions_available-rack-written-from-source.txt").read_text()
    parsed = parse_functions_available(text)
    assert parsed == {
        "freebsd": {"default": False, "alias": "freebsd", "aliases": ["freebsd"], "pcb_count": 0},
        "rack": {"default": True, "alias": "rack", "aliases": ["rack"], "pcb_count": 2},
        "bbr": {"default": False, "alias": None, "aliases": [], "pcb_count": 0},
    }
    assert check_stack(parsed, "rack") == []
    assert check_stack(parsed, "default") == ["default TCP stack is 'rack', not 'freebsd'"]


def test_parse_functions_available_merges_alias_rows() -> None:
    text = (
        "Stack                           D Alias                            PCB count\n"
        "freebsd                         * freebsd                          3\n"
        "rack                              rack                             1\n"
        "rack                              rack_latest                      1\n"
    )
    parsed = parse_functions_available(text)
    assert parsed["rack"] == {
        "default": False, "alias": "rack", "aliases": ["rack", "rack_latest"], "pcb_count": 1,
    }  # fmt: skip
    assert check_stack(parsed, "rack") == ["default TCP stack is 'freebsd', not 'rack'"]


def test_parse_functions_available_garbage() -> None:
    with pytest.raises(ValueError, match="no 'Stack D Alias PCB count' table"):
        parse_functions_available("sysctl: unknown oid 'net.inet.tcp.functions_available'")


# --- cc.available ---------------------------------------------------------------


def test_receive_buffer_facts_is_one_sysctl_call() -> None:
    argv = H.receive_buffer_facts()
    assert argv[0] == "sysctl" and "net.inet.tcp.recvbuf_max" in argv
