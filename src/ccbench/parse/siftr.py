"""Parse siftr(4) and siftr2 logs (FreeBSD per-packet TCP control-block samples).

A log is one tab-separated `key=value` header line (written when logging is enabled),
one comma-separated record per sampled packet, and a tab-separated footer line (written
when logging is disabled) that lists the flows. Every layout detail depends on the
`siftrver` in the header, so the layouts live in one table, `_LAYOUTS`, keyed by version:
a real log that differs from these is a one-place fix.

Versions (from the FreeBSD sources and man page, and ccfbsd/siftr2; no real log was
available to check against):

* siftr 1.2.x (older kernels): `hz` and `tcp_rtt_scale` in the header; records start
  `dir,0xHASH,sec.usec,laddr,lport,faddr,fport,ssthresh,cwnd,bwnd,...`; srtt is
  t_srtt in ticks x TCP_RTT_SCALE (divide by tcp_rtt_scale x hz for seconds) and rto is
  in ticks; 1.2.4 appends t_segqlen, flowid, flowtype.
* siftr 1.3.x (newer kernels, FreeBSD 14 sources): no hash, no bwnd (t_flags2 in its
  place), srtt and rto in microseconds, flowid and flowtype at the end; some builds
  append th_seq, th_ack and the payload size (and more, ignored here).
* siftr2 2.2 (ccfbsd/siftr2): decimal records `dir,sec.usec,flowid,cwnd,ssthresh,...`.
* siftr2 2.4: hex records `flowid,dir,ms-since-enable,cwnd,ssthresh,srtt,...`.
  Both siftr2 footers list each flow's stack and CC as codes: siftr2 decides them by the
  first letter of the name, so only freebsd(0)/rack(1) and cubic(0)/newreno(1) are
  meaningful (cdg and chd also log 0; other stacks and CCs log garbage).

Output: `SiftrLog` with the header/footer metadata, the flows, and (parse_siftr) one
tidy dict per record; a long log is read instead as typed columnar batches in bounded
memory by ccbench.parse.siftr_stream.SiftrReader, which parse_siftr wraps. Row keys
and units (`ROW_KEYS`): t_s (seconds since logging was enabled),
direction ("in"/"out"), flowid (8 hex digits), local/peer ("ip:port"), *_bytes,
srtt_us/rto_us (float, microseconds); None where a version does not log a field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ccbench.parse import join_hostport, split_hostport

SiftrRow = dict[str, Any]

# inflight_bytes: snd_max - snd_una in siftr 1.x; siftr2 logs the SACK-aware pipe.
ROW_KEYS = (
    "t_s",
    "direction",
    "flowid",
    "local",
    "peer",
    "cwnd_bytes",
    "ssthresh_bytes",
    "srtt_us",
    "rto_us",
    "snd_wnd_bytes",
    "rcv_wnd_bytes",
    "inflight_bytes",
    "mss_bytes",
    "state",
    "t_flags",
    "t_flags2",
    "snd_buf_hiwat_bytes",
    "snd_buf_used_bytes",
    "rcv_buf_hiwat_bytes",
    "rcv_buf_used_bytes",
    "reass_segs",
    "th_seq",
    "th_ack",
    "data_bytes",
)

# Raw field name -> row key, for fields that only need an integer conversion.
_INT_FIELDS = {
    "cwnd": "cwnd_bytes",
    "ssthresh": "ssthresh_bytes",
    "snd_wnd": "snd_wnd_bytes",
    "rcv_wnd": "rcv_wnd_bytes",
    "inflight": "inflight_bytes",
    "mss": "mss_bytes",
    "state": "state",
    "t_flags": "t_flags",
    "t_flags2": "t_flags2",
    "snd_buf_hiwat": "snd_buf_hiwat_bytes",
    "snd_buf_cc": "snd_buf_used_bytes",
    "rcv_buf_hiwat": "rcv_buf_hiwat_bytes",
    "rcv_buf_cc": "rcv_buf_used_bytes",
    "reass_qlen": "reass_segs",
    "th_seq": "th_seq",
    "th_ack": "th_ack",
    "data_sz": "data_bytes",
}

SIFTR2_STACKS = {0: "freebsd", 1: "rack"}
SIFTR2_CCS = {0: "cubic", 1: "newreno"}


@dataclass(frozen=True)
class _Layout:
    logger: str  # "siftr" | "siftr2"
    fields: tuple[str, ...]  # always present, in order
    optional: tuple[str, ...] = ()  # may follow, in order (later minor versions)
    extra_ok: bool = False  # more fields after those may follow (debug builds)
    base: int = 10  # base of the numeric fields
    time: str = "epoch"  # "epoch": sec.usec; "ms": milliseconds since enable (in `base`)
    rtt: str = "us"  # "us"; "ticks": srtt in ticks x tcp_rtt_scale, rto in ticks
    flowid_base: int = 10


_SIFTR_1_2 = _Layout(
    logger="siftr",
    fields=("direction", "hash", "time", "laddr", "lport", "faddr", "fport",
            "ssthresh", "cwnd", "bwnd", "snd_wnd", "rcv_wnd", "snd_scale", "rcv_scale",
            "state", "mss", "srtt", "sack", "t_flags", "rto", "snd_buf_hiwat",
            "snd_buf_cc", "rcv_buf_hiwat", "rcv_buf_cc", "inflight"),
    optional=("reass_qlen", "flowid", "flowtype"),
    rtt="ticks",
)  # fmt: skip
_SIFTR_1_3 = _Layout(
    logger="siftr",
    fields=("direction", "time", "laddr", "lport", "faddr", "fport", "ssthresh", "cwnd",
            "t_flags2", "snd_wnd", "rcv_wnd", "snd_scale", "rcv_scale", "state", "mss",
            "srtt", "sack", "t_flags", "rto", "snd_buf_hiwat", "snd_buf_cc",
            "rcv_buf_hiwat", "rcv_buf_cc", "inflight", "reass_qlen", "flowid",
            "flowtype"),
    optional=("th_seq", "th_ack", "data_sz"),
    extra_ok=True,
)  # fmt: skip
_SIFTR2_2_2 = _Layout(
    logger="siftr2",
    fields=("direction", "time", "flowid", "cwnd", "ssthresh", "snd_wnd", "rcv_wnd",
            "t_flags", "t_flags2", "state", "srtt", "rto", "snd_buf_hiwat", "snd_buf_cc",
            "rcv_buf_hiwat", "rcv_buf_cc", "inflight", "reass_qlen", "th_seq", "th_ack",
            "data_sz"),
    flowid_base=16,
)  # fmt: skip
_SIFTR2_2_4 = _Layout(
    logger="siftr2",
    fields=("flowid", "direction", "time", "cwnd", "ssthresh", "srtt", "data_sz",
            "snd_wnd", "rcv_wnd", "t_flags", "t_flags2", "rto", "snd_buf_hiwat",
            "snd_buf_cc", "rcv_buf_hiwat", "rcv_buf_cc", "inflight", "reass_qlen"),
    base=16,
    time="ms",
    flowid_base=16,
)  # fmt: skip

# siftr numbers versions X.Y.Z with Y bumped on incompatible changes: key on X.Y.
# siftr2's X.Y minor versions changed the layout: key on the exact X.Y.
_LAYOUTS: dict[str, _Layout] = {
    "1.2": _SIFTR_1_2,
    "1.3": _SIFTR_1_3,
    "2.2": _SIFTR2_2_2,
    "2.4": _SIFTR2_2_4,
}


@dataclass(frozen=True)
class SiftrFlow:
    """One flow of the footer (or, without a footer, seen in the records)."""

    local: str | None  # "ip:port" of this host's end
    peer: str | None
    flowid: str | None = None  # 8 hex digits, the records' key
    records: int | None = None  # records logged for the flow
    # siftr2 footer only:
    stack: str | None = None  # "freebsd" | "rack"; None if the code means neither
    cc: str | None = None  # "cubic" | "newreno" (see module doc); None otherwise
    stack_code: int | None = None
    cc_code: int | None = None
    mss_bytes: int | None = None
    sack: bool | None = None
    snd_scale: int | None = None
    rcv_scale: int | None = None
    transfers: int | None = None  # packets seen (records are every ppl-th)


@dataclass(frozen=True)
class SiftrLog:
    logger: str  # "siftr" | "siftr2"
    version: str  # header siftrver, e.g. "1.3.0", "2.4"
    header: dict[str, str]
    footer: dict[str, str] | None  # None: logging was never disabled (log incomplete)
    enable_time_s: float  # Unix time
    disable_time_s: float | None
    hz: int | None  # siftr 1.2.x only
    tcp_rtt_scale: int | None  # siftr 1.2.x only
    sysver: str | None  # __FreeBSD_version (siftr, siftr2 2.2) or kernel version line (2.4)
    flows: list[SiftrFlow] = field(default_factory=list)
    records: list[SiftrRow] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.footer is not None


def layout_key(version: str) -> str:
    """The `_LAYOUTS` key of a siftrver; ValueError naming an unknown version."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", version.strip())
    key = f"{m.group(1)}.{m.group(2)}" if m else None
    if key is None or key not in _LAYOUTS:
        raise ValueError(
            f"unsupported siftr log version '{version}' (known: siftr 1.2.x, 1.3.x; "
            "siftr2 2.2, 2.4): add its layout to ccbench.parse.siftr._LAYOUTS"
        )
    return key


def parse_header(line: str) -> dict[str, str]:
    """A tab-separated `key=value` line (header or footer) -> dict, in order."""
    out: dict[str, str] = {}
    for part in line.rstrip("\r\n").split("\t"):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"siftr header/footer field without '=': {part!r}")
        out[key] = value
    return out


def check_siftr2_flows(
    log: SiftrLog, stack: str, cc: str | None, port: int | None = None
) -> list[str]:
    """Contradictions between the intended stack/CC and what the siftr2 footer says each
    flow (on `port`, if given) ran with. Only contradictions are reported: the footer
    cannot identify the bbr stack or CCs other than cubic/newreno (see module doc), so
    those pass unverified; verify them with the functions_available snapshot instead."""
    if log.logger != "siftr2":
        return [f"a {log.logger} log names no stack or CC per flow; only siftr2 logs do"]
    if not log.complete:
        return ["siftr2 log has no footer (logging not disabled?): stacks/CCs unknown"]
    flows = [f for f in log.flows if port is None or _has_port(f, port)]
    if not flows:
        return [f"no flow on port {port} in the siftr2 footer"]
    want_stack = "freebsd" if stack == "default" else stack
    want_cc = {"reno": "newreno"}.get(cc or "", cc or "")
    problems: list[str] = []
    for f in flows:
        who = f"flow {f.flowid} ({f.local} -> {f.peer})"
        if want_stack in ("freebsd", "rack") and f.stack != want_stack:
            problems.append(f"{who} ran on stack code {f.stack_code}, not '{want_stack}'")
        # siftr2 logs 0 for every CC named c*, 1 for n*: only those can be contradicted.
        letter_code = {"c": 0, "n": 1}.get(want_cc[:1])
        if want_stack != "bbr" and letter_code is not None and f.cc_code != letter_code:
            problems.append(f"{who} ran with CC code {f.cc_code}, not '{want_cc}'")
    return problems


# --- internals ---------------------------------------------------------------
def _row_converter(
    layout: _Layout,
    enable_us: int,
    hz: int | None,
    rtt_scale: int | None,
    flows_by_id: dict[str, SiftrFlow],
) -> Callable[[list[str]], SiftrRow]:
    # Field positions are resolved once per log: logs run to millions of lines.
    names = layout.fields + layout.optional
    pos = {name: i for i, name in enumerate(names)}
    n_min, n_max = len(layout.fields), None if layout.extra_ok else len(names)
    base, flowid_base = layout.base, layout.flowid_base
    ints = [(pos[src], dst) for src, dst in _INT_FIELDS.items() if src in pos]
    i_dir, i_time, i_srtt, i_rto = pos["direction"], pos["time"], pos["srtt"], pos["rto"]
    i_flowid = pos.get("flowid")
    i_addr = [pos[k] for k in ("laddr", "lport", "faddr", "fport")] if "laddr" in pos else None
    if layout.rtt == "ticks":
        assert hz and rtt_scale
        srtt_us, rto_us = 1e6 / (rtt_scale * hz), 1e6 / hz
    else:
        srtt_us = rto_us = 1.0
    directions = {"i": "in", "o": "out"}
    template: SiftrRow = dict.fromkeys(ROW_KEYS)
    hostports: dict[tuple[str, ...], tuple[str, str]] = {}

    def convert(parts: list[str]) -> SiftrRow:
        n = len(parts)
        if n < n_min or (n_max is not None and n > n_max):
            raise ValueError(f"{n} fields, expected {_expected(layout)}")
        row = template.copy()
        row["direction"] = (
            directions[parts[i_dir]]
            if parts[i_dir] in directions
            else _bad("direction", parts[i_dir])
        )
        if layout.time == "ms":
            row["t_s"] = int(parts[i_time], base) / 1000
        else:
            row["t_s"] = (_stamp_us(parts[i_time]) - enable_us) / 1e6
        for i, dst in ints:
            if i < n:
                row[dst] = int(parts[i], base)
        row["srtt_us"] = int(parts[i_srtt], base) * srtt_us
        row["rto_us"] = int(parts[i_rto], base) * rto_us
        if i_flowid is not None and i_flowid < n:
            row["flowid"] = f"{int(parts[i_flowid], flowid_base):08x}"
        if i_addr is not None:
            key = tuple(parts[i] for i in i_addr)
            ends = hostports.get(key)
            if ends is None:
                ends = hostports[key] = (_hostport(key[0], key[1]), _hostport(key[2], key[3]))
            row["local"], row["peer"] = ends
        elif row["flowid"] in flows_by_id:
            # siftr2 records carry no addresses or MSS: the footer has them per flow.
            flow = flows_by_id[row["flowid"]]
            row["local"], row["peer"] = flow.local, flow.peer
            row["mss_bytes"] = flow.mss_bytes
        return row

    return convert


def _bad(what: str, value: str) -> str:
    raise ValueError(f"{what} {value!r}")


def _expected(layout: _Layout) -> str:
    lo, hi = len(layout.fields), len(layout.fields) + len(layout.optional)
    if layout.extra_ok:
        return f"at least {lo}"
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _footer_flows(footer: dict[str, str], layout: _Layout) -> list[SiftrFlow]:
    if layout.logger == "siftr2":
        return [_siftr2_flow(e) for e in footer.get("flow_list", "").split(";") if e]
    flows: list[SiftrFlow] = []
    # siftr 1.x: "laddr;lport-faddr;fport," per flow.
    for entry in footer.get("flow_list", "").split(","):
        if not entry:
            continue
        m = re.fullmatch(r"([^;]+);(\d+)-([^;]+);(\d+)", entry)
        if m is None:
            raise ValueError(f"bad siftr flow_list entry {entry!r}")
        flows.append(SiftrFlow(_hostport(m[1], m[2]), _hostport(m[3], m[4])))
    # Some 1.3 builds list decimal flowids instead ("flowid_list=").
    for fid in footer.get("flowid_list", "").split(","):
        if fid:
            flows.append(SiftrFlow(None, None, flowid=f"{int(fid):08x}"))
    return flows


def _siftr2_flow(entry: str) -> SiftrFlow:
    # flowid,laddr,lport,faddr,fport,stack,cc,mss,sack,snd_scale,rcv_scale,nrecord,ntrans
    p = entry.split(",")
    if len(p) != 13:
        raise ValueError(f"bad siftr2 flow_list entry ({len(p)} fields, expected 13): {entry!r}")
    stack_code, cc_code = int(p[5]), int(p[6])
    return SiftrFlow(
        local=_hostport(p[1], p[2]),
        peer=_hostport(p[3], p[4]),
        flowid=f"{int(p[0], 16):08x}",
        records=int(p[11]),
        stack=SIFTR2_STACKS.get(stack_code),
        cc=SIFTR2_CCS.get(cc_code),
        stack_code=stack_code,
        cc_code=cc_code,
        mss_bytes=int(p[7]),
        sack=bool(int(p[8])),
        snd_scale=int(p[9]),
        rcv_scale=int(p[10]),
        transfers=int(p[12]),
    )


def _with_record_counts(
    footer_flows: list[SiftrFlow] | None,
    counts: dict[tuple[Any, Any, Any], int],
    layout: _Layout,
) -> list[SiftrFlow]:
    """siftr 1.x footers carry no counts or flowids: add them from the records' counts
    per (local, peer, flowid). Without a footer, the flows are those seen in the records."""
    if footer_flows is None:
        return [SiftrFlow(k[0], k[1], flowid=k[2], records=c) for k, c in counts.items()]
    if layout.logger == "siftr2":
        return footer_flows
    out: list[SiftrFlow] = []
    for f in footer_flows:
        seen = [(k, c) for k, c in counts.items() if (k[0], k[1]) == (f.local, f.peer)]
        seen = seen or [(k, c) for k, c in counts.items() if f.flowid and k[2] == f.flowid]
        fid = f.flowid or next((k[2] for k, _ in seen if k[2]), None)
        local = f.local or next((k[0] for k, _ in seen), None)
        peer = f.peer or next((k[1] for k, _ in seen), None)
        out.append(SiftrFlow(local, peer, flowid=fid, records=sum(c for _, c in seen)))
    return out


def _has_port(flow: SiftrFlow, port: int) -> bool:
    return any(a and split_hostport(a)[1] == str(port) for a in (flow.local, flow.peer))


def _time_us(sec: str, usec: str) -> int:
    """Header/footer time: whole seconds and a separate microseconds field."""
    return int(sec) * 1_000_000 + int(usec or "0")


def _stamp_us(stamp: str) -> int:
    """Record time "sec.frac" as exact integer microseconds (no float rounding)."""
    sec, _, frac = stamp.partition(".")
    if len(frac) > 6 or not (sec.isdigit() and (frac.isdigit() or not frac)):
        raise ValueError(f"time {stamp!r}")
    return int(sec) * 1_000_000 + int(frac.ljust(6, "0"))


def _opt_int(x: str | None) -> int | None:
    return int(x) if x else None


def _hostport(host: str, port: str) -> str:
    return join_hostport(host, int(port))


# --- the number formats, vectorised (the fast path: ccbench.parse.siftr_stream) ------
_HEX = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _i


def _hex_int64(col: pa.Array) -> np.ndarray:
    """Hex strings without prefix (siftr2 2.4's %x) -> int64, vectorised; ValueError
    for anything else (empty, a non-hex digit, more than 15 digits)."""
    col = col.cast(pa.string())
    n = len(col)
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    data = col.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    raw = raw[offsets[0] : offsets[-1]]
    lengths = np.diff(offsets)
    if n and (lengths.min() < 1 or lengths.max() > 15):
        raise ValueError("not a hex number of 1 to 15 digits")
    nib = _HEX[raw]
    if (nib == 255).any():
        raise ValueError("not a hex number")
    # Each digit's weight: 16 ** (digits after it in its own string).
    ends = np.repeat(offsets[1:] - offsets[0], lengths)
    after = ends - 1 - np.arange(raw.size)
    vals = nib.astype(np.int64) << (4 * after).astype(np.int64)
    if not n:
        return np.zeros(0, dtype=np.int64)
    return np.add.reduceat(vals, offsets[:-1] - offsets[0])


def _fixed_us(col: pa.Array) -> np.ndarray | None:
    """The stamps siftr writes, "%jd.%06ld" (sys/netinet/siftr.c, siftr_process_pkt),
    all of one width, as integer microseconds: the digits around the point as one
    number, vectorised (the strings' bytes as a matrix); None for anything else."""
    n = len(col)
    if not n or col.null_count:
        return None
    offsets = np.frombuffer(col.buffers()[1], dtype=np.int32)[col.offset : col.offset + n + 1]
    width = int(offsets[1] - offsets[0])
    # at least one digit before the point; at most 18 digits (below 2**63)
    if not 8 <= width <= 19 or int(offsets[-1] - offsets[0]) != n * width:
        return None
    if not (np.diff(offsets) == width).all():
        return None
    data = col.buffers()[2]
    assert data is not None
    chars = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(n, width)
    if not (chars[:, width - 7] == ord(".")).all():
        return None
    digits = np.delete(chars, width - 7, axis=1).astype(np.int64) - ord("0")
    if ((digits < 0) | (digits > 9)).any():
        return None
    return digits @ (10 ** np.arange(width - 2, -1, -1, dtype=np.int64))
