"""The instruments as registered kinds: their exact command plans on a fake SSH testbed
(no Emulab or FreeBSD here), their records read back from meta.json (also as runs
before them wrote it), and the FreeBSD counters read from output written from
usr.bin/netstat/inet.c."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from ccbench import instruments, layout, runmeta
from ccbench.errors import CcbenchError
from ccbench.exec import Result
from ccbench.fetch import Fetched
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments import Cost, Recording
from ccbench.instruments.base import BeforeAfter
from ccbench.instruments.bblog import Bblog
from ccbench.instruments.counters import PLANS, TcpCounters
from ccbench.instruments.cpu import RouterCpu
from ccbench.instruments.tcp_probe import (
    ACKS_PER_S_PER_CPU,
    LINE_BYTES,
    NODE_FILE,
    TcpProbe,
    acks_per_s,
    port_filter,
    thin_bits_for,
)
from ccbench.layout import RawDir
from ccbench.roles import Bottleneck, NoDelay, dumbbell
from ccbench.run_record import RunRecord
from ccbench.spec import Flow, Recorded, RunSpec, Topology, Variant

CAP = Path(__file__).resolve().parents[1] / "captures"


@dataclass
class Spawned:
    argv: list[str]
    stdout: Path | None
    procs: list[str] = field(default_factory=list)

    def stop(self, *a: Any, **kw: Any) -> int:
        self.procs.append("stopped")
        return 0


class Ex:
    """Records what runs on one node; every command succeeds (`ls` of the tcp events
    lists what this kernel has)."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.writes: list[tuple[str, str]] = []
        self.spawned: list[Spawned] = []
        self.got: list[tuple[str, Path]] = []

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        out = "tcp_probe\ntcp_cong_state_set\ntcp_retransmit_skb\n" if argv[0] == "ls" else ""
        return Result(tuple(argv), 0, out, "")

    def write_file(self, path: str, text: str) -> None:
        self.writes.append((path, text))

    def spawn(self, argv: list[str], *, stdout: Path | None = None, **kw: Any) -> Spawned:
        self.spawned.append(Spawned(list(argv), stdout))
        return self.spawned[-1]

    def get(self, remote: str, local: Path, *, compress: bool | None = None) -> Fetched:
        self.got.append((remote, local))
        return Fetched("s1", remote, local, 1000, 300, True, 0.5, 60.0)


class SshTestbed:
    id = "emu1"
    kind = "ssh"
    bottleneck = ("rt1", "eth5")
    roles = dumbbell(2, Bottleneck("rt1", "eth5"), NoDelay())

    def __init__(self, os_name: str = "linux") -> None:
        self.os = os_name
        self.exs: dict[str, Ex] = {}

    def driver(self, node: str) -> Any:
        return FreeBSDHost() if node.startswith("s") and self.os == "freebsd" else LinuxHost()

    def node_os(self) -> dict[str, str]:
        return {n: self.driver(n).os for n in ("s1", "s2", "rt1", "rt2", "r1", "r2")}

    def ex(self, node: str) -> Ex:
        return self.exs.setdefault(node, Ex())

    def address(self, node: str) -> str:
        return {"r1": "10.1.3.2", "r2": "10.1.3.6"}[node]


def spec(tcp_probe: bool = True, os_name: str = "linux", rate: float = 1000,
         duration: float = 300) -> RunSpec:  # fmt: skip
    return RunSpec(
        topology=Topology(pairs=2, rate_mbit=rate),
        flows=(Flow(pair=1, cc="cubic", duration_s=duration),
               Flow(pair=2, cc="cubic", duration_s=duration)),
        record=(Recorded("tcp_probe", (("budget_mb", 256.0),)),) if tcp_probe else (),
        variant_def=Variant(label="x", cc="cubic", os=os_name),
    )  # fmt: skip


def test_registry_order_costs_and_oses() -> None:
    """The registry's order is the order of starting and stopping: the before/after
    reads come after everything that samples or traces (closest to the traffic), the
    router's CPU last."""
    reg = list(instruments.REGISTRY.values())
    snapshots = [i for i, c in enumerate(reg) if issubclass(c, BeforeAfter)]
    others = [i for i, c in enumerate(reg) if not issubclass(c, BeforeAfter)]
    assert snapshots and others and max(others) < min(snapshots)
    assert reg[-1] is RouterCpu
    costs = {n: c.cost for n, c in instruments.REGISTRY.items()}
    assert costs["tcp_probe"] is costs["siftr"] is Cost.PER_PACKET
    assert costs["ss"] is costs["qdisc"] is Cost.SAMPLED
    assert all(costs[c.name] is Cost.SNAPSHOT for c in reg if issubclass(c, BeforeAfter))
    assert instruments.REGISTRY["tcp_probe"].oses == ("linux",)
    assert instruments.REGISTRY["siftr"].oses == ("freebsd",)
    assert all(c.description for c in reg)


def test_every_summary_part_is_a_field_of_the_typed_record(tmp_path: Path) -> None:
    """The instruments' parts of summary.json, each a documented RunRecord field (of the
    type the instrument declares, where it declares one); the summary takes them from
    the instruments that recorded, in REGISTRY's order."""
    keys = {n: c.summary_key for n, c in instruments.REGISTRY.items() if c.summary_key}
    assert {"siftr", "bblog", "sockstat", "retransmit_causes"} <= set(keys.values())
    for name, key in keys.items():
        field = RunRecord.model_fields[key]
        assert field.description, key
        declared = instruments.REGISTRY[name].summary_type
        assert declared is None or field.annotation == declared | None, key
    ss = instruments.REGISTRY["ss"].from_record({"interval_s": 0.1, "nodes": []})
    recorded = {"bblog": Bblog(nodes={"s1": {"files": [], "problem": "cannot list"}}), "ss": ss}
    got = instruments.summary_parts(RawDir(tmp_path), spec(), recorded)
    assert got.parts == {"bblog": {"s1": {"files": [], "node_bytes": 0, "fetched_bytes": 0,
                                          "blocks": 0, "notes": ["cannot list"]}}}  # fmt: skip
    assert got.reasons == [] and got.nics == {}


def test_an_ssh_run_of_linux_senders_records_with_these(tmp_path: Path) -> None:
    """In the registry's order: every instrument for Linux senders or for the routers
    (none that is FreeBSD's only), the asked tcp_probe among them."""
    tb = SshTestbed()
    got = [i.name for i in instruments.for_run(tb, spec())]  # type: ignore[arg-type]
    assert got == [n for n in instruments.REGISTRY if n in got]
    assert {"ss", "tcp_probe", "qdisc", "tcp_counters", "tx_queue_limits", "router_cpu"} <= set(got)
    assert not [n for n in got if instruments.REGISTRY[n].oses == ("freebsd",)]
    # every record reads back as the instrument that wrote it
    for ins in instruments.for_run(tb, spec()):  # type: ignore[arg-type]
        again = type(ins).from_record(json.loads(json.dumps(ins.record_json())))
        assert again.record_json() == ins.record_json()
    assert "tcp_probe" not in [i.name for i in instruments.for_run(tb, spec(False))]  # type: ignore[arg-type]


def test_port_filter_and_thinning() -> None:
    assert port_filter([5202, 5203]) == "dport >= 5202 && dport <= 5203"
    # 1 in 16 of the sequence space, in whole 4 KiB windows
    assert port_filter([5202], 4) == "(dport >= 5202 && dport <= 5202) && !(snd_una & 0xf000)"
    budget = 256 * 2**20
    assert thin_bits_for(spec(rate=100, duration=30), budget) == 0  # the default: every ACK
    # 1 Gbit/s for 300 s over SSH: delayed ACKs only, ~4 GB of lines, thinned to 1/16
    assert thin_bits_for(spec(rate=1000, duration=300), budget) == 4
    # on one kernel of 2 CPUs the receivers ACK at most 4k times a second: 1/2
    assert acks_per_s(spec(rate=1000), cpus=2) == 2 * ACKS_PER_S_PER_CPU
    assert thin_bits_for(spec(rate=1000, duration=300), budget, cpus=2) == 1
    assert acks_per_s(spec(rate=10), cpus=2) == 10e6 / 8 / 1514 / 2  # delayed ACKs below


# Traced runs on this machine's local testbed (docs/series.md, "tcp_probe's size"): rate
# Mbit/s, cubic flows, traffic s, every ACK's trace in bytes.
MEASURED_TRACES = [
    (100, 2, 10, 11_328_868), (200, 2, 10, 8_091_031), (500, 2, 10, 7_244_947),
    (1000, 2, 10, 6_742_893), (1000, 1, 10, 4_933_565), (100, 1, 10, 7_693_051),
    (150, 1, 10, 7_214_019), (1000, 4, 10, 9_280_094),
    (100, 2, 20, 21_500_000), (1000, 2, 20, 14_600_000), (1000, 2, 300, 204_200_000),
]  # fmt: skip


@pytest.mark.parametrize(("rate", "flows", "secs", "size"), MEASURED_TRACES)
def test_the_trace_budget_holds_every_measured_trace(
    rate: float, flows: int, secs: float, size: int
) -> None:
    """The estimate is at least each measured trace (so a budget it plans for holds),
    and on 1 Gbit/s within 4x of it (the delayed-ACK estimate was 16-50x)."""
    s = spec(rate=rate, duration=secs)
    est = acks_per_s(s, cpus=2) * secs * LINE_BYTES
    assert size <= est < (4 if rate >= 500 else 2) * size
    for budget in (2**20, 8 * 2**20, 256 * 2**20):
        assert size / 2 ** thin_bits_for(s, budget, cpus=2) <= budget


def test_tcp_probe_plan_over_ssh(tmp_path: Path) -> None:
    """One reader per Linux sender, on its own node: instance, filters, reader, marker;
    stopped, drained, removed; its file fetched."""
    tb = SshTestbed()
    s = spec()
    ins = TcpProbe.for_run(tb, s)  # type: ignore[arg-type]
    assert ins is not None and [r.node for r in ins.readers] == ["s1", "s2"]
    rec = Recording(tb, s, tmp_path)  # type: ignore[arg-type]
    ins.start(rec)
    inst = "/sys/kernel/tracing/instances/ccbench-emu1"
    s1 = tb.exs["s1"]
    assert s1.calls[:3] == [
        ["sh", "-c", 'for f in "$1"/events/tcp/*/enable; do echo 0 > "$f"; done',
         "ccbench-off", inst],
        ["rmdir", inst],
        ["ls", "/sys/kernel/tracing/events/tcp"],
    ]  # fmt: skip
    assert s1.calls[3] == ["mkdir", inst]
    filt = "(dport >= 5202 && dport <= 5203) && !(snd_una & 0xf000)\n"
    assert s1.writes == [
        (f"{inst}/buffer_size_kb", "16384\n"),
        (f"{inst}/trace_clock", "mono\n"),
        (f"{inst}/events/tcp/tcp_probe/filter", filt),
        (f"{inst}/events/tcp/tcp_probe/enable", "1\n"),
        (f"{inst}/events/tcp/tcp_cong_state_set/filter", "dport >= 5202 && dport <= 5203\n"),
        (f"{inst}/events/tcp/tcp_cong_state_set/enable", "1\n"),
        (f"{inst}/events/tcp/tcp_retransmit_skb/filter", "dport >= 5202 && dport <= 5203\n"),
        (f"{inst}/events/tcp/tcp_retransmit_skb/enable", "1\n"),
    ]
    assert [p.argv for p in s1.spawned] == [
        ["sh", "-c", 'exec cat "$1" > "$2"', "ccbench-trace", f"{inst}/trace_pipe", NODE_FILE]
    ]
    assert s1.calls[-1][:3] == ["sh", "-c", 'printf "ccbench_unix=%s\\n" "$(date +%s.%N)" > "$1"']
    n = len(s1.calls)
    ins.stop(rec)
    assert s1.calls[n:n + 3] == [
        ["sh", "-c", 'echo 0 > "$1"', "ccbench-off", f"{inst}/events/tcp/{ev}/enable"]
        for ev in ("tcp_probe", "tcp_cong_state_set", "tcp_retransmit_skb")
    ]  # fmt: skip
    assert s1.calls[-1] == ["rmdir", inst]
    ins.collect(rec)
    assert s1.got == [(NODE_FILE, tmp_path / "tcp-probe-s1.txt")]
    assert s1.calls[-1] == ["rm", "-f", NODE_FILE]
    r = ins.record_json()
    assert r["thin_bits"] == 4 and r["readers"][0]["fetch"]["fetched_bytes"] == 300
    assert TcpProbe.from_record(r).thinning == (
        "ACKs thinned to 1 in 16 by sequence space (whole 4 KiB windows) to stay within the "
        "size budget")  # fmt: skip


def test_a_kernel_without_the_tracepoint_is_recorded_not_fatal(tmp_path: Path) -> None:
    class OldKernel(Ex):
        def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
            self.calls.append(list(argv))
            return Result(tuple(argv), 2, "", "ls: cannot access: No such file or directory")

    tb = SshTestbed()
    tb.exs["s1"] = OldKernel()
    s = spec()
    ins = TcpProbe.for_run(tb, s)  # type: ignore[arg-type]
    assert ins is not None
    ins.start(Recording(tb, s, tmp_path))  # type: ignore[arg-type]
    assert (
        ins.readers[0].problem is not None and "no tcp_probe tracepoint" in ins.readers[0].problem
    )
    assert tb.exs["s1"].spawned == [] and len(tb.exs["s2"].spawned) == 1


@pytest.mark.parametrize("os_name", ["linux", "freebsd"])
def test_counters_plan_per_os(tmp_path: Path, os_name: str) -> None:
    tb = SshTestbed(os_name)
    s = spec(False, os_name)
    ins = TcpCounters.for_run(tb, s)  # type: ignore[arg-type]
    assert ins is not None and ins.nodes == {"s1": os_name, "s2": os_name}
    rec = Recording(tb, s, tmp_path)  # type: ignore[arg-type]
    ins.start(rec)
    ins.stop(rec)
    want = {"linux": ["nstat", "-asz", "--json"],
            "freebsd": ["netstat", "-s", "-p", "tcp", "--libxo", "json"]}[os_name]  # fmt: skip
    assert PLANS[os_name] == want
    assert tb.exs["s1"].calls == [want, want]
    assert (tmp_path / "tcp-counters-s2-after.json").exists()


def test_freebsd_counters_name_the_causes(tmp_path: Path) -> None:
    """netstat's libxo JSON written from inet.c (tcp_stats): all of it during the run
    (before: every counter 0)."""
    after = (CAP / "freebsd" / "netstat-s-p-tcp-written-from-inet-c.json").read_text()
    d = json.loads(after)
    zero = {"statistics": {"tcp": _zeroed(d["statistics"]["tcp"])}}
    (tmp_path / layout.tcp_counters("s1", "before")).write_text(json.dumps(zero))
    (tmp_path / layout.tcp_counters("s1", "after")).write_text(after)
    rd = RawDir(tmp_path)
    got = TcpCounters(nodes={"s1": "freebsd"}).summary_part(rd, spec()).value
    assert rd.problems == []
    assert got is not None
    c = got["s1"]
    assert c["os"] == "freebsd" and c["retransmitted_bytes"] == 306976
    assert c["timeouts"] == d["statistics"]["tcp"]["retransmit-timeouts"]
    assert "timeout" in c["causes"]


def _zeroed(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _zeroed(v) for k, v in obj.items()}
    return 0 if isinstance(obj, int) else obj


def test_linux_counters_from_this_machine(tmp_path: Path) -> None:
    """nstat in a sender namespace before and after a flow with 5 % loss (real)."""
    for when in ("before", "after"):
        src = CAP / "nstat" / f"nstat-{when}-loss5.json"
        (tmp_path / layout.tcp_counters("s1", when)).write_text(src.read_text())
    rd = RawDir(tmp_path)
    got = TcpCounters(nodes={"s1": "linux"}).summary_part(rd, spec()).value
    assert got is not None and rd.problems == []
    assert got["s1"]["retransmitted_segments"] == 50 and got["s1"]["timeouts"] == 2
    assert got["s1"]["causes"][:2] == ["timeout", "fast-retransmit"]


def test_counters_that_went_down_are_a_problem(tmp_path: Path) -> None:
    src = CAP / "nstat"
    (tmp_path / layout.tcp_counters("s1", "before")).write_text(
        (src / "nstat-after-loss5.json").read_text())  # fmt: skip
    (tmp_path / layout.tcp_counters("s1", "after")).write_text(
        (src / "nstat-before-loss5.json").read_text())  # fmt: skip
    rd = RawDir(tmp_path)
    assert TcpCounters(nodes={"s1": "linux"}).summary_part(rd, spec()).value == {}
    assert len(rd.problems) == 1 and rd.problems[0].startswith("tcp-counters-s1-after.json: ")
    assert "went down" in rd.problems[0]


def _meta(tmp_path: Path, d: dict[str, Any]) -> RawDir:
    (tmp_path / "meta.json").write_text(json.dumps(d))
    return RawDir(tmp_path)


def test_meta_of_runs_before_instruments_reads_forward(tmp_path: Path) -> None:
    rd = _meta(tmp_path, {
        "started_unix": 1764000000.5, "flows": [{"flow": 1, "started_s": 0.0}],
        "client_rc": [0],
        "qdisc_sampler": {"node": "rt1", "dev": "to-dl", "argv": ["x"], "interval_s": 0.05},
        "siftr": {"s1": "siftr2"},
        "sockstat": [{"flow": 1, "node": "s1", "peer": "10.1.3.2:5202",
                      "file": "sockstat-1.txt", "at_s": 5.0}],
    })  # fmt: skip
    m = runmeta.load(rd, 1)
    assert rd.problems == []
    assert sorted(m.instruments) == ["qdisc", "siftr", "sockstat"]
    q = m.instrument(instruments.REGISTRY["qdisc"])
    assert q is not None and q.file == "qdisc-rt1.txt"  # type: ignore[attr-defined]
    si = m.instrument(instruments.REGISTRY["siftr"])
    assert si is not None and si.nodes["s1"]["logger"] == "siftr2"  # type: ignore[attr-defined]
    assert m.started_unix == 1764000000.5 and m.flow_starts == {1: 0.0} and m.client_rc == [0]


def test_a_damaged_record_is_one_problem_naming_it(tmp_path: Path) -> None:
    rd = _meta(tmp_path, {"flows": [], "instruments": {
        "tcp_probe": {"readers": "s1"}, "ss": {"interval_s": 0.1, "nodes": ["s1"]},
        "gizmo": {}}})  # fmt: skip
    m = runmeta.load(rd, 1)
    assert sorted(m.instruments) == ["ss"]
    assert rd.problems == [
        "meta.json: instruments.tcp_probe: not a tcp_probe record",
        "meta.json: instruments: 'gizmo' is no instrument of this ccbench",
    ]


def test_bblog_plan_and_its_files_checked_whole(tmp_path: Path) -> None:
    """FreeBSD senders with `bblog`: the sysctls of the CC maintainers' scripts, the
    dumper, its files fetched and each checked as pcapng (a real pcapng made here, and
    the same cut short)."""
    whole = (CAP / "pcapng").glob("*.pcapng")
    good = next(iter(sorted(whole))).read_bytes()

    class Node(Ex):
        def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
            self.calls.append(list(argv))
            out = "1.pcapng\n2.pcapng\n" if argv[0] == "ls" else ""
            return Result(tuple(argv), 0, out, "")

        def get(self, remote: str, local: Path, *, compress: bool | None = None) -> Fetched:
            self.got.append((remote, local))
            local.write_bytes(good if remote.endswith("1.pcapng") else good[:-10])
            return Fetched("s1", remote, local, len(good), len(good), False, 0.1, 60.0)

    tb = SshTestbed("freebsd")
    tb.exs["s1"], tb.exs["s2"] = Node(), Node()
    s = replace(spec(False, "freebsd"), record=(Recorded("bblog"),))
    got = instruments.for_run(tb, s)  # type: ignore[arg-type]
    ins = next(i for i in got if isinstance(i, Bblog))
    assert "bblog" not in [i.name for i in instruments.for_run(tb, replace(s, tracing="untraced"))]  # type: ignore[arg-type]
    rec = Recording(tb, s, tmp_path)  # type: ignore[arg-type]
    ins.start(rec)
    n1 = tb.exs["s1"]
    assert n1.calls == [
        ["sh", "-c", 'rm -rf "$1" && mkdir -p "$1" && chown nobody "$1"', "ccbench-bblog",
         "/var/tmp/ccbench-bblog"],
        ["sysctl", "net.inet.tcp.bb.log_auto_ratio=1"],
        ["sysctl", "net.inet.tcp.bb.log_session_limit=100000"],
        ["sysctl", "net.inet.tcp.bb.log_verbose=1"],
        ["sysctl", "net.inet.tcp.bb.log_auto_mode=4"],
        ["sysctl", "net.inet.tcp.bb.log_auto_all=1"],
    ]  # fmt: skip
    assert [p.argv for p in n1.spawned] == [["tcplog_dumper", "-D", "/var/tmp/ccbench-bblog"]]
    ins.stop(rec)
    assert n1.calls[-1] == ["sysctl", "net.inet.tcp.bb.log_auto_all=0"]
    assert n1.spawned[0].procs == ["stopped"]
    ins.collect(rec)
    files = ins.nodes["s1"]["files"]
    assert [f["file"] for f in files] == ["bblog-s1-1.pcapng", "bblog-s1-2.pcapng"]
    assert files[0]["problem"] is None and files[0]["blocks"] > 2
    assert files[1]["problem"] and "truncated" in files[1]["problem"]
    assert ["rm", "-rf", "/var/tmp/ccbench-bblog"] not in n1.calls  # kept for a look by hand
    kept = Bblog.from_record(json.loads(json.dumps(ins.record_json())))
    part = kept.summary_part(RawDir(tmp_path), s).value
    assert part["s1"]["blocks"] == files[0]["blocks"] + (files[1]["blocks"] or 0)
    assert part["s1"]["notes"] == [f"bblog-s1-2.pcapng: {files[1]['problem']}"]


def test_record_names_optional_instruments_with_their_options() -> None:
    """A config's `record:` as the spec holds it: by name, every option at a value."""
    got = instruments.record_option(["bblog", {"tcp_probe": {"budget_mb": 64}}])
    assert got == (Recorded("bblog"), Recorded("tcp_probe", (("budget_mb", 64.0),)))
    assert instruments.record_option(["tcp_probe"]) == (
        Recorded("tcp_probe", (("budget_mb", 256.0),)),
    )
    assert instruments.record_option([]) == ()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (["ss"], "'ss' is no optional instrument (there are: bblog, tcp_probe, receiver_tcp)"),
        (["nope"], "'nope' is no optional instrument"),
        (["bblog", "bblog"], "bblog is named twice"),
        ([{"tcp_probe": {"budget": 1}}], "tcp_probe has no option 'budget' (it has: budget_mb)"),
        (
            [{"tcp_probe": {"budget_mb": 0}}],
            "tcp_probe.budget_mb: 0 is not a number in (0, 100000]",
        ),
        ([{"tcp_probe": {"budget_mb": True}}], "tcp_probe.budget_mb: True is not a number"),
        ([{"bblog": {"x": 1}}], "bblog has no option 'x' (it has: none)"),
    ],
)
def test_a_bad_record_is_one_line_naming_it(value: list[Any], says: str) -> None:
    with pytest.raises(CcbenchError, match=re.escape(says)):
        instruments.record_option(value, "scenarios.a.record")


def test_a_traced_twin_records_with_tcp_probe_and_keeps_what_was_asked() -> None:
    s = replace(spec(False), record=(Recorded("bblog"),))
    twin = instruments.traced_twin(s)
    assert twin.tracing == "traced"
    assert [r.name for r in twin.record] == ["bblog", "tcp_probe"]
    asked = replace(spec(False), record=(Recorded("tcp_probe", (("budget_mb", 8.0),)),))
    assert instruments.traced_twin(asked).record == asked.record  # its own budget kept
    assert instruments.traced_twin_names() == ["tcp_probe"]


def test_specs_with_the_old_keys_read_as_record() -> None:
    """Specs written 2026-11-25 asked with keys of their own (tcp_probe, bblog)."""
    d = spec(False).to_dict()
    assert "record" not in json.loads(json.dumps({k: v for k, v in d.items() if v != {}}))
    old = {**{k: v for k, v in d.items() if k != "record"}, "tcp_probe": True,
           "tcp_probe_budget_mb": 32.0, "bblog": False}  # fmt: skip
    got = RunSpec.from_dict(old)
    assert got.record == (Recorded("tcp_probe", (("budget_mb", 32.0),)),)
    assert TcpProbe.asked(got) == {"budget_mb": 32.0}
    assert RunSpec.from_dict({**old, "tcp_probe": False}).record == ()
    # a run asking nothing keeps its id (record hashes only when set); asking changes it
    assert spec(False).run_id == RunSpec.from_dict(spec(False).to_dict()).run_id
    assert spec(True).run_id != spec(False).run_id
    assert RunSpec.from_dict(spec(True).to_dict()) == spec(True)


def test_sender_sources_are_ranked_by_the_instruments() -> None:
    assert instruments.SENDER_SOURCES == ("tcp_probe", "ss", "siftr")


def test_a_scenario_may_ask_its_own_record() -> None:
    """`record:` at the top level, overridden by a scenario's own (even an empty one)."""
    from ccbench import matrix
    from ccbench.config import load_yaml

    cfg = load_yaml(Path(__file__).parents[2] / "config" / "config.yaml")
    cfg = {**cfg, "repetitions": 1, "record": ["tcp_probe"]}
    cfg["scenarios"] = {**cfg["scenarios"]}
    cfg["scenarios"]["two-flows-48"] = {**cfg["scenarios"]["two-flows-48"], "record": []}
    m = matrix.load(cfg, "c.yaml", need_inventory=False)
    asked = {(r.scenario, tuple(x.name for x in r.spec.record)) for r in m.runs.values()}
    assert asked == {("single-bdp", ("tcp_probe",)), ("two-flows-48", ())}
    bad = {**cfg, "record": [{"tcp_probe": {"budget_mb": -1}}]}
    with pytest.raises(CcbenchError, match=r"^c\.yaml: record: tcp_probe\.budget_mb: -1 "):
        matrix.load(bad, "c.yaml", need_inventory=False)


def test_a_run_refuses_senders_of_another_os() -> None:
    """A FreeBSD variant on a Linux sender set (a variant pinned to the wrong dumbbell)
    fails before any traffic, naming both; a single run's config names no OS."""
    from ccbench.run import check_sender_os

    tb = SshTestbed("linux")
    with pytest.raises(
        CcbenchError,
        match=r"variant adhoc is for freebsd senders, but s1 runs linux \(testbed emu1: pin",
    ):
        check_sender_os(tb, spec(False, "freebsd"), ["s1"])  # type: ignore[arg-type]
    check_sender_os(tb, spec(False, "linux"), ["s1", "s2"])  # type: ignore[arg-type]
    check_sender_os(tb, replace(spec(False, "freebsd"), variant_def=None), ["s1"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cfg", "says"),
    [
        (
            {"tcp_probe": True},
            "c.yaml: tcp_probe: now an optional instrument: write record: [tcp_probe]",
        ),
        (
            {"scenarios": {"a": {"bblog": True}}},
            "c.yaml: scenarios.a.bblog: now an optional instrument: write record: [bblog]",
        ),
        (
            {"run": {"tcp_probe_budget_mb": 64}},
            "c.yaml: run.tcp_probe_budget_mb: now an optional instrument",
        ),
    ],
)
def test_a_config_with_the_old_keys_says_what_to_write(cfg: dict[str, Any], says: str) -> None:
    from ccbench.config import validate

    with pytest.raises(CcbenchError, match=re.escape(says)):
        validate(cfg, "matrix", "c.yaml")
