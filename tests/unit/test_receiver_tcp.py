"""The receiver_tcp instrument on a real run's reads (tests/captures/receiver-tcp): each
Linux receiver's TCP receive side over the traffic (after minus before), its plan per
receiver, and its record and part typed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ccbench import instruments
from ccbench.instruments import BadRecord
from ccbench.instruments.receiver_tcp import (
    COUNTS,
    DROPS,
    READ,
    ReceiverTcp,
    ReceiverTcpCounters,
    file,
)
from ccbench.layout import AFTER, BEFORE, RawDir
from ccbench.parse.nstat import parse_nstat
from ccbench.run_record import RunRecord
from ccbench.spec import Flow, Recorded, RunSpec, Topology
from ccbench.summarize.bottleneck import bottleneck_of
from tests.conftest import damaged_files

CAP = Path(__file__).resolve().parents[1] / "captures" / "receiver-tcp"
RECEIVERS = ["r1", "r2"]


def spec(record: bool = True) -> RunSpec:
    return RunSpec(topology=Topology(pairs=2),
                   flows=(Flow(pair=1, cc="cubic", duration_s=3),
                          Flow(pair=2, cc="cubic", duration_s=3)),
                   record=(Recorded("receiver_tcp", ()),) if record else ())  # fmt: skip


def _part(raw: Path) -> tuple[dict[str, Any], list[str]]:
    rd = RawDir(raw)
    part = ReceiverTcpCounters(nodes=RECEIVERS).summary_part(rd, spec())
    return part.value, rd.problems


def _kernel(name: str, raw: Path = CAP) -> dict[str, int]:
    return json.loads((raw / name).read_text())["kernel"]


def test_the_capture_parses_as_its_namespaces_counters() -> None:
    """Golden: every read is nstat's JSON of 395 kernel counters, as json reads it."""
    for node in RECEIVERS:
        for when in (BEFORE, AFTER):
            snap = parse_nstat((CAP / file(node, when)).read_text())
            assert snap.source == "kernel"
            assert snap.counters == _kernel(file(node, when)) and len(snap.counters) == 395
            assert set(DROPS) | set(COUNTS) <= set(snap.counters)  # this kernel has them all


def test_each_receiver_after_minus_before_from_a_real_run() -> None:
    got, problems = _part(CAP)
    assert problems == [] and list(got) == RECEIVERS
    for node in RECEIVERS:
        before, after = _kernel(file(node, BEFORE)), _kernel(file(node, AFTER))
        part = got[node]
        for counter, key in (DROPS | COUNTS).items():
            assert part[key] == after[counter] - before[counter], (node, counter)
        assert part["raw"] == [file(node, BEFORE), file(node, AFTER)]
        ReceiverTcp.model_validate(part)
    # r1's reads before were not zero (the calibration's traffic): the part is the increase
    assert _kernel(file("r1", BEFORE))["TcpExtTCPRcvCoalesce"] == 2
    assert got["r1"]["coalesced"] == 5650 and got["r2"]["coalesced"] == 5415
    # Every retransmission was a bottleneck drop: the receivers' TCP dropped nothing, and
    # each receiver queued out of order behind the holes those drops left.
    dropped = bottleneck_of(RawDir(CAP))["queue"]["dropped"]
    retrans = sum(_kernel(f"tcp-counters-{s}-{AFTER}.json")["TcpRetransSegs"]
                  - _kernel(f"tcp-counters-{s}-{BEFORE}.json")["TcpRetransSegs"]
                  for s in ("s1", "s2"))  # fmt: skip
    assert dropped == retrans == 280
    assert all(got[n]["dropped_segments"] == 0 for n in RECEIVERS)
    assert got["r1"]["ofo_queued"] == 594 and got["r2"]["ofo_queued"] == 458
    # The part is a typed field of the record, declared only by the instrument.
    field = RunRecord.model_fields["receiver_tcp"]
    assert field.annotation == ReceiverTcpCounters.summary_type | None


def test_drops_are_the_four_counters_summed(tmp_path: Path) -> None:
    """The capture's r1 reads with each drop counter raised by a different amount after
    (no capture here has a real drop, README): each lands in its field, their sum in
    dropped_segments; a counter the kernel lacks is null and counts 0."""
    for p in CAP.glob("receiver-tcp-r1-*.json"):
        shutil.copy(p, tmp_path)
    after = json.loads((tmp_path / file("r1", AFTER)).read_text())
    raised = dict(zip(DROPS, (3, 5, 7, 11), strict=True))
    for counter, n in raised.items():
        after["kernel"][counter] += n
    del after["kernel"]["TcpExtTCPOFOMerge"]
    (tmp_path / file("r1", AFTER)).write_text(json.dumps(after))
    rd = RawDir(tmp_path)
    got = ReceiverTcpCounters(nodes=["r1"]).summary_part(rd, spec()).value["r1"]
    assert rd.problems == []
    assert {DROPS[c]: got[DROPS[c]] for c in DROPS} == {DROPS[c]: n for c, n in raised.items()}
    assert got["dropped_segments"] == sum(raised.values())
    assert got["ofo_duplicates"] is None


def test_a_missing_or_damaged_read_is_one_problem(tmp_path: Path) -> None:
    for p in CAP.glob("receiver-tcp-*.json"):
        shutil.copy(p, tmp_path)
    (tmp_path / file("r2", AFTER)).unlink()
    got, problems = _part(tmp_path)
    assert list(got) == ["r1"] and damaged_files(problems) == [file("r2", AFTER)]
    (tmp_path / file("r2", AFTER)).write_text("{")
    got, problems = _part(tmp_path)
    pair = f"{file('r2', BEFORE)}/{file('r2', AFTER)}"
    assert list(got) == ["r1"] and damaged_files(problems) == [pair]
    assert "not nstat counters" in problems[0].text  # the file's own error, named
    # r1's reads swapped: its counters went down
    before, after = (tmp_path / file("r1", w) for w in (BEFORE, AFTER))
    text = before.read_text()
    before.write_text(after.read_text())
    after.write_text(text)
    got, problems = _part(tmp_path)
    assert got == {} and len(problems) == 2
    assert file("r1", AFTER) in damaged_files(problems)


class _Driver:
    def __init__(self, os: str) -> None:
        self.os = os


class _Testbed:
    def __init__(self, oses: dict[str, str]) -> None:
        self.oses = oses

    def driver(self, node: str) -> _Driver:
        return _Driver(self.oses[node])


def test_its_plan_is_nstat_on_each_linux_receiver_when_asked() -> None:
    tb: Any = _Testbed({"s1": "freebsd", "s2": "linux", "r1": "linux", "r2": "linux"})
    assert ReceiverTcpCounters.for_run(tb, spec(record=False)) is None  # not asked
    ins = ReceiverTcpCounters.for_run(tb, spec())
    assert ins is not None and ins.nodes == ["r1", "r2"] and ins.hosts() == ["r1", "r2"]
    assert READ == ["nstat", "-asz", "--json"]
    for when in (BEFORE, AFTER):
        assert ins.snapshots(None, when) == [  # type: ignore[arg-type]
            ("r1", ["nstat", "-asz", "--json"], f"receiver-tcp-r1-{when}.json"),
            ("r2", ["nstat", "-asz", "--json"], f"receiver-tcp-r2-{when}.json"),
        ]
    # a receiver of no Linux kernel is left out; none at all: the instrument does not apply
    assert ReceiverTcpCounters.for_run(_Testbed({"r1": "freebsd", "r2": "linux"}),  # type: ignore[arg-type]
                                       spec()).nodes == ["r2"]  # type: ignore[union-attr]  # fmt: skip
    assert ReceiverTcpCounters.for_run(_Testbed({"r1": "freebsd", "r2": "freebsd"}),  # type: ignore[arg-type]
                                       spec()) is None  # fmt: skip
    assert ReceiverTcpCounters.from_record(ins.record_json()) == ins
    with pytest.raises(BadRecord):
        ReceiverTcpCounters.from_record({"nodes": "r1"})
    assert instruments.REGISTRY["receiver_tcp"] is ReceiverTcpCounters
    assert instruments.record_option(["receiver_tcp"]) == (Recorded("receiver_tcp", ()),)
