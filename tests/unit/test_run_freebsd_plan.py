"""Plan test (no FreeBSD host here): what a run executes on a FreeBSD sender before its
flows, recorded by a fake executor that answers `functions_available` with the real
text from seed 002 after the stack switch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench.exec import Result
from ccbench.fetch import Fetched, FetchFailed
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.instruments import Recording
from ccbench.instruments.siftr import LOG as SIFTR_LOG
from ccbench.instruments.siftr import Siftr
from ccbench.reasons import Code
from ccbench.roles import NoDelay, dumbbell
from ccbench.run_senders import prepare_senders as _prepare_senders
from ccbench.spec import Flow, RunSpec, Topology, Variant
from ccbench.summarize import summarize
from tests.raw_meta import write_meta

SEED002_AFTER = """Stack                           D Alias                            PCB count
freebsd                           freebsd                          3
rack                            * rack                             0
"""

# Seed 001's scale: one flow per FreeBSD sender at 1 Gbit/s for 300 s (its port 5202).
SEED_SCALE = RunSpec(topology=Topology(pairs=1, rate_mbit=1000),
                     flows=(Flow(pair=1, cc="cubic", duration_s=300),))  # fmt: skip


class RecordingEx:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        out = SEED002_AFTER if argv[-1] == "net.inet.tcp.functions_available" else ""
        rc = 1 if argv == ["kldload", "-n", "tcphpts"] else 0  # built into this kernel
        assert rc == 0 or not check, f"a failing step must be allowed to fail: {argv}"
        return Result(tuple(argv), rc, out, "")


class FakeTestbed:
    kind = "ssh"
    roles = dumbbell(1, None, NoDelay())  # its flows' ports: layout.flow_port

    def __init__(self) -> None:
        self.exs = {"s1": RecordingEx()}

    def driver(self, node: str) -> FreeBSDHost:
        return FreeBSDHost()

    def ex(self, node: str) -> RecordingEx:
        return self.exs[node]


def spec(stack: str, cc: str = "cubic") -> RunSpec:
    return RunSpec(
        topology=Topology(pairs=1),
        flows=(Flow(pair=1, cc=cc, duration_s=3),),
        variant_def=Variant(label="x", cc=cc, os="freebsd", stack=stack),
    )


def test_rack_cubic_is_set_then_verified(tmp_path: Path) -> None:
    tb = FakeTestbed()
    _prepare_senders(tb, spec("rack"), ["s1"], tmp_path)  # type: ignore[arg-type]
    assert tb.exs["s1"].calls == [
        ["kldload", "-n", "tcphpts"],
        ["kldload", "-n", "tcp_rack"],
        ["sysctl", "net.inet.tcp.functions_default=rack"],
        ["kldload", "-n", "cc_cubic"],
        ["sysctl", "net.inet.tcp.cc.algorithm=cubic"],
        ["sysctl", "-n", "net.inet.tcp.functions_available"],
    ]
    rec = json.loads((tmp_path / "sender-setup.json").read_text())
    assert rec["s1"]["problems"] == []


def test_stack_that_did_not_take_makes_the_run_invalid(tmp_path: Path) -> None:
    tb = FakeTestbed()
    # Asked for the default stack, but the host still reports rack as default.
    raw = tmp_path / "raw"
    raw.mkdir()
    s = spec("freebsd")
    _prepare_senders(tb, s, ["s1"], raw)  # type: ignore[arg-type]
    rec = json.loads((raw / "sender-setup.json").read_text())
    assert rec["s1"]["problems"], "a wrong default stack must be reported"
    (raw / "spec.json").write_text(json.dumps(s.to_dict()))
    summary = summarize(raw)
    assert not summary["valid"]
    assert [r.evidence for r in summary["reasons"] if r.code == Code.STACK_MISMATCH] == [
        {"node": "s1", "asked": "freebsd"}]  # fmt: skip


class NoSiftr2Ex(RecordingEx):
    """A kernel without siftr2: its sysctl tree is unknown and its module will not load."""

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        if argv in (["sysctl", "-N", "net.inet.siftr2"], ["kldload", "-n", "siftr2"]):
            assert not check, f"probing for siftr2 must be allowed to fail: {argv}"
            self.calls.append(list(argv))
            return Result(tuple(argv), 1, "", "no such module")
        return super().run(argv, check=check, **kw)


def _siftr_start(tb: Any, spec: RunSpec, senders: list[str]) -> dict[str, dict[str, Any]]:
    """The siftr instrument started for the run (what run.py does); its per-node record."""
    ins = Siftr.for_run(tb, spec)
    assert ins is not None and list(ins.nodes) == senders
    ins.start(Recording(tb, spec, Path(".")))
    return ins.nodes


def _siftr_collect(tb: Any, nodes: dict[str, dict[str, Any]], raw: Path) -> None:
    Siftr(nodes=nodes).collect(Recording(tb, SEED_SCALE, raw))


def test_siftr_logs_the_run_and_is_fetched_where_there_is_no_siftr2(tmp_path: Path) -> None:
    tb = FakeTestbed()
    tb.exs["s1"] = NoSiftr2Ex()
    fetched: list[tuple[str, Path]] = []

    def get(remote: str, local: Path) -> Fetched:
        fetched.append((remote, local))
        return Fetched("s1", remote, local.with_name(local.name + ".gz"), 9_000_000, 1_000_000,
                       True, 2.5, 78.0)  # fmt: skip

    tb.exs["s1"].get = get  # type: ignore[attr-defined]
    nodes = _siftr_start(tb, SEED_SCALE, ["s1"])  # type: ignore[arg-type]
    assert nodes["s1"]["logger"] == "siftr" and nodes["s1"]["ppl"] == 97
    assert nodes["s1"]["port_filter"] == 5202 and nodes["s1"]["within_budget"]
    _siftr_collect(tb, nodes, tmp_path)  # type: ignore[arg-type]
    assert tb.exs["s1"].calls == [
        ["sysctl", "-N", "net.inet.siftr2"],
        ["kldload", "-n", "siftr2"],
        ["rm", "-f", SIFTR_LOG],
        ["kldload", "-n", "siftr"],
        ["sysctl", f"net.inet.siftr.logfile={SIFTR_LOG}"],
        ["sysctl", "net.inet.siftr.ppl=97"],
        ["sysctl", "net.inet.siftr.port_filter=5202"],
        ["sysctl", "net.inet.siftr.enabled=1"],
        ["sysctl", "net.inet.siftr.enabled=0"],
        ["rm", "-f", SIFTR_LOG],
    ]
    assert fetched == [(SIFTR_LOG, tmp_path / "siftr-s1.log")]
    assert nodes["s1"]["fetch"] == {"node_bytes": 9_000_000, "fetched_bytes": 1_000_000,
                                    "compressed": True, "seconds": 2.5}  # fmt: skip


def test_a_siftr_log_not_fetched_makes_the_run_invalid_and_stays_on_the_node(
    tmp_path: Path,
) -> None:
    tb = FakeTestbed()
    tb.exs["s1"] = NoSiftr2Ex()
    why = "exit 255 (ssh: the connection or the ssh client ended)"
    lost = FetchFailed("s1", SIFTR_LOG, tmp_path / "siftr-s1.log", 5_931_008, why, 255)

    def get(remote: str, local: Path) -> Fetched:
        raise lost

    tb.exs["s1"].get = get  # type: ignore[attr-defined]
    nodes = _siftr_start(tb, SEED_SCALE, ["s1"])  # type: ignore[arg-type]
    _siftr_collect(tb, nodes, tmp_path)  # type: ignore[arg-type]
    assert tb.exs["s1"].calls[-1] == ["sysctl", "net.inet.siftr.enabled=0"]  # no rm after it
    assert nodes["s1"]["fetch"] == {"error": str(lost)}
    (tmp_path / "spec.json").write_text(json.dumps(SEED_SCALE.to_dict()))
    write_meta(tmp_path, {"siftr": nodes}, client_rc=[0] * len(SEED_SCALE.flows))
    summary = summarize(tmp_path)
    assert not summary["valid"]
    [why] = [r.text for r in summary["reasons"] if r.evidence.get("file") == "siftr-s1.log"]
    assert why.endswith(str(lost))  # the fetch's own account
    assert "5931008 bytes received" in str(lost)


def test_siftr2_is_chosen_where_the_kernel_has_it(tmp_path: Path) -> None:
    tb = FakeTestbed()  # every command succeeds: `sysctl -N net.inet.siftr2` finds the tree
    tb.exs["s1"].get = lambda remote, local: Fetched(  # type: ignore[attr-defined]
        "s1", remote, local, 10, 10, False, 0.1, 60.0
    )
    nodes = _siftr_start(tb, SEED_SCALE, ["s1"])  # type: ignore[arg-type]
    assert nodes["s1"]["logger"] == "siftr2"
    _siftr_collect(tb, nodes, tmp_path)  # type: ignore[arg-type]
    assert tb.exs["s1"].calls == [
        ["sysctl", "-N", "net.inet.siftr2"],
        ["rm", "-f", SIFTR_LOG],
        ["kldload", "-n", "siftr2"],
        ["sysctl", f"net.inet.siftr2.logfile={SIFTR_LOG}"],
        ["sysctl", f"net.inet.siftr2.ppl={nodes['s1']['ppl']}"],
        ["sysctl", "net.inet.siftr2.port_filter=5202"],
        ["sysctl", "net.inet.siftr2.enabled=1"],
        ["sysctl", "net.inet.siftr2.enabled=0"],
        ["rm", "-f", SIFTR_LOG],
    ]


def test_siftr2_module_that_loads_is_chosen(tmp_path: Path) -> None:
    class LoadableSiftr2(RecordingEx):
        def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
            if argv == ["sysctl", "-N", "net.inet.siftr2"]:
                self.calls.append(list(argv))
                return Result(tuple(argv), 1, "", "unknown oid")
            return super().run(argv, check=check, **kw)

    tb = FakeTestbed()
    tb.exs["s1"] = LoadableSiftr2()
    assert _siftr_start(tb, SEED_SCALE, ["s1"])["s1"]["logger"] == "siftr2"  # type: ignore[arg-type]
    assert tb.exs["s1"].calls[:2] == [
        ["sysctl", "-N", "net.inet.siftr2"],
        ["kldload", "-n", "siftr2"],
    ]
