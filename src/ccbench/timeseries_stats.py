"""What a run's verdict needs from its time series, gathered while the rows stream past.

judge (ccbench.summarize) writes timeseries.parquet in row groups and never holds the
whole table; `SeriesStats` takes each part of rows as it is written and keeps only:
- the sources that gave rows (timeseries.finest_source's choice);
- per source (ss, siftr, iperf3), a count per distinct RTT value (parse.counts): the
  srtt statistics exactly, in memory bounded by the RTT's value range;
- per flow, the RTT samples above the path's bound (rare: host stalls) and how many
  samples there were: the RTT-excess share and its worst sample;
- the iperf3 rows (one per flow and interval): Jain's index over time.

The longest stretch a flow stayed above the bound (metrics.rtt_excess) needs the
samples below it too, but only where they fall between two samples above it: when a
flow has samples above, its other samples are read back from the written file
(`rtt_excess`'s `reread`), never held. The results are metrics.rtt_excess's and
metrics.srtt_stats' exactly (tests/unit/test_timeseries_stats.py checks both).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ccbench import metrics
from ccbench.parse.counts import ValueCounts

if TYPE_CHECKING:
    import pandas as pd

# The senders' own cwnd/RTT samples (`sender_sources`, finest first: the instruments'
# ranks, ccbench.instruments.SENDER_SOURCES) are what a run's statistics use first;
# iperf3's per-interval TCP_INFO is the fallback every OS has.
FALLBACK = "iperf3"
_EXACT_SUM = 2.0**53  # integer sums below this are exact in a float, in any order


class SeriesStats:
    """Statistics of the rows added (`add`, one part at a time, or `from_frame`).
    `sender_sources`: the sources of the senders' own samples, finest first; `bound_ms`:
    the RTT above which a sample counts as excess (None: not counted)."""

    def __init__(self, sender_sources: Sequence[str], bound_ms: float | None = None) -> None:
        self.sender_sources = tuple(sender_sources)
        self.bound_ms = bound_ms
        self.bound_us = None if bound_ms is None else bound_ms * 1e3  # as metrics.rtt_excess
        self.rows = 0
        self.sources: set[str] = set()
        self.rtt_counts = {s: ValueCounts() for s in (*self.sender_sources, FALLBACK)}
        self.samples: dict[int, int] = {}  # flow -> sender RTT samples
        self.above: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # flow -> (t, rtt)
        self.iperf3: list[pd.DataFrame] = []
        # Linux per-ACK traces: each flow's congestion events (summary.json tcp_events),
        # gathered as the traces stream past (the instrument's add_rows).
        self.tcp_events: dict[str, Any] | None = None

    @classmethod
    def from_frame(
        cls, df: pd.DataFrame, sender_sources: Sequence[str], bound_ms: float | None = None
    ) -> SeriesStats:
        """The statistics of a whole time series (a timeseries.parquet read back)."""
        st = cls(sender_sources, bound_ms)
        if len(df):
            st.add(df)
        return st

    def add(self, part: pd.DataFrame) -> None:
        """A part of the rows (timeseries.COLUMNS, or a subset with `source`)."""
        if not len(part):
            return
        self.rows += len(part)
        present = [str(x) for x in part["source"].unique().tolist()]
        self.sources.update(present)
        src = part["source"].to_numpy()
        # a producer's part has one source: no masks then
        mask = {s: (slice(None) if len(present) == 1 else src == s) for s in present}
        if "iperf3" in mask:
            self.iperf3.append(part[mask["iperf3"]])
        if "rtt_us" not in part:
            return
        rtt = part["rtt_us"].to_numpy(dtype=float, na_value=np.nan)
        for s in self.rtt_counts:
            if s in mask:
                self.rtt_counts[s].add(rtt[mask[s]])  # NaN is no sample
        if not any(s in mask for s in self.sender_sources):
            return
        sender = np.isin(src, self.sender_sources) & ~np.isnan(rtt)
        if not sender.any():
            return
        flow = part["flow"].to_numpy()[sender]
        t, r = part["t_s"].to_numpy(dtype=float)[sender], rtt[sender]
        for f, n in zip(*np.unique(flow, return_counts=True), strict=True):
            self.samples[int(f)] = self.samples.get(int(f), 0) + int(n)
        if self.bound_us is None:
            return
        hi = r > self.bound_us
        for f in np.unique(flow[hi]).tolist():
            at = hi & (flow == f)
            self.above.setdefault(int(f), []).append((t[at], r[at]))

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


def rtt_excess(
    st: SeriesStats,
    untimed: Sequence[float],
    reread: Callable[[int], Iterable[tuple[np.ndarray, np.ndarray]]],
) -> dict[str, Any]:
    """metrics.rtt_excess(st.bound_ms, timed, untimed) for the timed samples `st` saw
    (its bound not None). `reread(flow)`: that flow's sender samples (t_s, rtt_us)
    again, in parts, for a flow with samples above the bound."""
    assert st.bound_ms is not None and st.bound_us is not None
    bound_us = st.bound_us
    u = np.asarray(untimed, dtype=float)
    u_above = u[u > bound_us]
    n_above = sum(len(r) for parts in st.above.values() for _, r in parts) + len(u_above)
    total = sum(st.samples.values()) + len(u)
    peak = max([float(r.max()) for parts in st.above.values() for _, r in parts if len(r)]
               + ([float(u_above.max())] if len(u_above) else []), default=None)  # fmt: skip
    longest = 0.0
    for f, parts in st.above.items():
        longest = max(longest, _longest_above(parts, reread(f), bound_us))
    return {
        "bound_ms": st.bound_ms,
        "samples": total,
        "above": n_above,
        "share": n_above / total if total else None,
        "max_excess_ms": (peak - bound_us) / 1e3 if peak is not None else 0.0,
        "longest_above_s": longest,
    }


def _longest_above(
    above: list[tuple[np.ndarray, np.ndarray]],
    samples: Iterable[tuple[np.ndarray, np.ndarray]],
    bound_us: float,
) -> float:
    """The longest time one flow's samples stayed above, as metrics.rtt_excess walks
    them sorted by (t, rtt). A sample at or below the bound at time tb sorts after an
    above one at ta1 < tb and before one at ta2 >= tb (its RTT is the smaller): it
    breaks the stretch between consecutive above samples exactly when ta1 < tb <= ta2."""
    t = np.concatenate([a for a, _ in above])
    r = np.concatenate([b for _, b in above])
    t = t[np.lexsort((r, t))]
    broken = np.zeros(len(t) + 1, dtype=bool)  # broken[i]: between above i-1 and i
    for ts, rs in samples:
        low = ts[~(rs > bound_us) & ~np.isnan(rs)]
        broken[np.searchsorted(t, low, side="left")] = True
    longest, start = 0.0, math.nan
    for i, ti in enumerate(t.tolist()):
        if i == 0 or broken[i]:
            start = ti
        longest = max(longest, ti - start)
    return longest
