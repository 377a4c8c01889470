"""The roles as typed values (ccbench.roles): node names and pairs, the delay elements
by name, and the roles each testbed shape exposes (the routed and macvlan layouts, the
Emulab dumbbell with and without its delay node) -- the same nodes, devices and loss
site the build and `up` plans use."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ccbench import roles, topology
from ccbench.errors import CcbenchError
from ccbench.spec import Flow, RunSpec, Topology


def test_names_and_pairs() -> None:
    assert (roles.sender(3), roles.receiver(3)) == ("s3", "r3")
    assert roles.senders(2) == ["s1", "s2"] and roles.receivers(2) == ["r1", "r2"]
    assert [roles.pair_of(n) for n in ("s1", "r12", "rt1", "dl", "rt2", "x3")] == [
        1, 12, None, None, None, None,
    ]  # fmt: skip
    assert roles.is_sender("s2") and not roles.is_sender("r2") and not roles.is_sender("sx")
    assert roles.is_receiver("r2") and not roles.is_receiver("rt2")
    assert [roles.role(n) for n in ("s1", "rt1", "dl", "rt2", "r1")] == [
        "sender", "router", "delay", "router", "receiver",
    ]  # fmt: skip
    with pytest.raises(ValueError):
        roles.role("hubs")


def test_flows_name_their_pair() -> None:
    flows = (Flow(pair=2, cc="cubic"), Flow(pair=1, cc="bbr"), Flow(pair=2, cc="reno"))
    assert (flows[0].sender, flows[0].receiver) == ("s2", "r2")
    assert RunSpec(Topology(pairs=2), flows).senders == ["s1", "s2"]


def test_delay_elements_by_name() -> None:
    dn = roles.delay_element("dummynet", roles.DELAY_NODE)
    assert isinstance(dn, roles.DummynetNode) and dn.node == "dl"
    assert dn.read_back and not dn.snapshots
    local = roles.delay_element("local", "rt1")
    assert local.snapshots and not local.read_back
    none = roles.delay_element("none")
    assert none.node is None and not (none.snapshots or none.read_back)
    with pytest.raises(CcbenchError, match="unknown element 'nonesuch' "):
        roles.delay_element("nonesuch")


@pytest.mark.parametrize("pairs", [1, 3])
def test_local_layouts_are_instances(pairs: int) -> None:
    routed = topology.layout("routed").roles(pairs)
    assert routed.senders == tuple(f"s{i}" for i in range(1, pairs + 1))
    assert routed.receivers == tuple(f"r{i}" for i in range(1, pairs + 1))
    assert routed.bottleneck == roles.Bottleneck("rt1", "to-dl")
    assert routed.delay == roles.LocalElement("dl")
    assert routed.loss == roles.LossSite(routed.receivers, "INPUT")
    assert routed.pairs == pairs and routed.pair(pairs) == (f"s{pairs}", f"r{pairs}")
    macvlan = topology.layout("macvlan").roles(pairs)
    assert macvlan.bottleneck == roles.Bottleneck("rt1", "to-hubr")
    assert macvlan.delay == roles.LocalElement("rt1")
    assert (macvlan.senders, macvlan.receivers, macvlan.loss) == (
        routed.senders, routed.receivers, routed.loss,
    )  # fmt: skip
    # Every role is a node of its layout.
    for lay, r in (("routed", routed), ("macvlan", macvlan)):
        nodes = set(topology.layout(lay).nodes(pairs))
        assert r.bottleneck is not None
        assert {*r.hosts, r.bottleneck.node, r.delay.node} <= nodes


def _emulab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, delay_node: bool) -> roles.Roles:
    from ccbench.testbed import base, kinds, remote

    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    names = ["s1", "s2", "rt1", "rt2", "r1", "r2"] + (["dl"] if delay_node else [])
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"dumbbells": {1: {n: {"host": f"{n}.example.org"}
                                                     for n in names}}}))  # fmt: skip
    tb = remote.RemoteTestbed(kinds.TestbedConfig(kind="ssh", id="rl1", inventory=str(inv)),
                              Topology(pairs=2))  # fmt: skip
    tb.write_state({"bottleneck_dev": "eth5"})  # as `up` records it
    return tb.roles


def test_the_emulab_dumbbell_is_an_instance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _emulab(tmp_path, monkeypatch, delay_node=True)
    assert (r.senders, r.receivers) == (("s1", "s2"), ("r1", "r2"))
    assert r.bottleneck == roles.Bottleneck("rt1", "eth5")
    assert r.delay == roles.DummynetNode("dl")
    assert r.loss == roles.LossSite(("r1", "r2"), "INPUT")
    # Link-shaping mode: no delay node in the inventory, no delay element to read.
    assert _emulab(tmp_path, monkeypatch, delay_node=False).delay == roles.NoDelay()
