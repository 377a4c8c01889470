"""A run asks every node for what it will start there before it starts anything
(ccbench.needs): a missing tool is refused in one line naming it and its node, and no
command of the run runs. The check itself runs here for real, in sh."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ccbench import instruments, needs, run
from ccbench.errors import CcbenchError
from ccbench.exec import NetnsExecutor, Result
from ccbench.hosts import driver_for
from ccbench.instruments.counters import TcpCounters
from ccbench.needs import FEATURE, Need, Needs
from ccbench.roles import Bottleneck, NoDelay, dumbbell
from ccbench.spec import Flow, RunSpec, Topology


@dataclass
class Ex:
    """A node whose run's tools live apart from its own (as with `tools: container`):
    its own commands (run) have every tool, the run's place (run_where_tools_run)
    lacks `lacks`. Records every command (run, asked where the tools run, or started)."""

    name: str
    lacks: set[str] = field(default_factory=set)
    calls: list[list[str]] = field(default_factory=list)
    where_tools_run: list[list[str]] = field(default_factory=list)
    spawned: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        return Result(tuple(argv), 0, "", "")

    def run_where_tools_run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        self.where_tools_run.append(list(argv))
        out = ""
        if argv[3:4] == ["ccbench-needs"]:
            out = "".join(f"{a}\n" for a in argv[4:] if a.removeprefix(FEATURE) in self.lacks)
        return Result(tuple(argv), 0, out, "")

    def spawn(self, argv: list[str], **kw: Any) -> Any:
        self.spawned.append(list(argv))
        raise AssertionError(f"{self.name}: started {argv}")


class FakeTestbed:
    """Two pairs on Linux, rt1 the bottleneck router (an SSH testbed's shape)."""

    id = "t1"
    kind = "ssh"
    tools = "host"
    roles = dumbbell(2, Bottleneck("rt1", "eth1"), NoDelay())
    bottleneck = ("rt1", "eth1")

    def __init__(self, lacks: dict[str, set[str]]) -> None:
        self.exs = {n: Ex(n, lacks.get(n, set()))
                    for n in ("s1", "s2", "rt1", "dl", "rt2", "r1", "r2")}  # fmt: skip
        self.prepared = False

    def driver(self, node: str) -> Any:
        return driver_for(self.node_os()[node])

    def node_os(self) -> dict[str, str]:
        return {n: "dummynet" if n == "dl" else "linux" for n in self.exs}

    def ex(self, node: str) -> Ex:
        return self.exs[node]

    def address(self, node: str) -> str:
        return {"r1": "10.1.3.21", "r2": "10.1.3.22"}[node]

    def prepare_run(self) -> None:
        self.prepared = True


def spec(probe: str = "fping") -> RunSpec:
    return RunSpec(topology=Topology(pairs=2), probe_tool=probe,
                   flows=(Flow(pair=1, cc="cubic", duration_s=10),
                          Flow(pair=2, cc="cubic", duration_s=10)))  # fmt: skip


def test_a_missing_nstat_is_refused_in_one_line_before_anything_runs(tmp_path: Path) -> None:
    tb = FakeTestbed({"s1": {"nstat"}})
    with pytest.raises(CcbenchError) as e:
        run.run_once(tb, spec(), tmp_path)  # type: ignore[arg-type]
    assert (
        str(e.value) == "testbed t1: s1 has no nstat (needed by tcp_counters); nothing was started"
    )
    # Each node was asked once, with one argv, where the run's tools run, and nothing
    # else ran or started.
    for n, ex in tb.exs.items():
        assert all(argv[:2] == ["sh", "-c"] and argv[3] == "ccbench-needs" for argv in ex.calls), n
        assert len(ex.calls) <= 1 and not ex.spawned, n
        assert ex.where_tools_run == ex.calls, n
    assert [argv[4:] for argv in tb.exs["s1"].calls] == [
        ["iperf3", "fping", "bash", "ss", "nstat", "ip", "feature:bash5"]
    ]
    assert [argv[4:] for argv in tb.exs["rt1"].calls] == [["bash", "tc", "ip", "feature:bash5"]]
    assert tb.exs["dl"].calls == []  # Emulab's delay node: nothing of the run runs there
    assert not tb.prepared and not list(tmp_path.iterdir())


def test_every_missing_tool_and_node_is_in_the_one_line(tmp_path: Path) -> None:
    tb = FakeTestbed({"s2": {"iperf3", "ss"}, "r1": {"irtt"}, "rt1": {"tc"}})
    with pytest.raises(CcbenchError) as e:
        run.run_once(tb, spec("irtt"), tmp_path)  # type: ignore[arg-type]
    assert str(e.value) == (
        "testbed t1: s2 has no iperf3 (needed by the flows); s2 has no ss (needed by ss); "
        "r1 has no irtt (needed by probe irtt); rt1 has no tc (needed by qdisc); "
        "nothing was started"
    )


def test_an_instrument_set_can_be_passed_in(tmp_path: Path) -> None:
    """A run given its own instruments asks only for theirs (the flows' and probe's
    besides)."""
    tb = FakeTestbed({"s1": {"nstat"}})
    only = {TcpCounters.name: TcpCounters}
    insts = instruments.for_run(tb, spec(), only)  # type: ignore[arg-type]
    assert [i.name for i in insts] == ["tcp_counters"]
    with pytest.raises(CcbenchError, match=r"s1 has no nstat \(needed by tcp_counters\)"):
        run.run_once(tb, spec(), tmp_path, registry=only)  # type: ignore[arg-type]
    assert tb.exs["rt1"].calls == []  # no qdisc sampler in this set: rt1 is not asked


def test_the_check_runs_in_sh_here() -> None:
    """The check's script, run for real: sh and a program no machine has."""
    ex = NetnsExecutor(None)
    assert needs.lacking(ex, Needs(("sh", "ccbench-no-such-program"))) == [
        "ccbench-no-such-program"
    ]
    has_tracefs = "tracefs" in Path("/proc/filesystems").read_text().split()
    assert needs.lacking(ex, Needs(features=("tracefs",))) == ([] if has_tracefs else ["tracefs"])
    with pytest.raises(CcbenchError, match="no test for kernel feature nope"):
        needs.check_argv(Needs(features=("nope",)))
    line = needs.refusal([Need("here", ex, Needs(("ccbench-no-such-program",)), "a test")])
    assert line == "here has no ccbench-no-such-program (needed by a test); nothing was started"


def test_freebsd_kernel_features_are_checked_before_traffic(tmp_path: Path) -> None:
    """Run for real on stand-in FreeBSD kernels (tests/freebsd_standin.py): siftr is
    there when siftr2's tree is, or siftr(4) is in the kernel or loads (it is loaded by
    the check, before any traffic, not at its first use); BBLog needs the kernel's black
    box (net.inet.tcp.bb, `options TCP_BLACKBOX`: sys/netinet/tcp_log_buf.c) beside
    tcplog_dumper. The instruments declare them, so a run asks before it starts."""
    from ccbench.instruments.bblog import Bblog
    from ccbench.instruments.siftr import Siftr
    from tests.freebsd_standin import FreeBSDStandin

    assert Siftr.needs["freebsd"] == Needs(features=("siftr",))
    assert Bblog.needs["freebsd"] == Needs(("tcplog_dumper",), ("tcp_blackbox",))
    kernel = Needs(features=("siftr", "tcp_blackbox"))
    loadable = FreeBSDStandin(tmp_path / "a")  # siftr.ko there, not loaded; no black box
    assert needs.lacking(loadable, kernel) == ["tcp_blackbox"]
    assert "siftr.ko" in loadable.modules()  # loaded by the check
    bare = FreeBSDStandin(tmp_path / "b", available=(),
                          sysctls={"net.inet.tcp.bb.log_auto_all": "0"})  # fmt: skip
    assert needs.lacking(bare, kernel) == ["siftr"]
    siftr2 = FreeBSDStandin(tmp_path / "c", available=(),
                            sysctls={"net.inet.siftr2.enabled": "0"})  # fmt: skip
    assert needs.lacking(siftr2, Needs(features=("siftr",))) == []
    assert siftr2.modules() == ["kernel"]  # siftr2 found: siftr(4) not loaded
    assert needs.refusal([Need("s1", bare, kernel, "siftr")]) == (
        "s1 has no siftr (needed by siftr); nothing was started")  # fmt: skip


def test_bash5_for_the_sampler_loops() -> None:
    """$EPOCHREALTIME came with bash 5.0: the feature's test, run here (bash 5.2)."""
    assert needs.lacking(NetnsExecutor(None), Needs(features=("bash5",))) == []
