"""What a run's verdict needs from its time series, gathered while the rows stream past.

judge (ccbench.summarize) writes timeseries.parquet in row groups and never holds the
whole table; `SeriesStats` takes each part of rows as it is written and keeps only:
- the sources that gave rows (timeseries.finest_source's choice);
- per source (ss, siftr, iperf3), a count per distinct RTT value (parse.counts): the
  srtt statistics exactly, in memory bounded by the RTT's value range;
- per flow, the RTT samples above the path's bound (metrics.RttBound: each sample's, by
  its window; rare: host stalls) and how many samples there were: the RTT-excess share
  and its worst sample;
- the iperf3 rows, sender's and receiver's (one per flow and interval): Jain's index
  over time.

The longest stretch a flow stayed above the bound (metrics.rtt_excess) needs the
samples below it too, but only where they fall between two samples above it: when a
flow has samples above, its other samples are read back from the written file
(`rtt_excess`'s `reread`), never held. The results are metrics.rtt_excess's and
metrics.srtt_stats' exactly (tests/unit/test_timeseries_stats.py checks both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ccbench import metrics
from ccbench.metrics import RttBound
from ccbench.parse.counts import ValueCounts

if TYPE_CHECKING:
    import pandas as pd

# A part of the rows: a DataFrame, or an Arrow table (a siftr log's rows, never
# converted to pandas: timeseries_samplers), of timeseries.COLUMNS or some of them.
Part: TypeAlias = "pd.DataFrame | pa.Table"

# The senders' own cwnd/RTT samples (`sender_sources`, finest first: the instruments'
# ranks, ccbench.instruments.SENDER_SOURCES) are what a run's statistics use first;
# iperf3's per-interval TCP_INFO is the fallback every OS has.
FALLBACK = "iperf3"
# Each flow's minimum RTT as its kernel knows it, by source, best first: Linux's
# tcpi_min_rtt (the ss rows' min_rtt_us column). FreeBSD exports no minimum RTT: its
# tcpi_rttmin is t_rttmin, the retransmit timeout's floor (sys/netinet/tcp_usrreq.c
# tcp_fill_info; tcp_var.h), and t_rttlow, the smallest RTT seen, is not exported; so
# there the smallest srtt siftr logged per packet, an upper bound of the minimum.
MIN_RTT_SOURCES = {
    "ss": ("min_rtt_us", "ss minrtt (tcpi_min_rtt)"),
    "siftr": ("rtt_us", "siftr srtt, smallest (FreeBSD exports no minimum RTT)"),
}
# A flow is receive-window limited where its bytes in flight sit within RWND_SLACK_MSS
# segments of the window its peer advertises (the window is rounded to its scale's
# units, and a sender keeps a partial segment back rather than send past it); more than
# RWND_LIMITED_SHARE of its samples so makes the run measure the receiver's buffer.
RWND_SLACK_MSS = 2
RWND_LIMITED_SHARE = 0.2
DEFAULT_MSS = 1448
# iperf3's interval rows: the sender's writes and the receiver's deliveries (Jain's index
# over time uses the latter where a run has them: timeseries.throughput_source).
INTERVAL_SOURCES = ("iperf3", "receiver")
_EXACT_SUM = 2.0**53  # integer sums below this are exact in a float, in any order


class SeriesStats:
    """Statistics of the rows added (`add`, one part at a time, or `from_frame`).
    `sender_sources`: the sources of the senders' own samples, finest first; `bound`:
    what RTT a sample may reach before it counts as excess (None: not counted)."""

    def __init__(
        self, sender_sources: Sequence[str], bound: RttBound | None = None,
        mss_bytes: int = DEFAULT_MSS,
    ) -> None:  # fmt: skip
        self.sender_sources = tuple(sender_sources)
        self.mss_bytes = mss_bytes
        self.window_slack = RWND_SLACK_MSS * mss_bytes
        self.bound = bound
        self.rows = 0
        self.sources: set[str] = set()
        self.rtt_counts = {s: ValueCounts() for s in (*self.sender_sources, FALLBACK)}
        self.samples: dict[int, int] = {}  # flow -> sender RTT samples
        # flow -> (t, rtt, each one's bound) of its samples above their bounds
        self.above: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.iperf3: list[pd.DataFrame] = []
        self.min_rtt: dict[str, dict[int, float]] = {s: {} for s in MIN_RTT_SOURCES}
        # per sender source and flow: [samples with in-flight and window, of them at it]
        self.at_window: dict[str, dict[int, list[int]]] = {s: {} for s in self.sender_sources}
        # Linux per-ACK traces: each flow's congestion events (summary.json tcp_events),
        # gathered as the traces stream past (the instrument's add_rows).
        self.tcp_events: dict[str, Any] | None = None

    @classmethod
    def from_frame(
        cls, df: pd.DataFrame, sender_sources: Sequence[str], bound: RttBound | None = None
    ) -> SeriesStats:
        """The statistics of a whole time series (a timeseries.parquet read back)."""
        st = cls(sender_sources, bound)
        if len(df):
            st.add(df)
        return st

    def add(self, part: Part) -> None:
        """A part of the rows (timeseries.COLUMNS, or a subset with `source`): a
        DataFrame or an Arrow table."""
        if not len(part):
            return
        self.rows += len(part)
        cols = _Columns(part)
        present = cols.sources()
        self.sources.update(present)
        # a producer's part has one source: no masks then
        one = len(present) == 1
        src = np.empty(0) if one else cols.values("source")
        mask: dict[str, slice | np.ndarray] = {
            s: (slice(None) if one else np.asarray(src == s)) for s in present
        }
        for s in INTERVAL_SOURCES:
            if s in mask:
                self.iperf3.append(cols.frame(mask[s]))
        flows = cols.values("flow")
        for s, (col, _) in MIN_RTT_SOURCES.items():
            if s in mask and cols.has(col):
                self._take_min(s, flows[mask[s]], cols.floats(col)[mask[s]])
        if not cols.has("rtt_us"):
            return
        rtt = cols.floats("rtt_us")
        for s in self.rtt_counts:
            if s in mask:
                self.rtt_counts[s].add(rtt[mask[s]])  # NaN is no sample
        if not any(s in mask for s in self.sender_sources):
            return
        self._count_at_window(cols, flows, mask)
        # one source: a sender's (checked above)
        sender = ~np.isnan(rtt) if one else np.isin(src, self.sender_sources) & ~np.isnan(rtt)
        if not sender.any():
            return
        flow = flows[sender]
        t, r = cols.floats("t_s")[sender], rtt[sender]
        for f in _flows_in(flow):
            self.samples[f] = self.samples.get(f, 0) + int((flow == f).sum())
        if self.bound is None:
            return
        b = self.bound.us(cols.floats("cwnd_bytes")[sender] if cols.has("cwnd_bytes")
                          else np.full(len(r), np.nan))  # fmt: skip
        hi = r > b
        for f in _flows_in(flow[hi]):
            at = hi & (flow == f)
            self.above.setdefault(int(f), []).append((t[at], r[at], b[at]))

    def merge(self, other: SeriesStats) -> None:
        """Add what `other` gathered (a file's rows, taken once the file read whole)."""
        self.rows += other.rows
        self.sources |= other.sources
        for s, c in other.rtt_counts.items():
            self.rtt_counts[s].merge(c)
        for f, n in other.samples.items():
            self.samples[f] = self.samples.get(f, 0) + n
        for f, parts in other.above.items():
            self.above.setdefault(f, []).extend(parts)
        self.iperf3.extend(other.iperf3)
        for s, counts in other.at_window.items():
            for f, (n, at) in counts.items():
                mine = self.at_window.setdefault(s, {}).setdefault(f, [0, 0])
                mine[0] += n
                mine[1] += at
        for s, mins in other.min_rtt.items():
            for f, v in mins.items():
                self._take_min(s, np.array([f]), np.array([v]))

    def _count_at_window(
        self, cols: _Columns, flow: np.ndarray, mask: dict[str, slice | np.ndarray]
    ) -> None:
        if not cols.has("inflight_bytes") or not cols.has("rwnd_bytes"):
            return
        infl, wnd = cols.floats("inflight_bytes"), cols.floats("rwnd_bytes")
        both = ~np.isnan(infl) & ~np.isnan(wnd)
        at = both & (infl >= wnd - self.window_slack)
        for s in self.at_window:
            if s not in mask:
                continue
            mine = both if isinstance(mask[s], slice) else both & mask[s]
            for f in _flows_in(flow[mine]):
                c = self.at_window[s].setdefault(int(f), [0, 0])
                c[0] += int((mine & (flow == f)).sum())
                c[1] += int((at & mine & (flow == f)).sum())

    def window_limited(self) -> dict[int, tuple[float, int, str]]:
        """flow -> (share of samples at the peer's window, samples, source) from the
        finest sender source that has both in-flight bytes and the window."""
        for s in self.sender_sources:
            if self.at_window.get(s):
                return {f: (at / n, n, s) for f, (n, at) in self.at_window[s].items() if n}
        return {}

    def _take_min(self, source: str, flow: np.ndarray, vals: np.ndarray) -> None:
        ok = ~np.isnan(vals)
        mins = self.min_rtt[source]
        for f in _flows_in(flow[ok]):
            v = float(vals[ok & (flow == f)].min())
            mins[int(f)] = min(v, mins.get(int(f), v))

    def kernel_min_rtt(self, flow: int) -> tuple[float, str] | None:
        """(µs, source) of flow `flow`'s minimum RTT from the best source that sampled
        it (MIN_RTT_SOURCES); None: none did."""
        for s, (_, what) in MIN_RTT_SOURCES.items():
            if flow in self.min_rtt[s]:
                return self.min_rtt[s][flow], what
        return None

    def finest_source(self) -> str:
        """timeseries.finest_source of these rows."""
        return next((s for s in self.sender_sources if s in self.sources), FALLBACK)

    def srtt(self) -> tuple[str, int, metrics.SrttStats] | None:
        """(source, samples, metrics.srtt_stats of them) for the finest source; None
        without samples. From the counts where the mean is exact that way (integer
        microseconds, as ss and siftr give them), else from the samples themselves."""
        src = self.finest_source()
        counts = self.rtt_counts.get(src)
        if counts is None or not counts.count:
            return None
        vals = np.array([v for v, _ in counts.items()], dtype=float)
        ns = np.array([c for _, c in counts.items()], dtype=np.int64)
        if np.all(vals == np.floor(vals)) and float(np.abs(vals) @ ns) < _EXACT_SUM:
            st = metrics.SrttStats(counts.mean(), counts.percentile(95.0), counts.max())
        else:
            st = metrics.srtt_stats(np.repeat(vals, ns).tolist())
        return src, counts.count, st


def _flows_in(flow: np.ndarray) -> list[int]:
    """The distinct flows of these rows (a part has one, mostly: no sort then)."""
    if not len(flow):
        return []
    lo, hi = int(flow.min()), int(flow.max())
    return [lo] if lo == hi else [int(f) for f in np.unique(flow).tolist()]


class _Columns:
    """A part's columns as numpy arrays, whether it is a DataFrame or an Arrow table."""

    def __init__(self, part: Part) -> None:
        self.part = part
        self.arrow = isinstance(part, pa.Table)

    def has(self, name: str) -> bool:
        return name in (self.part.column_names if self.arrow else self.part)

    def sources(self) -> list[str]:
        col = self.part.column("source") if self.arrow else self.part["source"]
        uniq = pc.unique(col) if self.arrow else col.unique()
        return [str(x) for x in uniq.tolist()]

    def values(self, name: str) -> np.ndarray:
        """As they are (flows: int64; sources: str objects)."""
        if self.arrow:
            return np.asarray(self.part.column(name).to_numpy(zero_copy_only=False))
        return np.asarray(self.part[name].to_numpy())

    def floats(self, name: str) -> np.ndarray:
        """float64, NaN where missing."""
        if self.arrow:
            col = pc.cast(self.part.column(name), pa.float64())
            return np.asarray(col.to_numpy(), dtype=float)  # nulls: NaN
        return np.asarray(self.part[name].to_numpy(dtype=float, na_value=np.nan))

    def frame(self, rows: slice | np.ndarray) -> pd.DataFrame:
        """Those rows as a DataFrame (iperf3's: few)."""
        if self.arrow:
            return self.part.to_pandas()[rows].reset_index(drop=True)
        return self.part[rows]


def rtt_excess(
    st: SeriesStats,
    untimed: Sequence[float],
    reread: Callable[[int], Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]]],
) -> dict[str, Any]:
    """metrics.rtt_excess(st.bound, timed, untimed) for the timed samples `st` saw (its
    bound not None). `reread(flow)`: that flow's sender samples (t_s, rtt_us,
    cwnd_bytes) again, in parts, for a flow with samples above their bounds."""
    assert st.bound is not None
    bound = st.bound
    plain_us = bound.no_window_us
    u = np.asarray(untimed, dtype=float)
    u_above = u[u > plain_us]
    n_above = sum(len(r) for parts in st.above.values() for _, r, _ in parts) + len(u_above)
    total = sum(st.samples.values()) + len(u)
    peak = max([float((r - b).max()) for parts in st.above.values() for _, r, b in parts
                if len(r)] + ([float(u_above.max() - plain_us)] if len(u_above) else []),
               default=None)  # fmt: skip
    longest = 0.0
    for f, parts in st.above.items():
        longest = max(longest, _longest_above(parts, reread(f), bound))
    return {
        "bound_ms": bound.ms,
        "delayed_ack_max_ms": bound.delayed_ack_max_ms,
        "samples": total,
        "above": n_above,
        "share": n_above / total if total else None,
        "max_excess_ms": peak / 1e3 if peak is not None else 0.0,
        "longest_above_s": longest,
    }


def _longest_above(
    above: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
    samples: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray]],
    bound: RttBound,
) -> float:
    """The longest time one flow's samples stayed above, as metrics.rtt_excess walks
    them: by time, at one instant the samples below first. A sample below at time tb
    breaks the stretch between consecutive above samples at ta1 < tb <= ta2."""
    t = np.sort(np.concatenate([a for a, _, _ in above]))
    broken = np.zeros(len(t) + 1, dtype=bool)  # broken[i]: between above i-1 and i
    for ts, rs, cw in samples:
        low = ts[~(rs > bound.us(cw)) & ~np.isnan(rs)]
        broken[np.searchsorted(t, low, side="left")] = True
    longest, start = 0.0, math.nan
    for i, ti in enumerate(t.tolist()):
        if i == 0 or broken[i]:
            start = ti
        longest = max(longest, ti - start)
    return longest
