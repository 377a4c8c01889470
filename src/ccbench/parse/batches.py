"""Group a stream of records into columnar batches of a bounded number of rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

BATCH_ROWS = 65536


def batched_records(
    records: Iterable[dict[str, Any]], schema: pa.Schema, rows: int = BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """RecordBatches of `schema` with at most `rows` rows each (memory: one batch)."""
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
