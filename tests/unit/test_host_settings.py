"""Host settings as an axis: the config's `host`, the run spec, the OS plans (Linux run for
real in tests/integration/test_host_axis.py; FreeBSD tested as exact argv plans against
ifconfig(8)/sysctl(8) output written from their print code), the apply/put-back order
against a stand-in host that answers as procps, ethtool and ifconfig do, and the
read-back's verdict."""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ccbench import calibration, host_apply
from ccbench.errors import CcbenchError, Refused
from ccbench.exec import Result
from ccbench.host_settings import HostSettings, RoleSettings
from ccbench.hosts import loader
from ccbench.hosts.linux import LinuxHost
from ccbench.hosts.settings import (
    EndpointReading,
    FreeBSDSettings,
    LinuxSettings,
    read_endpoint,
)
from ccbench.instruments.host_settings import judge
from ccbench.matrix import expand
from ccbench.reasons import Code, texts
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.testbed import base
from tests.ssh_plans import DUMBBELL, ssh_testbed
from tests.unit.test_lab_guard import Host, make_lab

CAPS = Path(__file__).parents[1] / "captures" / "host"


def cap(name: str) -> str:
    return (CAPS / name).read_text()


# --- the config and the spec ------------------------------------------------------


def test_settings_from_a_config_and_back() -> None:
    h = HostSettings.from_dict({
        "senders": {"sysctl": {"net.ipv4.tcp_wmem": "4096  16384 5242880"},
                    "offloads": {"gso": True, "tso": "off"}},
        "receivers": {"offloads": {"gro": "on"}}, "mtu": 9000,
    })  # fmt: skip
    assert h.senders.sysctl == (("net.ipv4.tcp_wmem", "4096 16384 5242880"),)
    assert h.senders.offloads == (("gso", True), ("tso", False))
    assert h.to_dict() == {
        "senders": {"sysctl": {"net.ipv4.tcp_wmem": "4096 16384 5242880"},
                    "offloads": {"gso": "on", "tso": "off"}},
        "receivers": {"offloads": {"gro": "on"}}, "mtu": 9000,
    }  # fmt: skip
    assert HostSettings.from_dict(h.to_dict()) == h
    assert h.describe() == ("senders: net.ipv4.tcp_wmem=4096 16384 5242880, gso on, tso off; "
                            "receivers: gro on; MTU 9000")  # fmt: skip


@pytest.mark.parametrize(
    ("d", "says"),
    [
        ({"senders": {"sysctl": {"net/ipv4": "1"}}},
         "host.senders.sysctl: 'net/ipv4' is not a sysctl name"),
        ({"senders": {"sysctl": {"net.a": "1; reboot"}}}, "is not a sysctl value"),
        ({"receivers": {"offloads": {"tcp": True}}},
         "host.receivers.offloads: 'tcp' is not one of"),
        ({"senders": {"offloads": {"tso": "yes"}}},
         "host.senders.offloads.tso: 'yes' is not on or off"),
        ({"mtu": 100}, "host.mtu: 100 is not an MTU in 576..9000"),
        ({"routers": {}}, "host: unknown keys routers"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_naming_the_key(d: dict[str, object], says: str) -> None:
    with pytest.raises(CcbenchError, match=None) as e:
        HostSettings.from_dict(d)
    assert says in str(e.value) and "\n" not in str(e.value)


def test_a_variants_settings_go_over_the_top_levels() -> None:
    top = HostSettings.from_dict({"senders": {"sysctl": {"net.a.b": "1", "net.a.c": "2"}}})
    var = HostSettings.from_dict({"senders": {"sysctl": {"net.a.b": "9"}}, "mtu": 9000})
    both = var.over(top)
    assert both.senders.sysctl == (("net.a.b", "9"), ("net.a.c", "2")) and both.mtu == 9000


def _spec(host: HostSettings | None = None) -> RunSpec:
    return RunSpec(topology=Topology(pairs=1), flows=(Flow(1, "cubic"),),
                   host=host or HostSettings())  # fmt: skip


def test_a_run_without_host_settings_keeps_its_id() -> None:
    """Runs measured before host settings existed hash to the same id (FIELDS_ADDED)."""
    plain = _spec()
    d = plain.to_dict()
    assert d["host"] == {}
    del d["host"]
    assert RunSpec.from_dict(d).run_id == plain.run_id
    asked = _spec(HostSettings.from_dict({"senders": {"offloads": {"gso": True}}}))
    assert asked.run_id != plain.run_id
    assert RunSpec.from_dict(asked.to_dict()) == asked


def _cfg(**over: object) -> dict[str, object]:
    from ccbench.config import validate

    cfg = {
        "scenarios": {"one": {"topology": {"queue": {"kind": "pfifo", "limit_bdp": 1}}}},
        "variants": [
            {"label": "base", "cc": "cubic"},
            {"label": "gso", "cc": "cubic", "host": {"senders": {"offloads": {"gso": "on"}}}},
            {"label": "jumbo", "cc": "cubic", "host": {"mtu": 9000}},
        ],
        "topology": {"pairs": 1, "rate_mbit": 100, "rtt_ms": 40},
        "repetitions": 1, **over,
    }  # fmt: skip
    return validate(cfg, "matrix", "t.yaml")


def test_a_variants_mtu_is_its_runs_path_mtu_on_a_testbed_of_its_own() -> None:
    m = expand(_cfg(host={"senders": {"sysctl": {"net.ipv4.tcp_wmem": "4096 16384 5242880"}}}))
    runs = {r.spec.variant: r for r in m.runs.values()}
    base, jumbo = runs["base"].spec, runs["jumbo"].spec
    assert base.topology.mtu == 1500 and jumbo.topology.mtu == 9000
    # limit_bdp is counted in packets of the variant's MTU
    assert base.topology.queue_limit_pkts == 331 and jumbo.topology.queue_limit_pkts == 56
    assert runs["base"].testbed == runs["gso"].testbed != runs["jumbo"].testbed
    # the top level's settings reach every variant; a variant's go over them
    assert dict(jumbo.host.senders.sysctl) == {"net.ipv4.tcp_wmem": "4096 16384 5242880"}
    assert dict(runs["gso"].spec.host.senders.offloads) == {"gso": True}
    assert jumbo.host.mtu is None  # the spec's MTU is its topology's


def test_mtu_at_the_top_level_or_on_a_testbed_that_does_not_set_it_is_refused() -> None:
    with pytest.raises(CcbenchError, match=r"t.yaml: host.mtu: the path MTU every variant"):
        expand(_cfg(host={"mtu": 9000}), "t.yaml")
    with pytest.raises(CcbenchError, match=r"variant jumbo: host.mtu: the ssh testbed does not"):
        expand(_cfg(testbed={"kind": "ssh", "inventory": "x.yaml"}), "t.yaml")


# --- the OS plans -------------------------------------------------------------------


def test_linux_baseline_is_what_up_sets() -> None:
    lx = LinuxSettings()
    assert LinuxHost().tune(netns_local=True) == [
        ["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 10485760"],
        ["sysctl", "-w", "net.ipv4.tcp_no_metrics_save=1"],
    ]
    real = dict(lx.baseline(netns_local=False).sysctl)
    assert real["net.core.rmem_max"] == real["net.core.wmem_max"] == "10485760"
    assert dict(lx.baseline(netns_local=True).offloads) == {
        "tso": False,
        "gso": False,
        "gro": False,
    }


def test_linux_reads_a_veths_interface_from_real_captures() -> None:
    lx = LinuxSettings()
    assert lx.interface_of(cap("ip-j-addr-show.json"), "10.11.1.2") == "s1-eth0"
    assert lx.interface_of(cap("ip-j-addr-show.json"), "10.11.1.3") is None
    link = cap("ip-j-link-show-s1-eth0.json")
    new = lx.interface_state("s1-eth0", [link, cap("ethtool-k-veth-default.txt")])
    assert new.mtu == 1500
    assert new.offloads == {"tso": "on", "gso": "on", "gro": "off", "lro": "off [fixed]",
                            "rxcsum": "on", "txcsum": "on"}  # fmt: skip
    off = lx.interface_state("s1-eth0", [link, cap("ethtool-k-veth-offloads-off.txt")])
    assert (off.is_on("tso"), off.is_on("gso"), off.is_on("gro")) == (False, False, False)
    assert off.fixed("lro") and not off.fixed("tso")
    with pytest.raises(ValueError, match="no MTU"):
        lx.interface_state("s1-eth0", ["", cap("ethtool-k-veth-default.txt")])


def test_linux_plans_are_exact_argv() -> None:
    lx = LinuxSettings()
    assert lx.offloads_set("s1-eth0", {"tso": True, "rxcsum": False}) == [
        ["ethtool", "-K", "s1-eth0", "tso", "on", "rx", "off"]]  # fmt: skip
    assert lx.sysctl_write("net.ipv4.tcp_wmem", "4096 16384 5242880") == [
        "sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 5242880"]  # fmt: skip
    assert lx.interface_read("s1-eth0") == [["ip", "-j", "link", "show", "dev", "s1-eth0"],
                                            ["ethtool", "-k", "s1-eth0"]]  # fmt: skip
    with pytest.raises(CcbenchError, match="bad interface name"):
        lx.interface_read("eth0; reboot")


def test_freebsd_plans_and_reads_checked_against_ifconfig() -> None:
    """sbin/ifconfig/ifconfig.c: DEF_CMD "tso" (IFCAP_TSO = TSO4|TSO6), "-lro", "rxcsum",
    "txcsum"; sysctl(8) takes name=value."""
    fb = FreeBSDSettings()
    assert fb.interface_of(cap("freebsd-ifconfig-a.txt"), "10.10.1.1") == "igb1"
    assert fb.interface_of(cap("freebsd-ifconfig-a.txt"), "155.98.36.10") == "igb0"
    off = fb.interface_state("igb1", [cap("freebsd-ifconfig-m-igb1-offloads-off.txt")])
    assert off.mtu == 1500
    assert off.offloads == {"tso": "off", "lro": "off", "rxcsum": "off", "txcsum": "off"}
    on = fb.interface_state("igb1", [cap("freebsd-ifconfig-m-igb1-offloads-on.txt")])
    assert on.mtu == 9000 and set(on.offloads.values()) == {"on"}
    vt = fb.interface_state("vtnet1", [cap("freebsd-ifconfig-m-vtnet1-no-lro-capability.txt")])
    assert vt.offloads["lro"] == "off [fixed]" and not vt.fixed("tso")
    assert fb.offloads_set("igb1", {"tso": True, "lro": False}) == [
        ["ifconfig", "igb1", "tso", "-lro"]
    ]
    assert fb.interface_read("igb1") == [["ifconfig", "-m", "igb1"]]
    assert fb.sysctl_write("kern.ipc.maxsockbuf", "5242880") == [
        "sysctl",
        "kern.ipc.maxsockbuf=5242880",
    ]
    assert fb.unsupported({"gso": True, "tso": True, "gro": False}) == ["gso", "gro"]
    assert [a[1] for a in fb.tune(netns_local=False)] == [
        "net.inet.tcp.hostcache.enable=0", "kern.ipc.maxsockbuf=10485760",
        "net.inet.tcp.sendbuf_max=10485760", "net.inet.tcp.recvbuf_max=10485760"]  # fmt: skip


# --- apply and put back, on a stand-in host ----------------------------------------


@pytest.fixture(autouse=True)
def _state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """host_apply keeps its pending list beside the testbed's state: here, not /run."""
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")


@dataclass
class StandIn:
    """A Linux endpoint as its tools answer: procps sysctl 4.0.2 (exit 0 with "Invalid
    argument" for a read-only key, as measured in a namespace here), ethtool (a '[fixed]'
    feature stays), ip -j. Records every argv."""

    sysctl: dict[str, str]
    readonly: set[str] = field(default_factory=set)
    offloads: dict[str, str] = field(default_factory=lambda: {
        "tso": "off", "gso": "off", "gro": "off", "lro": "off [fixed]"})  # fmt: skip
    ran: list[list[str]] = field(default_factory=list)
    name: str = "s1"

    def run(self, argv: list[str], check: bool = True, **_: object) -> Result:
        self.ran.append(argv)
        out, rc, err = "", 0, ""
        if argv[:3] == ["ip", "-j", "addr"]:
            out = json.dumps([{"ifname": "s1-eth0", "addr_info": [{"local": "10.0.0.1"}]}])
        elif argv[:3] == ["ip", "-j", "link"]:
            out = json.dumps([{"ifname": "s1-eth0", "mtu": 1500}])
        elif argv[:2] == ["ethtool", "-k"]:
            names = {v: k for k, v in LinuxSettings.LINES.items()}
            out = "".join(f"{names[k]}: {v}\n" for k, v in self.offloads.items())
        elif argv[:2] == ["ethtool", "-K"]:
            for k, v in zip(argv[3::2], argv[4::2], strict=True):
                if not self.offloads[k].endswith("[fixed]"):
                    self.offloads[k] = v
        elif argv[:2] == ["sysctl", "-n"]:
            if argv[2] in self.sysctl:
                out = self.sysctl[argv[2]] + "\n"
            else:
                rc, err = 255, f"sysctl: cannot stat /proc/sys/{argv[2]}: No such file"
        elif argv[:2] == ["sysctl", "-w"]:
            k, _, v = argv[2].partition("=")
            if k in self.readonly:
                err = f'sysctl: setting key "{k}": Invalid argument'
            else:
                self.sysctl[k] = "\t".join(v.split())
        return Result(tuple(argv), rc, out, err)


@dataclass
class Bed:
    hosts: dict[str, StandIn]
    id: str = "t1"
    kind: str = "ssh"

    def ex(self, node: str) -> StandIn:
        return self.hosts[node]

    def node_os(self) -> dict[str, str]:
        return dict.fromkeys(self.hosts, "linux")

    def driver(self, node: str) -> LinuxHost:
        return LinuxHost()

    def address(self, node: str) -> str:
        return "10.0.0.1"


def _asking(**senders: object) -> RunSpec:
    return _spec(HostSettings.from_dict({"senders": senders}))


def _host() -> StandIn:
    return StandIn({"net.ipv4.tcp_wmem": "4096\t16384\t10485760", "net.core.rmem_max": "212992"},
                   readonly={"net.core.rmem_max"})  # fmt: skip


def _bed() -> Bed:
    return Bed({"s1": _host(), "r1": StandIn({}, name="r1")})


def _writes(h: StandIn) -> list[list[str]]:
    return [a for a in h.ran if a[:2] in (["sysctl", "-w"], ["ethtool", "-K"])]


def test_changes_are_made_recorded_and_put_back_last_first(tmp_path: Path) -> None:
    bed = _bed()
    spec = _asking(sysctl={"net.ipv4.tcp_wmem": "4096 16384 5242880"}, offloads={"gso": "on"})
    done = host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    s1 = bed.hosts["s1"]
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t5242880" and s1.offloads["gso"] == "on"
    assert [c.setting for c in done] == ["sysctl net.ipv4.tcp_wmem", "offload gso on s1-eth0"]
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    assert _writes(s1) == [
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 5242880"],
        ["ethtool", "-K", "s1-eth0", "gso", "on"],
        ["ethtool", "-K", "s1-eth0", "gso", "off"],
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096\t16384\t10485760"],
    ]
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760" and s1.offloads["gso"] == "off"
    rec = json.loads((tmp_path / "host-changes.json").read_text())
    assert [r["argv"][-1] for r in rec["put_back"]] == [
        "off",
        "net.ipv4.tcp_wmem=4096\t16384\t10485760",
    ]
    assert all(r["differs"] is None for r in rec["ran"] + rec["put_back"])
    assert bed.hosts["r1"].ran == []  # nothing asked of the receivers: nothing read there


@pytest.mark.parametrize(
    ("asked", "says"),
    [
        ({"sysctl": {"net.ipv4.tcp_wmem": "1 2 3", "net.nosuch.knob": "1"}},
         "s1 (senders): sysctl net.nosuch.knob: the host has no such setting"),
        ({"offloads": {"gso": "on", "lro": "on"}},
         "s1-eth0 cannot switch offload lro (off [fixed])"),
    ],
)  # fmt: skip
def test_what_can_be_refused_is_refused_before_anything_changes(
    tmp_path: Path, asked: dict[str, object], says: str
) -> None:
    bed = _bed()
    with pytest.raises(Refused, match=None) as e:
        host_apply.apply(bed, _asking(**asked), tmp_path)  # type: ignore[arg-type]
    assert says in str(e.value)
    assert _writes(bed.hosts["s1"]) == []


def test_freebsd_has_no_gso_switch_and_says_so(tmp_path: Path) -> None:
    bed = _bed()
    bed.driver = lambda node: type("D", (), {"os": "freebsd"})()  # type: ignore[method-assign]
    with pytest.raises(Refused, match="freebsd has no switch for offload gso"):
        host_apply.apply(bed, _asking(offloads={"gso": "on"}), tmp_path)  # type: ignore[arg-type]


def test_a_refusal_only_the_host_can_make_puts_back_what_was_set(tmp_path: Path) -> None:
    """procps sysctl exits 0 on EINVAL (tcp_mem is the host's, read-only in a namespace):
    the value read back after the write decides, and what was set before is put back."""
    bed = _bed()
    s1 = bed.hosts["s1"]
    s1.sysctl |= {"net.core.somaxconn": "4096", "net.ipv4.tcp_mem": "1 2 3"}
    s1.readonly.add("net.ipv4.tcp_mem")
    before = dict(s1.sysctl)
    spec = _asking(sysctl={"net.core.somaxconn": "128", "net.ipv4.tcp_mem": "4 5 6"})
    with pytest.raises(Refused) as e:
        host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert str(e.value) == (
        "testbed t1: s1: sysctl net.ipv4.tcp_mem = 4 5 6 refused: sysctl: setting key "
        '"net.ipv4.tcp_mem": Invalid argument (every setting made before it is put back)'
    )
    assert s1.sysctl == before
    assert _writes(s1) == [["sysctl", "-w", "net.core.somaxconn=128"],
                           ["sysctl", "-w", "net.ipv4.tcp_mem=4 5 6"],
                           ["sysctl", "-w", "net.ipv4.tcp_mem=1 2 3"],
                           ["sysctl", "-w", "net.core.somaxconn=4096"]]  # fmt: skip
    rec = json.loads((tmp_path / "host-changes.json").read_text())
    assert [r["differs"] for r in rec["ran"]] == [None, "it reads '1 2 3'", None, None]


def test_reading_an_endpoint_never_raises() -> None:
    r = read_endpoint(StandIn({}), LinuxSettings(), "senders", "10.9.9.9", ["net.x.y"])
    assert r.interface is None and r.sysctl == {"net.x.y": None}
    assert r.errors == ["no interface holds the data address 10.9.9.9",
                        "sysctl net.x.y: sysctl: cannot stat /proc/sys/net.x.y: "
                        "No such file"]  # fmt: skip


# --- the read-back's verdict ------------------------------------------------------------


def _reading(offloads: str, sysctl: dict[str, str | None], mtu: int = 1500) -> EndpointReading:
    link = json.dumps([{"ifname": "s1-eth0", "mtu": mtu}])
    return EndpointReading("senders", "linux", "10.11.1.2", "s1-eth0", [link, cap(offloads)],
                           sysctl)  # fmt: skip


def test_the_read_back_judges_what_the_run_asked_and_lists_the_baselines_rest() -> None:
    """What the config asked (and the path MTU) makes the run invalid when the host reports
    otherwise; where the host differs from ccbench's baseline in what the run did not ask
    (a namespace's host-wide net.core.*, say), that is listed beside, not judged."""
    base = LinuxSettings().baseline(netns_local=False)
    explicit = RoleSettings(sysctl=(("net.ipv4.tcp_wmem", "4096 16384 5242880"),),
                            offloads=(("gso", False),))  # fmt: skip
    want = explicit.over(base)
    host = {"net.ipv4.tcp_wmem": "4096\t16384\t10485760", "net.core.rmem_max": "4194304"}
    r = _reading("ethtool-k-veth-default.txt", dict(host))
    found, reasons = judge("s1", r, want, explicit, 9000)
    assert [(r.code, r.evidence["setting"]) for r in reasons] == [
        (Code.HOST_SETTING, "mtu"), (Code.HOST_SETTING, "offload gso"),
        (Code.HOST_SETTING, "sysctl net.ipv4.tcp_wmem")]  # fmt: skip
    assert texts(reasons) == [  # each naming host, setting, asked and found
        "s1/s1-eth0: MTU asked 9000, found 1500",
        "s1/s1-eth0: offload gso asked off, found on",
        "s1: sysctl net.ipv4.tcp_wmem asked '4096 16384 5242880', found '4096\\t16384\\t10485760'",
    ]
    assert found.baseline_differs == [
        "s1/s1-eth0: offload tso asked off, found on",
        "s1: sysctl net.core.rmem_max asked '10485760', found '4194304'",
    ]
    assert found.interface == "s1-eth0" and found.offloads["lro"] == "off [fixed]"
    ok = _reading("ethtool-k-veth-offloads-off.txt", {"net.ipv4.tcp_wmem": "4096\t16384\t5242880"})
    assert judge("s1", ok, want, explicit, 1500)[1] == []


def test_a_fixed_offload_the_run_did_not_ask_to_change_is_the_testbeds_own() -> None:
    """A macvlan's TSO is 'on [fixed]': the baseline's 'tso off' is not judged there."""
    text = cap("ethtool-k-veth-offloads-off.txt").replace(
        "tcp-segmentation-offload: off", "tcp-segmentation-offload: on").replace(
        "tx-tcp-segmentation: off", "tx-tcp-segmentation: on [fixed]")  # fmt: skip
    r = EndpointReading("senders", "linux", "a", "m1", [json.dumps([{"mtu": 1500}]), text], {})
    base = LinuxSettings().baseline(netns_local=True)
    assert judge("s1", r, base, RoleSettings(), 1500)[1] == []


# --- a run killed before its put-back (SIGKILL) ----------------------------------------

WMEM_GSO = {"sysctl": {"net.ipv4.tcp_wmem": "4096 16384 5242880"}, "offloads": {"gso": "on"}}
# the undo of each change as recorded, last made first
UNDO = [["ethtool", "-K", "s1-eth0", "gso", "off"],
        ["sysctl", "-w", "net.ipv4.tcp_wmem=4096\t16384\t10485760"]]  # fmt: skip


def _killed(tmp_path: Path, bed: Bed) -> list[host_apply.Change]:
    """A run that made its changes and was killed: apply, and no put-back."""
    (tmp_path / "killed").mkdir()
    return host_apply.apply(bed, _asking(**WMEM_GSO), tmp_path / "killed")  # type: ignore[arg-type]


def test_a_killed_run_leaves_its_list_and_the_next_run_puts_it_back_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    monkeypatch.setattr(host_apply.progress, "info", said.append)
    bed = _bed()
    s1 = bed.hosts["s1"]
    done = _killed(tmp_path, bed)
    pending = host_apply.pending_file("t1")
    assert pending == tmp_path / "state" / "t1" / "host-pending.json"  # beside state.json
    assert json.loads(pending.read_text())["changes"] == [asdict(c) for c in done]
    s1.ran.clear()
    # the next run: what the killed one set goes back before anything is read for its own
    done = host_apply.apply(bed, _asking(**WMEM_GSO), tmp_path)  # type: ignore[arg-type]
    assert said == ["testbed t1: putting back what a killed run set: s1 sysctl "
                    "net.ipv4.tcp_wmem, s1 offload gso on s1-eth0"]  # fmt: skip
    assert _writes(s1)[:2] == UNDO
    assert s1.ran.index(UNDO[1]) < s1.ran.index(["sysctl", "-n", "net.ipv4.tcp_wmem"])
    # so this run found the host as it was, and puts that back after it
    assert [c.before for c in done] == ["4096\t16384\t10485760", "off"]
    assert json.loads(pending.read_text())["changes"] == [asdict(c) for c in done]
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    assert not pending.exists()
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760" and s1.offloads["gso"] == "off"


def test_what_does_not_go_back_stays_listed_and_refuses_the_next_run(tmp_path: Path) -> None:
    bed = _bed()
    s1 = bed.hosts["s1"]
    _killed(tmp_path, bed)
    s1.readonly.add("net.ipv4.tcp_wmem")  # the host now refuses the old value
    with pytest.raises(Refused) as e:
        host_apply.apply(bed, _asking(**WMEM_GSO), tmp_path)  # type: ignore[arg-type]
    assert str(e.value) == (
        "testbed t1: what a killed run set is not all put back: s1: sysctl net.ipv4.tcp_wmem "
        "not put back (it reads '4096\\t16384\\t5242880') (`ccbench testbed down --id t1` "
        "retries)"
    )
    assert s1.offloads["gso"] == "off"  # the rest went back
    left = json.loads(host_apply.pending_file("t1").read_text())["changes"]
    assert [c["setting"] for c in left] == ["sysctl net.ipv4.tcp_wmem"]
    s1.readonly.clear()
    # `down` with s1 not reached: named, and kept for `down` again
    assert host_apply.down_hosts(bed, {"s1"}) == (  # type: ignore[arg-type]
        ["s1: sysctl net.ipv4.tcp_wmem not put back (not reached)"],
        "",
    )
    assert host_apply.pending_file("t1").exists()
    assert host_apply.down_hosts(bed, ()) == ([], "")  # type: ignore[arg-type]
    assert not host_apply.pending_file("t1").exists()
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760"


class LabHost(Host):
    """A lab host (test_lab_guard's) whose settings are a StandIn's."""

    ROUTED = (["ip", "-j", "addr"], ["ip", "-j", "link"], ["ethtool", "-k"], ["ethtool", "-K"],
              ["sysctl", "-n"], ["sysctl", "-w"])  # fmt: skip

    def __init__(self, standin: StandIn | None, *args: Any) -> None:
        super().__init__(*args)
        self.standin = standin

    def run(self, argv: Any, check: bool = True, timeout: float | None = None,
            **kw: Any) -> Result:  # fmt: skip
        argv = [str(a) for a in argv]
        if self.standin is not None and any(argv[: len(p)] == p for p in self.ROUTED):
            self.log.append((self.name, argv))
            return self.standin.run(argv)
        return super().run(argv, check, timeout)


def test_lab_down_puts_back_what_a_killed_run_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`down` alone after a killed run: its processes ended first, then its settings put
    back in the recorded order, and only then "as found"."""
    tb, log = make_lab(tmp_path, monkeypatch, {})
    s1 = _host()
    monkeypatch.setattr(tb, "ex", lambda n: LabHost(s1 if tb.host_of(n) == "s1" else None,
                                                    tb.host_of(n), log, {}))  # fmt: skip
    host_apply.apply(tb, _asking(**WMEM_GSO), tmp_path)
    assert host_apply.pending_file(tb.id).exists()
    log.clear()
    said = tb.down()
    assert said.startswith("lab hosts put back as found")
    ran = [a for n, a in log if n == "s1"]
    swept = next(i for i, a in enumerate(ran) if a[3:4] == ["ccbench-sweep"])
    assert [a for a in ran if a in UNDO] == UNDO and ran.index(UNDO[0]) > swept
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760" and s1.offloads["gso"] == "off"
    assert tb.read_state() is None and not host_apply.pending_file(tb.id).exists()


def test_lab_up_puts_back_what_a_killed_run_set_before_it_reads_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`up` again after a killed run: its settings go back before `up` records the hosts
    as found (its tuning's sysctl reads) and measures the path, so neither sees them."""
    tb, log = make_lab(tmp_path, monkeypatch, {})
    s1 = _host()
    monkeypatch.setattr(tb, "ex", lambda n: LabHost(s1 if tb.host_of(n) == "s1" else None,
                                                    tb.host_of(n), log, {}))  # fmt: skip
    host_apply.apply(tb, _asking(**WMEM_GSO), tmp_path)
    log.clear()

    class PathMeasured(Exception):
        pass

    def idle_rtt(*_: Any, **__: Any) -> None:
        # the killed run's values gone; the test stops `up` here, its changes all read
        assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760"
        assert s1.offloads["gso"] == "off"
        raise PathMeasured

    monkeypatch.setattr(calibration, "idle_rtt", idle_rtt)
    with pytest.raises(PathMeasured):
        tb.up()
    ran = [a for n, a in log if n == "s1"]
    assert [a for a in ran if a in UNDO] == UNDO
    swept = next(i for i, a in enumerate(ran) if a[3:4] == ["ccbench-sweep"])
    assert swept < ran.index(UNDO[0])  # its processes ended first, as `down` does
    assert not host_apply.pending_file(tb.id).exists()


def test_ssh_up_puts_back_what_a_killed_run_set_before_it_tunes_and_measures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ssh testbed's `up` again after a killed run: its settings go back right after
    its processes are ended, before anything of the path is looked at."""
    hosts = {n: StandIn({}, name=n) for n in DUMBBELL}
    hosts["s1"] = s1 = _host()
    tb = ssh_testbed(tmp_path, monkeypatch, "t1", Topology(pairs=1), hosts.__getitem__)
    monkeypatch.setattr(tb, "node_os", lambda: dict.fromkeys(hosts, "linux"))
    monkeypatch.setattr(tb, "address", lambda _: "10.0.0.1")  # StandIn's s1-eth0
    host_apply.apply(tb, _asking(**WMEM_GSO), tmp_path)
    s1.ran.clear()
    order: list[str] = []
    monkeypatch.setattr(tb, "end_leftovers", lambda: order.append("ended"))

    class PathLookedAt(Exception):
        pass

    def find_dev(_: str) -> str:
        order.append("path")
        raise PathLookedAt

    monkeypatch.setattr(tb, "_find_dev", find_dev)
    with pytest.raises(PathLookedAt):
        tb.up()
    assert order == ["ended", "path"] and _writes(s1) == UNDO
    assert s1.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760" and s1.offloads["gso"] == "off"
    assert not host_apply.pending_file("t1").exists()


class LoaderHost(StandIn):
    """A FreeBSD host's /boot/loader.conf as a file here: hosts.loader's scripts run on it
    for real (sh), the file's path in place of /boot/loader.conf."""

    def __init__(self, conf: Path) -> None:
        super().__init__({})
        self.conf = conf

    def run(self, argv: list[str], check: bool = True, **kw: object) -> Result:
        self.ran.append(argv)
        real = [str(self.conf) if a == loader.LOADER_CONF else a for a in argv]
        cp = subprocess.run(real, capture_output=True, text=True)
        return Result(tuple(argv), cp.returncode, cp.stdout, cp.stderr)


def test_down_removes_ccbenchs_loader_block_checked_and_says_the_kernel_keeps_it(
    tmp_path: Path,
) -> None:
    conf = tmp_path / "loader.conf"
    conf.write_text('kern.hz="1000"\n# ccbench begin\nnet.isr.maxthreads="-1"\n# ccbench end\n')
    bed = Bed({"s1": LoaderHost(conf)})
    bed.node_os = lambda: {"s1": "freebsd", "rt1": "linux"}  # type: ignore[method-assign]
    assert host_apply.down_hosts(bed, ()) == ([], (  # type: ignore[arg-type]
        "; removed ccbench's /boot/loader.conf block on s1 (the running kernel keeps its "
        "tunables until the next reboot)"))  # fmt: skip
    assert conf.read_text() == 'kern.hz="1000"\n'  # every other line kept
    assert bed.hosts["s1"].ran == [loader.remove_block(), loader.block_gone()]
    assert host_apply.down_hosts(bed, ()) == ([], "")  # type: ignore[arg-type]  # none: no word
    conf.write_text("# ccbench begin\nx=1\n")  # markers that do not pair up: left, said
    problems, _ = host_apply.down_hosts(bed, ())  # type: ignore[arg-type]
    assert problems == ["s1: ccbench's block still in /boot/loader.conf (" + str(conf) +
                        ": its '# ccbench begin' and '# ccbench end' lines do not pair up: "
                        "fix them by hand)"]  # fmt: skip
    assert conf.read_text() == "# ccbench begin\nx=1\n"
