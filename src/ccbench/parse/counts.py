"""Exact whole-run statistics of a sample stream in memory bounded by its value range.

RTTs are integer microseconds in siftr (srtt, rto), and in ss and ping output (both
print milliseconds with at most 3 decimals); a queue backlog is an integer number of
packets. A count per distinct value then holds everything a nearest-rank percentile,
the mean, the minimum and the maximum need, exactly, in memory that grows with the
number of distinct values (bounded by the value range), not with the number of
samples. `percentile` is ccbench.metrics.percentile's rule (nearest rank), so the
results are identical to sorting every sample and asking it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ccbench.metrics import nearest_rank


class ValueCounts:
    """Count per distinct value; add batches (numpy/pyarrow arrays or any iterable)."""

    def __init__(self) -> None:
        self._counts: dict[float, int] = {}
        self.count = 0

    def add(self, values: Any) -> None:
        """Add samples; None/NaN are not samples and are skipped (like dropna).
        Integer input keeps integer values (min/max return them as given)."""
        arr = _as_array(values)
        if not arr.size:
            return
        uniq, n = np.unique(arr, return_counts=True)
        counts = self._counts
        for v, c in zip(uniq.tolist(), n.tolist(), strict=True):
            counts[v] = counts.get(v, 0) + c
        self.count += int(arr.size)

    def merge(self, other: ValueCounts) -> None:
        for v, c in other._counts.items():
            self._counts[v] = self._counts.get(v, 0) + c
        self.count += other.count

    def items(self) -> Iterable[tuple[float, int]]:
        """(value, count) pairs, in no particular order."""
        return self._counts.items()

    @property
    def distinct(self) -> int:
        """How many distinct values are held (the memory this object uses)."""
        return len(self._counts)

    def add_one(self, value: float) -> None:
        """One sample (a hot loop's shortcut past numpy)."""
        self._counts[value] = self._counts.get(value, 0) + 1
        self.count += 1

    def min(self) -> float:
        return min(self._counts) if self._counts else math.nan

    def max(self) -> float:
        return max(self._counts) if self._counts else math.nan

    def mean(self) -> float:
        """Sum over count. Exact (identical to sum(samples)/n) while the values are
        integers and the sum stays below 2**53, as RTTs in us over any run do."""
        if not self.count:
            return math.nan
        return sum(v * c for v, c in self._counts.items()) / self.count

    def percentile(self, q: float) -> float:
        """Nearest rank, as ccbench.metrics.percentile: the smallest value with at
        least q % of the samples at or below it. ValueError on no samples."""
        k = nearest_rank(self.count, q)
        seen = 0
        for v in sorted(self._counts):
            seen += self._counts[v]
            if seen >= k:
                return float(v)
        raise AssertionError("unreachable: counts add up to count")


def _as_array(values: Any) -> np.ndarray:
    if isinstance(values, np.ndarray):
        arr = values
    elif hasattr(values, "to_numpy"):  # pyarrow (nulls become NaN) or pandas
        try:
            arr = np.asarray(values.to_numpy(zero_copy_only=False))
        except TypeError:
            arr = np.asarray(values.to_numpy())
    else:
        xs: Iterable[Any] = values
        arr = np.array([math.nan if v is None else v for v in xs])
    if arr.dtype.kind in "iu":
        return arr
    arr = arr.astype(float)
    return arr[~np.isnan(arr)]
