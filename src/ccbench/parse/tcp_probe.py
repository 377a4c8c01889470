"""Read the text of a tracefs instance (`trace_pipe` or `trace`) holding the Linux
tracepoints tcp:tcp_probe, tcp:tcp_cong_state_set and tcp:tcp_retransmit_skb, as a
stream of typed records or pyarrow RecordBatches, in bounded memory.

What the kernel prints (include/trace/events/tcp.h, each event's TP_printk; the
plumbing can read the same from events/tcp/<event>/format):

- tcp_probe, fired by tcp_rcv_established() (net/ipv4/tcp_input.c) for every segment
  an established socket receives: on a sender, its ACKs (data_len=0); on a receiver,
  the data. `family=AF_INET src=10.250.0.1:36200 dest=10.250.0.2:5201 mark=0x0
  data_len=0 snd_nxt=0xcb68a5b6 snd_una=0xcb68a591 snd_cwnd=10 ssthresh=2147483647
  snd_wnd=65160 srtt=95 rcv_wnd=64512 sock_cookie=2 skbaddr=... skaddr=...`.
  The length field was first printed `length=` (Linux's Documentation/trace/
  histogram.rst still shows such a line, `mark=0x0 length=32 snd_nxt=...`); both
  spellings are read (data_len below).
  snd_cwnd is in segments (tcp_snd_cwnd()); there is no MSS, so cwnd in bytes needs
  the MSS from elsewhere (ss). ssthresh is tcp_current_ssthresh() (include/net/tcp.h:
  snd_ssthresh during a cwnd reduction, else max(snd_ssthresh, 3/4 cwnd)): 2147483647
  (TCP_INFINITE_SSTHRESH) until the first reduction; read as None here, as ss omits
  it. srtt is `tp->srtt_us >> 3`: microseconds. snd_wnd is `tp->snd_wnd`: the window
  the peer advertised, scaled, in bytes (the most the sender may have outstanding by
  the peer's receive buffer). Older kernels print fewer fields
  (4.19: no `family=`; no `skbaddr=`/`skaddr=` before 2024); fields are read by
  name, so a missing one is None.
- tcp_cong_state_set (not in 4.19), fired by tcp_set_ca_state() on every call, also
  when the state does not change: `family=... sport=%hu dport=%hu saddr=%pI4
  daddr=%pI4 saddrv6=%pI6c daddrv6=%pI6c cong_state=%u`, the state a number of enum
  tcp_ca_state (include/net/tcp.h): 0 TCP_CA_Open, 1 TCP_CA_Disorder, 2 TCP_CA_CWR,
  3 TCP_CA_Recovery, 4 TCP_CA_Loss (an RTO).
- tcp_retransmit_skb, fired by the retransmit path (net/ipv4/tcp_output.c) for each
  retransmitted skb: `skbaddr=%p skaddr=%p family=... sport=... dport=... saddr=...
  daddr=... saddrv6=... daddrv6=... state=TCP_ESTABLISHED err=%d` (`err=` on this
  6.18 kernel, not in older ones; no `family=` in 4.19).

Line prefix (kernel/trace/trace_output.c): `<comm>-<pid> [<cpu>] <flags> <time>: <event>:
` with options that add or drop columns (record-tgid, irq-info), so the time and event
are found as `<number>: <event>: `; the time is the trace clock's (`local`, the default:
seconds since boot, microsecond resolution). `trace` starts with `#` comment lines;
`trace_pipe` inserts `CPU:N [LOST M EVENTS]` where the ring buffer overflowed (counted
in `lost_events`). Lines of other events are counted, not read.

Addresses are "ip:port" as siftr/ss records carry them, IPv4-mapped IPv6 addresses
(sockets of a server listening on ::) written as plain IPv4, other IPv6 as "[ip]:port",
so all three events of one connection have the same (local, peer).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pyarrow as pa

from ccbench.parse.batches import BATCH_ROWS, complete_lines

TCP_PROBE = "tcp_probe"
CONG_STATE_SET = "tcp_cong_state_set"
RETRANSMIT_SKB = "tcp_retransmit_skb"
EVENTS = (TCP_PROBE, CONG_STATE_SET, RETRANSMIT_SKB)

# enum tcp_ca_state, include/net/tcp.h
CA_STATES = ("TCP_CA_Open", "TCP_CA_Disorder", "TCP_CA_CWR", "TCP_CA_Recovery", "TCP_CA_Loss")
INFINITE_SSTHRESH = 0x7FFFFFFF
FILTER_MAX_CHARS = 4095  # a filter file takes less than one page

_LINE = re.compile(r"(?:^|\s)(\d+(?:\.\d+)?): (tcp_probe|tcp_cong_state_set|tcp_retransmit_skb): ")
_KEY_VALUE = re.compile(r"(\w+)=(\S*)")
_LOST = re.compile(r"^CPU:\s*\d+ \[LOST (\d+) EVENTS\]")
_V4MAPPED = "::ffff:"


@dataclass(frozen=True, slots=True)
class ProbeSample:
    """One tcp_probe event: the socket's state when it received a segment."""

    t_s: float
    local: str
    peer: str
    family: str | None
    data_len: int | None  # payload bytes (`data_len=`, older kernels `length=`)
    cwnd_pkts: int | None
    ssthresh_pkts: int | None  # None: infinite (no reduction yet)
    srtt_us: float | None
    snd_wnd_bytes: int | None
    rcv_wnd_bytes: int | None
    snd_nxt: int | None
    snd_una: int | None
    inflight_bytes: int | None  # snd_nxt - snd_una mod 2^32: sent, not yet cum-acked
    mss_bytes: int | None  # given by the caller; tcp_probe has none
    cwnd_bytes: int | None  # cwnd_pkts * mss_bytes
    mark: int | None
    sock_cookie: str | None  # hex, as printed
    skaddr: str | None  # the socket's hashed pointer, as printed


@dataclass(frozen=True, slots=True)
class CongStateChange:
    """One tcp_cong_state_set event (the state set, which may equal the last one)."""

    t_s: float
    local: str
    peer: str
    family: str | None
    state: str  # TCP_CA_Open ... TCP_CA_Loss
    state_code: int
    prev_state: str | None  # this connection's previous state in the trace; None: first


@dataclass(frozen=True, slots=True)
class Retransmit:
    """One tcp_retransmit_skb event."""

    t_s: float
    local: str
    peer: str
    family: str | None
    tcp_state: str | None  # TCP_ESTABLISHED, ...
    err: int | None  # the transmit's result (0: sent); None where no err= is printed
    skaddr: str | None


TraceRecord = ProbeSample | CongStateChange | Retransmit
_TYPES: dict[str, type[Any]] = {
    TCP_PROBE: ProbeSample,
    CONG_STATE_SET: CongStateChange,
    RETRANSMIT_SKB: Retransmit,
}


def _schema(cls: type[Any]) -> pa.Schema:
    cols = []
    for f in fields(cls):
        t = str(f.type).split()[0]
        cols.append((f.name, {"float": pa.float64(), "int": pa.int64()}.get(t, pa.string())))
    return pa.schema(cols)


PROBE_SCHEMA = _schema(ProbeSample)
CONG_STATE_SCHEMA = _schema(CongStateChange)
RETRANSMIT_SCHEMA = _schema(Retransmit)
SCHEMAS = {TCP_PROBE: PROBE_SCHEMA, CONG_STATE_SET: CONG_STATE_SCHEMA,
           RETRANSMIT_SKB: RETRANSMIT_SCHEMA}  # fmt: skip


@dataclass
class TcpTrace:
    """A whole trace read at once (parse_tcp_trace)."""

    probes: list[ProbeSample]
    cong_states: list[CongStateChange]
    retransmits: list[Retransmit]
    lost_events: int
    other_lines: int


MssBytes = int | Mapping[tuple[str, str], int] | None


class TcpTraceReader:
    """The events of one trace read as a stream, one line at a time: memory holds one
    record (records()) or one batch per event (batches()), plus the last congestion
    state of each connection. `lines`: the text's lines with their newlines (an open
    file is such an iterable); a last line without one was cut by the reader's stop
    and is dropped. `newlines=False`: lines without newlines, all complete.
    `mss_bytes`: one MSS for every connection, or (local, peer) -> MSS, to fill
    cwnd_bytes. Read once; afterwards `counts` (records per event), `lost_events`
    (dropped by the ring buffer) and `other_lines` (other events, unknown lines)."""

    def __init__(self, lines: Iterable[str], newlines: bool = True,
                 mss_bytes: MssBytes = None) -> None:  # fmt: skip
        self._lines = lines
        self._newlines = newlines
        self._mss = mss_bytes
        self._states: dict[tuple[str, str], str] = {}
        self.counts = dict.fromkeys(EVENTS, 0)
        self.lost_events = 0
        self.other_lines = 0
        self._started = False

    def __iter__(self) -> Iterator[TraceRecord]:
        return self.records()

    def records(self) -> Iterator[TraceRecord]:
        """ProbeSample / CongStateChange / Retransmit in trace order."""
        for event, row in self._rows():
            yield _TYPES[event](*row)

    def batches(self, rows: int = BATCH_ROWS) -> Iterator[tuple[str, pa.RecordBatch]]:
        """(event name, RecordBatch of its schema in SCHEMAS) with at most `rows` rows
        each; an event's batch is yielded when full, the rest at the end."""
        if rows < 1:
            raise ValueError("a batch needs at least one row")
        buf: dict[str, list[tuple[Any, ...]]] = {ev: [] for ev in EVENTS}
        for event, row in self._rows():
            b = buf[event]
            b.append(row)
            if len(b) >= rows:
                yield event, _batch(event, b)
                buf[event] = []
        for event in EVENTS:
            if buf[event]:
                yield event, _batch(event, buf[event])

    def _rows(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        """(event, the field values of its record type, in order)."""
        if self._started:
            raise RuntimeError("a TcpTraceReader can be read once")
        self._started = True
        numbered = complete_lines(self._lines) if self._newlines else enumerate(self._lines, 1)
        counts = self.counts
        for n, line in numbered:
            m = _LINE.search(line)
            if m is None:
                self._other(line)
                continue
            event = m.group(2)
            try:
                f = dict(_KEY_VALUE.findall(line, m.end()))
                t_s = float(m.group(1))
                row = self._probe(t_s, f) if event == TCP_PROBE else self._sk_event(event, t_s, f)
            except (ValueError, KeyError) as e:
                raise ValueError(
                    f"line {n}: bad {event} event: {e}: {line.strip()[:160]!r}"
                ) from None
            counts[event] += 1
            yield event, row

    def _other(self, line: str) -> None:
        if not line.strip() or line.startswith("#"):
            return
        lost = _LOST.match(line)
        if lost:
            self.lost_events += int(lost.group(1))
        else:
            self.other_lines += 1

    def _sk_event(self, event: str, t_s: float, f: dict[str, str]) -> tuple[Any, ...]:
        local, peer = _sk_addrs(f)
        family = f.get("family")
        if event == CONG_STATE_SET:
            code = int(f["cong_state"])
            state = CA_STATES[code] if 0 <= code < len(CA_STATES) else f"TCP_CA_{code}"
            prev = self._states.get((local, peer))
            self._states[(local, peer)] = state
            return (t_s, local, peer, family, state, code, prev)
        return (t_s, local, peer, family, f.get("state"), _opt(f, "err", 10), f.get("skaddr"))

    def _probe(self, t_s: float, f: dict[str, str]) -> tuple[Any, ...]:
        """The values of a ProbeSample, in its field order."""
        local, peer = _hostport(f["src"]), _hostport(f["dest"])
        nxt, una = _opt(f, "snd_nxt", 16), _opt(f, "snd_una", 16)
        inflight = (nxt - una) & 0xFFFFFFFF if nxt is not None and una is not None else None
        cwnd = _opt(f, "snd_cwnd", 10)
        ssthresh = _opt(f, "ssthresh", 10)
        if ssthresh is not None and ssthresh >= INFINITE_SSTHRESH:
            ssthresh = None
        srtt = _opt(f, "srtt", 10)
        mss = self._mss if isinstance(self._mss, int) or self._mss is None else (
            self._mss.get((local, peer)))  # fmt: skip
        return (
            t_s, local, peer, f.get("family"),
            _opt(f, "data_len" if "data_len" in f else "length", 10),
            cwnd, ssthresh, None if srtt is None else float(srtt),
            _opt(f, "snd_wnd", 10), _opt(f, "rcv_wnd", 10), nxt, una, inflight, mss,
            cwnd * mss if cwnd is not None and mss is not None else None,
            _opt(f, "mark", 16), f.get("sock_cookie"), f.get("skaddr"),
        )  # fmt: skip


def parse_tcp_trace(text: str, mss_bytes: MssBytes = None) -> TcpTrace:
    """A whole trace text into lists of records. A last line without a newline is
    dropped (the reader was stopped mid-line). For long traces use TcpTraceReader."""
    reader = TcpTraceReader(text.split("\n")[:-1], newlines=False, mss_bytes=mss_bytes)
    out: TcpTrace = TcpTrace([], [], [], 0, 0)
    for rec in reader:
        if isinstance(rec, ProbeSample):
            out.probes.append(rec)
        elif isinstance(rec, CongStateChange):
            out.cong_states.append(rec)
        else:
            out.retransmits.append(rec)
    out.lost_events, out.other_lines = reader.lost_events, reader.other_lines
    return out


def event_fields(format_text: str) -> dict[str, str]:
    """Field name -> C type of an event's `format` file (events/<sys>/<event>/format):
    the lines `field:<type> <name>[<n>];\\toffset:...`."""
    out: dict[str, str] = {}
    for line in format_text.splitlines():
        line = line.strip()
        if not line.startswith("field:"):
            continue
        decl = line[len("field:") : line.index(";")].strip()
        name = re.sub(r"\[.*\]$", "", decl.split()[-1]).lstrip("*")
        out[name] = decl[: decl.rindex(decl.split()[-1])].strip()
    return out


def port_filter(
    ports: Iterable[int],
    fields: Sequence[str] = ("sport", "dport"),
    format_text: str | None = None,
) -> str:
    """The tracefs filter expression (Documentation/trace/events.rst, "Event
    filtering") selecting the events whose `fields` (by default sport or dport, which
    all three events have, in host byte order) equal one of `ports`. Consecutive ports
    become a range. `fields=("dport",)` keeps a sender's sockets only (they connect to
    the server's port). With the event's `format_text`, checks that it has the fields.
    Write it to events/tcp/<event>/filter of the instance."""
    wanted = sorted(set(ports))
    if not wanted:
        raise ValueError("no ports to filter on")
    bad = [p for p in wanted if not 0 < p < 65536]
    if bad:
        raise ValueError(f"not a TCP port: {bad[0]}")
    if not fields:
        raise ValueError("no fields to filter on")
    if format_text is not None:
        have = event_fields(format_text)
        missing = [f for f in fields if f not in have]
        if missing:
            raise ValueError(f"the event has no field {missing[0]!r} (fields: {sorted(have)})")
    runs: list[tuple[int, int]] = []
    for p in wanted:
        if runs and p == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], p)
        else:
            runs.append((p, p))
    terms = []
    for field in fields:
        for lo, hi in runs:
            terms.append(
                f"{field} == {lo}" if lo == hi else f"({field} >= {lo} && {field} <= {hi})"
            )
    expr = " || ".join(terms)
    if len(expr) > FILTER_MAX_CHARS:
        raise ValueError(f"filter of {len(expr)} characters is longer than a tracefs filter")
    return expr


# --- helpers -------------------------------------------------------------------------
def _batch(event: str, rows: list[tuple[Any, ...]]) -> pa.RecordBatch:
    schema = SCHEMAS[event]
    cols = zip(*rows, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(cols, schema, strict=True)], schema=schema
    )


def _opt(f: dict[str, str], key: str, base: int) -> int | None:
    """The field as an int (base 16 takes a 0x prefix; %#x prints 0 as "0"), None if
    absent; ValueError if it is not a number."""
    v = f.get(key)
    if v is None:
        return None
    try:
        return int(v, base)
    except ValueError:
        raise ValueError(f"{key}={v!r} is not a number") from None


def _ip(addr: str) -> str:
    """An address as printed (%pI4, %pI6c, or inside %pISpc brackets) in host form."""
    if addr.startswith(_V4MAPPED) and "." in addr:
        return addr[len(_V4MAPPED) :]
    return f"[{addr}]" if ":" in addr else addr


def _hostport(text: str) -> str:
    """%pISpc ("10.0.0.1:5201", "[::ffff:10.0.0.1]:5201", "[fe80::1]:5201") -> ip:port."""
    if text.startswith("["):
        end = text.index("]")
        return f"{_ip(text[1:end])}{text[end + 1 :]}"
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"not an address:port: {text!r}")
    return text


def _sk_addrs(f: dict[str, str]) -> tuple[str, str]:
    """(local, peer) of the sk events (saddr/daddr for IPv4, saddrv6/daddrv6 else)."""
    sport, dport = int(f["sport"]), int(f["dport"])
    family = f.get("family")
    v6 = family == "AF_INET6" or (family is None and f.get("saddr") == "0.0.0.0"
                                  and "saddrv6" in f)  # fmt: skip
    if v6:
        s, d = _ip(f["saddrv6"]), _ip(f["daddrv6"])
    else:
        s, d = f["saddr"], f["daddr"]
    return f"{s}:{sport}", f"{d}:{dport}"


# --- the fast path: tcp_probe lines by the chunk --------------------------------------
# A run's trace is nearly all tcp_probe lines, whose fields have kept this order since
# the event was added (4.16: TP_printk in include/trace/events/tcp.h; `length=` became
# `data_len=`, `family=` came first in 6.2): one regex over a chunk of text finds them
# all at once (~4 µs a line here, against ~30 for TcpTraceReader's field-by-name read),
# and numpy converts the columns. The few other lines go to TcpTraceReader; a tcp_probe
# line the regex does not take is an error, never a silent gap.
_PROBE_FAST = re.compile(
    r" (\d+\.\d+): tcp_probe: (?:family=\w+ )?src=(\S+) dest=(\S+) mark=\w+ \w+=\d+ "
    r"snd_nxt=(\w+) snd_una=(\w+) snd_cwnd=(\d+) ssthresh=(\d+) snd_wnd=(\d+) srtt=(\d+) "
)
_PROBE_TAG = ": tcp_probe: "
CHUNK_BYTES = 8 << 20
FAST_SCHEMA = pa.schema([("t_s", pa.float64()), ("local", pa.string()), ("peer", pa.string()),
                         ("cwnd_pkts", pa.int64()), ("ssthresh_pkts", pa.int64()),
                         ("srtt_us", pa.float64()), ("inflight_bytes", pa.int64()),
                         ("snd_wnd_bytes", pa.int64())])  # fmt: skip


class FastTrace:
    """The tcp_probe samples of one trace (text lines with their newlines, e.g. an open
    file) as RecordBatches of FAST_SCHEMA, read a chunk at a time (`probe_batches`);
    the other events' records (CongStateChange, Retransmit, in trace order) each given
    to `on_other` as its chunk is read, or else kept in `others` (a trace with millions
    of retransmissions: give `on_other`); `counts`, `lost_events` and `other_lines` as
    TcpTraceReader has them, once the batches were read. The same numbers as
    TcpTraceReader (tested on captures)."""

    def __init__(
        self, lines: Iterable[str], chunk_bytes: int = CHUNK_BYTES,
        on_other: Callable[[TraceRecord], None] | None = None,
    ) -> None:  # fmt: skip
        self._lines = lines
        self._chunk = chunk_bytes
        self.others: list[TraceRecord] = []
        self._on_other = on_other or self.others.append
        self.counts = dict.fromkeys(EVENTS, 0)
        self.lost_events = 0
        self.other_lines = 0
        self._states: dict[tuple[str, str], str] = {}

    def _chunks(self) -> Iterator[tuple[str, list[str]]]:
        """(text of the chunk's tcp_probe lines, its other lines)."""
        probes: list[str] = []
        others: list[str] = []
        size = 0
        for line in self._lines:
            if not line.endswith("\n"):
                break  # the reader was stopped mid-line
            (probes if _PROBE_TAG in line else others).append(line)
            size += len(line)
            if size >= self._chunk:
                yield "".join(probes), others
                probes, others, size = [], [], 0
        if probes or others:
            yield "".join(probes), others

    def probe_batches(self) -> Iterator[pa.RecordBatch]:
        for text, others in self._chunks():
            rows = _PROBE_FAST.findall(text)
            if len(rows) != text.count("\n"):
                bad = next(ln for ln in text.splitlines() if not _PROBE_FAST.search(ln + " "))
                raise ValueError(
                    f"a tcp_probe line in a form not known here: {bad.strip()[:160]!r}"
                )
            if rows:
                self.counts[TCP_PROBE] += len(rows)
                yield _fast_batch(rows)
            if others:
                rest = TcpTraceReader(others)
                rest._states = self._states
                for rec in rest.records():
                    self._on_other(rec)
                for ev in (CONG_STATE_SET, RETRANSMIT_SKB):
                    self.counts[ev] += rest.counts[ev]
                self.lost_events += rest.lost_events
                self.other_lines += rest.other_lines


def _fast_batch(rows: list[tuple[str, ...]]) -> pa.RecordBatch:
    t, src, dst, nxt, una, cwnd, ssthresh, snd_wnd, srtt = zip(*rows, strict=True)
    n = len(rows)
    # %#x: "0x1f", but "0" for zero; int(x, 16) reads both.
    inflight = (np.fromiter((int(x, 16) for x in nxt), np.int64, n)
                - np.fromiter((int(x, 16) for x in una), np.int64, n)) & 0xFFFFFFFF  # fmt: skip
    thresh = np.array(ssthresh, dtype=np.int64)
    return pa.RecordBatch.from_arrays([
        pa.array(np.array(t, dtype=np.float64)),
        pa.array([_hostport(x) if x.startswith("[") else x for x in src], pa.string()),
        pa.array([_hostport(x) if x.startswith("[") else x for x in dst], pa.string()),
        pa.array(np.array(cwnd, dtype=np.int64)),
        pa.array(thresh, mask=thresh >= INFINITE_SSTHRESH),
        pa.array(np.array(srtt, dtype=np.float64)),
        pa.array(inflight),
        pa.array(np.array(snd_wnd, dtype=np.int64)),
    ], schema=FAST_SCHEMA)  # fmt: skip
