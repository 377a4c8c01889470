"""The samplers' rows of a run's time series, read as streams (ccbench.timeseries):
the senders' `ss` files (Linux), their siftr logs (FreeBSD) and rt1's queue samples.

Each file is read once, in columnar batches (pyarrow), never as one string or a list
of dicts, so memory follows the rows kept, not the file's size: a siftr log's
incoming packets are dropped batch by batch, and so are sockets that are not a flow's.
A file that does not parse gives no rows and one problem naming it (RawDir.problem).
"""

from __future__ import annotations

import functools
import itertools
import lzma
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ccbench import layout
from ccbench.layout import RawDir
from ccbench.parse.qdisc import QueuePoint, iter_qdisc_samples, iter_queue_points
from ccbench.parse.siftr_stream import SiftrReader
from ccbench.parse.ss import SsReader
from ccbench.timeseries_sink import FileRows, Sink

# The sampler runs from before the first flow to after the last: its samples must
# reach this share of the traffic, else the file was cut short.
SS_MIN_COVERAGE = 0.9
# ss records become a batch from a list of dicts (40-odd keys each): a few thousand at
# a time keep that list small.
SS_BATCH_ROWS = 4096
QUEUE_BATCH_ROWS = 8192  # queue samples per part (each a QueuePoint until then)
SIFTR_THREADS = 2  # logs read at once: a run has one per FreeBSD sender, the seeds two
# What reading a damaged or truncated stored file may raise (before ValueError: a
# UnicodeDecodeError is one).
_READ_ERRORS = (UnicodeDecodeError, OSError, EOFError, lzma.LZMAError, zlib.error)


def _unreadable(e: BaseException) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "not UTF-8 text"
    return f"unreadable ({type(e).__name__}: {e})"


def _flow_of(local: pa.Array, local_to_flow: dict[str, int]) -> np.ndarray:
    """Each row's flow (0: not a flow's socket) from its local address (or, siftr2,
    its flowid)."""
    if not local_to_flow:
        return np.zeros(len(local), dtype=np.int64)
    keys = pa.array(list(local_to_flow), pa.string())
    idx = pc.index_in(local, value_set=keys).to_numpy(zero_copy_only=False)
    flows = np.array([0, *local_to_flow.values()], dtype=np.int64)
    return flows[np.nan_to_num(idx, nan=-1).astype(np.int64) + 1]


def as_float(col: Any) -> np.ndarray:
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def open_stored(rd: RawDir, name: str) -> IO[str] | None:
    """The stored file (plain or compressed) as a text stream; None and a problem when
    it cannot be opened."""
    p = layout.stored(rd.path, name)
    if p is None:
        return None
    try:
        return layout.open_text(p)
    except OSError as e:
        rd.problem(name, f"unreadable ({e.strerror or e})")
        return None


def read_whole(rd: RawDir, name: str, rows: FileRows, what: str, read: Callable[[], None]) -> bool:
    """`read` a sampler file's rows; False (its rows discarded, one problem naming the
    file) when it is not text, cannot be read whole, or is not `what`."""
    try:
        read()
    except _READ_ERRORS as e:
        rows.discard()
        rd.problem(name, _unreadable(e))
        return False
    except ValueError as e:
        rows.discard()
        rd.problem(name, f"not {what} ({e})")
        return False
    return True


def add_sender_rows(
    rows: FileRows, b: pa.RecordBatch, local_to_flow: dict[str, int], t0: float | None,
    offset: float, source: str, cols: dict[str, np.ndarray],
) -> None:  # fmt: skip
    """A batch's samples of the run's flows (told by their local address), times from
    the run's start (`offset`: the batch's clock to wall-clock time)."""
    flow = _flow_of(b.column("local"), local_to_flow)
    keep = flow > 0
    if t0 is None or not keep.any():
        return
    rows.add(pd.DataFrame({
        "flow": flow[keep], "t_s": as_float(b.column("t_s"))[keep] + offset - t0,
        **{k: v[keep] for k, v in cols.items()}, "source": source,
    }))  # fmt: skip


def ss_rows(
    rd: RawDir, t0: float | None, traffic_s: float, local_to_flow: dict[str, int], sink: Sink
) -> None:
    """The ss samplers' rows (Linux senders) into `sink`, each file's once it read whole;
    every file is checked, even when the run's start time is unknown and it gives no
    rows."""
    for name in rd.glob(layout.SS_GLOB):
        fh = open_stored(rd, name)
        if fh is None:
            continue
        reader = SsReader(fh)
        rows = sink.file_rows()
        since = RetransSince()

        def read(fh: IO[str] = fh, reader: SsReader = reader, rows: FileRows = rows,
                 since: RetransSince = since) -> None:  # fmt: skip
            with fh:
                for b in reader.batches(SS_BATCH_ROWS):
                    cols = {**ss_columns(b), "retransmits": since(b)}
                    add_sender_rows(rows, b, local_to_flow, t0, 0.0, "ss", cols)

        if not read_whole(rd, name, rows, "ss samples", read):
            continue
        last = reader.last_ts
        if last is None:
            rows.discard()
            rd.problem(name, "no samples")
            continue
        if t0 is not None and traffic_s > 0 and last - t0 < SS_MIN_COVERAGE * traffic_s:
            rd.problem(name, f"samples end {last - t0:.1f} s into {traffic_s:g} s of traffic "
                             "(cut short)")  # fmt: skip
        sink.commit(rows)


def omitted_is_zero(b: pa.RecordBatch, col: str) -> np.ndarray:
    """An ss batch's column where ss omits the field at zero (`unacked:`, `retrans:`):
    0 on a parsed socket's row (it has an MSS), NaN on a row that is not one."""
    x = as_float(b.column(col))
    return np.where(np.isnan(x) & ~np.isnan(as_float(b.column("mss_bytes"))), 0.0, x)


def ss_columns(b: pa.RecordBatch) -> dict[str, np.ndarray]:
    """An ss batch's columns of the series (docs/series.md). ss prints counts in
    segments: ssthresh and unacked become bytes at the socket's MSS (unacked, which ss
    omits at zero, counts whole segments: SACKed and lost ones too, tcpi_unacked =
    packets_out). BBR's model only on a BBR flow's rows."""
    mss = as_float(b.column("mss_bytes"))
    unacked = omitted_is_zero(b, "unacked")
    return {
        "throughput_bps": as_float(b.column("delivery_rate_bps")),
        "cwnd_bytes": as_float(b.column("cwnd_bytes")),
        "rtt_us": as_float(b.column("rtt_us")),
        "ssthresh_bytes": as_float(b.column("ssthresh_pkts")) * mss,
        "inflight_bytes": unacked * mss,
        "rwnd_bytes": as_float(b.column("snd_wnd_bytes")),
        "min_rtt_us": as_float(b.column("minrtt_us")),
        "bbr_bw_bps": as_float(b.column("bbr_bw_bps")),
        "bbr_min_rtt_us": as_float(b.column("bbr_mrtt_us")),
        "bbr_pacing_gain": as_float(b.column("bbr_pacing_gain")),
        "bbr_cwnd_gain": as_float(b.column("bbr_cwnd_gain")),
    }


class RetransSince:
    """Segments each socket retransmitted since its previous ss sample, from ss's
    cumulative count (tcpi_total_retrans; ss omits `retrans:` while both counts are 0:
    iproute2 misc/ss.c, tcp_stats_print). A socket's first sample counts from its start.
    NaN where the row is not a parsed socket's (no MSS)."""

    def __init__(self) -> None:
        self.last: dict[str, float] = {}

    def __call__(self, b: pa.RecordBatch) -> np.ndarray:
        total = omitted_is_zero(b, "retrans_total")
        out = np.full(len(total), np.nan)
        for i, (local, v) in enumerate(zip(b.column("local").to_pylist(), total, strict=True)):
            if not np.isnan(v):
                out[i] = v - self.last.get(local, 0.0)
                self.last[local] = v
        return out


def siftr_rows(rd: RawDir, t0: float | None, local_to_flow: dict[str, int], sink: Sink) -> None:
    """The siftr logs' rows (FreeBSD senders: the flows' outgoing packets) into `sink`,
    each log's once it read whole (a siftr2 log's rows find their flow by the footer's
    addresses, so they wait for it); every file is checked, even when the run's start
    time is unknown and it gives no rows. Two logs are read at once (most of the work,
    gzip, pyarrow's CSV reader and compute, runs without the GIL); their rows join the
    table, and their problems the list, in the files' order."""
    names = rd.glob(layout.SIFTR_GLOB)
    with ThreadPoolExecutor(max_workers=SIFTR_THREADS) as pool:
        jobs = [pool.submit(_read_siftr, rd, n, t0, local_to_flow, sink) for n in names]
        try:
            for name, job in zip(names, jobs, strict=True):
                rows, problem = job.result()
                if problem is not None:
                    rd.problem(name, problem)
                if rows is not None:
                    sink.commit(rows)
        finally:  # an error: the logs not taken leave no spill file behind
            for job in jobs:
                if not job.cancel() and job.exception() is None:
                    rows, _ = job.result()
                    if rows is not None:
                        rows.discard()


def _read_siftr(
    rd: RawDir, name: str, t0: float | None, local_to_flow: dict[str, int], sink: Sink
) -> tuple[FileRows | None, str | None]:
    """One log's rows (None: none to take) and its problem (None: it read whole)."""
    path = layout.stored(rd.path, name)
    if path is None:
        return None, None
    try:
        fh = layout.open_binary(path)
    except OSError as e:
        return None, f"unreadable ({e.strerror or e})"
    rows: FileRows | None = None
    try:
        with fh:
            reader = SiftrReader(fh, SIFTR_BLOCK_BYTES, SIFTR_KEYS, counts=False)
            enable_s = reader.enable_us / 1e6  # = reader.log().enable_time_s
            by_id: dict[str, int] = {}  # siftr2: flowid -> flow, once the footer is read
            # siftr 1.x records name their addresses; siftr2's only their flowid
            footer = "laddr" not in reader.layout.fields
            if footer:
                reader.select((*SIFTR_KEYS, "flowid"))
            rows = sink.file_rows(functools.partial(_siftr2_flows, by_id) if footer else None)
            for b in reader.batches():
                if t0 is not None:
                    rows.add(_siftr_part(b, local_to_flow, enable_s, t0))
            # siftr2: a flow's local address is its footer's.
            by_id.update({fid: local_to_flow.get(f.local or "", 0)
                          for fid, f in reader.flows_by_id().items()})  # fmt: skip
    except _READ_ERRORS as e:
        problem = _unreadable(e)
    except ValueError as e:
        problem = str(e)
    except BaseException:
        if rows is not None:
            rows.discard()
        raise
    else:
        return rows, None
    if rows is not None:
        rows.discard()
    return None, problem


# FreeBSD's ssthresh before the first reduction (tcp_newtcpcb, sys/netinet/tcp_subr.c:
# TCP_MAXWIN << TCP_MAX_WINSHIFT), read as infinite: null (NaN), as Linux's.
SIFTR_INFINITE_SSTHRESH = 65535 << 14
# What the series takes of a siftr record (SiftrReader reads only these fields), and
# a siftr2 record's flowid (its flow's addresses are in the footer).
SIFTR_KEYS = ("t_s", "direction", "local", "cwnd_bytes", "ssthresh_bytes", "srtt_us",
              "snd_wnd_bytes", "inflight_bytes")  # fmt: skip
# Text per batch: bigger than the reader's default, so the per-batch cost (a few
# dozen Arrow calls) stays small beside the rows' (about 48,000 siftr 1.3 records).
SIFTR_BLOCK_BYTES = 8 << 20


def siftr_columns(b: pa.RecordBatch | pa.Table) -> dict[str, pa.Array]:
    """A siftr batch's columns of the series (docs/series.md), all in bytes already:
    inflight is snd_max - snd_una in siftr 1.x, the SACK-aware pipe in siftr2."""
    ssthresh = _f64(b.column("ssthresh_bytes"))
    infinite = pc.greater_equal(ssthresh, float(SIFTR_INFINITE_SSTHRESH))
    return {
        "cwnd_bytes": _f64(b.column("cwnd_bytes")),
        "rtt_us": _f64(b.column("srtt_us")),
        "ssthresh_bytes": pc.if_else(infinite, pa.scalar(None, pa.float64()), ssthresh),
        "inflight_bytes": _f64(b.column("inflight_bytes")),
        "rwnd_bytes": _f64(b.column("snd_wnd_bytes")),
    }


def _f64(col: Any) -> pa.Array:
    return pc.cast(col, pa.float64())


_SIFTR = pa.scalar("siftr", pa.large_string())


def _siftr_part(
    b: pa.RecordBatch, local_to_flow: dict[str, int], enable_s: float, t0: float
) -> pa.Table:
    """A batch's outgoing records of the run's flows, as an Arrow table of the series'
    columns; siftr2's (no addresses) with flow -1 and their flowid, for _siftr2_flows."""
    keep = pc.equal(b.column("direction"), "out").to_numpy(zero_copy_only=False)
    siftr2 = "flowid" in b.schema.names  # no addresses (_read_siftr)
    if not siftr2:
        flows = _flow_of(b.column("local"), local_to_flow)
        keep &= flows > 0
    b = b.select([k for k in b.schema.names if k not in ("direction", "local")])
    b = b.filter(pa.array(keep))  # once, and not the strings
    flow = np.full(b.num_rows, -1, dtype=np.int64) if siftr2 else flows[keep]
    # (enable + t) - t0, as the table always had it
    t_s = pc.subtract(pc.add(pa.scalar(enable_s), _f64(b.column("t_s"))), pa.scalar(t0))
    extra = {"flowid": b.column("flowid")} if siftr2 else {}
    return pa.table({"flow": pa.array(flow), "t_s": t_s, **siftr_columns(b),
                     "source": pa.repeat(_SIFTR, b.num_rows), **extra})  # fmt: skip


def _siftr2_flows(by_id: dict[str, int], part: pa.Table) -> pa.Table:
    """siftr2's rows given their flow (by flowid) and only the run's flows kept."""
    if "flowid" not in part.column_names:
        return part
    flow = _flow_of(part.column("flowid"), by_id)
    keep = flow > 0
    part = part.drop_columns(["flowid"]).filter(pa.array(keep))
    return part.set_column(part.column_names.index("flow"), "flow", pa.array(flow[keep]))


def qdisc_rows(rd: RawDir, file: str, t0: float, sink: Sink) -> None:
    """The bottleneck queue's rows (flow 0) from its sampler's `file` into `sink`, once
    the file read whole; the file's problems are the summary's."""
    fh = open_stored(rd, file)
    if fh is None:
        return
    rows = sink.file_rows()
    first: QueuePoint | None = None
    try:
        with fh:
            points = iter_queue_points(iter_qdisc_samples(fh))
            while pts := tuple(itertools.islice(points, QUEUE_BATCH_ROWS)):
                first = first or pts[0]
                rows.add(_queue_part(pts, first, t0))
    except (ValueError, *_READ_ERRORS):
        rows.discard()
        return
    sink.commit(rows)


def _queue_part(pts: tuple[QueuePoint, ...], first: QueuePoint, t0: float) -> pd.DataFrame:
    """Counters from the first sample on."""
    d0, s0, o0 = first.drops, first.sent_pkts, first.overlimits
    return pd.DataFrame({
        "flow": 0, "source": "qdisc", "t_s": [p.t_unix - t0 for p in pts],
        "backlog_pkts": [p.backlog_pkts for p in pts],
        "backlog_bytes": [p.backlog_bytes for p in pts],
        "drops": [p.drops - d0 for p in pts],
        "sent_pkts": [p.sent_pkts - s0 for p in pts],
        "overlimits": [None if p.overlimits is None or o0 is None else p.overlimits - o0
                       for p in pts],
    })  # fmt: skip
