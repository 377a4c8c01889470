"""Parse the sampler's TS-block file of `ss -tinH state established` output.

File format (written by hosts.linux.SS_LOOP): a line `TS <unix epoch seconds>` followed
by the raw ss output and a line `TE <unix epoch seconds>` written when ss returned. ss
read the sockets between the two, nearer TE (its start-up comes first and may take tens
of ms on a loaded host), so a block's records are stamped TE: a sample never shows a
state before its stamp. A block without TE (older files, a sampler stopped inside ss)
keeps TS. ss prints each socket as one line of address
columns (`Recv-Q Send-Q Local Peer`, preceded by the state when no state filter is
given) and one continuation line, starting with whitespace, of `key:value` items,
bare flags, the CC name and the `send`/`pacing_rate`/`delivery_rate` pairs; with
`-O` (`--oneline`) those items follow the address columns on the same line
(tests/captures/ss-oneline): both forms are read alike. ss's header line (a call
without `-H`) names no socket and is skipped.

Units as ss prints them: rtt/rttvar/minrtt/mrtt in ms (converted to us here), cwnd
and ssthresh in packets (segments), rates as `<n>[K|M|G|T]bps` with 1000-based
prefixes, bytes_* and snd_wnd in bytes. Fields ss leaves out (it omits zero `lost`, `reord_seen`,
absent `ssthresh` in slow start, ...) are None.

A file is read as a stream with SsReader (one record in memory at a time; dicts or
RecordBatches of SCHEMA); parse_ss_samples wraps it for a whole text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from ccbench.parse.batches import BATCH_ROWS, batched_records, complete_lines

SsRecord = dict[str, Any]

_RATE = re.compile(r"^([0-9.]+)([KMGT]?)bps$")
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
# Bare flag words ss prints (tcp_show_info, iproute2 misc/ss.c); any other bare word is the CC.
_FLAGS = {"ts", "sack", "ecn", "ecnseen", "fastopen", "app_limited", "cwnd_limited"}
# The first word of ss's header line (`State Recv-Q Send-Q ...`; `Recv-Q` first with a
# state filter), printed unless `-H`.
_HEADER = {"State", "Recv-Q", "Netid"}
_PAIRED = {
    "send": "send_bps",
    "pacing_rate": "pacing_rate_bps",
    "delivery_rate": "delivery_rate_bps",
}
_INT_KEYS = {
    "cwnd": "cwnd_pkts",
    "ssthresh": "ssthresh_pkts",
    "mss": "mss_bytes",
    "bytes_sent": "bytes_sent",
    "bytes_retrans": "bytes_retrans",
    "bytes_acked": "bytes_acked",
    "lost": "lost",
    "reord_seen": "reord_seen",
    "dsack_dups": "dsack_dups",
    "reordering": "reordering",
    "unacked": "unacked",
    "notsent": "notsent_bytes",
    "delivered": "delivered",
    # tcpi_snd_wnd (the window the peer advertised, in bytes), printed when non-zero
    # by iproute2's misc/ss.c tcp_stats_print (iproute2 6.1 on kernel 6.18 here do)
    "snd_wnd": "snd_wnd_bytes",
}
FIELDS = (
    "t_s",
    "local",
    "peer",
    "recv_q_bytes",
    "send_q_bytes",
    "cc",
    "cwnd_pkts",
    "mss_bytes",
    "cwnd_bytes",
    "ssthresh_pkts",
    "rtt_us",
    "rttvar_us",
    "minrtt_us",
    "send_bps",
    "delivery_rate_bps",
    "pacing_rate_bps",
    "bytes_sent",
    "bytes_retrans",
    "bytes_acked",
    "unacked",
    "notsent_bytes",
    "delivered",
    "snd_wnd_bytes",
    "retrans_now",
    "retrans_total",
    "lost",
    "reordering",
    "reord_seen",
    "dsack_dups",
    "bbr_bw_bps",
    "bbr_mrtt_us",
    "bbr_pacing_gain",
    "bbr_cwnd_gain",
)
_STR_FIELDS = {"local", "peer", "cc"}
_FLOAT_FIELDS = {"t_s", "rtt_us", "rttvar_us", "minrtt_us", "send_bps", "delivery_rate_bps",
                 "pacing_rate_bps", "bbr_bw_bps", "bbr_mrtt_us", "bbr_pacing_gain",
                 "bbr_cwnd_gain"}  # fmt: skip
SCHEMA = pa.schema(
    [(k, pa.string() if k in _STR_FIELDS else pa.float64() if k in _FLOAT_FIELDS
      else pa.int64()) for k in FIELDS]
)  # fmt: skip


def parse_ss_samples(text: str) -> list[SsRecord]:
    """One dict per socket per TS block, keys as in FIELDS, in file order.

    A trailing line without a newline (the sampler stopped mid-write) is dropped.
    Raises ValueError, naming the line number, for socket lines before the first TS
    line, a bad TS value, TS values that go backwards, or a socket or info line whose
    numbers do not parse (e.g. `cwnd:abc`). For long files use SsReader (this wraps it).
    """
    return list(SsReader(text.split("\n")[:-1], newlines=False))


class SsReader:
    """The records of a sampler file read as a stream, one socket at a time: memory
    holds one record, whatever the file's length. `lines`: the file's lines with their
    newlines (a text file object is such an iterable); a last line without one is the
    sampler stopped mid-write, and dropped. `newlines=False`: lines without newlines,
    all complete. Iterate once for dicts (`records()`) or RecordBatches (`batches()`);
    afterwards `last_ts` is the last TS or TE line's time (None: no TS line)."""

    def __init__(self, lines: Iterable[str], newlines: bool = True) -> None:
        self._lines = lines
        self._newlines = newlines
        self.last_ts: float | None = None
        self._started = False

    def __iter__(self) -> Iterator[SsRecord]:
        return self.records()

    def records(self) -> Iterator[SsRecord]:
        if self._started:
            raise RuntimeError("an SsReader can be read once")
        self._started = True
        t_s: float | None = None
        block: list[SsRecord] = []  # the records of the block being read (one ss call)
        numbered = complete_lines(self._lines) if self._newlines else enumerate(self._lines, 1)
        for n, line in numbered:
            if not line.strip():
                continue
            try:
                if line.startswith("TS "):
                    t = _timestamp(line)
                    if t_s is not None and t < t_s:
                        raise ValueError(f"TS {t} goes back from {t_s}")
                    t_s = self.last_ts = t
                    yield from block  # a block without TE keeps its TS
                    block = []
                elif line.startswith("TE "):
                    t = _timestamp(line)
                    if t_s is None or t < t_s:
                        raise ValueError(f"TE {t} before its TS {t_s}")
                    t_s = self.last_ts = t
                    for rec in block:
                        rec["t_s"] = t
                    yield from block
                    block = []
                elif line[0].isspace():
                    if block:  # info for a socket whose address line we saw
                        _apply_info(block[-1], line.split())
                elif line.split(None, 1)[0] not in _HEADER:
                    if t_s is None:
                        raise ValueError(f"ss output before the first TS line: {line[:80]!r}")
                    rec, info = _address_record(t_s, line.split())
                    if info:  # `ss -O`: the socket's tcp_info on its own line
                        _apply_info(rec, info)
                    block.append(rec)
            except ValueError as e:
                raise ValueError(f"line {n}: {e}") from None
        yield from block

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[pa.RecordBatch]:
        """The records as RecordBatches (SCHEMA) of at most `rows` rows."""
        yield from batched_records(self.records(), SCHEMA, rows)


def parse_rate_bps(token: str) -> float | None:
    """ss rate text ("2.86Mbps", "95615800bps") -> bits per second; else None."""
    m = _RATE.match(token)
    if not m:
        return None
    return float(m.group(1)) * _PREFIX[m.group(2)]


def _timestamp(line: str) -> float:
    try:
        t = float(line[3:].strip())
    except ValueError:
        raise ValueError(f"bad TS line: {line[:80]!r}") from None
    if not math.isfinite(t) or t < 0:
        raise ValueError(f"bad TS line: {line[:80]!r}")
    return t


def _address_record(t_s: float, cols: list[str]) -> tuple[SsRecord, list[str]]:
    """The record of a socket's address line, and what follows its four address
    columns (`ss -O`: the tcp_info items; else nothing)."""
    rec: SsRecord = dict.fromkeys(FIELDS)
    rec["t_s"] = t_s
    if cols and not cols[0].isdigit():  # a state column (no `state` filter given)
        cols = cols[1:]
    if len(cols) < 4:
        raise ValueError(f"unexpected ss socket line: {' '.join(cols)[:80]!r}")
    try:
        rec["recv_q_bytes"] = int(cols[0])
        rec["send_q_bytes"] = int(cols[1])
    except ValueError:
        raise ValueError(f"unexpected ss socket line: {' '.join(cols)[:80]!r}") from None
    rec["local"] = cols[2]
    rec["peer"] = cols[3]
    return rec, cols[4:]


def _apply_info(rec: SsRecord, tokens: list[str]) -> None:
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok in _PAIRED and i < len(tokens):
            rec[_PAIRED[tok]] = parse_rate_bps(tokens[i])
            i += 1
            continue
        key, sep, value = tok.partition(":")
        if not sep:
            if tok not in _FLAGS and rec["cc"] is None:
                rec["cc"] = tok
            continue
        _apply_item(rec, key, value)
    if rec["cwnd_pkts"] is not None and rec["mss_bytes"] is not None:
        rec["cwnd_bytes"] = rec["cwnd_pkts"] * rec["mss_bytes"]


def _apply_item(rec: SsRecord, key: str, value: str) -> None:
    try:
        _apply_value(rec, key, value)
    except ValueError:
        raise ValueError(f"bad ss value {key}:{value[:40]}") from None


def _apply_value(rec: SsRecord, key: str, value: str) -> None:
    if key in _INT_KEYS:
        rec[_INT_KEYS[key]] = int(value)
    elif key == "rtt":
        rtt, _, var = value.partition("/")
        rec["rtt_us"] = _ms_to_us(rtt)
        rec["rttvar_us"] = _ms_to_us(var) if var else None
    elif key == "minrtt":
        rec["minrtt_us"] = _ms_to_us(value)
    elif key == "retrans":  # "now/total": segments still out / retransmitted so far
        now, _, total = value.partition("/")
        rec["retrans_now"] = int(now)
        rec["retrans_total"] = int(total) if total else None
    elif key == "bbr":
        _apply_bbr(rec, value)


def _apply_bbr(rec: SsRecord, value: str) -> None:
    for item in value.strip("()").split(","):
        k, _, v = item.partition(":")
        if k == "bw":
            rec["bbr_bw_bps"] = parse_rate_bps(v)
        elif k == "mrtt":
            rec["bbr_mrtt_us"] = _ms_to_us(v)
        elif k == "pacing_gain":
            rec["bbr_pacing_gain"] = float(v)
        elif k == "cwnd_gain":
            rec["bbr_cwnd_gain"] = float(v)


def _ms_to_us(ms: str) -> float:
    # ss prints ms with 3 decimals; rounding drops binary noise like 40499.999...
    v = float(ms)
    if not math.isfinite(v):
        raise ValueError(f"{ms!r} ms")
    return round(v * 1000.0, 3)
