"""A run's time series written to timeseries.parquet as its rows are read, in row groups
(pyarrow's ParquetWriter), never held whole.

Rows come in parts, pandas DataFrames or Arrow tables of some of timeseries.COLUMNS, in
the order the table has always had; a table (a siftr log's rows: millions) is never
converted to pandas, only given the table's other columns (null) as it is written. A
sampler file's rows count only when the whole file reads (a file that does not parse
gives no rows): they are held per file (`FileRows`), in memory up to SPILL_ROWS and
beyond that in a temporary Arrow IPC file beside the output, and join the table when
the file is done (`Sink.commit`) or vanish (`FileRows.discard`).

Same table as the whole-frame write (timeseries._frame, then DataFrame.to_parquet):
while only DataFrames came and they fit in one row group (GROUP_ROWS) they are written
exactly that way at the end; otherwise every part is given _frame's columns and types,
with `retransmits` as float64 (what concatenating iperf3's integer column with a
sampler's missing one gives; only a table of iperf3 rows alone kept it int64, and such
a table never streams: iperf3 gives one row per flow and interval).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ccbench.errors import CcbenchError
from ccbench.timeseries_stats import INTERVAL_SOURCES, Part, SeriesStats

GROUP_ROWS = 1 << 16  # rows per row group once streaming (about 7 MB in memory)
SPILL_ROWS = 1 << 15  # a file's rows held in memory before they go to its spill file


class Series:
    """A judged run's time series: a parquet file at a temporary name, removed when
    this object goes unless it was moved into place (`move_to`)."""

    def __init__(self, path: Path, rows: int) -> None:
        self.path, self.rows = path, rows
        self._gone = weakref.finalize(self, _unlink, path)

    def __len__(self) -> int:
        return self.rows

    def frame(self) -> pd.DataFrame:
        return pd.read_parquet(self.path)

    def move_to(self, dest: Path) -> None:
        """Rename the file to `dest` (same file system: the run directory)."""
        os.replace(self.path, dest)
        self._gone.detach()

    def discard(self) -> None:
        self._gone()


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A full disk or a vanished directory while writing: one line naming the run
    directory (the output's)."""
    try:
        yield
    except OSError as e:
        raise CcbenchError(f"{path.parent}: cannot write its outputs ({e.strerror or e})") from None


class FileRows:
    """One sampler file's rows and statistics, until the file is read whole. Parts are
    final rows, or (`finish` given: siftr2, whose rows find their flow in the footer)
    Arrow tables that `finish` makes final when the file is done. A file's parts are
    all DataFrames or all tables."""

    def __init__(self, sink: Sink, finish: Callable[[pa.Table], pa.Table] | None):
        self._sink = sink
        self._finish = finish
        self._parts: list[Part] = []
        self._rows = 0
        self._spill: tuple[Path, pa.ipc.RecordBatchFileWriter] | None = None
        self.stats = SeriesStats(sink.stats.sender_sources, sink.stats.bound,
                                 sink.stats.mss_bytes)  # fmt: skip

    def add(self, part: Part) -> None:
        if not len(part):
            return
        if self._finish is None:
            self.stats.add(part)
        self._parts.append(part)
        self._rows += len(part)
        if self._rows >= SPILL_ROWS:
            with _writing(self._sink.path):
                self._spill_parts()

    def _spill_parts(self) -> None:
        # Final DataFrames go as the table will have them (converted once); tables as
        # they are.
        if isinstance(self._parts[0], pa.Table):
            table = pa.concat_tables(self._parts)
        else:
            table = self._sink.table(self._parts)
        if self._spill is None:
            fd, name = tempfile.mkstemp(prefix=".spill-", suffix=".arrow",
                                        dir=self._sink.path.parent)  # fmt: skip
            os.close(fd)
            self._spill = (Path(name), pa.ipc.new_file(name, table.schema))
        self._spill[1].write_table(table)
        self._parts, self._rows = [], 0

    def parts(self) -> Iterator[Part]:
        """The rows, in order, final: spilled ones as tables, read back a batch at a
        time; the others as they were added."""
        if self._spill is not None:
            path, writer = self._spill
            writer.close()
            with pa.OSFile(str(path), "rb") as f:
                reader = pa.ipc.open_file(f)
                for i in range(reader.num_record_batches):
                    table = pa.Table.from_batches([reader.get_batch(i)])
                    yield table if self._finish is None else self._finished(table)
        for p in self._parts:
            yield p if self._finish is None else self._finished(p)

    def _finished(self, part: pa.Table) -> pa.Table:
        assert self._finish is not None
        part = self._finish(part)
        self.stats.add(part)
        return part

    def discard(self) -> None:
        self._parts = []
        if self._spill is not None:
            path, writer = self._spill
            with contextlib.suppress(Exception):
                writer.close()
            path.unlink(missing_ok=True)
            self._spill = None


class Sink:
    """The time series being written to `path`; `close()` returns it as a Series."""

    def __init__(self, path: Path, run_id: str, frame: Callable[[list[pd.DataFrame]],
                 pd.DataFrame], stats: SeriesStats) -> None:  # fmt: skip
        self.path, self.run_id, self.stats = path, run_id, stats
        self._frame = frame  # timeseries._frame: the table's columns and types
        self._held: list[Part] = []  # rows not written yet
        self._held_rows = 0
        self._samplers = False  # rows from another source than iperf3 were taken
        self._writer: pq.ParquetWriter | None = None
        # the streamed table's schema: what _frame's columns and types give in Arrow
        one = pd.DataFrame({"flow": [0], "source": ["-"], "t_s": [0.0]})
        self._schema = pa.Schema.from_pandas(self._typed([one]), preserve_index=False)
        self.rows = 0

    def file_rows(self, finish: Callable[[pa.Table], pa.Table] | None = None) -> FileRows:
        return FileRows(self, finish)

    def table(self, parts: list[pd.DataFrame]) -> pa.Table:
        """Parts (with or without run_id) as the streamed table has them."""
        return pa.Table.from_pandas(self._typed(parts), schema=self._schema, preserve_index=False)

    def _typed(self, parts: list[pd.DataFrame]) -> pd.DataFrame:
        df = self._frame([p.assign(run_id=self.run_id) for p in parts])
        return df.astype({"retransmits": "float64"})

    def _widen(self, part: pa.Table) -> pa.Table:
        """An Arrow part with the table's columns: run_id, and null where it has none."""
        n, have = part.num_rows, set(part.column_names)
        cols = [part.column(f.name).cast(f.type) if f.name in have
                else pa.repeat(pa.scalar(self.run_id, f.type), n) if f.name == "run_id"
                else pa.nulls(n, f.type) for f in self._schema]  # fmt: skip
        return pa.Table.from_arrays(cols, schema=self._schema)

    def add(self, part: pd.DataFrame) -> None:
        """Rows that count as they come (iperf3's)."""
        if len(part):
            self.stats.add(part)
            with _writing(self.path):
                self._take(part)

    def commit(self, rows: FileRows) -> None:
        """A sampler file read whole: its rows join the table."""
        try:
            with _writing(self.path):
                for part in rows.parts():
                    self._take(part)
        finally:
            rows.discard()
        self.stats.merge(rows.stats)

    def _take(self, part: Part) -> None:
        n = len(part)
        if not n:
            return
        if isinstance(part, pa.Table):
            self._samplers = True  # only a sampler file's rows are spilled as tables
        else:
            intervals = part["source"].isin(INTERVAL_SOURCES)
            self._samplers = self._samplers or not bool(intervals.all())
        self._held.append(part)
        self._held_rows += n
        self.rows += n
        if self._held_rows >= GROUP_ROWS and self._samplers:
            self._write_held()

    def _write_held(self) -> None:
        """The held rows as row groups (streaming from here on)."""
        tables: list[pa.Table] = []
        frames: list[pd.DataFrame] = []  # consecutive frames, converted together
        for p in [*self._held, None]:
            if isinstance(p, pd.DataFrame):
                frames.append(p)
                continue
            if frames:
                tables.append(self.table(frames))
                frames = []
            if p is not None:
                tables.append(self._widen(p))
        self._held, self._held_rows = [], 0
        if self._writer is None:
            # Dictionary pages pay off for the repeating columns, not for t_s (a new
            # value each row): trying them there only costs time.
            dictionary = [n for n in self._schema.names if n != "t_s"]
            self._writer = pq.ParquetWriter(self.path, self._schema, use_dictionary=dictionary)
        self._writer.write_table(pa.concat_tables(tables), row_group_size=GROUP_ROWS)

    def close(self) -> Series:
        with _writing(self.path):
            if self._writer is None and not any(isinstance(p, pa.Table) for p in self._held):
                # Never streamed: the whole-frame write, as ever.
                self._frame([p.assign(run_id=self.run_id) for p in self._held]).to_parquet(
                    self.path, index=False)  # fmt: skip
            else:
                if self._held:
                    self._write_held()
                assert self._writer is not None
                self._writer.close()
        self._held = []
        return Series(self.path, self.rows)

    def abort(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self.path.unlink(missing_ok=True)
