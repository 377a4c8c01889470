"""A run's raw/meta.json as tests read and change it: through ccbench.runmeta (`load`,
`write`), never by its keys, so a test's meta.json has the layout a run writes today."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ccbench import instruments, runmeta
from ccbench.layout import RawDir
from ccbench.runmeta import RunMeta


def read_meta(raw: Path) -> RunMeta:
    """raw/meta.json as every reader reads it; a problem in it fails the test."""
    rd = RawDir(raw)
    meta = runmeta.load(rd)
    assert rd.problems == [], rd.problems
    return meta


def edit_meta(raw: Path, records: dict[str, Any] | None = None, **fields: Any) -> RunMeta:
    """raw/meta.json read, `fields` of RunMeta replaced and the instruments' `records`
    (name -> record, as meta.json keeps it) added, then written as a run writes it."""
    found, problems = instruments.from_records(records or {})
    assert problems == [], problems
    meta = read_meta(raw)
    meta = replace(meta, instruments={**meta.instruments, **found}, **fields)
    runmeta.write(raw, meta)
    return meta


def write_meta(raw: Path, records: dict[str, Any] | None = None, **fields: Any) -> RunMeta:
    """A new raw/meta.json as a run writes it: RunMeta's `fields` and the instruments'
    `records` (name -> record, as meta.json keeps it)."""
    found, problems = instruments.from_records(records or {})
    assert problems == [], problems
    meta = RunMeta(instruments=found, **fields)
    runmeta.write(raw, meta)
    return meta
