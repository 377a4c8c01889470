"""ccbench.timeseries_stats: the verdict's statistics gathered part by part as the time
series streams past equal metrics.rtt_excess and metrics.srtt_stats over the whole
table, whatever the parts, ties, sources, windows and order."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ccbench import metrics
from ccbench.instruments import SENDER_SOURCES
from ccbench.timeseries_stats import SeriesStats, rtt_excess

BOUND_MS = 45.5
BDP_BYTES = 100_000.0
BOUND = metrics.RttBound(BOUND_MS, 40.0, BDP_BYTES)

# (flow, source, t_s, rtt_us, cwnd_bytes): times on a coarse grid, RTTs around the
# bound and up to the delayed ACK's 40 ms above it, windows around the BDP (and none),
# so ties in time and stretches above and below are common.
Row = tuple[int, str, float, float | None, float | None]
rows = st.lists(
    st.tuples(
        st.integers(1, 3),
        st.sampled_from(["ss", "siftr", "iperf3", "qdisc"]),
        st.integers(0, 12).map(lambda x: x / 4),
        st.one_of(st.none(), st.integers(44_000, 47_000).map(float),
                  st.floats(44_000, 90_000, allow_nan=False)),
        st.one_of(st.none(), st.sampled_from([0.0, 25_000.0, BDP_BYTES, 2 * BDP_BYTES]),
                  st.floats(0, 2 * BDP_BYTES, allow_nan=False)),
    ),
    max_size=120,
)  # fmt: skip


def frame(rs: list[Row]) -> pd.DataFrame:
    return pd.DataFrame(
        {"flow": np.array([r[0] for r in rs], dtype=np.int64), "source": [r[1] for r in rs],
         "t_s": np.array([r[2] for r in rs], dtype=float),
         "rtt_us": np.array([math.nan if r[3] is None else r[3] for r in rs], dtype=float),
         "cwnd_bytes": np.array([math.nan if r[4] is None else r[4] for r in rs], dtype=float)}
    )  # fmt: skip


def reference(df: pd.DataFrame, untimed: list[float]) -> dict[str, object]:
    """metrics.rtt_excess as run_metrics called it on the whole table."""
    timed: dict[str, list[tuple[float, float, float]]] = {}
    sender = df[df["source"].isin(SENDER_SOURCES)].dropna(subset=["rtt_us"])
    for flow, g in sender.groupby("flow"):
        timed[f"flow {flow}"] = list(zip(g["t_s"], g["rtt_us"], g["cwnd_bytes"], strict=True))
    return metrics.rtt_excess(BOUND, timed, untimed)


def streamed(df: pd.DataFrame, cuts: list[int]) -> SeriesStats:
    st_ = SeriesStats(SENDER_SOURCES, BOUND)
    edges = [0, *sorted({c % (len(df) + 1) for c in cuts}), len(df)]
    for a, b in zip(edges, edges[1:], strict=False):
        other = SeriesStats(SENDER_SOURCES, BOUND)  # as a file's rows are gathered, then merged
        other.add(df.iloc[a:b].reset_index(drop=True))
        st_.merge(other)
    return st_


def reread(df: pd.DataFrame):  # type: ignore[no-untyped-def]
    def samples(flow: int):  # type: ignore[no-untyped-def]
        mine = df[(df["flow"] == flow) & df["source"].isin(SENDER_SOURCES)]
        third = len(mine) // 3 + 1
        for a in range(0, len(mine), third):  # a row group at a time
            part = mine.iloc[a : a + third]
            yield part["t_s"].to_numpy(), part["rtt_us"].to_numpy(), part["cwnd_bytes"].to_numpy()

    return samples


@settings(max_examples=300, deadline=None)
@given(rows, st.lists(st.integers(0, 200), max_size=4),
       st.lists(st.floats(40_000, 50_000, allow_nan=False), max_size=5))  # fmt: skip
def test_rtt_excess_equals_the_whole_table(
    rs: list[Row], cuts: list[int], untimed: list[float]
) -> None:
    df = frame(rs)
    got = rtt_excess(streamed(df, cuts), untimed, reread(df))
    assert got == reference(df, untimed)


@settings(max_examples=300, deadline=None)
@given(rows, st.lists(st.integers(0, 200), max_size=4))
def test_srtt_equals_sorting_every_sample(rs: list[Row], cuts: list[int]) -> None:
    df = frame(rs)
    st_ = streamed(df, cuts)
    src = next((s for s in SENDER_SOURCES if (df["source"] == s).any()), "iperf3")
    assert st_.finest_source() == src
    rtts = df.loc[(df["source"] == src) & df["rtt_us"].notna(), "rtt_us"].tolist()
    got = st_.srtt()
    if not rtts:
        assert got is None
        return
    assert got == (src, len(rtts), metrics.srtt_stats(rtts))


def test_a_stretch_is_broken_only_between_its_samples() -> None:
    """Two samples above at t=1 and t=2 with one below at t=2 (it sorts first there):
    the stretch breaks; one below at t=1 sorts before the first: it does not."""
    hi, lo = 50_000.0, 40_000.0
    for below_t, longest in ((2.0, 0.0), (1.0, 1.0), (1.5, 0.0), (3.0, 1.0)):
        df = frame([(1, "siftr", 1.0, hi, None), (1, "siftr", 2.0, hi, None),
                    (1, "siftr", below_t, lo, None)])  # fmt: skip
        got = rtt_excess(streamed(df, []), [], reread(df))
        assert got["longest_above_s"] == longest == reference(df, [])["longest_above_s"]


def test_no_flow_above_reads_nothing_back() -> None:
    df = frame([(1, "ss", 0.5, 40_000.0, None), (2, "siftr", 1.0, 41_000.0, None)])

    def never(flow: int):  # type: ignore[no-untyped-def]
        raise AssertionError("read back without a sample above the bound")

    got = rtt_excess(streamed(df, [1]), [46_000.0], never)
    assert got == reference(df, [46_000.0]) and got["above"] == 1


def test_a_window_below_the_bdp_may_wait_the_delayed_ack() -> None:
    """A sample 60 ms on a 40 ms path whose bound is 45.5 ms: excess with the window at
    the BDP or unknown; within the bound at a quarter of the BDP (the bottleneck idle
    30 ms a round trip: the delayed ACK may wait that long); 90 ms is excess whatever
    the window (the wait is at most 40 ms)."""
    ms = (BOUND.us([BDP_BYTES / 4, 0.0, math.nan, 2 * BDP_BYTES]) / 1e3).tolist()
    assert ms == [BOUND_MS + 30, BOUND_MS + 40, BOUND_MS, BOUND_MS]
    rs: list[Row] = [
        (1, "ss", 0.5, 60_000.0, BDP_BYTES), (1, "ss", 1.0, 60_000.0, None),
        (1, "ss", 1.5, 60_000.0, BDP_BYTES / 4), (1, "ss", 2.0, 90_000.0, 0.0),
    ]  # fmt: skip
    got = rtt_excess(streamed(frame(rs), []), [], reread(frame(rs)))
    assert got == reference(frame(rs), [])
    assert got["above"] == 3 and got["delayed_ack_max_ms"] == 40.0
    assert got["max_excess_ms"] == pytest.approx(60 - BOUND_MS)  # the worst over its own bound
