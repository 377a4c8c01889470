"""Exact command plans of ccbench.hosts.linux.LinuxHost (nothing is run)."""

from __future__ import annotations

import pytest

from ccbench.errors import CcbenchError
from ccbench.hosts import HostDriver, driver_for
from ccbench.hosts.linux import SS_LOOP, LinuxHost
from ccbench.spec import Topology

H = LinuxHost()
DEV = "rt1-eth1"


def test_driver_for_linux() -> None:
    d: HostDriver = driver_for("linux")
    assert isinstance(d, LinuxHost) and d.os == "linux"
    with pytest.raises(ValueError, match="no host driver for OS 'windows'"):
        driver_for("windows")


def test_tune_real_host_is_the_seed_sysctls() -> None:
    # seed 001, Linux receivers: `sysctl -p` with 10 MB maxima and no metrics cache.
    assert H.tune() == [
        ["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_no_metrics_save=1"],
        ["sysctl", "-w", "net.core.rmem_max=10485760"],
        ["sysctl", "-w", "net.core.wmem_max=10485760"],
    ]


def test_tune_in_a_namespace_skips_host_only_knobs() -> None:
    # Most of net.core.* is not a namespace's own: a namespace gets only netns_core_table
    # (Linux net/core/sysctl_net_core.c, sysctl_core_net_init).
    assert H.tune(netns_local=True) == [
        ["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_no_metrics_save=1"],
    ]


def test_a_linux_variant_has_one_stack() -> None:
    H.check_variant("cubic", "default")
    with pytest.raises(CcbenchError, match="stack 'rack' is a FreeBSD setting"):
        H.check_variant("cubic", "rack")


def test_facts_keys() -> None:
    facts = H.facts()
    assert list(facts) == [
        "uname", "kernel", "build_id", "cc_available", "cc_default", "tcp_rmem", "tcp_wmem",
        "tcp_no_metrics_save", "tcp_recovery", "iperf3",
    ]  # fmt: skip
    assert facts["kernel"] == ["uname", "-r", "-v"]
    assert facts["build_id"] == ["od", "-An", "-v", "-tx1", "/sys/kernel/notes"]
    assert H.kernel_identity() == {k: facts[k] for k in ("kernel", "build_id")}
    assert facts["cc_available"] == [
        "sysctl", "-n", "net.ipv4.tcp_available_congestion_control",
    ]  # fmt: skip


def test_iperf3_server() -> None:
    assert H.iperf3_server(5201) == ["iperf3", "-s", "-1", "-p", "5201"]
    assert H.iperf3_server(5201, 0.5) == ["iperf3", "-s", "-1", "-p", "5201", "-i", "0.5", "-J"]


def test_iperf3_client_one_stream() -> None:
    assert H.iperf3_client("10.1.3.21", 5201, "cubic", 300, 1) == [
        "iperf3", "-c", "10.1.3.21", "-p", "5201", "-C", "cubic", "-l", "1M",
        "-t", "300", "-i", "1", "-J",
    ]  # fmt: skip


def test_iperf3_client_fractional_and_parallel() -> None:
    assert H.iperf3_client("198.18.1.2", 5202, "bbr", 2.5, 0.1, streams=4) == [
        "iperf3", "-c", "198.18.1.2", "-p", "5202", "-C", "bbr", "-l", "1M",
        "-t", "2.5", "-i", "0.1", "-J", "-P", "4",
    ]  # fmt: skip


# --- bottleneck -------------------------------------------------------------------
def test_bottleneck_tbf_pfifo_100mbit() -> None:
    # 1 ms at 100 Mbit is 12500 B, under 10 frames (15140 B): the 10-frame floor wins.
    topo = Topology(rate_mbit=100, queue_kind="pfifo", queue_limit_pkts=48)
    assert H.bottleneck(DEV, topo) == [
        ["tc", "qdisc", "del", "dev", DEV, "root"],
        ["tc", "qdisc", "add", "dev", DEV, "root", "handle", "1:", "tbf",
         "rate", "100000000bit", "burst", "15140", "latency", "1s"],
        ["tc", "qdisc", "add", "dev", DEV, "parent", "1:1", "handle", "10:",
         "pfifo", "limit", "48"],
    ]  # fmt: skip


def test_bottleneck_tbf_1gbit_burst_is_one_ms() -> None:
    topo = Topology(rate_mbit=1000, queue_kind="pfifo", queue_limit_pkts=48)
    assert H.bottleneck(DEV, topo)[1] == [
        "tc", "qdisc", "add", "dev", DEV, "root", "handle", "1:", "tbf",
        "rate", "1000000000bit", "burst", "125000", "latency", "1s",
    ]  # fmt: skip


def test_bottleneck_htb_bfifo() -> None:
    topo = Topology(rate_mbit=500, queue_kind="bfifo", queue_limit_pkts=48)
    assert H.bottleneck(DEV, topo, shaper="htb") == [
        ["tc", "qdisc", "del", "dev", DEV, "root"],
        ["tc", "qdisc", "add", "dev", DEV, "root", "handle", "1:", "htb", "default", "1"],
        ["tc", "class", "add", "dev", DEV, "parent", "1:", "classid", "1:1", "htb",
         "rate", "500000000bit", "ceil", "500000000bit", "burst", "62500", "cburst", "62500"],
        ["tc", "qdisc", "add", "dev", DEV, "parent", "1:1", "handle", "10:",
         "bfifo", "limit", "72672"],  # 48 frames of 1514 B
    ]  # fmt: skip


def test_bottleneck_unknown_shaper() -> None:
    with pytest.raises(CcbenchError, match="unknown shaper 'cake'"):
        H.bottleneck(DEV, Topology(), shaper="cake")


@pytest.mark.parametrize(
    ("kind", "args"),
    [
        ("pfifo", ["pfifo", "limit", "48"]),
        ("bfifo", ["bfifo", "limit", "72672"]),
        ("fq_codel", ["fq_codel", "limit", "48"]),
        ("codel", ["codel", "limit", "48"]),
        ("pie", ["pie", "limit", "48"]),
        # RED in bytes: limit 48 x 1514, min 1/4, max 3/4 of it, burst (2 min + max) /
        # (3 avpkt) = 90840 / 4542 = 20 packets.
        ("red", ["red", "limit", "72672", "min", "18168", "max", "54504", "avpkt", "1514",
                 "burst", "20", "bandwidth", "100000000bit", "probability", "0.1"]),
    ],
)  # fmt: skip
def test_queue_args(kind: str, args: list[str]) -> None:
    assert H.queue_args(Topology(rate_mbit=100, queue_kind=kind, queue_limit_pkts=48)) == args


def test_queue_args_red_small_queue_floors() -> None:
    # 2 packets: min and max are floored at 1 and 2 frames.
    topo = Topology(rate_mbit=10, queue_kind="red", queue_limit_pkts=2)
    assert H.queue_args(topo) == [
        "red", "limit", "3028", "min", "1514", "max", "3028", "avpkt", "1514",
        "burst", "2", "bandwidth", "10000000bit", "probability", "0.1",
    ]  # fmt: skip


def test_queue_args_unknown() -> None:
    with pytest.raises(CcbenchError, match="unknown queue 'sfq'"):
        H.queue_args(Topology(queue_kind="sfq"))


def test_qdisc_stats() -> None:
    assert H.qdisc_stats(DEV) == ["tc", "-s", "-j", "qdisc", "show", "dev", DEV]


# --- delay and loss ---------------------------------------------------------------
def test_netem_delay() -> None:
    assert H.netem_delay("dl-eth0", 20) == [
        ["tc", "qdisc", "del", "dev", "dl-eth0", "root"],
        ["tc", "qdisc", "add", "dev", "dl-eth0", "root", "netem", "delay", "20ms",
         "limit", "1000000"],
    ]  # fmt: skip
    assert H.netem_delay("dl-eth0", 12.5)[1][8] == "12.5ms"


@pytest.mark.parametrize(("rate", "every"), [(0.01, "100"), (0.02, "50"), (0.03, "33"),
                                             (0.04, "25"), (0.25, "4")])  # fmt: skip
def test_loss_nth_matches_seed001(rate: float, every: str) -> None:
    # seed 001: --every 100/50/33/25 for 1/2/3/4 % loss.
    assert H.loss(Topology(loss_mode="nth", loss_rate=rate)) == [
        ["iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "5202:6201", "-m", "statistic",
         "--mode", "nth", "--every", every, "--packet", "0", "-j", "DROP"],
    ]  # fmt: skip


def test_loss_random_and_chain() -> None:
    assert H.loss(Topology(loss_mode="random", loss_rate=0.0005), chain="FORWARD") == [
        ["iptables", "-w", "-A", "FORWARD", "-p", "tcp", "--dport", "5202:6201", "-m", "statistic",
         "--mode", "random", "--probability", "0.000500", "-j", "DROP"],
    ]  # fmt: skip


def test_loss_none() -> None:
    assert H.loss(Topology()) == []
    assert H.loss(Topology(loss_mode="nth", loss_rate=0.0)) == []


def test_nfqueue_forwarding_offloads_ss() -> None:
    assert H.nfqueue_forwarded(3) == [
        "iptables", "-w", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "3",
    ]  # fmt: skip
    # delay_direction reverse: only what dl receives from rt2 (r -> s)
    assert H.nfqueue_forwarded(0, "to-rt2") == [
        "iptables", "-w", "-A", "FORWARD", "-i", "to-rt2", "-j", "NFQUEUE", "--queue-num", "0",
    ]  # fmt: skip
    assert H.forwarding() == [["sysctl", "-w", "net.ipv4.ip_forward=1"]]
    assert H.offloads_off("veth0") == [
        "ethtool", "-K", "veth0", "tso", "off", "gso", "off", "gro", "off",
    ]  # fmt: skip
    assert H.offloads_show("veth0") == ["ethtool", "-k", "veth0"]
    assert H.ss_sampler(0.1) == ["bash", "-c", SS_LOOP, "ccbench-ss", "100000"]
    assert "ss -tinH state established" in SS_LOOP


def test_receive_buffer_facts_is_one_sysctl_call() -> None:
    argv = H.receive_buffer_facts()
    assert argv[0] == "sysctl" and "net.ipv4.tcp_rmem" in argv
