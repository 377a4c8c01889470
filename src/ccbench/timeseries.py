"""Tidy time series of one run from its raw files: every column, per source, with its
unit, origin and limits, is in docs/series.md.

Rows: run_id, flow, source, t_s (seconds since the run started) and the columns that
source gives (NaN in the others). Sources: "iperf3" (the sender's per-interval
report, every OS: what its application wrote in `app_written_bps`, never in
`throughput_bps`, which holds only what crossed the wire) and "receiver" (the server's
own intervals, `throughput_bps`); the senders' own
samples, finest first, "tcp_probe" (Linux, per ACK), "ss" (Linux, every ss_interval_s)
and "siftr" (FreeBSD, per packet): cwnd_bytes, rtt_us and, where the tool gives them,
ssthresh_bytes, inflight_bytes, rwnd_bytes (the peer's advertised window), min_rtt_us
and BBR's model on ss rows of a BBR flow (bbr_bw_bps, bbr_min_rtt_us, bbr_pacing_gain,
bbr_cwnd_gain: its phase, docs/series.md); "ca_state" (Linux, traced runs): one
row per change of a flow's congestion state, `ca_state` the enum tcp_ca_state code
(0 Open .. 4 Loss). "qdisc" rows (flow 0: the bottleneck, not a flow) are rt1's queue
sampled every qdisc_interval_s: backlog_pkts, backlog_bytes, drops and sent_pkts (the
child queue's, cumulative since the first sample), overlimits (the shaper's,
likewise). Files written before a column existed lack it (read it as NaN); files
written before `app_written_bps` held the iperf3 rows' writes in `throughput_bps`:
upgrade.timeseries brings them forward.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ccbench import instruments, layout, metrics, runmeta
from ccbench.instruments import SENDER_SOURCES, SeriesContext
from ccbench.layout import RawDir, load_spec
from ccbench.metrics import RttBound
from ccbench.parse.iperf3 import Iperf3Result, read_report
from ccbench.reasons import Reason
from ccbench.runmeta import RunMeta
from ccbench.spec import Flow, RunSpec
from ccbench.timeseries_sink import Series, Sink
from ccbench.timeseries_stats import SeriesStats

QUEUE_COLUMNS = ["backlog_pkts", "backlog_bytes", "drops", "sent_pkts", "overlimits"]
# The senders' state beyond cwnd and RTT, and the congestion-state code: added after
# the columns older files have, which are a prefix of these.
STATE_COLUMNS = ["ssthresh_bytes", "inflight_bytes", "rwnd_bytes", "min_rtt_us",
                 "bbr_bw_bps", "bbr_min_rtt_us", "bbr_pacing_gain", "bbr_cwnd_gain",
                 "ca_state"]  # fmt: skip
# The bytes a sender's application wrote per iperf3 interval (not what crossed the
# wire: throughput_bps): last, so older files' columns stay a prefix.
WRITTEN_COLUMN = "app_written_bps"
COLUMNS = ["run_id", "flow", "source", "t_s", "throughput_bps", "cwnd_bytes", "rtt_us",
           "retransmits", *QUEUE_COLUMNS, *STATE_COLUMNS, WRITTEN_COLUMN]  # fmt: skip


# Per-interval throughput comes from two iperf3 reports. DELIVERED: the server's own
# intervals (raw/server-K.json), bytes the receiver read from its socket, which is what
# crossed the bottleneck. WRITTEN: the client's intervals, bytes the application wrote
# into its socket (esnet/iperf src/iperf_api.c: each side counts its own bytes), which
# run ahead of the wire by the socket buffer and show dips the wire does not have;
# stored in their own column (WRITTEN_COLUMN), drawn only for runs made before servers
# wrote JSON, and labelled so.
DELIVERED = "receiver"
WRITTEN = "iperf3"
THROUGHPUT_COLUMN = {DELIVERED: "throughput_bps", WRITTEN: WRITTEN_COLUMN}


def throughput_source(ts: pd.DataFrame) -> str:
    """Where these rows' per-interval throughput comes from: the receiver's intervals
    when the run has them, else the sender's writes (older runs)."""
    return DELIVERED if (ts["source"] == DELIVERED).any() else WRITTEN


def throughput_column(source: str) -> str:
    """The column that holds the per-interval throughput of `source`'s rows."""
    return THROUGHPUT_COLUMN[source]


def throughput_label(source: str) -> str:
    """What a figure's caption calls the throughput of `source`."""
    if source == DELIVERED:
        return "delivered per iperf3 interval (the receiver's own intervals)"
    return (
        "bytes the sender's application wrote per iperf3 interval (a run made before "
        "ccbench recorded the receiver's intervals: dips may not be on the wire)"
    )


def finest_source(ts: pd.DataFrame) -> str:
    """The finest source of cwnd/RTT samples these rows have: ss, siftr, else iperf3.
    The one choice behind the srtt statistics (summary.run_metrics), the cwnd/RTT
    plots (tsplot) and the figures' captions."""
    return next((s for s in SENDER_SOURCES if (ts["source"] == s).any()), "iperf3")


def build(raw: Path) -> pd.DataFrame:
    """The time series in memory (small runs, tests); rows from files that do not parse
    are left out (write_checked says which)."""
    spec = load_spec(raw)
    rd = RawDir(raw)
    files = None if rd.exists(layout.SKIPPED) else (rd, runmeta.load(rd, len(spec.flows)))
    with tempfile.TemporaryDirectory(prefix=".timeseries-", dir=raw.parent) as d:
        series, _, _ = write_checked(Path(d) / layout.TIMESERIES, spec, files)
        return series.frame()


def write_checked(
    path: Path, spec: RunSpec, files: tuple[RawDir, RunMeta] | None, bound: RttBound | None = None
) -> tuple[Series, SeriesStats, list[Reason]]:
    """Write the time series of a run of `spec` to `path` as its files are read
    (timeseries_sink: row groups, never the whole table in memory); returns it, what the
    verdict needs of it (timeseries_stats, RTT excess counted above `bound`), and one
    problem (naming the file) per sampler file (ss, siftr) that is not text, does not
    parse, or was cut short: its rows are left out, and the verdict (summarize.judge)
    makes the run invalid. `files`: the run's raw/ reader and its meta.json as read
    (summarize.context; None: a run not run, no rows). iperf3 and meta.json problems are
    the summary's (they are its files too); here such a file just gives no rows."""
    stats = SeriesStats(SENDER_SOURCES, bound, spec.topology.mss_bytes)
    sink = Sink(path, spec.run_id, _frame, stats)
    problems: list[Reason] = []
    try:
        if files is not None:
            problems = _read(*files, spec, sink)
        return sink.close(), stats, problems
    except BaseException:
        sink.abort()
        raise


def _read(rd: RawDir, meta: RunMeta, spec: RunSpec, sink: Sink) -> list[Reason]:
    """The rows of every file, into `sink`; the problems the samplers' files add to
    `rd` (what the summary found before is its own)."""
    seen = len(rd.problems)
    frames, local_to_flow = _iperf3_rows(rd, spec, meta.flow_starts)
    for f in frames:
        sink.add(f)
    ctx = SeriesContext(meta.started_unix, spec.traffic_s, local_to_flow,
                        spec.topology.mss_bytes)  # fmt: skip
    instruments.add_rows(rd, meta.instruments, ctx, sink)
    return rd.problems[seen:]


def iperf3_frame(st: SeriesStats) -> pd.DataFrame:
    """The iperf3 interval rows (sender and receiver) the statistics kept, as the table
    has them (jain_series)."""
    return _frame(st.iperf3)


def sender_samples(path: Path, flow: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Flow `flow`'s sender RTT samples (t_s, rtt_us, cwnd_bytes: the senders' sources'
    rows) read back from a written time series, a row group at a time
    (timeseries_stats.rtt_excess)."""
    pf = pq.ParquetFile(path)
    cols = ["flow", "source", "t_s", "rtt_us", "cwnd_bytes"]
    for g in range(pf.metadata.num_row_groups):  # (iter_batches held every group's buffers)
        b = pf.read_row_group(g, columns=cols, use_threads=False)
        src = b.column("source")
        mine = pc.and_(pc.equal(b.column("flow"), flow), pc.is_in(src, pa.array(SENDER_SOURCES)))
        t, r, c = (np.asarray(pc.cast(b.column(n).filter(mine), pa.float64()).to_numpy(
            zero_copy_only=False), dtype=float) for n in cols[2:])  # fmt: skip
        yield t, r, c


def _iperf3_rows(
    rd: RawDir, spec: RunSpec, started: dict[int, float]
) -> tuple[list[pd.DataFrame], dict[str, int]]:
    """Every flow's iperf3 interval rows, and each stream's local address -> its flow
    (how the samplers' sockets are told apart). A file that does not parse gives no
    rows (its reason is the summary's)."""
    frames: list[pd.DataFrame] = []
    local_to_flow: dict[str, int] = {}
    quiet = RawDir(rd.path)  # what is wrong with these files is said by the summary
    for k, f in enumerate(spec.flows, start=1):
        offset = started.get(k, f.start_s)
        res, _ = read_report(quiet, layout.iperf3(k))
        if res is not None:
            for s in res.streams:
                if s.local:
                    local_to_flow[s.local] = k
            frames.append(_iperf3_flow_rows(k, offset, res))
        # The server's intervals start when its test starts, within about one RTT of
        # the client's (both at TEST_START): placed at the client's start.
        got, _ = read_report(quiet, layout.server(k))
        if got is not None and got.intervals:
            frames.append(_iperf3_flow_rows(k, offset, got, DELIVERED))
    return frames, local_to_flow


def _iperf3_flow_rows(
    k: int, offset: float, res: Iperf3Result, source: str = WRITTEN
) -> pd.DataFrame:
    # Several streams (-P): sum throughput per interval, average cwnd/RTT.
    by_t: dict[float, list[dict[str, Any]]] = {}
    for iv in res.intervals:
        if iv["t_end_s"] is not None:
            by_t.setdefault(iv["t_end_s"], []).append(iv)
    t_ends = sorted(by_t)
    return pd.DataFrame({
        "flow": k,
        "source": source,
        "t_s": [offset + t for t in t_ends],
        # each side's own byte count: the receiver's crossed the wire, the sender's were
        # written by its application
        throughput_column(source): [sum(i["throughput_bps"] or 0 for i in by_t[t])
                                    for t in t_ends],
        "cwnd_bytes": [_mean([i["cwnd_bytes"] for i in by_t[t]]) for t in t_ends],
        "rtt_us": [_mean([i["rtt_us"] for i in by_t[t]]) for t in t_ends],
        # the receiver counts no retransmissions: NaN, not 0
        "retransmits": [sum(i["retransmits"] or 0 for i in by_t[t]) if source == WRITTEN
                        else math.nan for t in t_ends],
    })  # fmt: skip


def _frame(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """The rows as the table, with the same column types however few rows there are."""
    frames = [f for f in frames if len(f)]
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    df = df.reindex(columns=COLUMNS)
    return df.astype({"flow": "int64", "t_s": "float64", "throughput_bps": "float64",
                      "cwnd_bytes": "float64", "rtt_us": "float64",
                      **dict.fromkeys([*QUEUE_COLUMNS, *STATE_COLUMNS, WRITTEN_COLUMN],
                                      "float64")})  # fmt: skip


def _mean(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def jain_series(
    ts: pd.DataFrame, flows: Sequence[Flow], interval_s: float
) -> tuple[list[float], list[float]]:
    """Jain's index per iperf3 interval, the one series behind convergence_s (summary)
    and the Jain-over-time figure: the delivered throughput (throughput_source) in
    intervals after the last flow start until the first flow ends, binned to the
    interval grid (staggered flows to the nearest interval), times in seconds since the
    last flow started. ([], []) with fewer than 2 flows."""
    src = throughput_source(ts)
    ts = ts[ts["source"] == src]
    if ts.empty or len(flows) < 2 or not interval_s > 0:
        return [], []
    last_start = max(f.start_s for f in flows)
    end = min(f.start_s + f.duration_s for f in flows)
    ts = ts[(ts["t_s"] > last_start) & (ts["t_s"] <= end + 1e-6)]
    ts = ts.assign(bin=((ts["t_s"] - last_start) / interval_s).round().astype(int))
    wide = ts.pivot_table(
        index="bin", columns="flow", values=throughput_column(src), aggfunc="mean"
    )
    wide = wide.dropna()
    if wide.empty or wide.shape[1] < 2:
        return [], []
    jains = metrics.jain_over_time({str(c): wide[c].tolist() for c in wide.columns})
    return [float(b) * interval_s for b in wide.index], jains
