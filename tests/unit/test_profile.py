"""profile.py: the RSpec it prints, its parameter checks and its addressing plan.

Each profile run is a subprocess (geni-lib's portal.context is a per-process
singleton). Needs geni-lib 0.9.9.4 fixed up for Python 3:
    pip install geni-lib==0.9.9.4 six lxml && python scripts/fix_genilib.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
from lxml import etree

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profile.py"

NS = {
    "r": "http://www.geni.net/resources/rspec/3",
    "emulab": "http://www.protogeni.net/resources/rspec/ext/emulab/1",
    "delay": "http://www.protogeni.net/resources/rspec/ext/delay/1",
    "params": "http://www.protogeni.net/resources/rspec/ext/profile-parameters/1",
    "tour": "http://www.protogeni.net/resources/rspec/ext/apt-tour/1",
}
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
FBSD142 = "urn:publicid:IDN+emulab.net+image+emulab-ops//FBSD142-64-STD"


def load_profile_module():
    """profile.py as a module, without running the portal code."""
    os.environ["CCBENCH_PROFILE_IMPORT"] = "1"
    try:
        spec = importlib.util.spec_from_file_location("ccbench_profile", PROFILE)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        del os.environ["CCBENCH_PROFILE_IMPORT"]
    return mod


prof = load_profile_module()


@pytest.fixture(scope="module", autouse=True)
def genilib_ready():
    check = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "fix_genilib.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, (
        "geni-lib 0.9.9.4 is missing or not fixed up; run: "
        "pip install geni-lib==0.9.9.4 six lxml && python scripts/fix_genilib.py\n"
        + check.stdout
        + check.stderr
    )


def clean_env(**extra):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("GENILIB_") and k != "CCBENCH_PROFILE_IMPORT"
    }
    env.update(extra)
    return env


def run_profile(*args, env=None, cwd=None):
    return subprocess.run(
        [sys.executable, str(PROFILE), *args],
        capture_output=True,
        text=True,
        env=env or clean_env(),
        cwd=cwd,
        timeout=60,
    )


class RSpec:
    """The request RSpec a profile run printed, with lookups the tests need."""

    def __init__(self, xml: str):
        self.root = etree.fromstring(xml.encode())
        assert self.root.tag == "{{{}}}rspec".format(NS["r"]) and self.root.get("type") == "request"
        self.nodes = {n.get("client_id"): n for n in self.root.findall("r:node", NS)}
        self.links = {lk.get("client_id"): lk for lk in self.root.findall("r:link", NS)}

    def image(self, node):
        di = self.nodes[node].find("r:sliver_type/r:disk_image", NS)
        return None if di is None else di.get("name")

    def hardware_type(self, node):
        hw = self.nodes[node].find("r:hardware_type", NS)
        return None if hw is None else hw.get("name")

    def sliver_type(self, node):
        return self.nodes[node].find("r:sliver_type", NS).get("name")

    def addresses(self):
        """interface client_id -> (address, netmask) for every addressed interface."""
        out = {}
        for node in self.nodes.values():
            for iface in node.findall("r:interface", NS):
                for ip in iface.findall("r:ip", NS):
                    assert ip.get("type") == "ipv4"
                    out[iface.get("client_id")] = (ip.get("address"), ip.get("netmask"))
        return out

    def interfaces(self, node):
        return [i.get("client_id") for i in self.nodes[node].findall("r:interface", NS)]

    def link_members(self, link):
        return sorted(i.get("client_id") for i in self.links[link].findall("r:interface_ref", NS))

    def services(self, node):
        """[(script name, {key: value})] of the node's execute services."""
        out = []
        for ex in self.nodes[node].findall("r:services/r:execute", NS):
            assert ex.get("shell") == "sh"
            words = shlex.split(ex.get("command"))
            assert words[:2] == ["sudo", "/bin/sh"], words
            assert words[2].startswith("/local/repository/emulab/"), words
            args = dict(w.split("=", 1) for w in words[3:])
            assert len(args) == len(words) - 3, f"duplicate argument in {words!r}"
            out.append((words[2].rsplit("/", 1)[1], args))
        return out

    def parameters(self):
        return {
            d.get("name").rsplit(".", 1)[1]: (d.text or "")
            for d in self.root.findall("params:data_set/params:data_item", NS)
        }


def rspec_of(*args) -> RSpec:
    res = run_profile(*args)
    assert res.returncode == 0, res.stderr
    return RSpec(res.stdout)


# --------------------------------------------------------------------------- defaults


@pytest.fixture(scope="module")
def default_rspec():
    return rspec_of()


def test_default_nodes_images_and_hardware(default_rspec):
    r = default_rspec
    assert set(r.nodes) == {"s1", "s2", "rt1", "dl", "rt2", "r1", "r2"}
    for n in ("s1", "s2"):
        assert r.image(n) == FBSD142
    for n in ("rt1", "rt2", "r1", "r2"):
        assert r.image(n) == UBUNTU24
    for n in ("s1", "s2", "rt1", "rt2", "r1", "r2"):
        assert r.sliver_type(n) == "raw"
        assert r.nodes[n].get("exclusive") == "true"
        assert r.hardware_type(n) == "d430"


def test_default_addresses_follow_the_plan(default_rspec):
    expected = {
        "s1:rt1": "10.1.1.2",
        "rt1:s1": "10.1.1.1",
        "s2:rt1": "10.1.1.6",
        "rt1:s2": "10.1.1.5",
        "rt1:core": "10.1.2.1",
        "rt2:core": "10.1.2.2",
        "rt2:r1": "10.1.3.1",
        "r1:rt2": "10.1.3.2",
        "rt2:r2": "10.1.3.5",
        "r2:rt2": "10.1.3.6",
    }
    got = default_rspec.addresses()
    assert {k: v[0] for k, v in got.items()} == expected
    for iface, (_, mask) in got.items():  # a /30 per access link, the bottleneck a /24
        assert mask == ("255.255.255.0" if iface.endswith(":core") else "255.255.255.252")
    # and the same as dumbbell_plan()
    plan = prof.dumbbell_plan(2, 1, delay_node=True)
    from_plan = {
        info["interfaces"][seg]: addr
        for info in plan.values()
        for seg, addr in info["addresses"].items()
    }
    assert from_plan == expected


def link_props(r, name):
    return sorted(
        (p.get("source_id"), p.get("dest_id"), p.get("capacity"), p.get("latency"))
        for p in r.links[name].findall("r:property", NS)
    )


def test_default_one_link_per_host_at_link_speed(default_rspec):
    """Seed 001: one link per sender to rt1 and per receiver to rt2, no shared LAN
    (senders never meet in a switch buffer), all pinned to 1 Gb/s, unshaped by Emulab
    and kept off inter-switch trunks."""
    r = default_rspec
    assert set(r.links) == {"s1-rt1", "s2-rt1", "r1-rt2", "r2-rt2", "core-a", "core-b"}
    for i in (1, 2):
        assert r.link_members(f"s{i}-rt1") == [f"rt1:s{i}", f"s{i}:rt1"]
        assert r.link_members(f"r{i}-rt2") == [f"r{i}:rt2", f"rt2:r{i}"]
    for name, link in r.links.items():
        assert link.find("r:link_type", NS) is None  # point-to-point, no LAN
        assert link.find("emulab:best_effort", NS) is None
        assert link.find("emulab:force_nobwshaping", NS).get("enabled") == "true"
        assert link.find("emulab:interswitch", NS).get("allow") == "false"
        a, b = r.link_members(name)
        assert link_props(r, name) == sorted([(a, b, "1000000", None), (b, a, "1000000", None)])
    assert set(r.interfaces("rt1")) == {"rt1:s1", "rt1:s2", "rt1:core"}
    # and exactly the plan's links
    assert {n: r.link_members(n) for n in r.links} == prof.plan_links(prof.dumbbell_plan(2))


def test_inter_switch_links_can_be_allowed():
    r = rspec_of("--interSwitch", "yes", "--pairs", "1")
    assert all(lk.find("emulab:interswitch", NS) is None for lk in r.links.values())


def test_default_explicit_delay_node(default_rspec):
    r = default_rspec
    dl = r.nodes["dl"]
    assert r.sliver_type("dl") == "delay"
    # no type by default: a type on a delay node is a request for Emulab's delay-<type>
    # (libvtop_stable, GenVirtNodes), which may not be offered; no image either
    assert r.hardware_type("dl") is None and r.image("dl") is None
    assert r.interfaces("dl") == ["dl:if0", "dl:if1"]
    assert not any(i.startswith("dl:") for i in r.addresses())  # a transparent bridge
    pipes = dl.findall("r:sliver_type/delay:sliver_type_shaping/delay:pipe", NS)
    assert [(p.get("source"), p.get("dest")) for p in pipes] == [
        ("dl:if0", "dl:if1"),
        ("dl:if1", "dl:if0"),
    ]
    for p in pipes:
        # delay only, one choice: unlimited pipes (capacity 0: dummynet's bw 0), on links
        # marked "no bandwidth shaping" (which Emulab's bridge set-up also turns into an
        # unlimited pipe), never a rate (a limited pipe would queue a clock tick of frames)
        assert int(p.get("capacity")) == 0
        assert float(p.get("lossrate")) == 0.0
    assert sum(float(p.get("latency")) for p in pipes) == 40  # one-way each: RTT in total
    # rt1 -- core-a -- dl -- core-b -- rt2, each half at the link speed, unshaped
    assert r.link_members("core-a") == ["dl:if0", "rt1:core"]
    assert r.link_members("core-b") == ["dl:if1", "rt2:core"]
    for half in ("core-a", "core-b"):
        assert r.links[half].find("emulab:force_nobwshaping", NS).get("enabled") == "true"
        assert {c for _, _, c, _ in link_props(r, half)} == {"1000000"}  # picks 1 Gb/s ports
    assert "core" not in r.links
    # what ccbench.delaynode expects of dl is what this asks for
    from ccbench import delaynode

    assert delaynode.PROFILE_PIPE_BANDWIDTH_BPS is None  # unlimited


def test_delay_node_never_shapes_at_the_bottleneck_rate():
    r = rspec_of("--bandwidthMbps", "300", "--delayHwType", "d710")
    pipes = r.nodes["dl"].findall("r:sliver_type/delay:sliver_type_shaping/delay:pipe", NS)
    assert {int(p.get("capacity")) for p in pipes} == {0}  # unlimited, at any rate
    assert r.hardware_type("dl") == "d710"
    assert r.services("rt1")[0][1]["rate_mbit"] == "300"  # rt1's tbf is the one shaper
    assert rspec_of("--delayHwType", "").hardware_type("dl") is None


def test_default_startup_services(default_rspec):
    r = default_rspec
    assert r.services("rt1") == [
        (
            "setup-router.sh",
            {
                "role": "rt1",
                "core_addr": "10.1.2.1",
                "if_addrs": "10.1.1.1,10.1.1.5,10.1.2.1",
                "route": "10.1.3.0/24",
                "via": "10.1.2.2",
                "rate_mbit": "1000",
                "queue": "48",
                "aqm": "none",
                "shape": "yes",
                "tx_ring": "48",
            },
        )
    ]
    assert r.services("rt2") == [
        (
            "setup-router.sh",
            {
                "role": "rt2",
                "core_addr": "10.1.2.2",
                "if_addrs": "10.1.2.2,10.1.3.1,10.1.3.5",
                "route": "10.1.1.0/24",
                "via": "10.1.2.1",
                "rate_mbit": "1000",
                "queue": "48",
                "aqm": "none",
                "shape": "no",
                "tx_ring": "48",
            },
        )
    ]
    for i in (1, 2):
        assert r.services(f"s{i}") == [
            (
                "setup-freebsd-sender.sh",
                {
                    "role": "sender",
                    "addr": f"10.1.1.{4 * i - 2}",
                    "route": "10.1.3.0/24",
                    "via": f"10.1.1.{4 * i - 3}",
                    "offloads": "default",
                },
            )
        ]
        assert r.services(f"r{i}") == [
            (
                "setup-linux-host.sh",
                {
                    "role": "receiver",
                    "addr": f"10.1.3.{4 * i - 2}",
                    "route": "10.1.1.0/24",
                    "via": f"10.1.3.{4 * i - 3}",
                    "offloads": "default",
                    "container": "no",
                },
            )
        ]
    assert r.services("dl") == []
    for node in r.nodes:
        for script, _ in r.services(node):
            assert (REPO / "emulab" / script).is_file()


def test_default_parameters_and_tour(default_rspec):
    params = default_rspec.parameters()
    assert params["pairs"] == "2" and params["rttMs"] == "40" and params["queuePackets"] == "48"
    assert params["bandwidthMbps"] == "1000" and params["aqm"] == "none"
    tour = default_rspec.root.find("tour:rspec_tour", NS)
    assert "dumbbell" in tour.find("tour:description", NS).text
    instructions = tour.find("tour:instructions", NS).text
    assert (
        "ccbench testbed inventory --manifest manifest.xml --user YOUR_EMULAB_NAME "
        "--out hosts.yaml" in instructions
    )
    assert (
        "snakemake --cores 4 all --configfile config/examples/emulab-seed001.yaml" in instructions
    )
    assert "`ssh NODE geni-get manifest > manifest.xml`" in instructions  # any node has it


# --------------------------------------------------------------------------- variants


def test_link_shaping_without_explicit_delay_node():
    r = rspec_of("--delayMethod", "linkshaping", "--rttMs", "60", "--bandwidthMbps", "300")
    assert "dl" not in r.nodes
    assert not any(n.get("client_id").startswith("dl") for n in r.nodes.values())
    assert r.link_members("core") == ["rt1:core", "rt2:core"]
    props = r.links["core"].findall("r:property", NS)
    assert sorted((p.get("source_id"), p.get("dest_id")) for p in props) == [
        ("rt1:core", "rt2:core"),
        ("rt2:core", "rt1:core"),
    ]
    # Emulab's delay node delays and never rate-limits ("no bandwidth shaping": an
    # unlimited pipe, as dl's); the capacity picks the ports' speed
    assert {int(p.get("capacity")) for p in props} == {1000000}
    assert sum(float(p.get("latency")) for p in props) == 60
    # a delayed link gets a delay node Emulab inserts; emulab:force_shaping would ask for
    # end-node shaping instead (netem on rt1 and rt2, whose set-up deletes it)
    assert r.links["core"].find("emulab:force_shaping", NS) is None
    assert r.links["core"].find("emulab:force_nobwshaping", NS).get("enabled") == "true"
    assert r.services("rt1")[0][1]["rate_mbit"] == "300"


def test_link_shaping_needs_a_latency_emulab_delays():
    """Emulab inserts a delay node from 2 ms one-way up (libvtop_stable's DELAYTHRESH):
    RTT 2 would be an undelayed wire, RTT 0 and 4 are what they say."""
    base = {d[0]: d[3] for d in prof.parameter_definitions(_AnyType())}  # the defaults
    base["delayMethod"] = "linkshaping"
    ((msg, names),) = prof.validate(dict(base, rttMs=2))
    assert names == ["delayMethod", "rttMs"] and "at least 2 ms" in msg and "delaynode" in msg
    assert prof.validate(dict(base, rttMs=0)) == prof.validate(dict(base, rttMs=4)) == []
    assert prof.validate(dict(base, rttMs=2, delayMethod="delaynode")) == []  # dl delays any RTT
    r = rspec_of("--delayMethod", "linkshaping", "--rttMs", "4")
    assert {p.get("latency") for p in r.links["core"].findall("r:property", NS)} == {"2"}


def test_zero_rtt_link_shaping_has_no_latency():
    r = rspec_of("--delayMethod", "linkshaping", "--rttMs", "0")
    props = r.links["core"].findall("r:property", NS)
    assert sum(float(p.get("latency", "0")) for p in props) == 0
    assert {int(p.get("capacity")) for p in props} == {1000000}


def test_two_dumbbells_four_pairs_linux_senders():
    r = rspec_of(
        "--pairs",
        "4",
        "--dumbbells",
        "2",
        "--bandwidthMbps",
        "500",
        "--rttMs",
        "100",
        "--queuePackets",
        "1300",
        "--aqm",
        "fq_codel",
        "--reverseShaping",
        "yes",
        "--hwType",
        "",
        "--senderImage",
        UBUNTU24,
        "--containerTooling",
        "yes",
        "--txRing",
        "0",
    )
    plan = prof.dumbbell_plan(4, 2)
    assert set(r.nodes) == set(plan)
    assert len(r.nodes) == 2 * (4 * 2 + 3)
    assert {"s4-d2", "r4-d2", "rt1-d2", "rt2-d2", "dl-d2"} <= set(r.nodes)
    for name, info in plan.items():
        # "" = any type; the delay node's own is empty by default too
        assert r.hardware_type(name) is None
        for seg, addr in info["addresses"].items():
            mask = "255.255.255.0" if seg == "core" else "255.255.255.252"
            assert r.addresses()[info["interfaces"][seg]] == (addr, mask)
    assert r.addresses()["s3-d2:rt1"][0] == "10.2.1.10"
    assert r.addresses()["rt1-d2:s3"][0] == "10.2.1.9"
    assert r.addresses()["rt2-d2:r4"][0] == "10.2.3.13"
    assert r.link_members("s4-rt1-d2") == ["rt1-d2:s4", "s4-d2:rt1"]
    assert r.link_members("core-a-d2") == ["dl-d2:if0", "rt1-d2:core"]
    pipes = r.nodes["dl-d2"].findall("r:sliver_type/delay:sliver_type_shaping/delay:pipe", NS)
    assert sum(float(p.get("latency")) for p in pipes) == 100
    assert {int(p.get("capacity")) for p in pipes} == {0}
    for d in ("", "-d2"):
        for rt in ("rt1", "rt2"):
            ((script, args),) = r.services(rt + d)
            assert script == "setup-router.sh"
            assert (
                args["shape"],
                args["aqm"],
                args["queue"],
                args["rate_mbit"],
                args["tx_ring"],
            ) == ("yes", "fq_codel", "1300", "500", "0")
    ((script, args),) = r.services("s2-d2")
    assert script == "setup-linux-host.sh"
    assert args == {
        "role": "sender",
        "addr": "10.2.1.6",
        "route": "10.2.3.0/24",
        "via": "10.2.1.5",
        "offloads": "default",
        "container": "yes",
    }
    assert r.image("s2-d2") == UBUNTU24
    assert r.services("rt1-d2")[0][1]["route"] == "10.2.3.0/24"


def test_custom_sender_image_with_declared_os():
    image = "urn:publicid:IDN+emulab.net+image+myproj//patched-kernel"
    r = rspec_of("--senderImageCustom", image, "--senderOs", "freebsd", "--pairs", "1")
    assert r.image("s1") == image
    assert r.services("s1")[0][0] == "setup-freebsd-sender.sh"
    assert r.image("r1") == UBUNTU24


def test_sender_image_per_dumbbell_freebsd_and_linux():
    """One experiment, two OSes under test: FreeBSD senders on dumbbell 1, Ubuntu on 2."""
    r = rspec_of("--dumbbells", "2", "--pairs", "1", "--senderImages", f"{FBSD142},{UBUNTU24}")
    assert (r.image("s1"), r.image("s1-d2")) == (FBSD142, UBUNTU24)
    assert r.services("s1")[0][0] == "setup-freebsd-sender.sh"
    assert r.services("s1-d2")[0][0] == "setup-linux-host.sh"
    assert r.image("r1") == r.image("r1-d2") == r.image("rt1-d2") == UBUNTU24


def test_string_choices_are_not_bool_parsed():
    # In geni-lib 0.9.9.4 a BOOLEAN "False" on the command line is True: the
    # profile uses "yes"/"no" strings instead, and they mean what they say.
    r = rspec_of("--reverseShaping", "no", "--containerTooling", "no", "--senderImage", UBUNTU24)
    assert r.services("rt2")[0][1]["shape"] == "no"
    assert r.services("s1")[0][1]["container"] == "no"
    r = rspec_of("--reverseShaping", "yes")
    assert r.services("rt2")[0][1]["shape"] == "yes"


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "args, names",
    [
        (["--pairs", "5"], [["pairs"]]),
        (["--pairs", "0"], [["pairs"]]),
        (["--dumbbells", "5"], [["dumbbells"]]),
        (
            ["--pairs", "4", "--dumbbells", "3"],
            [["pairs", "dumbbells"], ["pairs", "hwType", "linkSpeedMbps"]],
        ),
        (["--pairs", "4"], [["pairs", "hwType", "linkSpeedMbps"]]),
        (["--pairs", "4", "--linkSpeedMbps", "10000"], [["pairs", "hwType", "linkSpeedMbps"]]),
        (["--rttMs", "-2"], [["rttMs"]]),
        (["--rttMs", "1002"], [["rttMs"]]),
        (["--rttMs", "41"], [["rttMs"]]),
        (["--delayMethod", "linkshaping", "--rttMs", "2"], [["delayMethod", "rttMs"]]),
        (["--queuePackets", "1"], [["queuePackets"]]),
        (["--bandwidthMbps", "0"], [["bandwidthMbps"]]),
        (["--bandwidthMbps", "20000"], [["bandwidthMbps"]]),
        (["--aqm", "red", "--queuePackets", "8"], [["aqm", "queuePackets"]]),
        (["--txRing", "100000"], [["txRing"]]),
        (["--hwType", "d430;reboot"], [["hwType"]]),
        (["--delayHwType", "d430 x"], [["delayHwType"]]),
        (["--bandwidthMbps", "2000"], [["bandwidthMbps", "linkSpeedMbps"]]),
        (["--nodeImage", FBSD142], [["nodeImage"]]),
        (["--nodeImage", "ubuntu"], [["nodeImage"]]),
        (
            ["--senderImageCustom", "urn:publicid:IDN+emulab.net+image+p//mine"],
            [["senderImageCustom", "senderOs"]],
        ),
        (["--senderImageCustom", "not a urn"], [["senderImageCustom"]]),
        (["--senderOs", "linux"], [["senderImage", "senderOs"]]),
        (["--dumbbells", "2", "--senderImages", FBSD142], [["senderImages", "dumbbells"]]),
        (["--senderImages", "freebsd"], [["senderImages"]]),
        (
            ["--queuePackets", "0", "--rttMs", "5000", "--pairs", "9"],
            [["pairs"], ["rttMs"], ["queuePackets"]],
        ),
    ],
)
def test_bad_parameters_exit_with_the_portal_code(args, names):
    res = run_profile(*args)
    assert res.returncode == 100 + len(names), (res.returncode, res.stderr)
    assert res.stdout == ""  # no RSpec
    errors = json.loads(res.stderr)
    assert [e["params"] for e in errors] == names
    assert all(e["errorType"] == "ParameterError" and e["message"] for e in errors)


def test_illegal_choice_is_refused_naming_the_field():
    res = run_profile("--aqm", "cake")
    assert res.returncode == 2
    assert "--aqm" in res.stderr and "cake" in res.stderr


def test_aqm_that_cannot_act_is_a_warning():
    p = dict(aqm="fq_codel", queuePackets=48, bandwidthMbps=1000)
    ((msg, names),) = prof.aqm_warnings(p)
    assert names == ["aqm", "queuePackets"] and "never act" in msg and "at least 413 packets" in msg
    assert prof.aqm_warnings(dict(p, bandwidthMbps=10)) == []
    assert prof.aqm_warnings(dict(p, queuePackets=1000)) == []
    assert prof.aqm_warnings(dict(p, aqm="none")) == []
    # standalone: a warning alone does not stop the profile
    assert run_profile("--aqm", "fq_codel").returncode == 0


# --------------------------------------------------------------------------- portal mode


def port_params(**over):
    return dict({"hwType": "d430", "pairs": 2, "linkSpeedMbps": 1000, "interSwitch": "no"}, **over)


def port_errors(**over):
    base = dict(
        pairs=2, dumbbells=1, bandwidthMbps=100, linkSpeedMbps=1000, rttMs=40, queuePackets=48,
        aqm="none", txRing=48, hwType="d430", delayHwType="d430", senderImages="",
        senderImageCustom="", senderImage=FBSD142, senderOs="auto", nodeImage=UBUNTU24,
    )  # fmt: skip
    return [(m, n) for m, n in prof.validate(dict(base, **over)) if "hwType" in n]


def test_router_ports_at_each_link_speed_on_d430s():
    """A router needs pairs + 1 ports at the link speed: four 1 GbE ports on 96 of the
    160 d430s (two on the other 64), four 10 GbE (X710) ports on those 64."""
    assert prof.router_ports("d430", 1000) == prof.router_ports("d430", 10000) == 4
    assert prof.router_ports("d430", 2500) == 0 and prof.router_ports("", 1000) is None
    assert prof.router_ports("m510", 10000) is None
    for speed in (1000, 10000):
        assert port_errors(pairs=3, linkSpeedMbps=speed) == []
        ((msg, names),) = port_errors(pairs=4, linkSpeedMbps=speed)
        assert names == ["pairs", "hwType", "linkSpeedMbps"]
        assert f"at most 3 pairs at {speed} Mbit/s links" in msg
    ((msg, _),) = port_errors(pairs=4, linkSpeedMbps=1000)
    assert "96 of Emulab's 160 have 4, 64 of Emulab's 160 have 2" in msg
    ((msg, _),) = port_errors(pairs=4, linkSpeedMbps=10000)
    assert "64 of Emulab's 160 have 4" in msg


def test_unknown_or_any_hardware_type_is_a_port_warning():
    ((msg, names),) = prof.port_warnings(port_params(hwType=""))
    assert names == ["hwType", "pairs"] and msg.startswith("Any hardware type:")
    assert "need 3 experimental ports at 1000 Mbit/s" in msg and "behind one switch" in msg
    ((msg, _),) = prof.port_warnings(port_params(hwType="m510", pairs=4, interSwitch="yes"))
    assert msg.startswith("Hardware type m510:") and "need 5 experimental ports" in msg
    assert "behind one switch" not in msg
    assert prof.port_warnings(port_params()) == []  # d430: checked as an error instead
    assert prof.port_warnings(port_params(hwType="d430;x")) == []  # an error already
    # standalone, a warning does not stop the profile (test_profile_portal: fatal there)
    assert run_profile("--hwType", "").returncode == 0


def test_port_and_switch_facts_where_the_user_chooses(default_rspec):
    import geni.portal

    ctx = _RecordingContext()
    prof.define_parameters(
        types.SimpleNamespace(context=ctx, ParameterType=geni.portal.ParameterType)
    )
    helps = {name: d["long"] for name, d in ctx.defs.items()}
    assert "96 of Emulab's 160 d430s" in helps["pairs"] and "other 64" in helps["pairs"]
    assert "empty = any type" in helps["hwType"] and "64 have two 1 GbE" in helps["hwType"]
    assert "pairs + 1 ports at this speed" in helps["linkSpeedMbps"]
    assert "behind one switch" in helps["interSwitch"]
    assert "at most 984 Mbit/s keeps the qdisc the only bottleneck" in helps["bandwidthMbps"]
    assert "unlimited" in helps["delayMethod"]
    instructions = default_rspec.root.find("tour:rspec_tour/tour:instructions", NS).text
    assert "If Emulab cannot map the experiment" in instructions
    assert "Only 96 of Emulab's 160 d430s have four 1 GbE ports" in instructions
    assert "every\nmachine of a dumbbell must sit behind one switch" in instructions
    assert "cannot ask for a pipe queue size" in instructions


def test_portal_mode_binds_from_json_and_writes_the_request(tmp_path):
    params = tmp_path / "params.json"
    params.write_text(
        json.dumps({"pairs": "1", "rttMs": "20", "aqm": "codel", "queuePackets": "1000"})
    )
    out = tmp_path / "request.xml"
    # (not GENILIB_PORTAL_DUMPPARAMS_PATH: 0.9.9.4's dump of the definitions raises
    # TypeError on any profile; the portal runs its own, newer geni-lib for that)
    env = clean_env(
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_PARAMS_PATH=str(params),
        GENILIB_PORTAL_REQUEST_PATH=str(out),
    )
    res = run_profile(env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    r = RSpec(out.read_text())
    assert set(r.nodes) == {"s1", "rt1", "dl", "rt2", "r1"}
    assert r.services("rt1")[0][1]["aqm"] == "codel"
    assert sum(float(p.get("latency")) for p in r.root.iter("{{{}}}pipe".format(NS["delay"]))) == 20
    assert r.parameters()["queuePackets"] == "1000"


def test_portal_mode_fatal_warnings_and_errors(tmp_path):
    params = tmp_path / "params.json"
    params.write_text(json.dumps({"aqm": "pie", "queuePackets": "48"}))
    env = clean_env(
        GENILIB_PORTAL_MODE="1",
        GENILIB_PORTAL_PARAMS_PATH=str(params),
        GENILIB_PORTAL_REQUEST_PATH=str(tmp_path / "out.xml"),
        GENILIB_PORTAL_WARNINGS_ARE_FATAL="1",
    )
    res = run_profile(env=env, cwd=tmp_path)
    assert res.returncode == 101
    (warning,) = json.loads(res.stderr)
    assert warning["errorType"] == "ParameterWarning" and warning["params"] == [
        "aqm",
        "queuePackets",
    ]
    params.write_text(json.dumps({"pairs": "7"}))
    res = run_profile(env=env, cwd=tmp_path)
    assert res.returncode == 101 and json.loads(res.stderr)[0]["params"] == ["pairs"]


# --------------------------------------------------------------------------- parameter definitions


class _AnyType:
    """A stand-in for portal.ParameterType: every type name is itself."""

    def __getattr__(self, name):
        return name


class _RecordingContext:
    def __init__(self):
        self.defs = {}

    def defineParameter(
        self,
        name,
        description,
        typ,
        defaultValue,
        legalValues=None,
        longDescription=None,
        advanced=False,
        groupId=None,
    ):
        self.defs[name] = dict(
            description=description,
            type=typ,
            default=defaultValue,
            legal=legalValues,
            long=longDescription,
            advanced=advanced,
        )


def test_parameter_definitions():
    import geni.portal

    ctx = _RecordingContext()
    prof.define_parameters(
        types.SimpleNamespace(context=ctx, ParameterType=geni.portal.ParameterType)
    )
    defs = ctx.defs
    assert set(defs) == {
        "pairs",
        "dumbbells",
        "senderImage",
        "nodeImage",
        "hwType",
        "bandwidthMbps",
        "rttMs",
        "queuePackets",
        "aqm",
        "delayMethod",
        "reverseShaping",
        "senderImageCustom",
        "senderImages",
        "senderOs",
        "txRing",
        "containerTooling",
        "linkSpeedMbps",
        "delayHwType",
        "interSwitch",
        "hostOffloads",
    }
    for name, d in defs.items():
        assert d["type"] != geni.portal.ParameterType.BOOLEAN, (
            name
        )  # bool("False") is True in 0.9.9.4
        assert d["long"], name
        if d["legal"]:
            legal = [v[0] if isinstance(v, tuple) else v for v in d["legal"]]
            assert d["default"] in legal, name
    assert defs["aqm"]["default"] == "none"
    assert [v if isinstance(v, str) else v[0] for v in defs["aqm"]["legal"]] == [
        "none",
        "fq_codel",
        "codel",
        "pie",
        "red",
    ]
    assert (
        defs["bandwidthMbps"]["default"],
        defs["rttMs"]["default"],
        defs["queuePackets"]["default"],
    ) == (1000, 40, 48)
    assert defs["hwType"]["default"] == "d430"
    # a delay node's type is a request for delay-<type>: none unless the user knows it exists
    assert defs["delayHwType"]["default"] == ""
    assert "delay-<type> node type (e.g. delay-d430)" in defs["delayHwType"]["long"]
    assert defs["nodeImage"]["default"] == UBUNTU24
    assert {v[0] for v in defs["senderImage"]["legal"]} == {UBUNTU24, FBSD142}
    # every default passes validation
    assert prof.validate({k: d["default"] for k, d in defs.items()}) == []


# --------------------------------------------------------------------------- the plan


def test_import_has_no_portal_side_effects():
    code = (
        "import importlib.util, json, os, sys\n"
        "os.environ['CCBENCH_PROFILE_IMPORT'] = '1'\n"
        "spec = importlib.util.spec_from_file_location('p', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "assert 'geni.portal' not in sys.modules\n"
        "json.dump(m.dumbbell_plan(1, 1), sys.stdout)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(PROFILE)],
        capture_output=True,
        text=True,
        env=clean_env(),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert set(json.loads(res.stdout)) == {"s1", "rt1", "dl", "rt2", "r1"}


def test_dumbbell_plan_addressing_rules():
    plan = prof.dumbbell_plan(3, 4)
    assert len(plan) == 4 * (2 * 3 + 3)
    for d in range(1, 5):
        sfx = "" if d == 1 else f"-d{d}"
        for i in range(1, 4):
            s, r = plan[f"s{i}{sfx}"], plan[f"r{i}{sfx}"]
            assert (s["role"], s["dumbbell"], s["pair"], s["peer"]) == (
                "sender",
                d,
                i,
                f"r{i}{sfx}",
            )
            # a /30 per host: router .4i-3, host .4i-2
            assert s["addresses"] == {"rt1": f"10.{d}.1.{4 * i - 2}"}
            assert s["prefixes"] == {"rt1": 30}
            assert s["links"] == {"rt1": f"s{i}-rt1{sfx}"}
            assert s["routes"] == {f"10.{d}.3.0/24": f"10.{d}.1.{4 * i - 3}"}
            assert (r["role"], r["peer"]) == ("receiver", f"s{i}{sfx}")
            assert r["addresses"] == {"rt2": f"10.{d}.3.{4 * i - 2}"}
            assert r["routes"] == {f"10.{d}.1.0/24": f"10.{d}.3.{4 * i - 3}"}
        rt1, rt2, dl = plan["rt1" + sfx], plan["rt2" + sfx], plan["dl" + sfx]
        assert rt1["addresses"] == {
            "s1": f"10.{d}.1.1",
            "s2": f"10.{d}.1.5",
            "s3": f"10.{d}.1.9",
            "core": f"10.{d}.2.1",
        }
        assert rt2["addresses"] == {
            "r1": f"10.{d}.3.1",
            "r2": f"10.{d}.3.5",
            "r3": f"10.{d}.3.9",
            "core": f"10.{d}.2.2",
        }
        assert rt1["links"]["core"] == dl["links"]["rt1"] == f"core-a{sfx}"
        assert rt1["routes"] == {f"10.{d}.3.0/24": f"10.{d}.2.2"}
        assert rt2["routes"] == {f"10.{d}.1.0/24": f"10.{d}.2.1"}
        assert (rt1["role"], rt2["role"], dl["role"]) == ("router", "router", "delay")
        assert dl["addresses"] == {}
    assert "dl" not in prof.dumbbell_plan(2, 1, delay_node=False)
    # every address is unique
    addrs = [a for n in plan.values() for a in n["addresses"].values()]
    assert len(addrs) == len(set(addrs))


def test_plan_roles_match_the_local_model():
    sys.path.insert(0, str(REPO / "src"))
    try:
        topology = pytest.importorskip("ccbench.topology")
    finally:
        sys.path.remove(str(REPO / "src"))
    if not (hasattr(topology, "nodes") and hasattr(topology, "role")):
        pytest.skip("ccbench.topology has no nodes()/role()")
    for pairs in (1, 2, 4):
        local = {n: topology.role(n) for n in topology.nodes(pairs)}
        plan = prof.dumbbell_plan(pairs, 1, delay_node=True)
        assert {n: info["role"] for n, info in plan.items()} == local
        # the same links: every host on one of its own to its router, rt1 - dl - rt2
        local_links = {frozenset((lk.a, lk.b)) for lk in topology.links(pairs)}
        plan_links = {
            frozenset(end.split(":")[0] for end in ends) for ends in prof.plan_links(plan).values()
        }
        assert plan_links == local_links
        # and the same layout inside each access /30: router .4i-3, host .4i-2
        for i in range(1, pairs + 1):
            for host, router in ((f"s{i}", "rt1"), (f"r{i}", "rt2")):
                local = topology.address(host, pairs).rsplit(".", 1)[1]
                assert plan[host]["addresses"][router].rsplit(".", 1)[1] == local
                assert plan[host]["prefixes"][router] == 30


# --------------------------------------------------------------------------- the geni-lib fix-up


def load_fixup():
    spec = importlib.util.spec_from_file_location(
        "fix_genilib", REPO / "scripts" / "fix_genilib.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fix_genilib_round_trip(tmp_path):
    """Rebuild the released 0.9.9.4 files from the fixed ones (undoing the exact
    replacements must give the original sha256), then fix the copy: fixed, then
    'already fixed'; an unknown file is refused without writing anything."""
    fx = load_fixup()
    installed = Path(importlib.util.find_spec("geni").submodule_search_locations[0])
    pkg = tmp_path / "geni"
    for rel, fix in fx.FIXES.items():
        text = (installed / rel).read_text()
        assert fx.sha256(text.encode()) == fix["fixed"], rel
        for old, new, _count in reversed(fix["replacements"]):
            text = text.replace(new, old)
        assert fx.sha256(text.encode()) == fix["original"], rel
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)

    script = [sys.executable, str(REPO / "scripts" / "fix_genilib.py"), "--path", str(pkg)]
    check = subprocess.run([*script, "--check"], capture_output=True, text=True)
    assert check.returncode == 1 and check.stdout.count("needs fixing") == 2
    first = subprocess.run(script, capture_output=True, text=True)
    assert first.returncode == 0 and first.stdout.count(": fixed") == 2, first.stderr
    for rel, fix in fx.FIXES.items():
        assert fx.sha256((pkg / rel).read_bytes()) == fix["fixed"]
    again = subprocess.run(script, capture_output=True, text=True)
    assert again.returncode == 0 and again.stdout.count("already fixed") == 2

    pg = pkg / "rspec" / "pg.py"
    pg.write_text(pg.read_text() + "# local edit\n")
    before = (pkg / "portal.py").read_bytes()
    refused = subprocess.run(script, capture_output=True, text=True)
    assert refused.returncode == 1
    assert len(refused.stderr.strip().splitlines()) == 1 and "unknown sha256" in refused.stderr
    assert (pkg / "portal.py").read_bytes() == before
