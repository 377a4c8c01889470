"""ccbench.metrics against hand-computed values and the seeds' own tables."""

from __future__ import annotations

import math

import pytest

from ccbench.metrics import (
    convergence_time_s,
    jain,
    jain_over_time,
    mathis_bps,
    mean_ci,
    paired_delta_pct,
    srtt_stats,
    utilization_pct,
)


def test_jain_basics() -> None:
    assert jain([1, 1]) == 1.0
    assert jain([1, 0]) == 0.5
    assert jain([5, 0, 0, 0]) == 0.25  # 1/n: one flow takes everything
    assert jain([3]) == 1.0
    assert math.isnan(jain([]))
    assert math.isnan(jain([0, 0]))
    with pytest.raises(ValueError):
        jain([1, -1])


def test_jain_reproduces_seed001_emulab_table() -> None:
    # Seed 001, Emulab dumbbell: per-flow Mbit/s -> "TCP fairness" column
    assert round(jain([304.0, 222.0]) * 100, 1) == 97.6  # CUBIC in Linux
    assert round(jain([92.5, 101.0]) * 100, 1) == 99.8  # FreeBSD CUBIC before patch
    assert round(jain([199.0, 247.0]) * 100, 1) == 98.9  # NewReno in Linux


def test_mean_ci_by_hand() -> None:
    # [1, 2, 3]: mean 2, s = 1, t(0.975, 2) = 4.303 -> 4.303 / sqrt(3) = 2.4843
    m, hw, n = mean_ci([1.0, 2.0, 3.0])
    assert (m, n) == (2.0, 3)
    assert hw == pytest.approx(4.303 / math.sqrt(3), rel=1e-4)
    # 90 %: t(0.95, 2) = 2.920
    assert mean_ci([1.0, 2.0, 3.0], confidence=0.90).half_width == pytest.approx(
        2.920 / math.sqrt(3), rel=1e-3
    )


def test_mean_ci_edges() -> None:
    one = mean_ci([7.0])
    assert one.mean == 7.0 and one.n == 1 and math.isnan(one.half_width)
    empty = mean_ci([])
    assert math.isnan(empty.mean) and math.isnan(empty.half_width) and empty.n == 0
    assert mean_ci([4.0, 4.0, 4.0]) == (4.0, 0.0, 3)


def test_paired_delta_seed001_patch() -> None:
    # Seed 001: FreeBSD CUBIC sum 193.5 -> 410.0 Mbit/s after the patch, "+111.9%"
    d = paired_delta_pct([193.5], [410.0])
    assert d.paired and d.n_base == d.n_variant == 1
    assert round(d.mean_pct, 1) == 111.9
    assert math.isnan(d.half_width_pct)


def test_paired_delta_by_hand() -> None:
    # deltas +10 % and -10 %: mean 0, s = 14.142, t(0.975, 1) = 12.706
    d = paired_delta_pct([100.0, 200.0], [110.0, 180.0])
    assert d.deltas_pct == pytest.approx((10.0, -10.0))
    assert d.mean_pct == pytest.approx(0.0, abs=1e-12)
    assert d.half_width_pct == pytest.approx(12.706 * math.sqrt(200) / math.sqrt(2), rel=1e-4)
    # three pairs of +10, +20, +30 %: mean 20, s 10, t(0.975, 2) = 4.303
    d3 = paired_delta_pct([10.0, 10.0, 10.0], [11.0, 12.0, 13.0])
    assert d3.mean_pct == pytest.approx(20.0)
    assert d3.half_width_pct == pytest.approx(4.303 * 10 / math.sqrt(3), rel=1e-4)


def test_unpaired_delta_when_counts_differ() -> None:
    d = paired_delta_pct([100.0, 100.0], [120.0, 130.0, 110.0])
    assert not d.paired and d.deltas_pct == ()
    assert (d.n_base, d.n_variant) == (2, 3)
    assert d.mean_pct == pytest.approx(20.0)  # 120 / 100 - 1
    # Welch: base var 0, variant var 100 -> se = sqrt(100 / 3), dof = 2
    assert d.half_width_pct == pytest.approx(4.303 * math.sqrt(100 / 3), rel=1e-4)
    assert math.isnan(paired_delta_pct([100.0], [1.0, 2.0]).half_width_pct)
    assert math.isnan(paired_delta_pct([], [1.0]).mean_pct)
    with pytest.raises(ValueError):
        paired_delta_pct([0.0], [1.0])


def test_utilization() -> None:
    assert utilization_pct(84966187.8875353, 100e6) == pytest.approx(84.966, rel=1e-4)
    assert utilization_pct(0.0, 1e9) == 0.0
    with pytest.raises(ValueError):
        utilization_pct(1.0, 0.0)


def test_mathis() -> None:
    # 1448 * 8 / 0.040 * sqrt(1.5) / sqrt(0.01) = 3.547 Mbit/s
    bps = mathis_bps(1448, 0.040, 0.01)
    assert bps == pytest.approx(3.5468e6, rel=1e-4)
    assert round(bps / 1e6, 2) == 3.55
    assert mathis_bps(1448, 0.040, 0.01, c=1.0) == pytest.approx(2.896e6)
    assert mathis_bps(1448, 0.040, 0.0) == math.inf
    for bad in ((1448, 0.0, 0.01), (1448, 0.04, -0.1), (1448, 0.04, 1.5)):
        with pytest.raises(ValueError):
            mathis_bps(*bad)


def test_srtt_stats() -> None:
    s = srtt_stats([float(x) for x in range(1, 101)])  # 1..100 us
    assert s.mean_us == 50.5 and s.max_us == 100.0
    assert s.p95_us == 95.0  # nearest rank: the 95th of 100 samples (metrics.percentile)
    assert srtt_stats([40000.0]) == (40000.0, 40000.0, 40000.0)
    assert all(math.isnan(v) for v in srtt_stats([]))


def test_jain_over_time() -> None:
    series = {"flow1": [10.0, 10.0, 0.0, 6.0], "flow2": [0.0, 10.0, 0.0, 2.0]}
    j = jain_over_time(series)
    assert j[0] == 0.5 and j[1] == 1.0 and math.isnan(j[2])
    assert j[3] == pytest.approx(64 / (2 * 40))
    assert jain_over_time({}) == []
    with pytest.raises(ValueError):
        jain_over_time({"a": [1.0], "b": [1.0, 2.0]})


def test_convergence_time() -> None:
    t = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    j = [0.5, 0.99, 0.6, 0.97, 0.98, 0.99, 0.99]
    # stays >= 0.95 from t=4 to the end (the 0.99 at t=2 does not last)
    assert convergence_time_s(t, j, threshold=0.95) == 4.0
    # with a 1 s window, t=2 would need t=3 too: fails; t=4 holds through t=5
    assert convergence_time_s(t, j, threshold=0.95, window_s=1.0) == 4.0
    # window 0: the first good sample counts
    assert convergence_time_s(t, j, threshold=0.95, window_s=0.0) == 2.0
    # a window longer than the data left after any good start: never
    assert convergence_time_s(t, j, threshold=0.95, window_s=10.0) is None
    assert convergence_time_s(t, j, threshold=0.995) is None
    assert convergence_time_s([], []) is None
    # NaN (a bin with no traffic) counts as not converged
    assert convergence_time_s([1.0, 2.0, 3.0], [1.0, math.nan, 1.0]) == 3.0
    with pytest.raises(ValueError):
        convergence_time_s([1.0], [])
