"""Every part of the summary an instrument gives comes through the instrument
(instruments.summary_parts): the sampled queue is the qdisc sampler's `queue`, the
bottleneck NIC's BQL the tx_queue_limits instrument's readings of that NIC, the
router's CPU its `router_cpu`; no module of ccbench.summarize names an instrument or
reads its files. A run from before the instruments kept records asks the instruments
that can read it without one."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from ccbench import instruments, layout
from ccbench.instruments.bql import TxQueueLimits
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.layout import AFTER, BEFORE, RawDir
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.summarize import summarize
from tests.conftest import damaged_files
from tests.raw_meta import edit_meta

REPO = Path(__file__).resolve().parents[2]
SUMMARIZE = REPO / "src" / "ccbench" / "summarize"
CAP = REPO / "tests" / "captures"
# A run recorded before the instruments' records: cpu-*.txt, no `instruments` in meta.json.
LEDGER_RUN = CAP / "run-local-2cubic-ledger"
T0 = 1795445065.5215516  # the qdisc capture's run: its traffic's start


def spec(qdisc_interval_s: float = 0.05) -> RunSpec:
    return RunSpec(topology=Topology(pairs=2), qdisc_interval_s=qdisc_interval_s,
                   flows=(Flow(pair=1, cc="cubic", duration_s=12),
                          Flow(pair=2, cc="cubic", start_s=2, duration_s=10)))  # fmt: skip


def test_summarize_names_no_instrument() -> None:
    """summarize reaches instruments through the registry only (instruments.*), never
    an instrument's module."""
    found = []
    for p in sorted(SUMMARIZE.glob("*.py")):
        for n in ast.walk(ast.parse(p.read_text())):
            module = (n.module or "") if isinstance(n, ast.ImportFrom) else ""
            if module.startswith("ccbench.instruments."):
                found.append(f"{p.name}:{n.lineno}: {module}")
    assert found == []


def test_the_sampled_queue_is_the_samplers_part(tmp_path: Path) -> None:
    shutil.copy(CAP / "qdisc" / "qdisc-rt1-2cubic-100m.txt", tmp_path / "qdisc-rt1.txt")
    shutil.copy(CAP / "qdisc" / "tc-before-2cubic-100m.json", tmp_path / layout.tc(BEFORE))
    shutil.copy(CAP / "qdisc" / "tc-after-2cubic-100m.json", tmp_path / layout.tc(AFTER))
    qs = QdiscSampler(node="rt1", dev="to-dl", interval_s=0.05)
    rd = RawDir(tmp_path)
    got = instruments.summary_parts(rd, spec(), {"qdisc": qs}, t0=T0)
    q = got.parts["queue"]
    assert q["sampled"] and q["samples"] == 250 and q["file"] == "qdisc-rt1.txt"
    assert q["drops_check"]["counters"] == 318 and rd.problems == []
    # without the traffic's start its samples cannot be placed: a problem, not numbers
    rd = RawDir(tmp_path)
    got = instruments.summary_parts(rd, spec(), {"qdisc": qs})
    assert got.parts["queue"] == {"sampled": False, "notes": ["qdisc-rt1.txt: no samples"]}
    assert damaged_files(rd.problems) == ["qdisc-rt1.txt"]


def test_a_run_without_a_samplers_record(tmp_path: Path) -> None:
    """Made before queue sampling (no records at all): the part says so; a run of this
    layout that did not sample (a lab's own network, sampling off) has none."""
    rd = RawDir(tmp_path)
    old = instruments.summary_parts(rd, spec(), {}, before_records=True)
    assert old.parts["queue"] == {"sampled": False, "notes": [
        "no queue samples: the run was made before ccbench sampled the queue"]}  # fmt: skip
    assert "queue" not in instruments.summary_parts(rd, spec(), {}).parts
    off = instruments.summary_parts(rd, spec(qdisc_interval_s=0), {}, before_records=True)
    assert "queue" not in off.parts


def test_the_bottleneck_bql_is_read_by_its_instrument_onto_its_nic(tmp_path: Path) -> None:
    """A read captured here (a virtio_net NIC's one queue) before and after: keys of the
    NIC record of the node and interface the instrument recorded."""
    shutil.copy(CAP / "nic" / "bql-virtio_net-eth0.txt", tmp_path / layout.bql(BEFORE))
    shutil.copy(CAP / "nic" / "bql-virtio_net-eth0.txt", tmp_path / layout.bql(AFTER))
    rd = RawDir(tmp_path)
    got = instruments.summary_parts(rd, spec(), {"tx_queue_limits": TxQueueLimits("rt1", "eth0")})
    queue = {"queue": 0, "limit": 2020, "limit_max": 1879048192, "inflight": 0}
    assert got.nics == {("rt1", "eth0"): {"bql_before": [queue], "bql_after": [queue]}}
    assert "tx_queue_limits" not in got.parts and rd.problems == []
    (tmp_path / layout.bql(AFTER)).write_text("garbage\n")
    got = instruments.summary_parts(rd, spec(), {"tx_queue_limits": TxQueueLimits("rt1", "eth0")})
    assert got.nics == {("rt1", "eth0"): {"bql_before": [queue]}}
    assert damaged_files(rd.problems) == ["bql-after.txt"]


def test_a_run_from_before_the_records_still_has_its_routers_cpu() -> None:
    """Its meta.json has no `instruments`; the router's CPU reads its cpu-*.txt anyway,
    and the summary's part is the one a run with the record gets."""
    s = summarize(LEDGER_RUN)
    assert s["router_cpu"] is not None and s["router_cpu"]["steal_pct"] is not None
    assert not [f for f in damaged_files(s["reasons"]) if f.startswith("cpu-")]


def test_a_run_of_this_layout_gives_the_part_only_with_the_record(tmp_path: Path) -> None:
    shutil.copytree(LEDGER_RUN, tmp_path / "raw")
    raw = tmp_path / "raw"
    edit_meta(raw)  # today's layout: the instruments' records, none here
    assert "router_cpu" not in summarize(raw)
    edit_meta(raw, {"router_cpu": {"node": "rt1"}})
    assert summarize(raw)["router_cpu"] == summarize(LEDGER_RUN)["router_cpu"]
