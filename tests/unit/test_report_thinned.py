"""The figures' time series in bounded memory (report.thinned), on a real run's series
(tests/captures/timeseries-local-2cubic: `ccbench parse` of a default-comparison run on
this machine, 2 x cubic, 30 s: ss every 0.1 s, iperf3 intervals, the queue every 50 ms)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ccbench import upgrade
from ccbench.report import thinned

CAPTURE = Path(__file__).resolve().parents[1] / "captures/timeseries-local-2cubic"


@pytest.fixture(scope="module")
def series() -> pd.DataFrame:
    """The capture in the current layout (written before app_written_bps: upgraded as
    every reader does, test_series_columns)."""
    return upgrade.timeseries(pd.read_parquet(CAPTURE / "timeseries.parquet"))


def _write(df: pd.DataFrame, path: Path) -> Path:
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), path, row_group_size=50)
    return path


def test_a_file_under_the_limit_is_read_whole(series: pd.DataFrame, tmp_path: Path) -> None:
    p = _write(series, tmp_path / "ts.parquet")
    # (a file written before the state columns: load adds them, empty; test_series_columns)
    pd.testing.assert_frame_equal(thinned.load(p)[series.columns], pd.read_parquet(p))


def test_a_larger_file_keeps_every_extreme_and_the_whole_intervals_and_queue(
    series: pd.DataFrame, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    samples = series[series["source"].isin(["ss", "siftr"])]
    assert len(samples) > 100  # the capture has sender samples to thin
    monkeypatch.setattr(thinned, "FULL_ROWS", 10)
    monkeypatch.setattr(thinned, "BUCKETS", 8)
    p = _write(series, tmp_path / "ts.parquet")
    got = thinned.load(p)

    kept = got[got["source"].isin(["ss", "siftr"])]
    # at most 5 rows per bucket per flow and source, counted per row group (50 rows)
    groups = samples.groupby(["flow", "source"]).ngroups
    assert len(kept) < len(samples) and len(kept) <= groups * 8 * 5 + 5 * len(series) // 50
    for col in ("source", "flow"):
        assert sorted(kept[col].unique()) == sorted(samples[col].unique())
    for (flow, src), g in samples.groupby(["flow", "source"]):
        k = kept[(kept["flow"] == flow) & (kept["source"] == src)]
        for col in ("cwnd_bytes", "rtt_us"):
            assert k[col].max() == g[col].max() and k[col].min() == g[col].min()
        assert k["t_s"].min() == g["t_s"].min()
    for src in ("iperf3", "qdisc"):
        whole = series[series["source"] == src].sort_values(["flow", "t_s"])
        mine = got.loc[got["source"] == src, series.columns].sort_values(["flow", "t_s"])
        assert len(whole) > 0
        pd.testing.assert_frame_equal(
            mine.reset_index(drop=True), whole.reset_index(drop=True), check_dtype=False
        )
