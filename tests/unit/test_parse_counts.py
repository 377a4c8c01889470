"""ccbench.parse.counts.ValueCounts: exact whole-run statistics from counts per value,
identical to sorting every sample (ccbench.metrics)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ccbench import metrics
from ccbench.parse.counts import ValueCounts

samples = st.lists(st.integers(min_value=0, max_value=3_000_000), min_size=1, max_size=300)


@given(samples, st.integers(min_value=1, max_value=5), st.floats(min_value=0, max_value=100))
def test_equals_sorting_every_sample(xs: list[int], parts: int, q: float) -> None:
    counts = ValueCounts()
    for chunk in np.array_split(np.array(xs), parts):  # batches of any size
        counts.add(chunk)
    assert counts.count == len(xs)
    assert counts.percentile(q) == metrics.percentile(xs, q)
    ref = metrics.srtt_stats(xs)
    assert (counts.mean(), counts.percentile(95), counts.max()) == tuple(ref)
    assert counts.min() == min(xs)


def test_skips_missing_and_takes_arrow_and_lists() -> None:
    counts = ValueCounts()
    counts.add(pa.array([40250.0, None, 40250.0]))
    counts.add([41000.5, None, math.nan])
    other = ValueCounts()
    other.add_one(39000.0)
    counts.merge(other)
    assert (counts.count, counts.distinct) == (4, 3)
    assert counts.percentile(50) == 40250.0 and counts.min() == 39000.0
    assert sorted(counts.items()) == [(39000.0, 1), (40250.0, 2), (41000.5, 1)]


def test_memory_is_per_distinct_value() -> None:
    counts = ValueCounts()
    rng = np.random.default_rng(1)
    for _ in range(50):  # a million srtt samples in us between 40 and 48 ms
        counts.add(rng.integers(40_000, 48_000, 20_000))
    assert counts.count == 1_000_000 and counts.distinct <= 8000


def test_empty() -> None:
    counts = ValueCounts()
    assert math.isnan(counts.mean()) and math.isnan(counts.max())
    with pytest.raises(ValueError, match="no values"):
        counts.percentile(95)
    counts.add([1])
    with pytest.raises(ValueError, match="not in"):
        counts.percentile(101)
