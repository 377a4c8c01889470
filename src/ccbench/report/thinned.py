"""A run's time series as the figures need it, in memory bounded by a figure's width.

A siftr log at every 4th packet gives millions of rows per flow (10^7 for a seed-length
run), far more than a plot can show; read whole they took 2.3 GB at 300 s and grew with
the run's length. A file of at most FULL_ROWS rows is read whole (every figure of a
short run is exactly what it was). A larger one is read a row group at a time, and each
flow's sender samples (ss, siftr) are thinned to BUCKETS time buckets, keeping in each
the first row and the rows holding the lowest and highest cwnd and RTT, so every peak
and trough a plot would draw is still drawn and the axes' limits are unchanged. iperf3
intervals and the queue's samples (one per interval, one per 50 ms) are kept whole.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from ccbench import upgrade
from ccbench.instruments import SENDER_SOURCES
from ccbench.timeseries import COLUMNS

FULL_ROWS = 400_000  # about 45 MB as a DataFrame
BUCKETS = 4_000  # per flow and source: more than a figure has pixels across
EXTREMES = ("cwnd_bytes", "rtt_us")


def load(path: Path) -> pd.DataFrame:
    """The run's rows, thinned as above when the file is larger than FULL_ROWS, in the
    current layout (upgrade.timeseries), with every column of timeseries.COLUMNS (NaN
    where a file written before it lacks it)."""
    return _all_columns(upgrade.timeseries(_load(path)))


def _all_columns(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in COLUMNS if c not in df.columns]
    return df.assign(**dict.fromkeys(missing, np.nan)) if missing else df


def _load(path: Path) -> pd.DataFrame:
    pf = pq.ParquetFile(path)
    if pf.metadata.num_rows <= FULL_ROWS:
        return pd.read_parquet(path)
    width = max(_t_max(pf), 1e-9) / BUCKETS
    # A row group at a time: iter_batches kept the whole file's buffers allocated until
    # it finished (551 MB for 2*10^7 rows, 4 MB this way).
    parts = [_thin(pf.read_row_group(g, use_threads=False).to_pandas(), width)
             for g in range(pf.metadata.num_row_groups)]  # fmt: skip
    df = pd.concat(parts, ignore_index=True)
    return df.sort_values(["source", "flow", "t_s"], kind="stable", ignore_index=True)


def _t_max(pf: pq.ParquetFile) -> float:
    """The last sample's time, from the row groups' statistics (nothing read)."""
    col = pf.schema_arrow.get_field_index("t_s")
    best = 0.0
    for g in range(pf.metadata.num_row_groups):
        st = pf.metadata.row_group(g).column(col).statistics
        if st is not None and st.has_min_max:
            best = max(best, float(st.max))
    return best


def _thin(batch: pd.DataFrame, width: float) -> pd.DataFrame:
    samples = batch["source"].isin(SENDER_SOURCES)
    s = batch[samples]
    if s.empty:
        return batch
    key = [s["flow"], s["source"], (s["t_s"] // width).astype("int64")]
    keep = set(s.groupby(key, sort=False).head(1).index)
    for col in EXTREMES:
        v = s[col].dropna()
        if v.empty:
            continue
        g = v.groupby([k.loc[v.index] for k in key], sort=False)
        keep.update(g.idxmax())
        keep.update(g.idxmin())
    return pd.concat([batch[~samples], s.loc[sorted(keep)]])
