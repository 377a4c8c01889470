"""Read a siftr/siftr2 log as a stream of typed columnar batches, in bounded memory.

A FreeBSD sender at 1 Gbit/s logs millions of records per run (sys/netinet/siftr.c logs every packet
but 1 in ppl), so the log
is never held whole: `SiftrReader` takes a text stream (or any iterable of text pieces,
e.g. a file's lines) and yields pyarrow RecordBatches of one block of text each
(`block_chars`, 1 MiB by default: about 6,000 siftr 1.3 records). Peak memory is a
few blocks, whatever the log's length.

Each block's records go through pyarrow's C++ CSV reader with the version's column
types (the layouts of ccbench.parse.siftr); a block it cannot read the strict way
(wrong field count, a bad number, a blank line inside) is converted line by line by
the same Python converter parse_siftr always used, which either reads it or raises the
one-line error naming the line. So both paths give identical rows.

The batches have the columns of ccbench.parse.siftr.ROW_KEYS (SCHEMA). What is only
known at the end of the log, after the footer, is on the reader once the batches are
exhausted: `reader.log()` (header/footer metadata, the flows with their record counts)
and, for siftr2, each flowid's addresses and MSS (`reader.flows_by_id()`): siftr2
records carry no addresses, so their `local`/`peer`/`mss_bytes` columns are null in
the batches (parse_siftr fills them from the footer).
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
    _footer_flows,
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
_SPECIAL = ("enable_time_secs=", "disable_time_secs=")
_TIME = r"^(?P<sec>[0-9]+)(?:\.(?P<frac>[0-9]{0,6}))?$"
_NOT_A_LOG = "not a siftr log: the first line is not an enable_time_secs= header"
_SECOND = "a second enable/disable cycle; split the log first"


class _Fallback(Exception):
    """The fast path cannot read this block; the line-by-line converter will."""


def text_blocks(source: Any, block_chars: int = BLOCK_CHARS) -> Iterator[str]:
    """`source`'s text in blocks of about `block_chars` (longer only for a longer
    line) that end at a line end (the last may not). `source`: a text stream (`read`)
    or an iterable of text pieces of any size."""
    reads = hasattr(source, "read")
    pieces: Iterable[str] = iter(lambda: source.read(block_chars), "") if reads else source
    buf: list[str] = []
    size = 0
    for piece in pieces:
        buf.append(piece)
        size += len(piece)
        if size < block_chars:
            continue
        text, pos = "".join(buf), 0
        while len(text) - pos >= block_chars:
            cut = text.rfind("\n", pos, pos + block_chars) + 1 or text.find("\n", pos) + 1
            if not cut:
                break  # no line end yet: read on
            yield text[pos:cut]
            pos = cut
        buf, size = [text[pos:]], len(text) - pos
    text = "".join(buf)
    if text:
        yield text


class SiftrReader:
    """One siftr/siftr2 log. Reads the header at once (ValueError: not a siftr log,
    unknown version); iterate it (or `batches()`) once for the records; then `log()`."""

    def __init__(self, source: Any, block_chars: int = BLOCK_CHARS) -> None:
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
        self._n_min = len(self.layout.fields)
        self._n_max = None if self.layout.extra_ok else len(names)
        self._footer: tuple[int, str] | None = None  # (line number, text)
        self._counts: dict[tuple[Any, Any, Any], int] = {}
        self._log: SiftrLog | None = None
        self._started = False

    # --- reading -------------------------------------------------------------
    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.batches()

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The records, one RecordBatch (SCHEMA) per block of text with records."""
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

    def _header_line(self) -> tuple[str, str]:
        for block in self._blocks:
            start = 0
            while start < len(block):
                end = block.find("\n", start) + 1 or len(block)
                self._line += 1
                line = block[start:end]
                if line.strip():
                    if not line.startswith("enable_time_secs="):
                        raise ValueError(_NOT_A_LOG)
                    return line, block[end:]
                start = end
        raise ValueError(_NOT_A_LOG)

    def _block(self, block: str) -> Iterator[pa.RecordBatch]:
        first_no = self._line + 1
        self._line += block.count("\n") + (0 if block.endswith("\n") else 1)
        if self._footer is not None:
            if block.strip():
                raise ValueError(f"line {self._footer[0]}: {_SECOND}")
            return
        at = _special_line(block)
        batch = self._records(block if at < 0 else block[:at], first_no)
        if batch is not None:
            self._count(batch)
            yield batch
        if at >= 0:
            no = first_no + block.count("\n", 0, at)
            end = block.find("\n", at) + 1 or len(block)
            line = block[at:end]
            if line.startswith("enable_time_secs=") or block[end:].strip():
                raise ValueError(f"line {no}: {_SECOND}")
            self._footer = (no, line)

    def _records(self, text: str, first_no: int) -> pa.RecordBatch | None:
        if not text.strip():
            return None
        try:
            return self._fast(text)
        except _Fallback:
            return self._slow(text, first_no)

    def _slow(self, text: str, first_no: int) -> pa.RecordBatch:
        rows = []
        for i, line in enumerate(text.split("\n")):
            if not line.strip():
                continue
            try:
                rows.append(self._convert(line.split(",")))
            except (ValueError, IndexError) as e:
                raise ValueError(
                    f"line {first_no + i}: bad siftr {self.version} record: {e}: {line!r}"
                ) from e
        return pa.RecordBatch.from_pylist(rows, schema=SCHEMA)

    def _count(self, batch: pa.RecordBatch) -> None:
        # Records per (local, peer, flowid), in order of first appearance (as the
        # footer-less flow list has always been ordered).
        keys = ["local", "peer", "flowid"]
        table = pa.Table.from_batches([batch.select(keys)])
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
            flows=_with_record_counts(footer_flows, self._counts, self.layout),
        )

    # --- the fast path: pyarrow's CSV reader -----------------------------------
    def _fast(self, text: str) -> pa.RecordBatch:
        first = text[: text.find("\n")] if "\n" in text else text
        n = first.count(",") + 1
        if not first.strip() or n < self._n_min or (self._n_max is not None and n > self._n_max):
            raise _Fallback
        lay = self.layout
        names = list((lay.fields + lay.optional)[:n])
        names += [f"extra{i}" for i in range(n - len(names))]
        decimal = lay.base == 10
        types: dict[str, pa.DataType] = {name: pa.string() for name in names}
        if decimal:
            types.update({k: pa.int64() for k in names if k in _INT_FIELDS or k in ("srtt", "rto")})
            if lay.flowid_base == 10 and "flowid" in types:
                types["flowid"] = pa.int64()
        wanted = [k for k in names if not k.startswith("extra") and k not in ("hash", "bwnd",
                  "snd_scale", "rcv_scale", "sack", "flowtype")]  # fmt: skip
        try:
            table = csv.read_csv(
                io.BytesIO(text.encode()),
                read_options=csv.ReadOptions(column_names=names, use_threads=False),
                parse_options=csv.ParseOptions(quote_char=False, double_quote=False),
                convert_options=csv.ConvertOptions(
                    column_types=types, include_columns=wanted, null_values=[],
                    strings_can_be_null=False, quoted_strings_can_be_null=False,
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
        d = t["direction"]
        is_out, is_in = pc.equal(d, "o"), pc.equal(d, "i")
        if not pc.all(pc.or_(is_out, is_in)).as_py() and n:
            raise _Fallback
        out["direction"] = pc.if_else(is_out, "out", "in")
        if lay.time == "ms":
            out["t_s"] = pc.divide(pc.cast(num("time"), pa.float64()), 1000.0)
        else:
            out["t_s"] = self._epoch_s(t["time"])
        for src, dst in _INT_FIELDS.items():
            if src in present:
                out[dst] = num(src)
        srtt_f, rto_f = 1.0, 1.0
        if lay.rtt == "ticks":
            assert self.hz and self.tcp_rtt_scale
            srtt_f, rto_f = 1e6 / (self.tcp_rtt_scale * self.hz), 1e6 / self.hz
        out["srtt_us"] = pc.multiply(pc.cast(num("srtt"), pa.float64()), srtt_f)
        out["rto_us"] = pc.multiply(pc.cast(num("rto"), pa.float64()), rto_f)
        if "flowid" in present:
            out["flowid"] = _by_value(t["flowid"], lambda v: _flowid(v, lay.flowid_base))
        if "laddr" in present:
            key = pc.binary_join_element_wise(*(t[k] for k in ("laddr", "lport", "faddr",
                                                               "fport")), "\n")  # fmt: skip
            out["local"] = _by_value(key, lambda k: _hostport(*k.split("\n")[:2]))
            out["peer"] = _by_value(key, lambda k: _hostport(*k.split("\n")[2:]))
        arrays = [_array(out[k], f.type) if k in out else pa.nulls(n, f.type)
                  for k, f in zip(ROW_KEYS, SCHEMA, strict=True)]  # fmt: skip
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)

    def _epoch_s(self, col: pa.ChunkedArray) -> pa.Array:
        """ "sec.usec" -> seconds since enable, as (exact integer us - enable us) / 1e6."""
        parts = pc.extract_regex(col, _TIME)
        if parts.null_count:
            raise _Fallback
        sec = pc.cast(pc.struct_field(parts, [0]), pa.int64())
        frac = pc.cast(pc.utf8_rpad(pc.struct_field(parts, [1]), width=6, padding="0"),
                       pa.int64())  # fmt: skip
        us = pc.add_checked(pc.multiply_checked(sec, 1_000_000), frac)
        return pc.divide(pc.cast(pc.subtract_checked(us, self.enable_us), pa.float64()), 1e6)


def _special_line(block: str) -> int:
    """Offset of the first enable/disable line in a block of whole lines, else -1."""
    text = "\n" + block  # so a match at a line start is "\n" + prefix everywhere
    found = [at for at in (text.find("\n" + p) for p in _SPECIAL) if at >= 0]
    return min(found, default=-1)


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


_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def _hex_int64(col: pa.Array) -> np.ndarray:
    """Hex strings without prefix (siftr2 2.4's %x) -> int64, vectorised; _Fallback
    for anything else (empty, a non-hex digit, more than 15 digits)."""
    col = col.cast(pa.string())
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    data = col.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    raw = raw[offsets[0] : offsets[-1]]
    lengths = np.diff(offsets)
    if n and (lengths.min() < 1 or lengths.max() > 15):
        raise _Fallback
    nib = _HEX[raw]
    if (nib == 255).any():
        raise _Fallback
    # Each digit's weight: 16 ** (digits after it in its own string).
    ends = np.repeat(offsets[1:] - offsets[0], lengths)
    after = ends - 1 - np.arange(raw.size)
    vals = nib.astype(np.int64) << (4 * after).astype(np.int64)
    if not n:
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(vals, offsets[:-1] - offsets[0])


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
