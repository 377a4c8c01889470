"""Plan tests: a lab's changes on its hosts as exact argv lists, and the argv that put
each back (testbed.lab_plans, testbed.lab). netem and its ifb cannot run on this
machine's kernel (no netem qdisc), so their plans are checked here exactly; the ccdelay,
iptables and nftables plans also run for real in tests/integration/test_lab_rehearsal.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench.exec import Result
from ccbench.parse.drops import nft_drops
from ccbench.reasons import Code
from ccbench.roles import LAB_DELAY_ELEMENTS
from ccbench.spec import Topology
from ccbench.testbed import base, kinds, lab_checks
from ccbench.testbed import lab_plans as plans
from ccbench.testbed.lab import LabTestbed
from ccbench.unproven import Scope, check_path_rtt, not_checkable, scope_of
from tests.freebsd_standin import FreeBSDStandin
from tests.lab_recording import commands

NTH = Topology(pairs=2, rtt_ms=40, loss_mode="nth", loss_rate=0.01)
RANDOM = Topology(pairs=1, rtt_ms=0, loss_mode="random", loss_rate=0.02)


def test_every_lab_delay_element_has_its_plan() -> None:
    """The inventory accepts roles.LAB_DELAY_ELEMENTS; each needs a plan of its own."""
    assert set(plans.DELAY_PLANS) == set(LAB_DELAY_ELEMENTS)
    for name, plan in plans.DELAY_PLANS.items():
        assert plans.delay_plan(name) is plan and LAB_DELAY_ELEMENTS[name].name == name


def test_netem_on_the_receivers_egress_and_back() -> None:
    p = plans.NetemEgress()
    assert p.apply("enp1s0", 40) == [
        ["tc", "qdisc", "replace", "dev", "enp1s0", "root", "netem", "delay", "40ms",
         "limit", "1000000"]]  # fmt: skip
    assert p.undo("enp1s0") == [["tc", "qdisc", "del", "dev", "enp1s0", "root"]]


def test_netem_on_an_ifb_for_ingress_and_back() -> None:
    p = plans.NetemIfb()
    assert p.apply("enp1s0", 40) == [
        ["ip", "link", "add", "ccb-ifb0", "type", "ifb"],
        ["ip", "link", "set", "ccb-ifb0", "up"],
        ["tc", "qdisc", "replace", "dev", "ccb-ifb0", "root", "netem", "delay", "40ms",
         "limit", "1000000"],
        ["tc", "qdisc", "add", "dev", "enp1s0", "handle", "ffff:", "ingress"],
        ["tc", "filter", "add", "dev", "enp1s0", "parent", "ffff:", "protocol", "all",
         "matchall", "action", "mirred", "egress", "redirect", "dev", "ccb-ifb0"],
    ]  # fmt: skip
    assert p.undo("enp1s0") == [["tc", "qdisc", "del", "dev", "enp1s0", "ingress"],
                                ["ip", "link", "del", "ccb-ifb0"]]  # fmt: skip
    assert plans.NetemIfb.load_argv == ["modprobe", "ifb", "numifbs=0"]


def test_ccdelay_at_the_receiver_delays_only_acks_and_echo_replies() -> None:
    p = plans.CcdelayAtReceiver("/opt/ccdelay", "t1")
    start = p.start(40)
    assert start[-1][:2] == ["sh", "-c"] and start[-1][4:] == [
        "/var/tmp/ccbench/lab/t1-ccdelay.pid", "/var/tmp/ccbench/lab/t1-ccdelay.log",
        "/opt/ccdelay", "--queue", "5201", "--delay-us", "40000",
        "--stats", "/var/tmp/ccbench/lab/t1-ccdelay-stats.json", "--rt-prio", "10"]  # fmt: skip
    assert p.rules() == [
        ["iptables", "-w", "-A", "OUTPUT", "-p", "tcp", "--sport", "5202:6201", "-m", "comment",
         "--comment", "ccbench", "-j", "NFQUEUE", "--queue-num", "5201"],
        ["iptables", "-w", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "echo-reply", "-m",
         "comment", "--comment", "ccbench", "-j", "NFQUEUE", "--queue-num", "5201"],
    ]  # fmt: skip
    stop = p.stop(123)  # only a pid that still is a ccdelay is ended; its files go
    assert stop[0][3:] == ["ccbench-ccdelay", "123", *p.files()]
    assert stop[1][-2:] == ["/var/tmp/ccbench/lab", "/var/tmp/ccbench"]  # if empty
    assert p.gone(123)[3:] == ["ccbench-ccdelay", "123", *p.files()]
    pinned = plans.CcdelayAtReceiver("/opt/ccdelay", "t1", plans.covered_ports([5201]))
    assert pinned.rules()[0][7] == "5201:6201"  # a sender pinned to 5201: covered


def test_ccdelay_stop_and_its_check_for_real(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stop plan and its check, run here on a process named ccdelay (sleep under
    that name: the plans recognise it by /proc/PID/comm) and its three files. Its parent
    never reaps it, as a late-reaping init (this VM's) leaves an orphan: the zombie it
    stays counts as ended, at once, not after the 2 s a live one is given.

    No step depends on the scheduler: `$!` is printed when the shell has forked, and
    the child may not have exec'd yet (measured under two busy loops on this 2-CPU
    machine: 63 of 200 pids still had comm `sh` when read), and the stop plan rightly
    leaves a pid that is not a ccdelay alone. So the test waits, bounded, for the pid
    to be a ccdelay before it stops it; once the stop has returned, the state is
    settled (the plan waits for it), so it is read once. "At once" is the plan's, not a
    clock's: the stop never ran its wait loop's `sleep` (a `sleep` first on its PATH
    records each call), however slowly a loaded machine ran it."""
    import os
    import shutil
    import subprocess
    import time

    from ccbench import leftovers

    monkeypatch.setattr(plans, "STATE_DIR", str(tmp_path))
    # the stop's rmdir of ccbench's directory: this test's, not the machine's /var/tmp
    monkeypatch.setattr(leftovers, "ROOT_DIR", str(tmp_path))
    el = plans.CcdelayAtReceiver(str(tmp_path / "ccdelay"), "t9")
    shutil.copy("/bin/sleep", tmp_path / "ccdelay")
    orphaning = ["sh", "-c", '"$1" 60 & echo $!; exec sleep 60', "x", str(tmp_path / "ccdelay")]
    parent = subprocess.Popen(orphaning, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while Path(f"/proc/{pid}/comm").read_text().strip() != "ccdelay":
            assert time.monotonic() < deadline, "the child never exec'd ccdelay"
            time.sleep(0.01)
        assert subprocess.run(el.gone(pid)).returncode == 1  # running (no files yet)
        for f in el.files():
            Path(f).write_text("x")
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "sleep").write_text(
            '#!/bin/sh\necho "$@" >> "$SLEPT"\nexec /bin/sleep "$@"\n'
        )
        (tmp_path / "bin" / "sleep").chmod(0o755)
        env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
               "SLEPT": str(tmp_path / "slept")}  # fmt: skip
        for argv in el.stop(pid):
            assert subprocess.run(argv, timeout=30, env=env).returncode == 0
        # SIGTERM ended it and its zombie counted as ended: the wait loop stopped before
        # its 20 naps ran out (a process that ignores SIGTERM takes all 20, then KILL).
        # How many naps the signal's delivery took depends on the scheduler (a CI run
        # under load took one), so only the bound is asserted.
        slept = tmp_path / "slept"
        assert len(slept.read_text().splitlines() if slept.exists() else []) < 20
        assert "Z" in Path(f"/proc/{pid}/status").read_text().split("State:")[1].split()[0]
        assert not any(Path(f).exists() for f in el.files())
        assert subprocess.run(el.gone(pid)).returncode == 0
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.parametrize(
    ("topo", "match"),
    [(NTH, ["-m", "statistic", "--mode", "nth", "--every", "100", "--packet", "0"]),
     (RANDOM, ["-m", "statistic", "--mode", "random", "--probability", "0.020000"])],
)  # fmt: skip
def test_iptables_loss_on_the_flows_ports_only(topo: Topology, match: list[str]) -> None:
    tool = plans.loss_tool("iptables")
    added = tool.add(topo)
    assert added == [["iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "5202:6201",
                      *match, "-m", "comment", "--comment", "ccbench", "-j", "DROP"]]  # fmt: skip
    assert tool.undo(added) == [["iptables", "-w", "-D", *added[0][3:]]]


@pytest.mark.parametrize(
    ("topo", "match"),
    [(NTH, ["numgen", "inc", "mod", "100", "==", "0"]),
     (RANDOM, ["numgen", "random", "mod", "1000000", "<", "20000"])],
)  # fmt: skip
def test_nftables_loss_in_ccbenchs_own_table(topo: Topology, match: list[str]) -> None:
    tool = plans.loss_tool("nftables")
    added = tool.add(topo)
    assert added == [
        ["nft", "add", "table", "inet", "ccbench"],
        ["nft", "add", "chain", "inet", "ccbench", "input", "{", "type", "filter", "hook",
         "input", "priority", "0", ";", "policy", "accept", ";", "}"],
        ["nft", "add", "rule", "inet", "ccbench", "input", "tcp", "dport", "5202-6201", *match,
         "counter", "drop"],
    ]  # fmt: skip
    assert tool.undo(added) == [["nft", "delete", "table", "inet", "ccbench"]]
    assert tool.counters() == ["nft", "-j", "list", "table", "inet", "ccbench"]


def test_nftables_counters_count_the_drop_rules() -> None:
    doc = {"nftables": [
        {"metainfo": {"json_schema_version": 1}},
        {"table": {"family": "inet", "name": "ccbench"}},
        {"rule": {"expr": [{"match": {}}, {"counter": {"packets": 41, "bytes": 60000}},
                           {"drop": None}]}},
        {"rule": {"expr": [{"counter": {"packets": 7, "bytes": 1}}, {"accept": None}]}},
    ]}  # fmt: skip
    assert nft_drops(json.dumps(doc)) == 41
    assert nft_drops("") == 0


def test_sysctls_are_read_and_written_back() -> None:
    argv = ["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 134217728"]
    assert plans.sysctl_read(argv) == ["sysctl", "-n", "net.ipv4.tcp_rmem"]
    assert plans.sysctl_restore(argv, "4096\t131072\t6291456\n") == [
        "sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 6291456"]  # fmt: skip
    fbsd = ["sysctl", "kern.ipc.maxsockbuf=134217728"]
    assert plans.sysctl_restore(fbsd, "2097152") == ["sysctl", "kern.ipc.maxsockbuf=2097152"]


def test_only_a_default_root_qdisc_is_replaced() -> None:
    default = [{"kind": "fq_codel", "handle": "0:", "root": True}]
    mine = [{"kind": "htb", "handle": "1:", "root": True}]
    assert lab_checks.foreign_root(json.dumps(default), "eth0") is None
    assert lab_checks.foreign_root(json.dumps(mine), "eth0") == "htb 1:"


# --- the whole `up` plan of a lab with netem, against a recording executor -----------
class Rec:
    def __init__(self, node: str, log: list[tuple[str, list[str]]]):
        self.node, self.log = node, log

    def run(self, argv: Any, check: bool = True, timeout: float | None = None) -> Result:
        argv = list(argv)
        out = ""
        for one in commands(argv):  # a batch: each of its commands
            self.log.append((self.node, one))
            if one[:2] == ["sysctl", "-n"]:
                out += "4096\t131072\t6291456\n" if "mem" in one[2] else "0\n"
            elif one[:3] == ["tc", "-j", "qdisc"]:
                out += json.dumps([{"kind": "fq_codel", "handle": "0:", "root": True}])
            out += "ccbench-rc 0\n" if one is not argv else ""
        return Result(tuple(argv), 0, out, "")


@pytest.fixture
def netem_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LabTestbed, list[Any]]:
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = {"senders": {"s1": {"host": "a", "address": "10.0.0.1"},
                       "s2": {"host": "b", "address": "10.0.0.2"}},
           "receivers": {"r1": {"host": "c", "address": "10.0.0.9"}},
           "emulation": {"delay": "netem", "loss": "iptables"}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="t1", inventory=str(tmp_path / "lab.yaml"))
    tb = LabTestbed(cfg, NTH)
    log: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(tb, "ex", lambda node: Rec(tb.host_of(node), log))
    monkeypatch.setattr(tb, "_find_dev", lambda node: "enp1s0")
    return tb, log


def test_a_netem_lab_up_plan_and_its_undo(netem_lab: tuple[LabTestbed, list[Any]]) -> None:
    tb, log = netem_lab
    assert tb.ex("r2").node == "r1"  # both pairs' receiving end is r1
    st: dict[str, Any] = {"devs": {"r1": "enp1s0"}}  # found by lab_guard.preflight
    tb._apply(st)
    on_r1 = [a for n, a in log if n == "r1" and a[0] in ("tc", "iptables")]
    assert on_r1 == [
        ["tc", "qdisc", "replace", "dev", "enp1s0", "root", "netem", "delay", "40ms",
         "limit", "1000000"],
        ["iptables", "-w", "-A", "INPUT", "-p", "tcp", "--dport", "5202:6201", "-m", "statistic",
         "--mode", "nth", "--every", "100", "--packet", "0", "-m", "comment", "--comment",
         "ccbench", "-j", "DROP"],
    ]  # fmt: skip
    changes = {(c["node"], c["what"]): c for c in st["changes"]}
    assert changes[("r1", "netem 40 ms on enp1s0")]["check"] == [lab_checks.root_default("enp1s0")]
    loss = changes[("r1", "iptables loss rule (nth 0.01)")]
    assert loss["check"] == [lab_checks.absent(["iptables", "-w", "-C", *on_r1[1][3:]])]
    rmem = changes[("s1", "sysctl net.ipv4.tcp_rmem")]  # read before, put back by down
    assert rmem["check"] == [lab_checks.sysctl_is("net.ipv4.tcp_rmem", "4096 131072 6291456")]
    log.clear()
    tb._undo(st["changes"], "test")
    undone = [(n, a) for n, a in log]  # the hosts at once: each host's last change first
    back_on_r1 = [a for n, a in undone if n == "r1"]
    assert back_on_r1[0] == ["iptables", "-w", "-D", *on_r1[1][3:]]  # the loss rule added
    assert back_on_r1[1] == ["tc", "qdisc", "del", "dev", "enp1s0", "root"]
    assert ("s1", ["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 6291456"]) in undone


# --- what a lab run can prove (ccbench.unproven) ---------------------------------------
def test_a_lab_without_a_router_names_what_it_cannot_check() -> None:
    cal = {"bottleneck": {"controlled": False, "where": "the network between s1 and r1; its "
                          "buffer is not known"}, "expected_rtt_ms": {"pair1": 40.4}}  # fmt: skip
    scope = scope_of(cal)
    assert scope == Scope("the network between s1 and r1; its buffer is not known", {1: 40.4})
    lines = not_checkable(scope)
    assert len(lines) == 4 and all(ln.endswith("its buffer is not known)") for ln in lines)
    assert not_checkable(scope_of({"bottleneck": {"node": "rt1"}})) == []
    flows = [{"flow": 1, "pair": 1, "min_rtt_us": 38000}, {"flow": 2, "pair": 1,
                                                           "min_rtt_us": 40300}]  # fmt: skip
    [low] = check_path_rtt(flows, scope)
    assert (low.code, low.evidence) == (Code.DELAY_NOT_APPLIED, {
        "flow": 1, "source": "min RTT", "rtt_ms": 38.0, "asked_ms": 40.4})  # fmt: skip


def test_nftables_loss_rules_drops_are_the_ledgers() -> None:
    from ccbench import ledger

    def snap(n: int) -> dict[str, Any]:
        doc = {"nftables": [{"rule": {"expr": [{"counter": {"packets": n, "bytes": 0}},
                                               {"drop": None}]}}]}  # fmt: skip
        return {"schema": ledger.SCHEMA, "nodes": {"r1": {"nft": json.dumps(doc)}}, "errors": {}}

    assert ledger.account(snap(5), snap(47))["loss_rules_pkts"] == 42


def test_a_labs_router_is_shaped_as_rt1_and_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan test (seed 001's EdgeRouter case): the router's egress gets the shaper and
    the scenario's queue, as rt1 on a dumbbell; `down` deletes the root qdisc (the
    kernel's default comes back); the bottleneck is then ccbench's, checkable."""
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = {"senders": {"s1": {"host": "a", "address": "10.0.0.1"}},
           "receivers": {"r1": {"host": "c", "address": "10.0.1.9"}},
           "router": {"host": "edge", "address": "10.0.1.1"},
           "emulation": {"delay": "none"}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="t2", inventory=str(tmp_path / "lab.yaml"))
    topo = Topology(pairs=1, rate_mbit=1000, rtt_ms=0, queue_limit_pkts=3500)
    tb = LabTestbed(cfg, topo)
    log: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(tb, "ex", lambda node: Rec(tb.host_of(node), log))
    monkeypatch.setattr(tb, "_find_dev", lambda node: "eth1")
    st: dict[str, Any] = {"devs": {"rt1": "eth1"}}  # its root a default one: lab_guard
    tb._apply(st)
    on_rt1 = [a for n, a in log if n == "rt1" and a[0] == "tc"]
    assert any("tbf" in a and "1000000000bit" in a for a in on_rt1)
    assert any(a[-3:] == ["pfifo", "limit", "3500"] for a in on_rt1)
    assert st["bottleneck_dev"] == "eth1"
    assert ("rt1", "qdisc eth1 root: shaper and queue") in [
        (c["node"], c["what"]) for c in st["changes"]
    ]
    assert not any(n == "r1" and a[0] in ("tc", "iptables") for n, a in log)  # nothing emulated
    log.clear()
    tb._undo(st["changes"], "test")
    assert ("rt1", ["tc", "qdisc", "del", "dev", "eth1", "root"]) in log


# --- ccdelay on several receivers: one statistics file for the run's checks ------------
STATS = json.loads((Path(__file__).parents[1] / "captures" / "run-local-2cubic" /
                    "delay-after.json").read_text())  # fmt: skip


def _scaled(k: int, max_ms: float) -> dict[str, Any]:
    s = json.loads(json.dumps(STATS))
    la = s["lateness"]
    for key in ("count", "over_threshold"):
        la[key] *= k
    la["bucket_counts"] = [c * k for c in la["bucket_counts"]]
    la["max_ms"] = max_ms
    s["packets_received"] *= k
    s["kernel_queue"]["queue_full_drops"] = k
    s["cpu"] = {"user_s": 0.5 * k, "system_s": 1.0 * k}
    return s


def test_several_receivers_ccdelay_statistics_add_up() -> None:
    """Real ccdelay statistics (a local run of this machine), a receiver with twice the
    packets beside it: what summarize.delay reads is their sum, the worst lateness, and
    each receiver's own numbers stay in the file."""
    one, two = _scaled(1, 3.0), _scaled(2, 7.5)
    m = plans.merged_stats({"r1": one, "r2": two})
    la = m["lateness"]
    assert la["count"] == 3 * STATS["lateness"]["count"]
    assert la["over_threshold"] == 3 * STATS["lateness"]["over_threshold"]
    assert la["bucket_counts"] == [3 * c for c in STATS["lateness"]["bucket_counts"]]
    assert la["max_ms"] == 7.5
    assert la["mean_ms"] == pytest.approx(STATS["lateness"]["mean_ms"])  # same mean, weighted
    assert m["packets_received"] == 3 * STATS["packets_received"]
    assert m["kernel_queue"]["queue_full_drops"] == 3
    assert m["cpu"] == {"user_s": 1.5, "system_s": 3.0}
    assert m["receivers"] == {"r1": one, "r2": two}
    from ccbench.summarize.delay import delay_between

    d = delay_between({}, m)
    assert d["packets"] == la["count"] and d["queue_full_drops"] == 3 and d["cpu_s"] == 4.5


def test_ccdelay_statistics_of_different_elements_do_not_merge() -> None:
    other = _scaled(1, 1.0)
    other["lateness"]["bucket_edges_ms"] = [1, 2]
    with pytest.raises(ValueError, match="buckets differ"):
        plans.merged_stats({"r1": _scaled(1, 1.0), "r2": other})
    with pytest.raises(ValueError, match="not ccdelay statistics"):
        plans.merged_stats({"r1": _scaled(1, 1.0), "r2": []})  # type: ignore[dict-item]


def test_a_lab_with_two_ccdelay_receivers_records_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan test: each receiver's ccdelay is asked for its statistics (its own pid);
    the run's file holds their sum and each one's; one receiver alone: its file as is."""
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = {"senders": {"s1": {"host": "a", "address": "10.0.0.1", "receiver": "r1"},
                       "s2": {"host": "b", "address": "10.0.0.2", "receiver": "r2"}},
           "receivers": {"r1": {"host": "c", "address": "10.0.0.9"},
                         "r2": {"host": "d", "address": "10.0.0.10"}},
           "emulation": {"delay": "ccdelay"}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="t3", inventory=str(tmp_path / "lab.yaml"))
    tb = LabTestbed(cfg, Topology(pairs=2, rtt_ms=40))
    tb.state_dir.mkdir(parents=True)
    tb.write_state({"ccdelay_pids": {"r1": 101, "r2": 202}})
    asked: list[tuple[str, list[str]]] = []

    class Stats(Rec):
        def run(self, argv: Any, check: bool = True, timeout: float | None = None) -> Result:
            asked.append((self.node, list(argv)))
            s = _scaled(1 if self.node == "r1" else 2, 1.0)
            return Result(tuple(argv), 0, json.dumps(s), "")

    monkeypatch.setattr(tb, "ex", lambda node: Stats(tb.host_of(node), []))
    tb.snapshot_delay(tmp_path / "delay-after.json")
    assert [(n, a[4]) for n, a in asked] == [("r1", "101"), ("r2", "202")]
    got = json.loads((tmp_path / "delay-after.json").read_text())
    assert set(got["receivers"]) == {"r1", "r2"}
    assert got["lateness"]["count"] == 3 * STATS["lateness"]["count"]
    tb.write_state({"ccdelay_pids": {"r1": 101}})  # one element: its own output, unchanged
    tb.snapshot_delay(tmp_path / "delay-one.json")
    assert (tmp_path / "delay-one.json").read_text() == json.dumps(_scaled(1, 1.0))


# --- a FreeBSD sender: a rack run's defaults and modules put back in dependency order ---
@pytest.fixture
def freebsd_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[LabTestbed, FreeBSDStandin]:
    """A lab whose sender s1 is a stand-in FreeBSD kernel (tests/freebsd_standin.py:
    its sysctl and kld tools run here, refusing what FreeBSD refuses); r1 records."""
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = {"senders": {"s1": {"host": "a", "os": "freebsd", "address": "10.0.0.1"}},
           "receivers": {"r1": {"host": "c", "address": "10.0.0.9"}},
           "emulation": {"delay": "none"}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="t4", inventory=str(tmp_path / "lab.yaml"))
    tb = LabTestbed(cfg, Topology(pairs=1, rtt_ms=0))
    host = FreeBSDStandin(tmp_path / "s1")
    log: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(tb, "ex", lambda n: host if tb.host_of(n) == "s1" else Rec("r1", log))
    monkeypatch.setattr(tb, "run_files", lambda: [])  # this machine's /var/tmp is not s1's
    return tb, host


def rack_run(host: FreeBSDStandin) -> None:
    """What a run of variant {cc: htcp, stack: rack} does to its sender (run_senders)."""
    from ccbench.hosts.freebsd import FreeBSDHost

    for step in FreeBSDHost().variant_plan("htcp", "rack"):
        assert host.run(step.argv).ok or step.allow_fail, step


def test_a_freebsd_senders_rack_run_is_put_back_defaults_first(
    freebsd_lab: tuple[LabTestbed, FreeBSDStandin],
) -> None:
    """Plan test on a stand-in FreeBSD kernel: after a rack + htcp run, `down` sets the
    default stack and CC back before it unloads tcp_rack and cc_htcp (FreeBSD refuses to
    unload a default with EBUSY: tcp_subr.c deregister_tcp_functions, cc.c
    cc_check_default), tcp_rack before the tcphpts it loaded; every check then passes.
    The old order (modules first) leaves both modules loaded on the stand-in."""
    from ccbench.leftovers import Swept
    from ccbench.testbed import lab_guard
    from ccbench.testbed.lab import KLD_RESTORE

    tb, host = freebsd_lab
    st: dict[str, Any] = {"devs": {}}
    tb._apply(st)
    found = host.modules()
    rack_run(host)
    assert host.modules() == [*found, "tcphpts.ko", "tcp_rack.ko", "cc_htcp.ko"]
    assert host.sysctl("net.inet.tcp.functions_default") == "rack"
    host.log.clear()
    tb._undo(st["changes"], "down")
    (batch,) = host.log
    undo = commands(batch)
    kld = next(i for i, a in enumerate(undo) if a[:3] == ["sh", "-c", KLD_RESTORE])
    # the defaults back before the modules go
    assert undo[:kld] == [["sysctl", "net.inet.tcp.cc.algorithm=cubic"],
                          ["sysctl", "net.inet.tcp.functions_default=freebsd"]]  # fmt: skip
    assert host.modules() == found and host.sysctl("net.inet.tcp.cc.algorithm") == "cubic"
    changes = [lab_checks.Change.from_dict(d) for d in st["changes"]]
    assert lab_guard.not_as_found(tb, changes, {"s1": Swept()}, {}) == []
    # modules first, as before: tcp_rack and cc_htcp are the defaults still (EBUSY)
    rack_run(host)
    for c in sorted(changes, key=lambda c: not c.what.startswith("kernel modules")):
        for argv in c.undo:
            host.run(argv)
    assert "tcp_rack.ko" in host.modules() and "cc_htcp.ko" in host.modules()
    assert lab_guard.not_as_found(tb, changes, {"s1": Swept()}, {}) == [
        "s1: kernel modules loaded since up: not put back"]  # fmt: skip
