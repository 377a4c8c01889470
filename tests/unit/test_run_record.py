"""The run record composed from the registry (ccbench.run_record): every instrument's
part declared once, in its own module, and placed where summary.json shows it; the
record's own package imports no instrument."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ccbench import instruments
from ccbench.instruments.qdisc import QdiscSampler, QueueSummary
from ccbench.record import RecordFields
from ccbench.run_record import RunRecord, placed

RECORD = Path(__file__).resolve().parents[2] / "src" / "ccbench" / "record"


def test_each_part_is_its_instruments_type_and_words_in_its_place() -> None:
    kinds = [c for c in instruments.REGISTRY.values() if c.summary_key]
    for c in kinds:
        f = RunRecord.model_fields[c.summary_key or ""]
        assert f.annotation == c.summary_type | None and f.default is None, c.name
        assert f.description == c.summary_doc and c.summary_doc, c.name
        names = list(RunRecord.model_fields)
        if c.summary_after is not None:
            assert names[names.index(c.summary_key or "") - 1] == c.summary_after, c.name
    own = set(RecordFields.model_fields)
    assert set(RunRecord.model_fields) == own | {c.summary_key for c in kinds}
    assert not own & {c.summary_key for c in kinds}  # no part declared by hand


def test_parts_follow_their_field_and_chains_wait() -> None:
    # b follows a, which is placed after it in the list: b waits for a.
    got = placed(["x", "y"], [("b", "a"), ("a", "x"), ("end", None)])
    assert got == ["x", "a", "b", "y", "end"]
    # two parts after one field keep their (the registry's) order
    assert placed(["x", "y"], [("p", "x"), ("q", "x")]) == ["x", "p", "q", "y"]
    with pytest.raises(TypeError, match="c after 'nowhere'"):
        placed(["x"], [("c", "nowhere")])
    with pytest.raises(TypeError, match="'x' is a field already"):
        placed(["x"], [("x", None)])


def test_part_of_reads_an_instruments_part_typed() -> None:
    rec = RunRecord.model_construct(queue=QueueSummary(sampled=False, notes=["off"]))
    assert QdiscSampler.part_of(rec) == QueueSummary(sampled=False, notes=["off"])
    assert QdiscSampler.part_of(None) is None
    assert instruments.REGISTRY["ss"].part_of(rec) is None  # no part


def test_the_record_package_imports_no_instrument() -> None:
    for path in RECORD.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            assert not any(n.startswith("ccbench.instruments") for n in names), path
