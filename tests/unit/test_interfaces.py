"""The interfaces instrument on a real run's reads (tests/captures/interfaces): what
each interface carried and dropped over the traffic, the two ends of each veth pair
agreeing, and the bottleneck router's packets in minus packets out being the drops its
queue counted in the same run."""

from __future__ import annotations

import shutil
from pathlib import Path

from ccbench import instruments
from ccbench.instruments.interfaces import READ, Interfaces, file
from ccbench.layout import AFTER, BEFORE, RawDir
from ccbench.reasons import Code, Reason
from ccbench.run_record import RunRecord
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.summarize.bottleneck import bottleneck_of
from tests.conftest import damaged_files

CAP = Path(__file__).resolve().parents[1] / "captures" / "interfaces"
NODES = ["s1", "s2", "rt1", "dl", "rt2", "r1", "r2"]


def spec() -> RunSpec:
    return RunSpec(topology=Topology(pairs=2),
                   flows=(Flow(pair=1, cc="cubic", duration_s=3),
                          Flow(pair=2, cc="cubic", duration_s=3)))  # fmt: skip


def _part(raw: Path) -> tuple[dict, list[Reason]]:
    rd = RawDir(raw)
    part = Interfaces(nodes=NODES).summary_part(rd, spec())
    return part.value, rd.problems


def test_each_interface_over_the_traffic_from_a_real_run() -> None:
    got, problems = _part(CAP)
    assert problems == [] and list(got) == NODES
    # A veth pair's ends count the same packets (read one after the other: dl sent
    # rt1 one packet between its and rt1's read).
    assert got["s1"]["to-rt1"]["tx_packets"] == got["rt1"]["to-s1"]["rx_packets"] == 14473
    assert got["r1"]["to-rt2"]["rx_packets"] == got["rt2"]["to-r1"]["tx_packets"] == 14335
    assert got["dl"]["to-rt1"]["tx_packets"] - got["rt1"]["to-dl"]["rx_packets"] == 1
    # rt1 forwards what the senders sent, less what its bottleneck queue dropped.
    rt1 = got["rt1"]
    into = rt1["to-s1"]["rx_packets"] + rt1["to-s2"]["rx_packets"]
    dropped = bottleneck_of(RawDir(CAP))["queue"]["dropped"]
    assert dropped == 194
    assert into - rt1["to-dl"]["tx_packets"] == dropped + 1  # + one local packet of rt1's
    # No interface dropped or errored: every loss of this run was the queue's.
    counts = [v for node in got.values() for dev in node.values()
              for k, v in dev.items() if not k.endswith("_packets")]  # fmt: skip
    assert counts and not any(counts)
    # The part is a typed field of the record, declared only by the instrument.
    assert RunRecord.model_fields["interfaces"].annotation == Interfaces.summary_type | None
    RunRecord.model_validate({**_minimal_record(), "interfaces": got})


def test_a_missing_or_damaged_read_is_one_problem(tmp_path: Path) -> None:
    for p in CAP.glob("interfaces-*.json"):
        shutil.copy(p, tmp_path)
    (tmp_path / file("s2", AFTER)).unlink()
    (tmp_path / file("r2", BEFORE)).write_text("[{")
    # rt2's reads swapped: its busy interfaces' counters went down
    before, after = (tmp_path / file("rt2", w) for w in (BEFORE, AFTER))
    text = before.read_text()
    before.write_text(after.read_text())
    after.write_text(text)
    got, problems = _part(tmp_path)
    assert sorted(got) == ["dl", "r1", "rt1", "rt2", "s1"]
    assert sorted(got["rt2"]) == ["lo"]  # the one interface whose counters did not go down
    assert len(problems) == 5, problems
    assert sorted(damaged_files(problems)) == [
        f"{file('r2', BEFORE)}/{file('r2', AFTER)}", file("s2", AFTER)]  # fmt: skip
    went_down = [p.evidence["file"] for p in problems if p.code == Code.PLAUSIBILITY]
    assert went_down == 3 * [file("rt2", AFTER)]


class _Ex:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []


class _Testbed:
    def node_os(self) -> dict[str, str]:
        return {"s1": "freebsd", "rt1": "linux", "dl": "dummynet", "r1": "linux"}


def test_it_reads_every_linux_node_and_is_registered() -> None:
    ins = Interfaces.for_run(_Testbed(), spec())  # type: ignore[arg-type]
    assert ins is not None and ins.nodes == ["rt1", "r1"] and ins.hosts() == ["rt1", "r1"]
    assert ins.snapshots(None, BEFORE) == [  # type: ignore[arg-type]
        ("rt1", READ, "interfaces-rt1-before.json"),
        ("r1", READ, "interfaces-r1-before.json"),
    ]
    assert Interfaces.from_record(ins.record_json()) == ins
    assert instruments.REGISTRY["interfaces"] is Interfaces


def _minimal_record() -> dict:
    return {"run_id": "x", "scenario": "s", "variant": "v", "repetition": 1, "spec": {},
            "started_unix": None, "flows": [], "throughput_sum_bps": None,
            "utilization_pct": None, "jain": None, "bottleneck": {"drops": None},
            "calibration": {}, "valid": True, "reasons": []}  # fmt: skip
