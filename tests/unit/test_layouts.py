"""testbed.layout: the layouts' exact command plans (argv lists, as the local testbed runs
them), the calibration's read-back rules, and the refusals of a layout where it cannot
work (one clear line, exit 2)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import topology
from ccbench.cli import main
from ccbench.errors import CcbenchError
from ccbench.hosts.linux import LinuxHost
from ccbench.spec import Topology
from ccbench.testbed import kinds
from ccbench.testbed import local_layouts as plans
from ccbench.testbed.local_layouts import Cmd, Write
from tests.unit.test_matrix import write_inventory

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
MV = topology.layout("macvlan")
ROUTED = topology.layout("routed")


def ns(node: str) -> str:
    return f"ccb-t-{node}"


def _topo(**kw: Any) -> Topology:
    args: dict[str, Any] = {"pairs": 2, "rate_mbit": 1000, "rtt_ms": 40,
                            "queue_kind": "pfifo", "queue_limit_pkts": 48, **kw}  # fmt: skip
    return Topology(**args)


def _plan(lay: topology.Layout, cpus: int = 2, **kw: Any) -> plans.BuildPlan:
    return plans.build_plan(lay, ns, _topo(**kw), LinuxHost(), "tbf", cpus)


def c(node: str | None, *argv: str) -> Cmd:
    return Cmd(node, argv)


OFF = ("tso", "off", "gso", "off", "gro", "off")


def veth_end(node: str, dev: str, addr: str | None, rps: str) -> list[Any]:
    head = [c(node, "ip", "addr", "add", addr, "dev", dev)] if addr else []
    return [*head, c(node, "ip", "link", "set", dev, "mtu", "1500"),
            c(node, "ethtool", "-K", dev, *OFF),
            Write(node, f"/sys/class/net/{dev}/queues/rx-0/rps_cpus", rps),
            c(node, "ip", "link", "set", dev, "up")]  # fmt: skip


def macvlan(hub: str, host: str, addr: str) -> list[Cmd]:
    return [
        c(hub, "ip", "link", "add", "link", "to-rt1", "name", "mv0", "netns", ns(host),
          "type", "macvlan", "mode", "bridge"),
        c(host, "ip", "addr", "add", addr, "dev", "mv0"),
        c(host, "ip", "link", "set", "mv0", "mtu", "1500"),
        c(host, "ethtool", "-K", "mv0", *OFF),
        c(host, "ip", "link", "set", "mv0", "up"),
    ]  # fmt: skip


TUNE = [("sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 10485760"),
        ("sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 10485760"),
        ("sysctl", "-w", "net.ipv4.tcp_no_metrics_save=1")]  # fmt: skip


def test_macvlan_plan_is_exactly_this() -> None:
    """Two veth pairs into rt1, a macvlan per host on its hub, one forwarding namespace,
    only rt1's data ingress (to-hubs) on CPU 0 of two, the bottleneck on rt1's egress
    toward the receivers' hub: the layout measured in /work/gbit-lab (Mr-t)."""
    p = _plan(MV, loss_mode="nth", loss_rate=0.01)
    assert p.namespaces == ["s1", "s2", "hubs", "rt1", "hubr", "r1", "r2"]
    assert p.links == [
        c(None, "ip", "link", "add", "to-rt1", "netns", ns("hubs"), "type", "veth", "peer",
          "name", "to-hubs", "netns", ns("rt1")),
        *veth_end("hubs", "to-rt1", None, "2"),
        *veth_end("rt1", "to-hubs", "198.18.1.1/24", "1"),
        c(None, "ip", "link", "add", "to-hubr", "netns", ns("rt1"), "type", "veth", "peer",
          "name", "to-rt1", "netns", ns("hubr")),
        *veth_end("rt1", "to-hubr", "198.18.4.1/24", "2"),
        *veth_end("hubr", "to-rt1", None, "2"),
        *macvlan("hubs", "s1", "198.18.1.2/24"),
        *macvlan("hubs", "s2", "198.18.1.3/24"),
        *macvlan("hubr", "r1", "198.18.4.2/24"),
        *macvlan("hubr", "r2", "198.18.4.3/24"),
    ]  # fmt: skip
    lo = ("ip", "link", "set", "lo", "up")
    host = [lo, *TUNE]
    assert p.nodes == [
        *(Cmd(n, a) for n in ("s1", "s2") for a in host),
        Cmd("hubs", lo),
        Cmd("rt1", lo), c("rt1", "sysctl", "-w", "net.ipv4.ip_forward=1"),
        Cmd("hubr", lo),
        *(Cmd(n, a) for n in ("r1", "r2") for a in host),
    ]  # fmt: skip
    assert p.routes == [
        c("s1", "ip", "route", "add", "default", "via", "198.18.1.1"),
        c("r1", "ip", "route", "add", "default", "via", "198.18.4.1"),
        c("s2", "ip", "route", "add", "default", "via", "198.18.1.1"),
        c("r2", "ip", "route", "add", "default", "via", "198.18.4.1"),
    ]
    assert p.bottleneck == [
        c("rt1", "tc", "qdisc", "add", "dev", "to-hubr", "root", "handle", "1:", "tbf",
          "rate", "1000000000bit", "burst", "125000", "latency", "1s"),
        c("rt1", "tc", "qdisc", "add", "dev", "to-hubr", "parent", "1:1", "handle", "10:",
          "pfifo", "limit", "48"),
    ]  # fmt: skip
    drop = ("iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "5202:6201", "-m",
            "statistic", "--mode", "nth",
            "--every", "100", "--packet", "0", "-j", "DROP")  # fmt: skip
    assert p.loss == [Cmd("r1", drop), Cmd("r2", drop)]


def test_routed_plan_is_the_seeds_dumbbell() -> None:
    """The default layout's plan, one pair: a veth per hop, every end's receive work on
    every CPU but the releaser's. Checked 2026-11-25 against the code before layouts
    existed: the same argv, in the same order, for 1 and 2 pairs, both directions."""
    p = _plan(ROUTED, cpus=4, pairs=1)
    assert p.namespaces == ["s1", "rt1", "dl", "rt2", "r1"]
    assert p.links == [
        c(None, "ip", "link", "add", "to-rt1", "netns", ns("s1"), "type", "veth", "peer",
          "name", "to-s1", "netns", ns("rt1")),
        *veth_end("s1", "to-rt1", "198.18.1.2/30", "7"),
        *veth_end("rt1", "to-s1", "198.18.1.1/30", "7"),
        c(None, "ip", "link", "add", "to-dl", "netns", ns("rt1"), "type", "veth", "peer",
          "name", "to-rt1", "netns", ns("dl")),
        *veth_end("rt1", "to-dl", "198.18.2.1/30", "7"),
        *veth_end("dl", "to-rt1", "198.18.2.2/30", "7"),
        c(None, "ip", "link", "add", "to-rt2", "netns", ns("dl"), "type", "veth", "peer",
          "name", "to-dl", "netns", ns("rt2")),
        *veth_end("dl", "to-rt2", "198.18.3.1/30", "7"),
        *veth_end("rt2", "to-dl", "198.18.3.2/30", "7"),
        c(None, "ip", "link", "add", "to-r1", "netns", ns("rt2"), "type", "veth", "peer",
          "name", "to-rt2", "netns", ns("r1")),
        *veth_end("rt2", "to-r1", "198.18.4.1/30", "7"),
        *veth_end("r1", "to-rt2", "198.18.4.2/30", "7"),
    ]  # fmt: skip
    fwd = ("sysctl", "-w", "net.ipv4.ip_forward=1")
    lo = ("ip", "link", "set", "lo", "up")
    assert p.nodes == [Cmd("s1", lo), *(Cmd("s1", a) for a in TUNE),
                       *(x for n in ("rt1", "dl", "rt2") for x in (Cmd(n, lo), Cmd(n, fwd))),
                       Cmd("r1", lo), *(Cmd("r1", a) for a in TUNE)]  # fmt: skip
    assert p.routes == [
        c("s1", "ip", "route", "add", "default", "via", "198.18.1.1"),
        c("r1", "ip", "route", "add", "default", "via", "198.18.4.1"),
        c("rt1", "ip", "route", "add", "198.18.4.0/24", "via", "198.18.2.2"),
        c("rt1", "ip", "route", "add", "198.18.3.0/30", "via", "198.18.2.2"),
        c("dl", "ip", "route", "add", "198.18.1.0/24", "via", "198.18.2.1"),
        c("dl", "ip", "route", "add", "198.18.4.0/24", "via", "198.18.3.2"),
        c("rt2", "ip", "route", "add", "198.18.1.0/24", "via", "198.18.3.1"),
        c("rt2", "ip", "route", "add", "198.18.2.0/30", "via", "198.18.3.1"),
    ]
    assert [s.argv[4] for s in p.bottleneck if isinstance(s, Cmd)] == ["to-dl", "to-dl"]
    assert p.loss == []


@pytest.mark.parametrize(("cpus", "spare", "releaser"), [(1, "1", "1"), (2, "1", "2"),
                                                         (4, "7", "8")])  # fmt: skip
def test_rps_masks(cpus: int, spare: str, releaser: str) -> None:
    assert plans.rps_mask(ROUTED, "rt2", "to-dl", cpus) == spare
    assert plans.rps_mask(MV, "rt1", "to-hubs", cpus) == spare  # the data's way in
    for node, dev in (("hubs", "to-rt1"), ("hubr", "to-rt1"), ("rt1", "to-hubr")):
        assert plans.rps_mask(MV, node, dev, cpus) == releaser


def test_delay_plans() -> None:
    """Where the RTT goes: the routed layout's dl (both ways, or the ACK path), the
    macvlan layout's rt1, on the ACKs that come in from the receivers' hub."""
    h = LinuxHost()
    assert plans.one_way_ms(40, True) == 40 and plans.one_way_ms(40, False) == 20
    nfq = ("iptables", "-w", "-A", "FORWARD", "-i", "to-hubr", "-j", "NFQUEUE",
           "--queue-num", "0")  # fmt: skip
    assert plans.nfqueue_plan(MV, True, h) == Cmd("rt1", nfq)
    assert plans.nfqueue_plan(ROUTED, True, h) == Cmd("dl", (*nfq[:5], "to-rt2", *nfq[6:]))
    assert plans.nfqueue_plan(ROUTED, False, h) == Cmd("dl", (*nfq[:4], *nfq[6:]))
    netem = ("tc", "qdisc", "add", "dev", "to-hubs", "root", "netem", "delay", "40ms",
             "limit", "1000000")  # fmt: skip
    assert plans.netem_plan(MV, True, 40, h) == [Cmd("rt1", netem)]
    assert [x.argv[4] for x in plans.netem_plan(ROUTED, False, 20, h)] == ["to-rt1", "to-rt2"]
    assert plans.ccdelay_argv("/b/ccdelay", 40, Path("/s.json"), 1) == [
        "/b/ccdelay", "--queue", "0", "--delay-us", "40000", "--stats", "/s.json",
        "--rt-prio", "10", "--cpu", "0,1"]  # fmt: skip


def test_layout_addresses_and_stacking() -> None:
    assert [MV.address(n, 3) for n in ("s1", "s3", "r2")] == [
        "198.18.1.2", "198.18.1.4", "198.18.4.3"]  # fmt: skip
    with pytest.raises(ValueError):
        MV.address("s4", 3)
    assert MV.stacked(1) == {"s1 mv0": "hubs to-rt1", "r1 mv0": "hubr to-rt1"}
    assert ROUTED.stacked(2) == {}
    assert (MV.bottleneck, ROUTED.bottleneck) == (("rt1", "to-hubr"), ("rt1", "to-dl"))


# --- calibration read-backs ----------------------------------------------------------

# Real captures of a macvlan testbed here (tests/captures/README.md, macvlan/).
CAP = REPO / "tests" / "captures" / "macvlan"
ETHTOOL_MACVLAN = (CAP / "ethtool-k-mv0.txt").read_text()
ETHTOOL_VETH = (CAP / "ethtool-k-hubs-to-rt1.txt").read_text()


def test_offload_rule_accepts_a_macvlans_fixed_tso_only() -> None:
    mv = plans.offload_state(ETHTOOL_MACVLAN)
    assert mv == {"tso": "on [fixed]", "gso": "off", "gro": "off"}
    assert plans.offload_problem("s1/mv0", plans.MACVLAN, mv) is None
    assert plans.offload_problem("s1/mv0", plans.VETH, mv) == "s1/mv0: offloads still on: tso"
    # tso on but not fixed (it could have been turned off): a problem on a macvlan too
    switched = ETHTOOL_MACVLAN.replace("tx-tcp-segmentation: on [fixed]", "tx-tcp-segmentation: on")
    assert switched != ETHTOOL_MACVLAN
    st = plans.offload_state(switched)
    assert plans.offload_problem("s1/mv0", plans.MACVLAN, st) == "s1/mv0: offloads still on: tso"
    gro = plans.offload_state(
        ETHTOOL_MACVLAN.replace("receive-offload: off", "receive-offload: on")
    )
    assert plans.offload_problem("r1/mv0", plans.MACVLAN, gro) == "r1/mv0: offloads still on: gro"
    veth = plans.offload_state(ETHTOOL_VETH)
    assert plans.offload_problem("hubs/to-rt1", plans.VETH, veth) is None
    assert plans.offload_problem("x/y", plans.VETH, {"tso": "off"}) == (
        "x/y: offloads not read back: gso, gro"
    )
    devs = plans.offload_devices(MV, 1)
    assert [d for d in devs if d[2] == plans.MACVLAN] == [("s1", "mv0", "macvlan"),
                                                           ("r1", "mv0", "macvlan")]  # fmt: skip
    assert len([d for d in devs if d[2] == plans.VETH]) == 4  # both ends of both pairs


TC_RT1 = (CAP / "tc-j-qdisc-show-rt1.json").read_text()


def test_no_queue_outside_the_bottleneck() -> None:
    allowed = plans.queue_devices(MV, netem=False, reverse=True)
    seen, problems = plans.queue_problems("rt1", TC_RT1, allowed)
    assert seen == {"lo": ["noqueue"], "to-hubs": ["noqueue"], "to-hubr": ["tbf", "pfifo"]}
    assert problems == []
    s1 = (CAP / "tc-j-qdisc-show-s1.json").read_text()
    assert plans.queue_problems("s1", s1, allowed) == ({"lo": ["noqueue"], "mv0": ["noqueue"]}, [])
    # as if to-hubs had a default qdisc (a device made without IFF_NO_QUEUE)
    other = TC_RT1.replace('"noqueue","handle":"0:","dev":"to-hubs"',
                           '"pfifo_fast","handle":"0:","dev":"to-hubs"')  # fmt: skip
    assert other != TC_RT1
    assert plans.queue_problems("rt1", other, allowed)[1] == [
        "rt1/to-hubs: a queue outside the bottleneck (pfifo_fast)"]  # fmt: skip
    # netem carries the delay: its device may hold netem, and nothing else
    with_netem = plans.queue_devices(MV, netem=True, reverse=True)
    netem = other.replace("pfifo_fast", "netem")
    assert plans.queue_problems("rt1", netem, with_netem)[1] == []
    assert plans.queue_problems("rt1", netem, allowed)[1] == [
        "rt1/to-hubs: a queue outside the bottleneck (netem)"]  # fmt: skip
    assert plans.queue_problems("rt1", "garbage", allowed)[1] == [
        "rt1: tc -j qdisc show: not JSON"]  # fmt: skip


# --- the key and its refusals --------------------------------------------------------


def test_testbed_config_layout_key() -> None:
    assert kinds.TestbedConfig().layout == "routed"
    assert "layout" not in kinds.TestbedConfig().to_dict()  # older state and matrix files alike
    mv = kinds.TestbedConfig(layout="macvlan", delay_direction="reverse")
    assert kinds.TestbedConfig.from_dict(mv.to_dict()) == mv
    assert kinds.kind("local").caps.layouts == topology.NAMES == ("routed", "macvlan")
    assert kinds.kind("ssh").caps.layouts == ("routed",)


@pytest.mark.parametrize(("cfg", "says"), [
    ({"layout": "macvlan"}, "testbed.layout: macvlan needs testbed.delay_direction reverse, "
                            "not both: its delay element sits in rt1"),
    ({"layout": "star"}, "testbed.layout: unknown layout 'star' (one of routed, macvlan)"),
    ({"kind": "ssh", "layout": "macvlan"},
     "testbed.layout: macvlan is not for a ssh testbed (it builds: routed)"),
])  # fmt: skip
def test_testbed_config_refuses(cfg: dict[str, Any], says: str) -> None:
    with pytest.raises(CcbenchError) as e:
        kinds.TestbedConfig(**cfg)
    assert str(e.value).startswith(says) and "\n" not in str(e.value), str(e.value)


def test_ssh_refuses_a_layout_other_than_routed() -> None:
    with pytest.raises(CcbenchError) as e:
        kinds.kind("ssh").check_layout("macvlan", "both")
    assert str(e.value) == "testbed.layout: macvlan is not for a ssh testbed (it builds: routed)"
    kinds.kind("ssh").check_layout("routed", "both")


def _matrix(tmp: Path, testbed: dict[str, Any], capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, list[str], str]:  # fmt: skip
    cfg = copy.deepcopy(BASE)
    cfg["testbed"] = testbed
    p = tmp / "c.yaml"
    p.write_text(yaml.safe_dump(cfg))
    rc = main(["matrix", "--json", "--config", str(p)])
    out = capsys.readouterr()
    return rc, out.err.splitlines(), out.out


def test_matrix_refuses_macvlan_with_both_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err, _ = _matrix(tmp_path, {"layout": "macvlan"}, capsys)
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith("ccbench: error: ") and "testbed.layout: macvlan needs " \
        "testbed.delay_direction reverse, not both" in err[0], err[0]  # fmt: skip


def test_matrix_refuses_macvlan_on_ssh_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inv = str(write_inventory(tmp_path, 2))
    rc, err, _ = _matrix(tmp_path, {"kind": "ssh", "inventory": inv, "layout": "macvlan"}, capsys)
    assert rc == 2 and len(err) == 1, err
    assert "testbed.layout: macvlan is not for a ssh testbed (it builds: routed)" in err[0]
    rc, err, _ = _matrix(tmp_path, {"layout": "hub"}, capsys)
    assert rc == 2 and len(err) == 1 and "layout" in err[0] and "hub" in err[0], err


def test_matrix_carries_the_layout_and_keeps_run_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default and an explicit `routed` plan the same runs (ids unchanged, no
    layout key in matrix.json); macvlan reaches every planned testbed."""
    plans_ = {}
    for name, tb in (("default", {}), ("routed", {"layout": "routed"}),
                     ("macvlan", {"layout": "macvlan", "delay_direction": "reverse"})):  # fmt: skip
        rc, err, out = _matrix(tmp_path, tb, capsys)
        assert rc == 0, err
        plans_[name] = json.loads(out)
    assert plans_["default"] == plans_["routed"]
    assert "layout" not in json.dumps(plans_["default"]["testbeds"])
    assert set(plans_["macvlan"]["runs"]) == set(plans_["default"]["runs"])
    assert {t["testbed"]["layout"] for t in plans_["macvlan"]["testbeds"].values()} == {"macvlan"}
