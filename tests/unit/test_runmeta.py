"""meta.json as one typed record (ccbench.runmeta.RunMeta): what the run writes reads back
the same; runs written before read alike (their keys are the same names, an older
layout brought forward in one step, keys nothing reads ignored); a field no verdict
reads never makes a run invalid."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ccbench import layout, run, runmeta
from ccbench.exec import Result
from ccbench.hosts import driver_for
from ccbench.instruments.cpu import RouterCpu
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.layout import RawDir
from ccbench.probes import ProbeRun
from ccbench.roles import Bottleneck, NoDelay, dumbbell
from ccbench.runmeta import RunMeta
from ccbench.spec import Flow, RunSpec, Topology
from tests.conftest import damaged_files

REPO = Path(__file__).resolve().parents[2]
# A run of this ccbench's layout (instruments' records) and one from before them.
WIRE = REPO / "tests" / "captures" / "run-local-wire-cubic-bdp" / "raw"
SMALL = REPO / "tests" / "fixtures" / "results-small" / "runs" / "two-flows-bbr-r1-3c359d7e"
# What older runs wrote that this ccbench reads nowhere, and so no longer writes.
DROPPED = {"testbed", "kind"}


def _meta() -> RunMeta:
    qs = QdiscSampler(node="rt1", dev="to-dl", interval_s=0.05, argv=["to-dl", "0.05"])
    return RunMeta(
        started_unix=1795812707.9768536, flow_starts={2: 0.0, 1: 1.5}, client_rc=[0, 1],
        probe_argv=["fping", "-D", "-p", "100", "-c", "50", "198.18.4.2"],
        instruments={"qdisc": qs, "router_cpu": RouterCpu(node="rt1")},
        client_argv=[["iperf3", "-c", "198.18.4.2"], ["iperf3", "-c", "198.18.4.6"]],
        tools="container", traffic_wall_s=6.52, finished_unix=1795812715.0,
        phases_s={"prepare": 0.483, "start": 0.213, "end": 0.245},
    )  # fmt: skip


def test_what_the_run_writes_reads_back_the_same(tmp_path: Path) -> None:
    meta = _meta()
    runmeta.write(tmp_path, meta)
    rd = RawDir(tmp_path)
    got = runmeta.load(rd, 2)
    assert rd.problems == []
    assert got == meta  # the instruments' records compare as their dataclasses
    # flows in the order they were released, as the time series reads them
    doc = json.loads((tmp_path / layout.META).read_text())
    assert doc["flows"] == [{"flow": 2, "started_s": 0.0}, {"flow": 1, "started_s": 1.5}]
    assert doc["instruments"]["qdisc"]["dev"] == "to-dl"
    assert not got.before_records


def test_the_file_keeps_the_key_names_runs_wrote_before() -> None:
    """Every key a recorded run has is one RunMeta writes, or one nothing reads."""
    written = set(_meta().to_json())
    for raw in (WIRE, SMALL / "raw"):
        old = set(json.loads((raw / layout.META).read_text()))
        assert old - written <= DROPPED, raw
    assert not written & DROPPED


def test_a_run_of_this_layout_reads_whole() -> None:
    rd = RawDir(WIRE)
    m = runmeta.load(rd, 1)
    assert rd.problems == []
    assert sorted(m.instruments) == ["qdisc", "router_cpu", "ss", "tcp_counters"]
    assert m.tools == "host" and m.traffic_wall_s == 15.392 and not m.before_records
    assert m.phases_s == {"prepare": 0.483, "start": 0.213, "end": 0.245}
    assert m.finished_unix == 1795812723.6140318 and m.client_argv is not None


def test_a_run_from_before_the_records_reads_forward() -> None:
    rd = RawDir(SMALL / "raw")
    m = runmeta.load(rd, 2)
    assert rd.problems == []
    assert m.before_records and m.instruments == {}
    assert m.client_rc == [0, 0] and m.flow_starts == {1: 0.0, 2: 0.0}
    assert m.probe_argv == ["ping", "-n", "-D", "-i", "0.1", "198.18.4.2"]
    assert m.phases_s is None  # not kept then: not recorded, no problem


def test_a_malformed_field_no_verdict_reads_is_none_not_a_reason(tmp_path: Path) -> None:
    doc = _meta().to_json() | {"tools": 3, "phases_s": ["prepare"], "client_argv": "iperf3",
                               "traffic_wall_s": "6 s", "finished_unix": None}  # fmt: skip
    (tmp_path / layout.META).write_text(json.dumps(doc))
    rd = RawDir(tmp_path)
    m = runmeta.load(rd, 2)
    assert rd.problems == []
    assert (m.tools, m.phases_s, m.client_argv, m.traffic_wall_s) == (None, None, None, None)
    assert m.started_unix == _meta().started_unix


def test_a_malformed_field_a_verdict_reads_is_one_problem(tmp_path: Path) -> None:
    doc = _meta().to_json() | {"probe_argv": ["fping", 7]}
    (tmp_path / layout.META).write_text(json.dumps(doc))
    rd = RawDir(tmp_path)
    assert runmeta.load(rd, 2).probe_argv is None
    assert damaged_files(rd.problems) == ["meta.json"]
    assert "probe_argv" in rd.problems[0].text  # the field, named


def test_the_probe_reads_the_traffic_window_and_argv_from_it() -> None:
    m = _meta()
    assert m.probe_run(5.0) == ProbeRun((m.started_unix, m.started_unix + 5.0), m.probe_argv)
    assert RunMeta().probe_run(5.0) == ProbeRun(None, None)
    assert m.probe_run(None).window is None


# --- what run.run_once writes: a run on a testbed of fakes (nothing really runs) -----


class _Proc:
    """A process held at its gate that exits 0 a moment after its release."""

    def __init__(self) -> None:
        self.t: float | None = None

    def release(self) -> None:
        self.t = time.monotonic()

    def poll(self) -> int | None:
        return 0 if self.t is not None and time.monotonic() - self.t > 0.05 else None

    def wait(self, timeout: float | None = None) -> int:
        return 0

    def stop(self, *a: Any, **kw: Any) -> None:
        pass


class _Ex:
    def run(self, argv: list[str], **kw: Any) -> Result:
        return Result(tuple(argv), 0, "", "")

    run_where_tools_run = run  # the tool check: nothing lacking

    def spawn(self, argv: list[str], **kw: Any) -> _Proc:
        return _Proc()


class _Testbed:
    id, kind, tools = "t1", "local", "host"
    roles = dumbbell(2, Bottleneck("rt1", "eth1"), NoDelay())
    bottleneck = ("rt1", "eth1")

    def ex(self, node: str) -> _Ex:
        return _Ex()

    def driver(self, node: str) -> Any:
        return driver_for("linux")

    def address(self, node: str) -> str:
        return "10.0.0.2"

    def prepare_run(self) -> None:
        pass

    def calibration(self) -> dict[str, Any]:
        return {}

    def snapshot_delay(self, path: Path) -> None:
        pass

    def snapshot_drops(self, path: Path) -> None:
        pass

    def wait_listening(self, node: str, port: int, **kw: Any) -> None:
        pass


def test_the_run_writes_what_it_returns(tmp_path: Path) -> None:
    s = RunSpec(topology=Topology(pairs=2), probe_interval_s=0,
                flows=(Flow(pair=1, cc="cubic", duration_s=0.2),
                       Flow(pair=2, cc="cubic", start_s=0.1, duration_s=0.1)))  # fmt: skip
    meta = run.run_once(_Testbed(), s, tmp_path, registry={})  # type: ignore[arg-type]
    rd = RawDir(tmp_path)
    assert runmeta.load(rd, 2) == meta and rd.problems == []
    assert list(meta.flow_starts) == [1, 2] and meta.flow_starts[2] >= 0.1
    assert meta.client_rc == [0, 0] and meta.probe_argv is None and meta.tools == "host"
    assert meta.client_argv is not None and [a[0] for a in meta.client_argv] == ["iperf3"] * 2
    assert set(meta.phases_s or {}) == {"prepare", "start", "end"}
    assert meta.started_unix is not None and meta.finished_unix is not None
    # traffic_wall_s is rounded to the millisecond (run._drive), and the wall clock
    # and the monotonic one may differ by a few microseconds over a run
    assert meta.finished_unix >= meta.started_unix + (meta.traffic_wall_s or 0) - 0.001
