"""What a run on the SSH testbed records beyond the flows, tested as exact plans with
fake executors (no Emulab here): FreeBSD senders' sockstat per flow while it runs, and
every node's NIC records (driver, link speed, TX ring asked vs set, offloads)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench.exec import Result
from ccbench.hosts import driver_for
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments import Recording, for_run
from ccbench.instruments.sockstat import Sockstat
from ccbench.reasons import Code
from ccbench.roles import Bottleneck, NoDelay, dumbbell
from ccbench.run import RunProcs, _drive
from ccbench.run_senders import _nic_records
from ccbench.spec import Flow, RunSpec, Topology, Variant
from ccbench.summarize import summarize
from ccbench.summarize.hosts import nic_records
from tests.conftest import codes, damaged_files
from tests.raw_meta import edit_meta, write_meta

CAP = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
SOCKSTAT = (CAP / "sockstat-CS-written-from-docs.txt").read_text()

# What emulab/lib-linux.sh record_nic writes for rt1's bottleneck on a d430 (igb: the
# ring of 48 asked is clamped to its minimum of 64) and an access link left alone.
RT1_RECORDS = (
    '{"interface": "eth5", "node_script": "rt1", "driver": "igb",'
    ' "driver_version": "6.8.0-48-generic", "firmware": "1.63", "bus": "0000:03:00.0",'
    ' "speed_mbps": 1000, "tx_ring_asked": 48,'
    ' "tx_ring_set": 64, "tx_ring_max": 4096, "tx_ring_note": "igb raised it: below its minimum",'
    ' "tcp-segmentation-offload": "off", "generic-segmentation-offload": "off",'
    ' "generic-receive-offload": "off", "large-receive-offload": "off [fixed]",'
    ' "time": "2026-11-23T10:00:00Z"}\n\n'
    '{"interface": "eth2", "node_script": "rt1", "driver": "igb",'
    ' "driver_version": "6.8.0-48-generic", "firmware": "1.63", "bus": "0000:03:00.1",'
    ' "speed_mbps": 1000, "tx_ring_asked": null,'
    ' "tx_ring_set": 256, "tx_ring_max": 4096, "tx_ring_note": "",'
    ' "tcp-segmentation-offload": "off", "generic-segmentation-offload": "off",'
    ' "generic-receive-offload": "off", "large-receive-offload": "off [fixed]",'
    ' "time": "2026-11-23T10:00:00Z"}\n'
)
S1_RECORDS = (
    '{"interface": "em0", "node_script": "s1", "driver": "em", "media": "Ethernet autoselect'
    ' (1000baseT <full-duplex>)", "status": "active", "options": "RXCSUM,TXCSUM,TSO4",'
    ' "time": "2026-11-23T10:00:00Z"}\n'
)


@dataclass
class Spawned:
    argv: list[str]
    stdout: Path | None

    def wait(self, timeout: float | None = None) -> int:
        return 0


class Ex:
    def __init__(self, out: str = "") -> None:
        self.out = out
        self.calls: list[list[str]] = []
        self.spawned: list[Spawned] = []

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        return Result(tuple(argv), 0, self.out, "")

    def spawn(self, argv: list[str], *, stdout: Path | None = None, **kw: Any) -> Spawned:
        p = Spawned(list(argv), stdout)
        self.spawned.append(p)
        return p


@dataclass
class Node:
    os: str


class SshTestbed:
    kind = "ssh"
    roles = dumbbell(2, Bottleneck("rt1", "eth5"), NoDelay())

    def __init__(self, sender_os: str = "freebsd") -> None:
        self.nodes = {"s1": Node(sender_os), "s2": Node(sender_os), "rt1": Node("linux"),
                      "dl": Node("dummynet"), "rt2": Node("linux"), "r1": Node("linux"),
                      "r2": Node("linux")}  # fmt: skip
        self.exs = {"rt1": Ex(RT1_RECORDS), "s1": Ex(S1_RECORDS), "s2": Ex(), "rt2": Ex(),
                    "r1": Ex(), "r2": Ex()}  # fmt: skip

    tools = "host"

    def node_os(self) -> dict[str, str]:
        return {n: node.os for n, node in self.nodes.items()}

    def driver(self, node: str) -> Any:
        return driver_for(self.nodes[node].os)

    def ex(self, node: str) -> Ex:
        return self.exs[node]

    def address(self, node: str) -> str:
        return {"r1": "10.1.3.21", "r2": "10.1.3.22"}[node]


def spec(stack: str = "rack", cc: str = "cubic", duration: float = 300.0) -> RunSpec:
    return RunSpec(
        topology=Topology(pairs=2),
        flows=(Flow(pair=1, cc=cc, duration_s=duration),
               Flow(pair=2, cc=cc, start_s=10, duration_s=duration)),
        variant_def=Variant(label="x", cc=cc, os="freebsd", stack=stack),
    )  # fmt: skip


# --- B. FreeBSD per-flow truth ----------------------------------------------------
def test_sockstat_plan_samples_each_flow_on_its_sender_while_it_runs(tmp_path: Path) -> None:
    tb = SshTestbed()
    ins = Sockstat.for_run(tb, spec())  # type: ignore[arg-type]
    assert ins is not None
    rec = Recording(tb, spec(), tmp_path, started_unix=time.time())  # type: ignore[arg-type]
    plan = ins.during(rec)
    # 5 s after each flow's start (flow 2 starts at 10 s).
    assert [t for t, _ in plan] == [5.0, 15.0]
    for _, take in plan:
        take()
    argv = FreeBSDHost().sockstat_tcp()
    assert argv == ["sockstat", "-46", "-CS", "-P", "tcp"]
    assert [(p.argv, p.stdout) for p in tb.exs["s1"].spawned] == [
        (argv, tmp_path / "sockstat-1.txt")
    ]
    assert [(p.argv, p.stdout) for p in tb.exs["s2"].spawned] == [
        (argv, tmp_path / "sockstat-2.txt")
    ]
    assert len(ins.procs) == 2
    record = ins.record_json()
    assert [(e["flow"], e["node"], e["peer"], e["file"]) for e in record] == [
        (1, "s1", "10.1.3.21:5202", "sockstat-1.txt"),
        (2, "s2", "10.1.3.22:5203", "sockstat-2.txt"),
    ]
    assert all(e["at_s"] is not None for e in record)
    # The record reads back as the instrument it was.
    assert Sockstat.from_record(json.loads(json.dumps(record))).samples == ins.samples


def test_short_flows_are_sampled_halfway() -> None:
    tb = SshTestbed()
    ins = Sockstat.for_run(tb, spec(duration=3))  # type: ignore[arg-type]
    assert ins is not None
    plan = ins.during(Recording(tb, spec(duration=3), Path(".")))  # type: ignore[arg-type]
    assert [t for t, _ in plan] == [1.5, 11.5]


def test_linux_senders_get_no_sockstat() -> None:
    tb = SshTestbed("linux")
    linux = RunSpec(topology=Topology(pairs=1), flows=(Flow(pair=1, cc="cubic"),))
    assert Sockstat.for_run(tb, linux) is None  # type: ignore[arg-type]
    tb.bottleneck = ("rt1", "eth5")  # type: ignore[attr-defined]
    assert "sockstat" not in [i.name for i in for_run(tb, linux)]  # type: ignore[arg-type]


class Client:
    """A gated iperf3 client that ends `runs_s` after its release."""

    def __init__(self, runs_s: float) -> None:
        self.runs_s = runs_s
        self.t: float | None = None

    def release(self) -> None:
        self.t = time.monotonic()

    def poll(self) -> int | None:
        return 0 if self.t is not None and time.monotonic() - self.t > self.runs_s else None

    def wait(self, timeout: float | None = None) -> int:
        return 0


def test_drive_takes_each_sample_after_its_flow_started_and_before_the_end() -> None:
    s = RunSpec(topology=Topology(pairs=2),
                flows=(Flow(pair=1, cc="cubic", duration_s=0.4),
                       Flow(pair=2, cc="cubic", start_s=0.2, duration_s=0.4)))  # fmt: skip
    procs = RunProcs(clients=[Client(0.4), Client(0.4)])  # type: ignore[list-item]
    seen: list[tuple[str, bool, bool]] = []

    def at(name: str, i: int) -> Any:
        return lambda: seen.append(
            (
                name,
                procs.clients[i].t is not None,  # type: ignore[attr-defined]
                procs.clients[i].poll() is None,
            )
        )

    got = _drive(
        s, procs, "t", [(0.3, at("flow 2", 1)), (0.2, at("flow 1", 0)), (9.0, at("never", 0))]
    )
    # In time order, each flow released and still running; the one past the end skipped.
    assert seen == [("flow 1", True, True), ("flow 2", True, True)]
    # What meta.json keeps of it: each flow's release in release order, the exit codes.
    assert list(got.flow_starts) == [1, 2] and 0.2 <= got.flow_starts[2] < 0.3
    assert got.client_rc == [0, 0] and got.wall_s >= 0.4


def _raw(tmp_path: Path, stack: str, at_s: float | None = 5.0) -> Path:
    raw = tmp_path / "raw"
    raw.mkdir()
    variant = Variant(label="x", cc="cubic", os="freebsd", stack=stack)
    one = RunSpec(topology=Topology(pairs=1), flows=(Flow(pair=1, cc="cubic", duration_s=300),),
                  variant_def=variant)  # fmt: skip
    (raw / "spec.json").write_text(json.dumps(one.to_dict()))
    write_meta(raw, {"sockstat": [{"flow": 1, "node": "s1", "peer": "10.1.3.21:5202",
                                   "file": "sockstat-1.txt", "at_s": at_s}]},
               client_rc=[0])  # fmt: skip
    (raw / "sockstat-1.txt").write_text(SOCKSTAT)
    return raw


def test_summary_keeps_the_connections_and_accepts_the_asked_stack(tmp_path: Path) -> None:
    s = summarize(_raw(tmp_path, "rack"))
    assert s["sockstat"]["flows"] == [{
        "flow": 1, "node": "s1", "peer": "10.1.3.21:5202", "at_s": 5.0, "raw": "sockstat-1.txt",
        "connections": [{"local": "10.1.1.11:54320", "stack": "rack", "cc": "cubic"},
                        {"local": "10.1.1.11:54321", "stack": "rack", "cc": "cubic"}],
    }]  # fmt: skip
    assert not {Code.STACK_MISMATCH, Code.STACK_UNVERIFIED, Code.CC_MISMATCH} & set(
        codes(s["reasons"]))  # fmt: skip
    assert "sockstat-1.txt" not in damaged_files(s["reasons"])


def test_summary_a_connection_on_another_stack_makes_the_run_invalid(tmp_path: Path) -> None:
    s = summarize(_raw(tmp_path, "default"))
    assert not s["valid"]
    assert {"flow": 1, "used": "rack", "asked": "freebsd"} in [
        r.evidence for r in s["reasons"] if r.code == Code.STACK_MISMATCH]  # fmt: skip


def test_summary_a_sample_never_taken_is_a_reason(tmp_path: Path) -> None:
    s = summarize(_raw(tmp_path, "rack", at_s=None))
    assert [r.evidence for r in s["reasons"] if r.code == Code.STACK_UNVERIFIED] == [{"flow": 1}]


def test_summary_damaged_sockstat_names_the_file(tmp_path: Path) -> None:
    raw = _raw(tmp_path, "rack")
    (raw / "sockstat-1.txt").write_text("sockstat: not found\n")
    s = summarize(raw)
    assert "sockstat-1.txt" in damaged_files(s["reasons"])


# --- A. NIC records -----------------------------------------------------------------
def test_nic_record_plans_are_a_constant_script() -> None:
    for drv in (LinuxHost(), FreeBSDHost()):
        argv = drv.nic_records()
        assert argv[:2] == ["sh", "-c"] and len(argv) == 3
        assert "/var/tmp/ccbench/nic-*.json" in argv[2]


def test_nic_record_script_prints_one_record_per_line(tmp_path: Path) -> None:
    d = tmp_path / "ccbench"
    d.mkdir()
    (d / "nic-eth5.json").write_text(RT1_RECORDS.splitlines()[0] + "\n")
    (d / "nic-eth2.json").write_text(RT1_RECORDS.splitlines()[2])  # no final newline
    script = LinuxHost().nic_records()[2].replace("/var/tmp/ccbench", str(d))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    records, notes, problems = nic_records({"rt1": out})
    assert problems == [] and sorted(r["interface"] for r in records) == ["eth2", "eth5"]
    empty = subprocess.run(["sh", "-c", script.replace(str(d), str(tmp_path / "none"))],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert empty.stdout == ""


def test_run_reads_every_logged_in_node_but_the_delay_node() -> None:
    tb = SshTestbed()
    nics = _nic_records(tb)  # type: ignore[arg-type]
    assert nics is not None and sorted(nics) == ["r1", "r2", "rt1", "rt2", "s1", "s2"]
    assert nics["rt1"] == RT1_RECORDS
    assert tb.exs["rt1"].calls == [LinuxHost().nic_records()]
    assert tb.exs["s1"].calls == [FreeBSDHost().nic_records()]


def test_local_testbeds_record_no_nics() -> None:
    class Local:
        kind = "local"

    assert _nic_records(Local()) is None  # type: ignore[arg-type]


def test_asked_and_set_differ_is_a_note() -> None:
    records, notes, problems = nic_records({"rt1": RT1_RECORDS, "s1": S1_RECORDS})
    assert problems == []
    assert notes == ["rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum"]
    eth5 = next(r for r in records if r["interface"] == "eth5")
    assert eth5["node"] == "rt1" and eth5["driver"] == "igb" and eth5["speed_mbps"] == 1000
    assert eth5["offloads"] == {"tso": "off", "gso": "off", "gro": "off", "lro": "off [fixed]"}
    em0 = next(r for r in records if r["interface"] == "em0")
    assert em0["offloads"] == {} and em0["options"] == "RXCSUM,TXCSUM,TSO4"


def test_a_driver_without_ring_sizes_is_said_so() -> None:
    rec = json.loads(RT1_RECORDS.splitlines()[0])
    rec.update(tx_ring_set=None, tx_ring_note="the driver does not report ring sizes")
    _, notes, _ = nic_records({"rt1": json.dumps(rec)})
    assert notes == ["rt1 eth5: TX ring 48 asked, the driver reports no ring size"]


def test_summary_carries_records_and_notes_only_when_recorded(tmp_path: Path) -> None:
    raw = _raw(tmp_path, "rack")
    (raw / "facts.json").write_text(
        json.dumps({"host": {}, "nics": {"rt1": RT1_RECORDS, "s1": "not json\n"}})
    )
    s = summarize(raw)
    assert s["nic_notes"] == [
        "rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum"
    ]
    assert [r["interface"] for r in s["nics"]] == ["eth5", "eth2"]
    facts = [r.text for r in s["reasons"] if r.evidence.get("file") == "facts.json"]
    assert len(facts) == 1 and "nics s1: line 1" in facts[0]  # where in it, named
    (raw / "facts.json").write_text(json.dumps({"host": {}}))
    assert "nics" not in summarize(raw) and "nic_notes" not in summarize(raw)


# --- rt1's transmit queues: channels and BQL at set-up, BQL before and after the traffic
IGB_ONE_QUEUE = (
    "Channel parameters for eth5:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\n"
    "Combined:\t8\nCurrent hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\n"
    "Combined:\t1"
)  # tests/captures/nic/ethtool-l-igb-combined-1-written-from-source.txt, as record_nic keeps it


def bql_lines(dev: str, limit: int, inflight: int) -> str:
    q = f"/sys/class/net/{dev}/queues/tx-0/byte_queue_limits"
    return f"{q}/limit:{limit}\n{q}/limit_max:1879048192\n{q}/inflight:{inflight}\n"


def test_summary_keeps_rt1s_bql_before_and_after_the_traffic(tmp_path: Path) -> None:
    """The set-up record says one combined channel; the run's own readings of the
    bottleneck's BQL (raw/bql-before.txt, bql-after.txt: LinuxHost.tx_queue_state) land
    on rt1's eth5 record only, not on rt2's interface of the same name."""
    raw = _raw(tmp_path, "rack")
    eth5 = json.loads(RT1_RECORDS.splitlines()[0])
    eth5.update(ethtool_l=IGB_ONE_QUEUE, tx_queues=1, tx_queues_asked=1, tx_queues_note="",
                tx_bql=bql_lines("eth5", 0, 0).rstrip("\n"))  # fmt: skip
    rt2 = {**eth5, "tx_queues_asked": None, "tx_ring_asked": None}
    (raw / "facts.json").write_text(json.dumps({"host": {}, "nics": {
        "rt1": json.dumps(eth5) + "\n", "rt2": json.dumps(rt2) + "\n"}}))  # fmt: skip
    # the instrument's record names the node it read
    edit_meta(raw, {"tx_queue_limits": {"node": "rt1", "dev": "eth5"}})
    (raw / "bql-before.txt").write_text(bql_lines("eth5", 4542, 0))
    (raw / "bql-after.txt").write_text(bql_lines("eth5", 30280, 1514))
    s = summarize(raw)
    rt1 = next(r for r in s["nics"] if r["node"] == "rt1")
    assert rt1["channels"]["current"]["combined"] == 1
    assert rt1["bql"] == [{"queue": 0, "limit": 0, "limit_max": 1879048192, "inflight": 0}]
    assert rt1["bql_before"][0]["limit"] == 4542
    assert rt1["bql_after"] == [{"queue": 0, "limit": 30280, "limit_max": 1879048192,
                                 "inflight": 1514}]  # fmt: skip
    other = next(r for r in s["nics"] if r["node"] == "rt2")
    assert "bql_after" not in other
    assert s["nic_notes"] == [
        "rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum"
    ]
    # a damaged reading is a reason naming the file
    (raw / "bql-after.txt").write_text("garbage\n")
    assert "bql-after.txt" in damaged_files(summarize(raw)["reasons"])
