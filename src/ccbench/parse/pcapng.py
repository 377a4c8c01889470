"""Check that a pcapng file (what tcplog_dumper writes BBLog into) is whole, by walking
its block structure as a stream, in bounded memory.

The structure (the pcapng specification, draft-ietf-opsawg-pcapng, "General Block
Structure" and "Section Header Block"): a file is one or more sections, each a
Section Header Block (type 0x0A0D0D0A, a palindrome) whose byte-order magic
0x1A2B3C4D, read in the writer's byte order, fixes the order of every number in the
section; then major/minor version (1.x) and the section length (-1: not given). Every
block is `type, total length, body, total length`, the length a multiple of 4 and
repeated at the block's end. Here also: a packet or statistics block (EPB, ISB, the
obsolete PB) must name an interface that an Interface Description Block of its
section described earlier, and a section that states its length must have it.

check_pcapng() reads a binary stream once, block by block, keeping only a block's
first bytes and its trailer (bodies are read in `chunk`-sized pieces), so a
gzip/xz stream (check_pcapng_file() opens those by their magic) works as well as a
plain file. It returns the counts of what it read and, where the file breaks, a
one-line reason naming the block and its offset.
"""

from __future__ import annotations

import gzip
import lzma
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

SHB = 0x0A0D0D0A
IDB, PB, SPB, NRB, ISB, EPB, DSB = 1, 2, 3, 4, 5, 6, 10
CUSTOM, CUSTOM_NOCOPY = 0x00000BAD, 0x40000BAD
BLOCK_NAMES = {SHB: "SHB", IDB: "IDB", PB: "PB", SPB: "SPB", NRB: "NRB", ISB: "ISB",
               EPB: "EPB", DSB: "DSB", CUSTOM: "custom", CUSTOM_NOCOPY: "custom"}  # fmt: skip
_SHB_MAGIC = b"\x0a\x0d\x0d\x0a"
_BOM_LE, _BOM_BE = b"\x4d\x3c\x2b\x1a", b"\x1a\x2b\x3c\x4d"
_PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
_GZIP, _XZ = b"\x1f\x8b", b"\xfd7zXZ\x00"
_CHUNK = 1 << 20


@dataclass
class PcapngCheck:
    """What the walk read: whole blocks, sections, interfaces (IDBs) and bytes (of the
    pcapng, after decompression), blocks per type; `reason` is None for a whole file,
    else where it breaks (the counts then stop before that block)."""

    blocks: int = 0
    sections: int = 0
    interfaces: int = 0
    bytes: int = 0
    block_types: dict[int, int] = field(default_factory=dict)
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


class Readable(Protocol):
    """A binary stream: a file opened "rb", gzip.GzipFile, lzma.LZMAFile, io.BytesIO."""

    def read(self, size: int, /) -> bytes: ...


class _Broken(Exception):
    """Where the file breaks (the message is the reason)."""


def check_pcapng(stream: Readable, chunk: int = _CHUNK) -> PcapngCheck:
    """Walk the blocks of the pcapng read from `stream` (binary, read() only)."""
    out = PcapngCheck()
    try:
        _walk(stream, out, chunk)
    except _Broken as e:
        out.reason = str(e)
    except (EOFError, OSError, zlib.error, lzma.LZMAError) as e:
        out.reason = f"the stream breaks after {out.bytes} bytes of pcapng: {e}"
    return out


def check_pcapng_file(path: str | Path, chunk: int = _CHUNK) -> PcapngCheck:
    """check_pcapng() of a file, decompressed first if it starts with the gzip or xz
    magic (a capture may be kept compressed)."""
    with open(path, "rb") as raw:
        magic = raw.read(6)
    if magic.startswith(_GZIP):
        with gzip.open(path, "rb") as gz:
            return check_pcapng(gz, chunk)
    if magic.startswith(_XZ):
        with lzma.open(path, "rb") as xz:
            return check_pcapng(xz, chunk)
    with open(path, "rb") as f:
        return check_pcapng(f, chunk)


def _read(stream: Readable, n: int) -> bytes:
    """Up to n bytes (fewer only at the end of the stream)."""
    parts, got = [], 0
    while got < n:
        b = stream.read(n - got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _skip(stream: Readable, n: int, chunk: int) -> int:
    """Read and drop n bytes; how many there were."""
    got = 0
    while got < n:
        b = stream.read(min(chunk, n - got))
        if not b:
            break
        got += len(b)
    return got


def _walk(stream: Readable, out: PcapngCheck, chunk: int) -> None:
    order = ""  # struct byte order of the current section
    shb_at = section_at = section_len = 0  # its SHB's offset, the offset after it, its
    idbs = 0  # stated length (-1: none); IDBs in the current section
    while True:
        at, n = out.bytes, out.blocks + 1
        head = _read(stream, 8)
        if not head:
            break
        if len(head) < 8:
            raise _Broken(f"truncated: {len(head)} bytes at offset {at}, after block "
                          f"{out.blocks}: less than a block header")  # fmt: skip
        if head[:4] == _SHB_MAGIC:
            name = "SHB"
            bom = _read(stream, 4)
            if len(bom) < 4:
                raise _Broken(f"truncated: block {n} (SHB) at offset {at} ends in its header")
            if bom not in (_BOM_LE, _BOM_BE):
                raise _Broken(f"block {n} (SHB) at offset {at}: byte-order magic "
                              f"{bom.hex()} is not 1a2b3c4d in either order")  # fmt: skip
            _section_end(out, at, shb_at, section_at, section_len)
            order = "<" if bom == _BOM_LE else ">"
            (length,) = struct.unpack(order + "I", head[4:])
            _check_length(length, 28, n, name, at)
            fixed = _read(stream, 12)
            if len(fixed) < 12:
                raise _Broken(_cut(n, name, at, length, 12 + len(fixed)))
            major, minor, slen = struct.unpack(order + "HHq", fixed)
            if major != 1:
                raise _Broken(f"block {n} (SHB) at offset {at}: pcapng version "
                              f"{major}.{minor}, not 1.x")  # fmt: skip
            body_read = 16  # bytes read after the type and length
            btype, shb_at, section_at, section_len, idbs = SHB, at, at + length, slen, 0
            out.sections += 1
        else:
            if not order:
                raise _Broken(_not_pcapng(head))
            btype, length = struct.unpack(order + "II", head)
            name = BLOCK_NAMES.get(btype, f"type {btype:#x}")
            _check_length(length, 12, n, name, at)
            want = min(4, length - 12)
            first = _read(stream, want)
            body_read = len(first)
            if body_read < want:
                raise _Broken(_cut(n, name, at, length, 8 + body_read))
            if btype in (EPB, ISB, PB):
                size = 2 if btype == PB else 4
                if body_read < size:
                    raise _Broken(f"block {n} ({name}) at offset {at}: total length {length} "
                                  "leaves no room for its interface id")  # fmt: skip
                (iface,) = struct.unpack_from(order + ("H" if size == 2 else "I"), first)
                if iface >= idbs:
                    raise _Broken(f"block {n} ({name}) at offset {at}: interface {iface}, "
                                  f"but its section has {idbs} IDB(s) before it")  # fmt: skip
        rest = length - 8 - body_read - 4  # body bytes not read yet
        got = _skip(stream, rest, chunk)
        if got < rest:
            raise _Broken(_cut(n, name, at, length, 8 + body_read + got))
        tail = _read(stream, 4)
        if len(tail) < 4:
            raise _Broken(_cut(n, name, at, length, length - 4 + len(tail)))
        (trailer,) = struct.unpack(order + "I", tail)
        if trailer != length:
            raise _Broken(f"block {n} ({name}) at offset {at}: total length {length} at "
                          f"its start, {trailer} at its end")  # fmt: skip
        if btype == IDB:
            idbs += 1
            out.interfaces += 1
        out.blocks += 1
        out.bytes += length
        out.block_types[btype] = out.block_types.get(btype, 0) + 1
    _section_end(out, out.bytes, shb_at, section_at, section_len)
    if out.blocks == 0:
        raise _Broken("empty: no Section Header Block")


def _check_length(length: int, minimum: int, n: int, name: str, at: int) -> None:
    if length < minimum or length % 4:
        raise _Broken(f"block {n} ({name}) at offset {at}: total length {length} is "
                      f"{'not a multiple of 4' if length % 4 else f'below {minimum}'}")  # fmt: skip


def _cut(n: int, name: str, at: int, length: int, have: int) -> str:
    return (f"truncated: block {n} ({name}) at offset {at} is {length} bytes, "
            f"the file ends {have} bytes into it")  # fmt: skip


def _section_end(out: PcapngCheck, end: int, shb_at: int, section_at: int,
                 section_len: int) -> None:  # fmt: skip
    """A section that stated its length must end where that says."""
    if out.sections and section_len != -1 and end - section_at != section_len:
        raise _Broken(f"section {out.sections} (SHB at offset {shb_at}) states "
                      f"{section_len} bytes but holds {end - section_at}")  # fmt: skip


def _not_pcapng(head: bytes) -> str:
    if head[:4] in _PCAP_MAGICS:
        return "not pcapng: a classic pcap file (magic a1b2c3d4/a1b23c4d)"
    if head.startswith(_GZIP) or head.startswith(_XZ[:6]):
        return "not pcapng: a compressed file (use check_pcapng_file)"
    return f"not pcapng: starts with {head[:4].hex()}, not a Section Header Block (0a0d0d0a)"
