"""Read a siftr/siftr2 log as a stream of typed columnar batches, in bounded memory.

A FreeBSD sender at 1 Gbit/s logs millions of records per run (sys/netinet/siftr.c logs
every packet but 1 in ppl), so the log is never held whole: `SiftrReader` takes a
binary file (plain or decompressed), a text stream, or any iterable of bytes or text
pieces (e.g. a file's lines), and yields pyarrow RecordBatches of one block of about
`block_chars` bytes each (1 MiB by default: about 6,000 siftr 1.3 records). Peak memory
is a few blocks, whatever the log's length.

Each block's bytes go through pyarrow's C++ CSV reader with the version's column types
(the layouts of ccbench.parse.siftr), only the fields of the columns asked for, and
pyarrow's compute functions; a block it cannot read the strict way (wrong field count,
a bad number, a blank line, an enable/disable line inside, anything not ASCII) is
converted line by line by the same Python converter parse_siftr always used, which
either reads it or raises the one-line error naming the line. So both paths give
identical rows.

The batches have the columns of ccbench.parse.siftr.ROW_KEYS (SCHEMA), or those asked
for. What is only known at the end of the log, after the footer, is on the reader once
the batches are exhausted: `reader.log()` (header/footer metadata, the flows with their
record counts) and, for siftr2, each flowid's addresses and MSS (`reader.flows_by_id()`):
siftr2 records carry no addresses, so their `local`/`peer`/`mss_bytes` columns are null
in the batches (parse_siftr fills them from the footer).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

from ccbench.parse.siftr import (
    _INT_FIELDS,
    _LAYOUTS,
    ROW_KEYS,
    SiftrFlow,
    SiftrLog,
    _fixed_us,
    _footer_flows,
    _hex_int64,
    _hostport,
    _opt_int,
    _row_converter,
    _time_us,
    _with_record_counts,
    layout_key,
    parse_header,
)

BLOCK_CHARS = 1 << 20

_FLOATS = {"t_s", "srtt_us", "rto_us"}
_STRINGS = {"direction", "flowid", "local", "peer"}
SCHEMA = pa.schema(
    [(k, pa.float64() if k in _FLOATS else pa.string() if k in _STRINGS else pa.int64())
     for k in ROW_KEYS]
)  # fmt: skip
_SPECIAL = (b"enable_time_secs=", b"disable_time_secs=")
# raw field -> its column (ROW_KEYS), where the names differ
_SOURCE_OF = {**_INT_FIELDS, "time": "t_s", "srtt": "srtt_us", "rto": "rto_us",
              "laddr": "local", "lport": "local", "faddr": "peer", "fport": "peer"}  # fmt: skip
_COUNT_KEYS = ("local", "peer", "flowid")  # a flow's records are counted by these
_DIRECTIONS = {"o": "out", "i": "in"}
_TIME = r"^(?P<sec>[0-9]+)(?:\.(?P<frac>[0-9]{0,6}))?$"
_NOT_A_LOG = "not a siftr log: the first line is not an enable_time_secs= header"
_SECOND = "a second enable/disable cycle; split the log first"


class _Fallback(Exception):
    """The fast path cannot read this block; the line-by-line converter will."""


def text_blocks(source: Any, block_chars: int = BLOCK_CHARS) -> Iterator[bytes]:
    """`source`'s bytes in blocks of about `block_chars` (longer only for a longer
    line) that end at a line end (the last may not). `source`: a binary or text stream
    (`read`) or an iterable of bytes or text pieces of any size (text as UTF-8)."""
    if isinstance(source, io.BufferedIOBase):  # a binary file, plain or decompressed
        yield from _file_blocks(source, block_chars)
        return
    pieces: Iterable[Any] = _reads(source, block_chars) if hasattr(source, "read") else source
    buf: list[bytes] = []
    size = 0
    for piece in pieces:
        if isinstance(piece, str):
            piece = piece.encode()
        buf.append(piece)
        size += len(piece)
        if size < block_chars:
            continue
        text, pos = b"".join(buf), 0
        while len(text) - pos >= block_chars:
            cut = text.rfind(b"\n", pos, pos + block_chars) + 1 or text.find(b"\n", pos) + 1
            if not cut:
                break  # no line end yet: read on
            yield text[pos:cut]
            pos = cut
        buf, size = [text[pos:]], len(text) - pos
    text = b"".join(buf)
    if text:
        yield text


def _file_blocks(f: io.BufferedIOBase, size: int) -> Iterator[bytes]:
    """Blocks read into place, each completed to its line's end (no copy of the block)."""
    while True:
        block = bytearray(size)
        n = f.readinto(block)
        if not n:
            return
        del block[n:]
        if not block.endswith(b"\n"):
            block += f.readline()
        yield block  # type: ignore[misc]  # read as bytes (find, count, decode, buffer)


def _reads(stream: Any, size: int) -> Iterator[Any]:
    while piece := stream.read(size):
        yield piece


class SiftrReader:
    """One siftr/siftr2 log. Reads the header at once (ValueError: not a siftr log,
    unknown version); iterate it (or `batches()`) once for the records; then `log()`.
    `columns`: the ROW_KEYS the batches carry, and the only fields read (with the
    direction and time; `select` changes them, once the header told the layout);
    `counts` false: the flows' record counts are not kept (their `records` None; a
    log without a footer then lists no flows)."""

    def __init__(
        self, source: Any, block_chars: int = BLOCK_CHARS, columns: Iterable[str] = ROW_KEYS,
        counts: bool = True,
    ) -> None:  # fmt: skip
        self._blocks = text_blocks(source, block_chars)
        self._line = 0  # lines before the text not yet converted
        header_line, self._rest = self._header_line()
        self.header = parse_header(header_line)
        version = self.header.get("siftrver")
        if version is None:
            raise ValueError("siftr header has no siftrver")
        self.version = version
        self.layout = _LAYOUTS[layout_key(version)]
        self.enable_us = _time_us(
            self.header["enable_time_secs"], self.header.get("enable_time_usecs", "0")
        )
        self.hz = _opt_int(self.header.get("hz"))
        self.tcp_rtt_scale = _opt_int(self.header.get("tcp_rtt_scale"))
        if self.layout.rtt == "ticks" and not (self.hz and self.tcp_rtt_scale):
            raise ValueError(f"siftr {version} header lacks hz/tcp_rtt_scale to convert srtt")
        self._convert = _row_converter(self.layout, self.enable_us, self.hz,
                                       self.tcp_rtt_scale, {})  # fmt: skip
        names = self.layout.fields + self.layout.optional
        self._counting = counts
        self.select(columns)
        self._n_min = len(self.layout.fields)
        self._n_max = None if self.layout.extra_ok else len(names)
        self._footer: tuple[int, str] | None = None  # (line number, text)
        self._counts: dict[tuple[Any, Any, Any], int] = {}
        self._log: SiftrLog | None = None
        self._started = False

    def select(self, columns: Iterable[str]) -> None:
        """The ROW_KEYS the batches carry (before they are read)."""
        want = set(columns)
        if not want <= set(ROW_KEYS):
            raise ValueError(f"no such siftr columns: {sorted(want - set(ROW_KEYS))}")
        self._keys = [k for k in ROW_KEYS if k in want]
        self._schema = pa.schema([SCHEMA.field(k) for k in self._keys])
        # the raw fields read: those of these columns, and the record counts' keys
        keys = {*self._keys, "direction", "t_s", *(_COUNT_KEYS if self._counting else ())}
        names = self.layout.fields + self.layout.optional
        self._fields = {f for f in names if _SOURCE_OF.get(f, f) in keys}

    # --- reading -------------------------------------------------------------
    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.batches()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The records, one RecordBatch (SCHEMA, or the `columns` asked for) per block
        of text with records."""
        if self._started:
            raise RuntimeError("a SiftrReader's records can be read once")
        self._started = True
        if self._rest:
            yield from self._block(self._rest)
        for block in self._blocks:
            yield from self._block(block)
        self._finish()

    def log(self) -> SiftrLog:
        """Header/footer metadata and flows (records=[]); after the batches are read."""
        if self._log is None:
            raise RuntimeError("read the batches first: the flows come with the footer")
        return self._log

    def flows_by_id(self) -> dict[str, SiftrFlow]:
        """flowid -> its flow; for siftr2, where the footer alone names addresses/MSS."""
        return {f.flowid: f for f in self.log().flows if f.flowid is not None}

    def _header_line(self) -> tuple[str, bytes]:
        for block in self._blocks:
            start = 0
            while start < len(block):
                end = block.find(b"\n", start) + 1 or len(block)
                self._line += 1
                line = block[start:end].decode()
                if line.strip():
                    if not line.startswith("enable_time_secs="):
                        raise ValueError(_NOT_A_LOG)
                    return line, block[end:]
                start = end
        raise ValueError(_NOT_A_LOG)

    def _block(self, block: bytes) -> Iterator[pa.RecordBatch]:
        if self._footer is not None:
            if not block.isspace():
                raise ValueError(f"line {self._footer[0]}: {_SECOND}")
            return
        # A block the fast path reads whole has no enable/disable line: the header has
        # no comma, the footer a `key=...` where the direction belongs, and the fast
        # path takes only "i"/"o" there. So only a block it cannot read is searched.
        try:
            batch = self._fast(block)
        except _Fallback:
            pass
        else:
            self._line += batch.num_rows  # one row per line: no blank line passes there
            yield batch
            return
        at = _special_line(block)
        # (without one, the fast path just failed on these very records)
        records = block if at < 0 else block[:at]
        batch, lines = self._records(records, self._line + 1, fast=at >= 0)
        self._line += lines
        if batch is not None:
            yield batch
        if at >= 0:
            no = self._line + 1  # the records before it end with a line end
            end = block.find(b"\n", at) + 1 or len(block)
            line = block[at:end].decode()
            if line.startswith("enable_time_secs=") or block[end:].strip():
                raise ValueError(f"line {no}: {_SECOND}")
            self._footer = (no, line)

    def _records(self, text: bytes, first_no: int, fast: bool) -> tuple[pa.RecordBatch | None, int]:
        """The block's records, and how many lines it has."""
        if not text or text.isspace():
            return None, _lines(text)
        try:
            if fast:
                batch = self._fast(text)
                return batch, batch.num_rows  # one row per line: no blank line passes
        except _Fallback:
            pass
        return self._slow(text, first_no), _lines(text)

    def _slow(self, block: bytes, first_no: int) -> pa.RecordBatch:
        rows = []
        for i, line in enumerate(block.decode().split("\n")):
            if not line.strip():
                continue
            try:
                rows.append(self._convert(line.split(",")))
            except (ValueError, IndexError) as e:
                raise ValueError(
                    f"line {first_no + i}: bad siftr {self.version} record: {e}: {line!r}"
                ) from e
        batch = pa.RecordBatch.from_pylist(rows, schema=SCHEMA)
        self._count({k: batch.column(k) for k in _COUNT_KEYS}, len(rows))
        return batch.select(self._keys)

    def _count(self, cols: dict[str, pa.Array], n: int) -> None:
        # Records per (local, peer, flowid), in order of first appearance (as the
        # footer-less flow list has always been ordered).
        if not self._counting:
            return
        keys = list(_COUNT_KEYS)
        table = pa.table({k: cols[k] if k in cols else pa.nulls(n, pa.string()) for k in keys})
        grouped = table.group_by(keys, use_threads=False).aggregate([([], "count_all")])
        for row in grouped.to_pylist():
            key = (row["local"], row["peer"], row["flowid"])
            self._counts[key] = self._counts.get(key, 0) + row["count_all"]

    def _finish(self) -> None:
        footer = parse_header(self._footer[1]) if self._footer else None
        footer_flows = _footer_flows(footer, self.layout) if footer else None
        disable_s = None
        if footer and "disable_time_secs" in footer:
            disable_us = _time_us(footer["disable_time_secs"],
                                  footer.get("disable_time_usecs", "0"))  # fmt: skip
            disable_s = disable_us / 1e6
        flows = footer_flows or []
        if self._counting:
            flows = _with_record_counts(footer_flows, self._counts, self.layout)
        self._log = SiftrLog(
            logger=self.layout.logger,
            version=self.version,
            header=self.header,
            footer=footer,
            enable_time_s=self.enable_us / 1e6,
            disable_time_s=disable_s,
            hz=self.hz,
            tcp_rtt_scale=self.tcp_rtt_scale,
            sysver=self.header.get("sysver"),
            flows=flows,
        )

    # --- the fast path: pyarrow's CSV reader -----------------------------------
    def _fast(self, text: bytes) -> pa.RecordBatch:
        first = text[: text.find(b"\n")] if b"\n" in text else text
        n = first.count(b",") + 1
        if not first.strip() or n < self._n_min or (self._n_max is not None and n > self._n_max):
            raise _Fallback
        if not text.isascii():  # anything else: checked (UTF-8) line by line
            raise _Fallback
        lay = self.layout
        names = list((lay.fields + lay.optional)[:n])
        names += [f"extra{i}" for i in range(n - len(names))]
        # Strings (direction, time, addresses, hex flowids; pyarrow's CSV reader
        # dictionary-encodes slower than its compute functions do after).
        types: dict[str, pa.DataType] = {name: pa.string() for name in names}
        numeric = pa.int64() if lay.base == 10 else pa.string()  # hex: _hex_int64
        types.update({k: numeric for k in names if k in _INT_FIELDS or k in ("srtt", "rto")})
        if lay.base == 10 and lay.flowid_base == 10 and "flowid" in types:
            types["flowid"] = pa.int64()
        wanted = [k for k in names if k in self._fields]
        try:
            table = csv.read_csv(
                pa.py_buffer(text),
                read_options=csv.ReadOptions(column_names=names, use_threads=False),
                parse_options=csv.ParseOptions(quote_char=False, double_quote=False,
                                               ignore_empty_lines=False),
                convert_options=csv.ConvertOptions(
                    column_types=types, include_columns=wanted, null_values=[],
                    strings_can_be_null=False, quoted_strings_can_be_null=False,
                    check_utf8=False,  # ASCII (checked above)
                ),
            )  # fmt: skip
            return self._columns(table.combine_chunks())
        except (pa.ArrowInvalid, OverflowError, ValueError) as e:
            raise _Fallback from e

    def _columns(self, t: pa.Table) -> pa.RecordBatch:
        lay, n = self.layout, t.num_rows
        present = set(t.column_names)

        def num(name: str) -> pa.Array:
            col = t[name].combine_chunks()
            return col if lay.base == 10 else pa.array(_hex_int64(col))

        out: dict[str, pa.Array] = {}
        out["direction"] = _by_value(t["direction"], _direction)
        if lay.time == "ms":
            out["t_s"] = pc.divide(pc.cast(num("time"), pa.float64()), 1000.0)
        else:
            out["t_s"] = self._epoch_s(t["time"].combine_chunks())
        for src, dst in _INT_FIELDS.items():
            if src in present:
                out[dst] = num(src)
        srtt_f, rto_f = 1.0, 1.0
        if lay.rtt == "ticks":
            assert self.hz and self.tcp_rtt_scale
            srtt_f, rto_f = 1e6 / (self.tcp_rtt_scale * self.hz), 1e6 / self.hz
        if "srtt" in present:
            out["srtt_us"] = pc.multiply(pc.cast(num("srtt"), pa.float64()), srtt_f)
        if "rto" in present:
            out["rto_us"] = pc.multiply(pc.cast(num("rto"), pa.float64()), rto_f)
        if "flowid" in present:
            out["flowid"] = _by_value(t["flowid"], lambda v: _flowid(v, lay.flowid_base))
        if "laddr" in present:
            out["local"] = _ends(t["laddr"], t["lport"])
        if "faddr" in present:
            out["peer"] = _ends(t["faddr"], t["fport"])
        arrays = [_array(out[k], SCHEMA.field(k).type) if k in out else
                  pa.nulls(n, SCHEMA.field(k).type) for k in self._keys]  # fmt: skip
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._count(out, n)  # last: a block that falls back is counted there
        return batch

    def _epoch_s(self, col: pa.Array) -> pa.Array:
        """ "sec.usec" -> seconds since enable, as (exact integer us - enable us) / 1e6."""
        return pc.divide(pc.cast(pc.subtract_checked(_epoch_us(col), self.enable_us),
                                 pa.float64()), 1e6)  # fmt: skip


def _epoch_us(col: pa.Array) -> pa.Array:
    """ "sec.usec" -> exact integer microseconds; other forms by a regular expression."""
    fixed = _fixed_us(col)
    if fixed is not None:
        return pa.array(fixed)
    parts = pc.extract_regex(col, _TIME)
    if parts.null_count:
        raise _Fallback
    sec = pc.cast(pc.struct_field(parts, [0]), pa.int64())
    frac = pc.cast(pc.utf8_rpad(pc.struct_field(parts, [1]), width=6, padding="0"),
                   pa.int64())  # fmt: skip
    return pc.add_checked(pc.multiply_checked(sec, 1_000_000), frac)


def _direction(v: str) -> str:
    if v not in _DIRECTIONS:
        raise _Fallback  # the converter names the line
    return _DIRECTIONS[v]


def _ends(host: pa.ChunkedArray, port: pa.ChunkedArray) -> pa.Array:
    """ "ip:port" from siftr 1.x's laddr and lport (or faddr and fport): each
    distinct pair formatted once."""
    h, p = (pc.dictionary_encode(c.combine_chunks()) for c in (host, port))
    # one integer per pair of the two dictionaries' indices
    key = h.indices.to_numpy(zero_copy_only=False).astype(np.int64) * len(p.dictionary)
    enc = pc.dictionary_encode(pa.array(key + p.indices.to_numpy(zero_copy_only=False)))
    hosts, ports = h.dictionary.to_pylist(), p.dictionary.to_pylist()
    pairs = [divmod(k, len(ports)) for k in enc.dictionary.to_pylist()]
    text = pa.array([_hostport(hosts[i], ports[j]) for i, j in pairs], pa.string())
    return pc.take(text, enc.indices)


def _special_line(block: bytes) -> int:
    """Offset of the first enable/disable line in a block of whole lines, else -1."""
    at = block.find(b"_time_secs=")  # one pass over the block for both prefixes
    while at >= 0:
        start = block.rfind(b"\n", 0, at) + 1
        if block.startswith(_SPECIAL, start):
            return start
        at = block.find(b"_time_secs=", at + 1)
    return -1


def _lines(text: bytes) -> int:
    return text.count(b"\n") + (0 if not text or text.endswith(b"\n") else 1)


def _array(col: Any, typ: pa.DataType) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return arr.cast(typ)


def _flowid(value: Any, base: int) -> str:
    return f"{value if isinstance(value, int) else int(value, base):08x}"


def _by_value(col: Any, fn: Any) -> pa.Array:
    """fn applied once per distinct value (flowids and address pairs are few)."""
    enc = pc.dictionary_encode(col).combine_chunks()
    mapped = pa.array([fn(v) for v in enc.dictionary.to_pylist()], pa.string())
    return pc.take(mapped, enc.indices)


def with_footer(log: SiftrLog, records: list[dict[str, Any]]) -> SiftrLog:
    """`log` with `records`, siftr2 rows given their flow's addresses and MSS from the
    footer (what parse_siftr returns)."""
    if log.logger == "siftr2" and log.footer is not None:
        by_id = {f.flowid: f for f in log.flows if f.flowid is not None}
        for r in records:
            flow = by_id.get(r["flowid"])
            if flow is not None:
                r["local"], r["peer"], r["mss_bytes"] = flow.local, flow.peer, flow.mss_bytes
    return replace(log, records=records)


def parse_siftr(text: str) -> SiftrLog:
    """Parse a whole siftr or siftr2 log (the version in its header picks the layout)
    into one dict per record. For long logs read batches with SiftrReader
    instead: this wraps it."""
    reader = SiftrReader(io.StringIO(text, newline=None))
    records = [row for batch in reader for row in batch.to_pylist()]
    return with_footer(reader.log(), records)
