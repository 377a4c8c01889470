"""Tests of ccbench.parse.pcapng: a real pcapng written on this machine (scapy's
PcapNgWriter, tests/captures/pcapng/README.md), its cut and corrupted copies, and
files built here from the pcapng specification (sections of both byte orders,
stated section lengths, custom blocks as BBLog uses)."""

from __future__ import annotations

import gzip
import io
import lzma
import struct
from pathlib import Path

import pytest

from ccbench.parse.pcapng import (
    CUSTOM,
    CUSTOM_NOCOPY,
    EPB,
    IDB,
    ISB,
    SHB,
    PcapngCheck,
    check_pcapng,
    check_pcapng_file,
)

PCAPNG = Path(__file__).resolve().parents[1] / "captures" / "pcapng"
REAL = PCAPNG / "iperf3-netns-40pkts-scapy.pcapng"
DATA = REAL.read_bytes()
NFLX_PEN = 10949  # the Private Enterprise Number of BBLog's custom blocks


def check(data: bytes, chunk: int = 1 << 20) -> PcapngCheck:
    return check_pcapng(io.BytesIO(data), chunk)


# --- blocks written from the specification -------------------------------------------
def block(order: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    total = 12 + len(body)
    return struct.pack(order + "II", btype, total) + body + struct.pack(order + "I", total)


def shb(order: str, section_len: int = -1) -> bytes:
    return block(order, SHB, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, section_len))


def idb(order: str) -> bytes:
    return block(order, IDB, struct.pack(order + "HHI", 1, 0, 0))


def epb(order: str, iface: int, data: bytes) -> bytes:
    head = struct.pack(order + "IIIII", iface, 0, 0, len(data), len(data))
    return block(order, EPB, head + data)


def custom(order: str, data: bytes, btype: int = CUSTOM) -> bytes:
    return block(order, btype, struct.pack(order + "I", NFLX_PEN) + data)


# --- the real file ------------------------------------------------------------------
def test_real_capture_is_whole() -> None:
    r = check_pcapng_file(REAL)
    assert r.ok and r.reason is None
    assert (r.blocks, r.sections, r.interfaces, r.bytes) == (42, 1, 1, 4420)
    assert r.bytes == len(DATA)
    assert r.block_types == {SHB: 1, IDB: 1, EPB: 40}


def test_real_capture_compressed() -> None:
    gz = check_pcapng_file(PCAPNG / "iperf3-netns-40pkts-scapy.pcapng.gz")
    assert gz == check_pcapng_file(REAL)
    with gzip.open(PCAPNG / "iperf3-netns-40pkts-scapy.pcapng.gz", "rb") as f:
        assert check_pcapng(f) == gz
    assert check(lzma.compress(DATA)).reason == (
        "not pcapng: a compressed file (use check_pcapng_file)")  # fmt: skip


def test_xz_file(tmp_path: Path) -> None:
    path = tmp_path / "bblog.pcapng.xz"
    path.write_bytes(lzma.compress(DATA))
    assert check_pcapng_file(path) == check_pcapng_file(REAL)


def test_small_chunks_same_result() -> None:
    assert check(DATA, chunk=3) == check(DATA)


def test_every_cut() -> None:
    # A cut inside a block is found; a cut exactly between two blocks cannot be told
    # from a shorter capture (pcapng has no end marker): 41 such places after the SHB.
    whole_at = []
    for cut in range(1, len(DATA)):
        r = check(DATA[:cut])
        if r.ok:
            whole_at.append(cut)
            assert r.bytes == cut
        else:
            assert r.reason is not None and r.reason.startswith("truncated: ")
            assert r.bytes < cut
    assert len(whole_at) == 41
    assert whole_at[:3] == [28, 48, 156]  # SHB 28 bytes, IDB 20, the first EPB 108
    assert check(b"").reason == "empty: no Section Header Block"


def test_cut_reasons_exact() -> None:
    assert check(DATA[:100]).reason == (
        "truncated: block 3 (EPB) at offset 48 is 108 bytes, the file ends 52 bytes into it"
    )
    assert check(DATA[:20]).reason == (
        "truncated: block 1 (SHB) at offset 0 is 28 bytes, the file ends 20 bytes into it"
    )
    assert check(DATA[:52]).reason == (
        "truncated: 4 bytes at offset 48, after block 2: less than a block header"
    )
    r = check(DATA[:-1])
    assert (r.blocks, r.bytes) == (41, 4320)
    assert r.reason == (
        "truncated: block 42 (EPB) at offset 4320 is 100 bytes, the file ends 99 bytes into it"
    )


def test_truncated_gzip() -> None:
    gz = (PCAPNG / "iperf3-netns-40pkts-scapy.pcapng.gz").read_bytes()
    with gzip.GzipFile(fileobj=io.BytesIO(gz[:-10])) as f:
        r = check_pcapng(f)
    assert r.reason is not None
    assert r.reason.startswith(
        "the stream breaks after 4320 bytes of pcapng: Compressed file ended"
    )
    assert r.blocks == 41


def patched(offset: int, new: bytes) -> bytes:
    return DATA[:offset] + new + DATA[offset + len(new) :]


def test_corruptions() -> None:
    # block 3 (EPB, offset 48, 108 bytes): its trailing length at 48 + 104
    assert check(patched(152, struct.pack("<I", 112))).reason == (
        "block 3 (EPB) at offset 48: total length 108 at its start, 112 at its end"
    )
    assert check(patched(8, b"\0\0\0\0")).reason == (
        "block 1 (SHB) at offset 0: byte-order magic 00000000 is not 1a2b3c4d in either order"
    )
    assert check(patched(32, struct.pack("<I", 21))).reason == (
        "block 2 (IDB) at offset 28: total length 21 is not a multiple of 4"
    )
    assert check(patched(32, struct.pack("<I", 8))).reason == (
        "block 2 (IDB) at offset 28: total length 8 is below 12"
    )
    # the EPB's interface id (first body word) names an interface never described
    assert check(patched(56, struct.pack("<I", 1))).reason == (
        "block 3 (EPB) at offset 48: interface 1, but its section has 1 IDB(s) before it"
    )
    assert check(patched(12, struct.pack("<H", 2))).reason == (
        "block 1 (SHB) at offset 0: pcapng version 2.0, not 1.x"
    )
    pcap = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    assert check(pcap).reason == "not pcapng: a classic pcap file (magic a1b2c3d4/a1b23c4d)"
    assert check(b"GARBAGE!").reason == (
        "not pcapng: starts with 47415242, not a Section Header Block (0a0d0d0a)"
    )


# --- files built from the specification -----------------------------------------------
def two_sections(stated: int | None = None) -> bytes:
    le_body = idb("<") + epb("<", 0, b"\x45" * 61) + custom("<", b"bblog event")
    be_body = (idb(">") + idb(">") + epb(">", 1, b"\x60" * 40)
               + custom(">", b"x" * 5, CUSTOM_NOCOPY)
               + block(">", ISB, struct.pack(">III", 0, 0, 0)))  # fmt: skip
    first = shb("<", len(le_body) if stated is None else stated)
    return first + le_body + shb(">") + be_body


def test_sections_of_both_byte_orders_and_custom_blocks() -> None:
    data = two_sections()
    r = check(data)
    assert r.ok, r.reason
    assert (r.blocks, r.sections, r.interfaces, r.bytes) == (10, 2, 3, len(data))
    assert r.block_types == {SHB: 2, IDB: 3, EPB: 2, CUSTOM: 1, CUSTOM_NOCOPY: 1, ISB: 1}
    # an unknown block type is still a block
    assert check(shb("<") + block("<", 0x12345678, b"abc")).block_types == {
        SHB: 1, 0x12345678: 1}  # fmt: skip


def test_stated_section_length() -> None:
    r = check(two_sections(stated=100))
    assert r.reason is not None
    assert r.reason.startswith("section 1 (SHB at offset 0) states 100 bytes but holds ")
    # a stated length also catches a cut between blocks of the last section
    one = shb("<", len(idb("<") + epb("<", 0, b"x"))) + idb("<") + epb("<", 0, b"x")
    assert check(one).ok
    assert check(one[: 28 + 20]).reason == (
        "section 1 (SHB at offset 0) states 56 bytes but holds 20"
    )


def test_packet_before_its_interface() -> None:
    assert check(shb(">") + epb(">", 0, b"x")).reason == (
        "block 2 (EPB) at offset 28: interface 0, but its section has 0 IDB(s) before it"
    )
    # interfaces are per section: the second section's EPB cannot use the first's IDB
    data = shb("<") + idb("<") + shb("<") + epb("<", 0, b"x")
    assert check(data).reason == (
        "block 4 (EPB) at offset 76: interface 0, but its section has 0 IDB(s) before it"
    )


@pytest.mark.parametrize("order", ["<", ">"])
def test_minimal_file(order: str) -> None:
    r = check(shb(order))
    assert (r.ok, r.blocks, r.sections, r.bytes) == (True, 1, 1, 28)
