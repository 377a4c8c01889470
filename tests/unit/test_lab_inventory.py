"""A lab inventory (ccbench.lab_inventory): a good one reads back as its roles; each
bad one is refused in one line naming the problem."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import lab_inventory
from ccbench.errors import CcbenchError

GOOD: dict[str, Any] = {
    "ssh": {"user": "root"},
    "senders": {
        "s1": {"host": "n1fbsd.lan", "os": "freebsd", "address": "192.168.50.37"},
        "s2": {"host": "n1linux.lan", "address": "192.168.50.154", "server_port": 5203},
    },
    "receivers": {"r1": {"host": "n2linux.lan", "address": "192.168.50.89"}},
    "emulation": {"delay": "netem", "loss": "iptables"},
}


def load(tmp_path: Path, data: dict[str, Any]) -> lab_inventory.LabInventory:
    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(data))
    return lab_inventory.load(p)


def changed(path: list[str], value: Any) -> dict[str, Any]:
    d = copy.deepcopy(GOOD)
    at = d
    for k in path[:-1]:
        at = at[k]
    if value is None:
        del at[path[-1]]
    else:
        at[path[-1]] = value
    return d


def test_a_good_lab_reads_back_as_its_roles(tmp_path: Path) -> None:
    lab = load(tmp_path, GOOD)
    assert [s.node.name for s in lab.senders] == ["s1", "s2"]
    assert lab.receiver_of(1) == lab.receiver_of(2) == "r1"  # one receiver, two senders
    assert lab.senders[0].node.os == "freebsd" and lab.senders[1].port == 5203
    assert lab.emulation.delay == "netem" and lab.router is None
    assert set(lab.as_ssh_inventory().dumbbell(1)) == {"s1", "s2", "r1"}
    assert lab_inventory.pairs_in(str(tmp_path / "lab.yaml"), 1) == 2
    seed001 = changed(["senders", "s1", "server_port"], 5201)  # iperf3's default, as seed 001
    assert [s.port for s in load(tmp_path, seed001).senders] == [5201, 5203]


BAD = [
    pytest.param(changed(["receivers"], None), "receivers: none listed", id="no receiver"),
    pytest.param(changed(["senders"], {}), "senders: none listed", id="no sender"),
    pytest.param(changed(["senders", "s1"], None), "s1 is missing", id="sender gap"),
    pytest.param(changed(["senders", "s1", "receiver"], "r9"), "receiver 'r9' is not among",
                 id="unknown receiver"),
    pytest.param(changed(["receivers", "r1", "os"], "freebsd"),
                 "emulation.delay netem asked of a FreeBSD receiver", id="netem on FreeBSD"),
    pytest.param(changed(["emulation"], {"delay": "none", "loss": "iptables"})
                 | {"receivers": {"r1": {**GOOD["receivers"]["r1"], "os": "freebsd"}}},
                 "emulation.loss iptables asked of a FreeBSD receiver", id="iptables on FreeBSD"),
    pytest.param(changed(["senders", "s2", "server_port"], 5202), "s1 and s2 on one server "
                 "port (5202): pin another", id="two senders on one port"),
    pytest.param(changed(["senders", "s2", "server_port"], 22), "server_port 22 is not a "
                 "flow's port (5201..6201)", id="a port of another service"),
    pytest.param(changed(["senders", "s1", "os"], "windows"), "unknown os 'windows'",
                 id="unknown os"),
    pytest.param(changed(["emulation", "delay"], "dummynet"), "unknown element 'dummynet'",
                 id="unknown element"),
    pytest.param(changed(["emulation", "loss"], "pf"), "unknown tool 'pf'", id="unknown tool"),
    pytest.param(changed(["router"], {"host": "edge.lan"}), "router: no address", id="router"),
    pytest.param(changed(["receivers", "r1", "host"], "n1linux.lan"), "same host and port",
                 id="one host twice"),
]  # fmt: skip


@pytest.mark.parametrize(("data", "says"), BAD)
def test_a_bad_lab_is_refused_in_one_line(tmp_path: Path, data: dict[str, Any], says: str) -> None:
    with pytest.raises(CcbenchError) as e:
        load(tmp_path, data)
    msg = str(e.value)
    assert says in msg and "\n" not in msg, msg
    assert msg.startswith(str(tmp_path / "lab.yaml"))


def test_sender_sets_share_the_receivers(tmp_path: Path) -> None:
    """Seed 000's lab in one comparison: set 1 FreeBSD, set 2 Linux, one receiver."""
    data = {**GOOD, "sender_sets": {2: {"s1": {"host": "n1linux2.lan", "os": "linux",
                                              "address": "192.168.50.155"}}}}  # fmt: skip
    p = tmp_path / "lab.yaml"
    p.write_text(yaml.safe_dump(data))
    one, two = lab_inventory.load(p), lab_inventory.load(p, 2)
    assert (one.set_no, one.sets, two.set_no, two.sets) == (1, (1, 2), 2, (1, 2))
    assert [s.node.os for s in one.senders] == ["freebsd", "linux"]
    assert [(s.node.os, s.node.target.host, s.receiver) for s in two.senders] == [
        ("linux", "n1linux2.lan", "r1")
    ]
    assert two.receivers == one.receivers and lab_inventory.pairs_in(str(p), 2) == 1
    with pytest.raises(CcbenchError, match=r"lab\.yaml: no sender set 3 \(it has 1, 2; set 1 is"):
        lab_inventory.load(p, 3)


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        ({1: {"s1": {"host": "x", "address": "10.0.0.1"}}}, "sender_sets: 1 is not a set number"),
        ({2: {"s2": {"host": "x", "address": "10.0.0.1"}}}, "sender_sets.2: s1 is missing"),
        ({2: {"s1": {"host": "n2linux.lan", "address": "10.0.0.1"}}}, "same host and port as"),
        ({2: {"s1": {"host": "x", "os": "plan9", "address": "10.0.0.1"}}}, "unknown os 'plan9'"),
    ],
)
def test_bad_sender_sets_are_refused(tmp_path: Path, sets: Any, says: str) -> None:
    with pytest.raises(CcbenchError, match=re.escape(says)):
        load(tmp_path, {**GOOD, "sender_sets": sets})
