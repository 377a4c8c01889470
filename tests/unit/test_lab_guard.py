"""A lab's hosts guarded (testbed.lab_guard), against recording executors: a refused
`up` ran nothing that changes a host (every command it ran is one of the reads listed
here), and `down` says "as found" only once every change's check passes and no file of
its runs is left. The same refusals run for real over SSH in
tests/integration/test_lab_rehearsal.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import instruments, leftovers
from ccbench.errors import CcbenchError
from ccbench.exec import Result
from ccbench.exec_ssh import batch_argv, batch_rcs
from ccbench.spec import Topology
from ccbench.testbed import base, kinds, lab_checks, lab_guard, remote
from ccbench.testbed.lab import LabTestbed
from ccbench.testbed.lab_checks import Change
from tests.lab_recording import commands, reads_only

ADDRS = {"s1": "10.0.0.1", "s2": "10.0.0.2", "r1": "10.0.1.9", "rt1": "10.0.1.1"}
DEFAULT_ROOT = [{"kind": "fq_codel", "handle": "0:", "root": True}]
TOPO = Topology(pairs=2, rate_mbit=100, rtt_ms=40, loss_mode="nth", loss_rate=0.01)
# What the instruments and probes declare they write on a node (test_leftovers has the
# list), as testbed g1's `down` removes and checks them (flent's: g1's directory alone).
NODE_FILES = remote.down_paths("g1")


class Host:
    """A host as its commands see it: its addresses, its qdiscs, its programs, the
    files ccbench's runs left there (`files`; those in `stuck` cannot be removed); every
    command recorded. Anything else it is asked succeeds (a change, in a real host)."""

    def __init__(self, name: str, log: list[tuple[str, list[str]]], world: dict[str, Any]):
        self.name, self.log, self.world = name, log, world

    def run(self, argv: Any, check: bool = True, timeout: float | None = None) -> Result:
        argv = [str(a) for a in argv]
        parts = commands(argv)
        if parts != [argv]:  # a batch: each command, its exit code after its output
            got = [self.run(a) for a in parts]
            return Result(tuple(argv), 0, "".join(f"{r.stdout}ccbench-rc {r.returncode}\n"
                                                  for r in got), "")  # fmt: skip
        w = self.world.get(self.name, {})
        if w.get("unreachable"):
            raise CcbenchError(f"{self.name} ({self.name}.lan) unreachable over ssh: timed out")
        self.log.append((self.name, argv))
        out, rc = "", 0
        if argv == ["ip", "-j", "-4", "addr", "show"]:
            addr = w.get("address", ADDRS[self.name])
            out = json.dumps([{"ifname": "eth1", "addr_info": [{"local": addr}]}])
        elif argv[:5] == list(lab_checks.QDISC_SHOW):
            qd = w.get("ingress", []) if argv[-1] == "ingress" else w.get("root", DEFAULT_ROOT)
            out = json.dumps(qd)
        elif argv[:4] == lab_checks.has_programs()[:4]:
            missing = [p for p in argv[4:] if p in w.get("missing", ())]
            out, rc = (missing[0], 1) if missing else ("", 0)
        elif argv[:3] == ["sh", "-c", lab_checks.sysctl_is("k", "v")[2]]:
            rc = 1 if argv[4] in w.get("not_back", ()) else 0
        elif argv[:4] == leftovers.remove_files_argv([])[:4]:
            there = w.get("files", set())
            out = "".join(f"file {f}\n" for f in argv[5:] if f in there)  # after TOP
            there &= set(w.get("stuck", ()))
        elif argv[:4] == leftovers.files_left_argv([])[:4]:
            left = [f for f in argv[5:] if f in w.get("files", set())]
            out, rc = "".join(f"ccbench-left {f}\n" for f in left), int(bool(left))
        return Result(tuple(argv), rc, out, "")

    def close(self) -> None:
        return None


def make_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, world: dict[str, Any], **emulation: Any
) -> tuple[LabTestbed, list[tuple[str, list[str]]]]:
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = {"senders": {s: {"host": f"{s}.lan", "address": ADDRS[s]} for s in ("s1", "s2")},
           "receivers": {"r1": {"host": "r1.lan", "address": ADDRS["r1"]}},
           "router": {"host": "edge.lan", "address": ADDRS["rt1"]},
           "emulation": {"delay": "netem", "loss": "iptables", **emulation}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="g1", inventory=str(tmp_path / "lab.yaml"))
    tb = LabTestbed(cfg, TOPO)
    log: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(tb, "ex", lambda node: Host(tb.host_of(node), log, world))
    return tb, log


FOREIGN = [{"kind": "htb", "handle": "1:", "root": True}]
REFUSED = [
    pytest.param({"rt1": {"address": "10.0.9.9"}}, {},
                 "rt1: no interface has the experiment address 10.0.1.1", id="bad router address"),
    pytest.param({"rt1": {"root": FOREIGN}}, {},
                 r"rt1: eth1 has a root qdisc \(htb 1:\) ccbench did not put there",
                 id="foreign qdisc on the router's egress"),
    pytest.param({"r1": {"root": FOREIGN}}, {}, r"r1: eth1 has a root qdisc \(htb 1:\)",
                 id="foreign qdisc where netem goes"),
    pytest.param({"r1": {"ingress": [{"kind": "ingress", "handle": "ffff:"}]}},
                 {"delay": "netem-ifb"}, "r1: eth1 has an ingress qdisc", id="foreign ingress"),
    pytest.param({"r1": {"missing": ("nft",)}}, {"loss": "nftables"},
                 "r1: no program 'nft' there", id="no nft"),
    pytest.param({"r1": {"missing": ("/opt/ccdelay",)}},
                 {"delay": "ccdelay", "ccdelay": "/opt/ccdelay"},
                 "r1: no program '/opt/ccdelay' there", id="no ccdelay"),
]  # fmt: skip


@pytest.mark.parametrize(("world", "emulation", "says"), REFUSED)
def test_a_refused_up_changes_nothing_on_any_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, world: dict[str, Any],
    emulation: dict[str, Any], says: str,
) -> None:  # fmt: skip
    tb, log = make_lab(tmp_path, monkeypatch, world, **emulation)
    with pytest.raises(CcbenchError, match=says) as e:
        tb.up()
    assert "\n" not in str(e.value)
    changing = [(n, a) for n, a in log if not reads_only(a)]
    assert changing == [] and log, changing  # every host reached, only read
    assert tb.read_state() is None  # nothing to put back


def test_a_qdisc_ccbench_put_there_and_puts_back_first_is_not_someones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed testbed's tbf on the router (its state lists its removal) is no
    refusal: `up` removes it before it puts its own there."""
    tb, _ = make_lab(tmp_path, monkeypatch, {"rt1": {"root": FOREIGN}})
    mine = Change("rt1", "qdisc eth1 root", (("tc", "qdisc", "del", "dev", "eth1", "root"),))
    assert lab_guard.preflight(tb, [mine]) == {"rt1": "eth1", "r1": "eth1"}
    with pytest.raises(CcbenchError, match="has a root qdisc"):
        lab_guard.preflight(tb, [Change("rt1", "other", (("tc", "qdisc", "del", "dev", "eth0",
                                                           "root"),))])  # fmt: skip


def applied(tb: LabTestbed) -> dict[str, Any]:
    st: dict[str, Any] = {"devs": {"rt1": "eth1", "r1": "eth1"}}
    tb.state_dir.mkdir(parents=True, exist_ok=True)
    tb._apply(st)
    tb.write_state({**st, "complete": True})
    return st


def test_down_says_as_found_only_after_every_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world: dict[str, Any] = {}
    tb, log = make_lab(tmp_path, monkeypatch, world)
    st = applied(tb)
    checks = [a for c in st["changes"] for a in c["check"]]
    assert len(checks) >= len(st["changes"]) > 5  # every change has its check
    # a run killed mid-traffic left its tcp_probe trace on s1 (as siftr's log would be on a
    # FreeBSD sender)
    world["s1"] = {"files": {"/var/tmp/ccbench-tcp-probe.txt"}}
    log.clear()
    said = tb.down()
    assert said.startswith(f"lab hosts put back as found (checked: {len(st['changes'])} ")
    assert said.endswith("no process or file of its runs left on s1, s2, r1, rt1; removed "
                         "/var/tmp/ccbench-tcp-probe.txt)")  # fmt: skip
    assert world["s1"]["files"] == set()
    ran = [a for _, a in log]
    first_undo = ran.index(list(Change.from_dict(st["changes"][-1]).undo[0]))
    swept = [(i, n) for i, (n, a) in enumerate(log) if a[3:4] == ["ccbench-sweep"]]
    assert sorted(n for _, n in swept) == ["r1", "rt1", "s1", "s2"]  # on every host,
    assert max(i for i, _ in swept) < first_undo  # its runs' processes ended first
    mine = leftovers.proc_dir("g1")
    # of flent's data directories, g1's own (another testbed's on the same host stay)
    assert [p for p in NODE_FILES if "flent" in p] == ["pids:/var/tmp/ccbench/flent/g1"]
    # the sweep's plan on each host, in one round trip: this testbed's processes only,
    # the instruments' own undo, the files they write, its record directories
    for i, n in swept:
        plan = [a for _, a in log[i : i + 4]]
        assert [m for m, _ in log[i : i + 4]] == [n] * 4
        assert plan == [
            leftovers.sweep_argv(mine, every_testbed=False),
            *instruments.leftovers_argv("linux"),
            leftovers.remove_files_argv(NODE_FILES),
            leftovers.rmdirs_argv(mine, leftovers.PROC_DIR, leftovers.ROOT_DIR),
        ]
    assert first_undo < min(ran.index(a) for a in checks)  # checked after putting back
    # then each host checked for every file its runs may leave, after putting back
    left = leftovers.files_left_argv([*NODE_FILES, mine])
    looked = [(i, n) for i, (n, a) in enumerate(log) if a == left]
    assert sorted(n for _, n in looked) == ["r1", "rt1", "s1", "s2"]
    assert min(i for i, _ in looked) > first_undo
    assert tb.read_state() is None


NOT_AS_FOUND = [
    pytest.param("s1", {"not_back": ("net.ipv4.tcp_rmem",)},
                 r"s1: sysctl net.ipv4.tcp_rmem: not put back", id="a sysctl refused back"),
    pytest.param("r1", {"unreachable": True},
                 r"r1: not reached \(r1 \(r1.lan\) unreachable over ssh", id="a host gone"),
    pytest.param("s2", {"files": {NODE_FILES[2]}, "stuck": {NODE_FILES[2]}},
                 rf"s2: files of its runs still there \({NODE_FILES[2]}\)", id="a file stays"),
]  # fmt: skip


@pytest.mark.parametrize(("host", "trouble", "says"), NOT_AS_FOUND)
def test_down_not_as_found_says_what_and_keeps_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str, trouble: dict[str, Any],
    says: str,
) -> None:  # fmt: skip
    """One line naming what is not as found; the other hosts put back and checked all
    the same; the state kept, so `down` again (the trouble gone) finishes."""
    world: dict[str, Any] = {}
    tb, log = make_lab(tmp_path, monkeypatch, world)
    applied(tb)
    world[host] = trouble
    log.clear()
    with pytest.raises(CcbenchError, match=f"not as found after down: {says}") as e:
        tb.down()
    assert "\n" not in str(e.value) and "state is kept" in str(e.value)
    reached = {"s1", "s2", "r1", "rt1"} - ({host} if "unreachable" in trouble else set())
    assert {n for n, _ in log} == reached  # the others put back and checked
    assert any(a[:2] == ["sysctl", "-w"] for n, a in log if n == "s1")
    st = tb.read_state()
    assert st is not None and st["complete"] is False and st["changes"]  # down again: retried
    world.clear()
    assert tb.down().startswith("lab hosts put back as found")


def test_the_check_scripts_for_real() -> None:
    """The checks `down` runs on the hosts, run here: a sysctl read back (whitespace as
    one space), a default root qdisc (lo's noqueue 0:), something that must be gone."""
    key = "net.ipv4.tcp_rmem"
    now = subprocess.run(["sysctl", "-n", key], capture_output=True, text=True).stdout
    assert "\t" in now  # tab-separated as read
    assert subprocess.run(lab_checks.sysctl_is(key, now)).returncode == 0
    assert subprocess.run(lab_checks.sysctl_is(key, "1 2 3")).returncode == 1
    assert subprocess.run(lab_checks.root_default("lo")).returncode == 0
    assert subprocess.run(lab_checks.absent(["false"])).returncode == 0
    assert subprocess.run(lab_checks.absent(["true"])).returncode == 1
    got = subprocess.run(lab_checks.has_programs("sh", "no-such-program-ccb"),
                         capture_output=True, text=True)  # fmt: skip
    assert got.returncode == 1 and got.stdout.strip() == "no-such-program-ccb"


def test_a_batch_runs_each_command_once_its_values_as_given(tmp_path: Path) -> None:
    """`down` puts a host back and checks it in one round trip each (exec_ssh.batch_argv):
    each command runs as its argv, values never read as shell (a `$(...)`, quotes, an
    eleventh argument), its exit code read back in order."""
    hostile = f'a b $(touch {tmp_path}/pwned) ; "q" \''
    argvs = [["true"], ["sh", "-c", 'printf "%s|" "$@"; exit 3', "x", hostile],
             ["false"], ["printf", "%s,", *map(str, range(1, 11)), "eleven"]]  # fmt: skip
    cp = subprocess.run(batch_argv(argvs), capture_output=True, text=True, timeout=10)
    assert batch_rcs(cp.stdout) == [0, 3, 1, 0]
    assert f"{hostile}|" in cp.stdout and "1,2,3,4,5,6,7,8,9,10,eleven," in cp.stdout
    assert not (tmp_path / "pwned").exists()
    assert commands(batch_argv(argvs)) == argvs
