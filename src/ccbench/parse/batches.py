"""Group a stream of records into columnar batches of a bounded number of rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where a batch is made: `ccbench run` and `matrix` need none
    import pyarrow as pa

BATCH_ROWS = 65536


def batched_records(
    records: Iterable[dict[str, Any]], schema: pa.Schema, rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """RecordBatches of `schema` with at most `rows` rows each (memory: one batch)."""
    import pyarrow as pa

    if rows < 1:
        raise ValueError("a batch needs at least one row")
    buf: list[dict[str, Any]] = []
    for rec in records:
        buf.append(rec)
        if len(buf) >= rows:
            yield pa.RecordBatch.from_pylist(buf, schema=schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_pylist(buf, schema=schema)


def complete_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline) of each complete line of a file read
    as a stream. A last line without a newline was cut mid-write (a sampler stopped
    by a signal) and is dropped; a line without one that is NOT last means the lines
    lost their newlines (e.g. str.splitlines()): ValueError, not silence."""
    cut: int | None = None
    for n, line in enumerate(lines, start=1):
        if cut is not None:
            raise ValueError(
                f"line {cut} has no newline but is not the last: give lines with their "
                "newlines (an open file), or newlines=False"
            )
        if line.endswith("\n"):
            yield n, line[:-1]
        else:
            cut = n
