"""Parse an iperf3 client `-J` document (TCP, optionally `-P k`) into one record, and
read the received rate of a UDP one (`udp_received_bps`, the calibration's rate probe).

Units: bytes, bits per second (bps), microseconds (us), seconds (s). iperf3 already
reports `snd_cwnd` in bytes on Linux (tcpi_snd_cwnd * tcpi_snd_mss) and on FreeBSD
(tcpi_snd_cwnd is bytes there); `rtt`/`rttvar` are microseconds on both. FreeBSD has
no tcpi_pmtu, so iperf3 writes -1 for `pmtu` (and `reorder`, where present): those
become None. iperf3 before 3.2 computed FreeBSD cwnd wrongly (esnet/iperf #465, #338;
fixed in 3.2 per its RELNOTES), hence `cwnd_trusted`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, fields
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # imported where a batch is made: `ccbench run` reads iperf3 without it
    import pyarrow as pa

    from ccbench.reasons import Code, Reason

from ccbench.jsonio import jtype
from ccbench.parse import join_hostport
from ccbench.parse.batches import BATCH_ROWS, batched_records

# One interval row: stream, t_start_s, t_end_s, bytes, throughput_bps, retransmits,
# cwnd_bytes, snd_wnd_bytes, rtt_us, rttvar_us, pmtu_bytes, reorder, omitted.
IntervalRow = dict[str, Any]

_FREEBSD_CWND_FIXED = (3, 2)


@dataclass(frozen=True)
class Iperf3Stream:
    """End-of-test numbers of one TCP stream (end.streams[i])."""

    stream: int  # iperf3's socket number, the key shared with `intervals`
    local: str | None  # "ip:port" from start.connected
    peer: str | None
    duration_s: float | None  # sender-side seconds
    bytes_sent: int | None
    bytes_received: int | None
    sender_bps: float | None
    throughput_bps: float | None  # receiver side
    retransmits: int | None
    max_snd_cwnd_bytes: int | None
    max_snd_wnd_bytes: int | None
    min_rtt_us: int | None
    mean_rtt_us: int | None
    max_rtt_us: int | None


@dataclass(frozen=True)
class Iperf3Cpu:
    """end.cpu_utilization_percent: each process's CPU time over the test as % of ONE
    CPU (esnet/iperf src/iperf_util.c cpu_util: getrusage(RUSAGE_SELF) user and system
    time, and clock(), over the wall time since the test started; above 100 with
    several threads). `host_*` is the process that wrote the document, `remote_*` its
    peer's as exchanged at the end (a server's document has 0 there)."""

    host_total: float | None
    host_user: float | None
    host_system: float | None
    remote_total: float | None
    remote_user: float | None
    remote_system: float | None


@dataclass(frozen=True)
class Iperf3Result:
    """One iperf3 client run. Numeric fields are None when the document lacks them
    (error runs, older iperf3 versions, OSes without TCP_INFO)."""

    version: str | None  # "3.12" from "iperf 3.12"
    os: str | None  # first word of system_info, lower-case: "linux", "freebsd", ...
    system_info: str | None
    error: str | None  # the document's "error" string
    cc_sender: str | None  # end.sender_tcp_congestion (iperf3 >= 3.1.4)
    cc_receiver: str | None
    num_streams: int | None
    reverse: bool
    requested_duration_s: float | None  # start.test_start.duration
    omit_s: float | None
    timestamp_s: int | None  # start.timestamp.timesecs
    duration_s: float | None  # end.sum_sent.seconds (measured)
    bytes_sent: int | None
    bytes_received: int | None
    throughput_bps: float | None  # end.sum_received.bits_per_second
    sender_bps: float | None  # end.sum_sent.bits_per_second
    retransmits: int | None
    min_rtt_us: int | None  # min over streams
    mean_rtt_us: float | None  # unweighted mean of the streams' mean_rtt
    max_rtt_us: int | None  # max over streams
    max_snd_cwnd_bytes: int | None  # max over streams
    cwnd_trusted: bool
    streams: list[Iperf3Stream] = field(default_factory=list)
    intervals: list[IntervalRow] = field(default_factory=list)
    cpu: Iperf3Cpu | None = None  # None: the document has none (an error run)


def parse_version(version: str | None) -> tuple[int, ...] | None:
    """Version tuple: "iperf 3.17.1" -> (3, 17, 1), "iperf 3.9+" -> (3, 9), else None."""
    if not version:
        return None
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", version)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def is_cwnd_trusted(os_name: str | None, version: tuple[int, ...] | None) -> bool:
    """False only for FreeBSD senders whose iperf3 is older than 3.2 or unknown."""
    if os_name != "freebsd":
        return True
    return version is not None and version >= _FREEBSD_CWND_FIXED


class Iperf3FormatError(ValueError):
    """The document is JSON but not an iperf3 client document: a field has the wrong
    type (a list where an object belongs, a string or NaN where a number belongs).
    The message names the field, e.g. `end.sum_received.bits_per_second`."""


def parse_iperf3(doc: dict[str, Any]) -> Iperf3Result:
    """Parse a client-side iperf3 `-J` document (already json-loaded).

    Absent fields become None; present fields of the wrong type raise Iperf3FormatError.
    """
    if not isinstance(doc, dict):
        raise Iperf3FormatError(f"a JSON {jtype(doc)} where an iperf3 document belongs")
    start = _obj(doc.get("start"), "start")
    end = _obj(doc.get("end"), "end")
    test_start = _obj(start.get("test_start"), "start.test_start")
    sum_sent = _obj(end.get("sum_sent"), "end.sum_sent")
    sum_received = _obj(end.get("sum_received"), "end.sum_received")

    version_str = _str(start.get("version"), "start.version")
    version = parse_version(version_str)
    system_info = _str(start.get("system_info"), "start.system_info")
    os_name = system_info.split()[0].lower() if system_info and system_info.split() else None

    streams = _end_streams(end, start)
    min_rtts = [s.min_rtt_us for s in streams if s.min_rtt_us is not None]
    mean_rtts = [s.mean_rtt_us for s in streams if s.mean_rtt_us is not None]
    max_rtts = [s.max_rtt_us for s in streams if s.max_rtt_us is not None]
    cwnds = [s.max_snd_cwnd_bytes for s in streams if s.max_snd_cwnd_bytes is not None]

    error = doc.get("error")
    return Iperf3Result(
        version=version_str.split()[-1] if version_str and version_str.split() else None,
        os=os_name,
        system_info=system_info,
        error=str(error) if error else None,
        cc_sender=_str(end.get("sender_tcp_congestion"), "end.sender_tcp_congestion"),
        cc_receiver=_str(end.get("receiver_tcp_congestion"), "end.receiver_tcp_congestion"),
        num_streams=_int(test_start.get("num_streams"), "start.test_start.num_streams"),
        reverse=bool(test_start.get("reverse", 0)),
        requested_duration_s=_float(test_start.get("duration"), "start.test_start.duration"),
        omit_s=_float(test_start.get("omit"), "start.test_start.omit"),
        timestamp_s=_int(
            _obj(start.get("timestamp"), "start.timestamp").get("timesecs"),
            "start.timestamp.timesecs",
        ),
        duration_s=_float(sum_sent.get("seconds"), "end.sum_sent.seconds"),
        bytes_sent=_int(sum_sent.get("bytes"), "end.sum_sent.bytes"),
        bytes_received=_int(sum_received.get("bytes"), "end.sum_received.bytes"),
        throughput_bps=_float(
            sum_received.get("bits_per_second"), "end.sum_received.bits_per_second"
        ),
        sender_bps=_float(sum_sent.get("bits_per_second"), "end.sum_sent.bits_per_second"),
        retransmits=_int(sum_sent.get("retransmits"), "end.sum_sent.retransmits"),
        min_rtt_us=min(min_rtts) if min_rtts else None,
        mean_rtt_us=sum(mean_rtts) / len(mean_rtts) if mean_rtts else None,
        max_rtt_us=max(max_rtts) if max_rtts else None,
        max_snd_cwnd_bytes=max(cwnds) if cwnds else None,
        cwnd_trusted=is_cwnd_trusted(os_name, version),
        streams=streams,
        intervals=_intervals(doc.get("intervals")),
        cpu=_cpu(end.get("cpu_utilization_percent")),
    )


def _cpu(raw: Any) -> Iperf3Cpu | None:
    where = "end.cpu_utilization_percent"
    got = _obj(raw, where)
    if not got:
        return None
    return Iperf3Cpu(**{f.name: _float(got.get(f.name), f"{where}.{f.name}")
                        for f in fields(Iperf3Cpu)})  # fmt: skip


def _end_streams(end: dict[str, Any], start: dict[str, Any]) -> list[Iperf3Stream]:
    conns: dict[int, dict[str, Any]] = {}
    for i, c in enumerate(_list(start.get("connected"), "start.connected")):
        if isinstance(c, dict) and "socket" in c:
            sock = _int(c["socket"], f"start.connected[{i}].socket")
            if sock is not None:
                conns[sock] = c
    out: list[Iperf3Stream] = []
    for i, s in enumerate(_list(end.get("streams"), "end.streams")):
        at = f"end.streams[{i}]"
        s = _obj(s, at)
        snd = _obj(s.get("sender"), f"{at}.sender")
        rcv = _obj(s.get("receiver"), f"{at}.receiver")
        sock = _int(snd.get("socket", rcv.get("socket")), f"{at}.sender.socket")
        if sock is None:  # UDP end streams carry "udp" instead: not ours
            continue
        conn = conns.get(sock, {})
        at_s = f"{at}.sender"
        out.append(
            Iperf3Stream(
                stream=sock,
                local=_hostport(conn.get("local_host"), conn.get("local_port")),
                peer=_hostport(conn.get("remote_host"), conn.get("remote_port")),
                duration_s=_float(snd.get("seconds"), f"{at_s}.seconds"),
                bytes_sent=_int(snd.get("bytes"), f"{at_s}.bytes"),
                bytes_received=_int(rcv.get("bytes"), f"{at}.receiver.bytes"),
                sender_bps=_float(snd.get("bits_per_second"), f"{at_s}.bits_per_second"),
                throughput_bps=_float(rcv.get("bits_per_second"), f"{at}.receiver.bits_per_second"),
                retransmits=_int(snd.get("retransmits"), f"{at_s}.retransmits"),
                max_snd_cwnd_bytes=_nonneg(snd.get("max_snd_cwnd"), f"{at_s}.max_snd_cwnd"),
                max_snd_wnd_bytes=_nonneg(snd.get("max_snd_wnd"), f"{at_s}.max_snd_wnd"),
                min_rtt_us=_nonneg(snd.get("min_rtt"), f"{at_s}.min_rtt"),
                mean_rtt_us=_nonneg(snd.get("mean_rtt"), f"{at_s}.mean_rtt"),
                max_rtt_us=_nonneg(snd.get("max_rtt"), f"{at_s}.max_rtt"),
            )
        )
    return out


def read_iperf3(stream: IO[str]) -> Iperf3Result:
    """parse_iperf3 of an open `-J` file (ValueError: not JSON, or not iperf3's).

    No streaming JSON reader: the document is one object whose interval list grows
    about 1 kB per second per stream; json.load of a 3000 s `-i 1 -P 2` document
    peaks at 9 MB of Python objects (0.9 MB at 300 s) and is 1.5x faster than
    ijson's C backend walking the intervals alone (measured 2026-11-24)."""
    return parse_iperf3(json.load(stream))


class RunFiles(Protocol):
    """What read_report needs of a run's raw files (ccbench.layout.RawDir: reading one
    never raises; what is wrong with it is a problem naming it)."""

    problems: list[Reason]

    def exists(self, name: str) -> bool: ...
    def text(self, name: str) -> str | None: ...
    def json(self, name: str) -> Any: ...
    def problem(self, name: str, what: str, code: Code = ...) -> None: ...


def read_report(rd: RunFiles, name: str) -> tuple[Iperf3Result | None, bool]:
    """The iperf3 `-J` report `name` of a run (a client's or a server's), None when
    there is none; the flag says the file was there but unreadable, its reason in
    rd.problems. An absent or empty file is no report (the client died first), as is
    a server's text log of older runs (no .json). The one reader of both the summary
    (summarize.flows) and the time series (timeseries)."""
    if not rd.exists(name):
        return None, False
    text = rd.text(name)
    if text is None:
        return None, True
    if not text.strip():
        return None, False
    n = len(rd.problems)
    doc = rd.json(name)
    if len(rd.problems) > n:
        return None, True
    try:
        return parse_iperf3(doc), False
    except ValueError as e:
        rd.problem(name, str(e))
        return None, True


def udp_received_bps(doc: dict[str, Any]) -> float | None:
    """What the receiver got of a UDP client run (`iperf3 -u -J`), in bits per second;
    None when the document holds no UDP result (an error run).

    iperf3 >= 3.11 writes it as `end.sum_received.bits_per_second`. Up to 3.10 (3.9 in
    Debian 11 and Ubuntu 22.04) there is only `end.sum` (iperf_api.c,
    iperf_print_results(), "Summary sum, UDP"): its `bytes` and `bits_per_second` are the
    sender's, `lost_packets` is the receiver's count of sequence gaps, `packets` the
    sender's count and `seconds` the receiver's duration; so the received bytes are the
    sent ones less the lost share. Datagrams still in flight when the test ended are
    neither received nor counted lost there: that estimate is high by at most a queue
    and a BDP's worth."""
    if not isinstance(doc, dict):
        raise Iperf3FormatError(f"a JSON {jtype(doc)} where an iperf3 document belongs")
    end = _obj(doc.get("end"), "end")
    if "sum_received" in end:
        where = "end.sum_received.bits_per_second"
        return _float(_obj(end["sum_received"], "end.sum_received").get("bits_per_second"), where)
    total = _obj(end.get("sum"), "end.sum")
    sent = _int(total.get("bytes"), "end.sum.bytes")
    packets = _int(total.get("packets"), "end.sum.packets")
    lost = _int(total.get("lost_packets"), "end.sum.lost_packets")
    seconds = _float(total.get("seconds"), "end.sum.seconds")
    if sent is None or lost is None or not packets or not seconds:
        return None
    return sent * (packets - lost) / packets * 8 / seconds


def interval_schema() -> pa.Schema:
    """The Arrow schema of Iperf3Result.intervals' rows."""
    import pyarrow as pa

    return pa.schema(
        [("stream", pa.int64()), ("t_start_s", pa.float64()), ("t_end_s", pa.float64()),
         ("bytes", pa.int64()), ("throughput_bps", pa.float64())]
        + [(k, pa.int64()) for k in ("retransmits", "cwnd_bytes", "snd_wnd_bytes", "rtt_us",
                                     "rttvar_us", "pmtu_bytes", "reorder")]
        + [("omitted", pa.bool_())]
    )  # fmt: skip


def interval_batches(rows: list[IntervalRow], size: int = BATCH_ROWS) -> list[pa.RecordBatch]:
    """Iperf3Result.intervals as RecordBatches (interval_schema) of at most `size` rows."""
    return list(batched_records(rows, interval_schema(), size))


def _intervals(raw: Any) -> list[IntervalRow]:
    rows: list[IntervalRow] = []
    for i, interval in enumerate(_list(raw, "intervals")):
        at_i = f"intervals[{i}]"
        for j, s in enumerate(_list(_obj(interval, at_i).get("streams"), f"{at_i}.streams")):
            at = f"{at_i}.streams[{j}]"
            s = _obj(s, at)
            rows.append(
                {
                    "stream": _int(s.get("socket"), f"{at}.socket"),
                    "t_start_s": _float(s.get("start"), f"{at}.start"),
                    "t_end_s": _float(s.get("end"), f"{at}.end"),
                    "bytes": _int(s.get("bytes"), f"{at}.bytes"),
                    "throughput_bps": _float(s.get("bits_per_second"), f"{at}.bits_per_second"),
                    "retransmits": _nonneg(s.get("retransmits"), f"{at}.retransmits"),
                    "cwnd_bytes": _nonneg(s.get("snd_cwnd"), f"{at}.snd_cwnd"),
                    "snd_wnd_bytes": _nonneg(s.get("snd_wnd"), f"{at}.snd_wnd"),
                    "rtt_us": _nonneg(s.get("rtt"), f"{at}.rtt"),
                    "rttvar_us": _nonneg(s.get("rttvar"), f"{at}.rttvar"),
                    "pmtu_bytes": _nonneg(s.get("pmtu"), f"{at}.pmtu"),
                    "reorder": _nonneg(s.get("reorder"), f"{at}.reorder"),
                    "omitted": bool(s.get("omitted", False)),
                }
            )
    return rows


def _obj(x: Any, where: str) -> dict[str, Any]:
    if x is None:
        return {}
    if not isinstance(x, dict):
        raise Iperf3FormatError(f"{where}: a JSON {jtype(x)} where an object belongs")
    return x


def _list(x: Any, where: str) -> list[Any]:
    if x is None:
        return []
    if not isinstance(x, list):
        raise Iperf3FormatError(f"{where}: a JSON {jtype(x)} where a list belongs")
    return x


def _str(x: Any, where: str) -> str | None:
    if x is None or isinstance(x, str):
        return x
    raise Iperf3FormatError(f"{where}: a JSON {jtype(x)} where a string belongs")


def _number(x: Any, where: str) -> float | int | None:
    """A JSON number, or None when absent (a boolean counts as absent, as before)."""
    if x is None or isinstance(x, bool):
        return None
    if not isinstance(x, (int, float)):
        raise Iperf3FormatError(f"{where}: {x!r} is not a number")
    if isinstance(x, float) and not math.isfinite(x):
        raise Iperf3FormatError(f"{where}: {x} is not a finite number")
    return x


def _int(x: Any, where: str) -> int | None:
    v = _number(x, where)
    return None if v is None else int(v)


def _nonneg(x: Any, where: str) -> int | None:
    """iperf3 writes -1 for 'not available on this OS' (FreeBSD pmtu/reorder)."""
    v = _int(x, where)
    return None if v is None or v < 0 else v


def _float(x: Any, where: str) -> float | None:
    v = _number(x, where)
    return None if v is None else float(v)


def _hostport(host: Any, port: Any) -> str | None:
    if host is None or port is None:
        return None
    return join_hostport(str(host), port)
