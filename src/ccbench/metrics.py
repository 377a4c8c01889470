"""Pure metrics for the comparison tables: fairness, confidence intervals, deltas,
utilization, the Mathis model, RTT summaries and convergence.

Conventions: inputs are plain sequences of floats; "undefined" results (empty input,
too few samples, 0/0) are NaN rather than exceptions, so a table cell can show "n/a";
inputs that are wrong (negative rates, mismatched lengths, zero baselines) raise
ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

NAN = math.nan

JAIN_CONVERGED = 0.95  # fairness threshold for convergence_s
JAIN_WINDOW_S = 2.0  # ... held for this long


class MeanCI(NamedTuple):
    mean: float
    half_width: float  # NaN when n < 2
    n: int


class DeltaPct(NamedTuple):
    mean_pct: float
    half_width_pct: float  # NaN when too few samples
    paired: bool
    n_base: int
    n_variant: int
    deltas_pct: tuple[float, ...]  # per-repetition deltas; empty when unpaired


class SrttStats(NamedTuple):
    mean_us: float
    p95_us: float
    max_us: float


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2), in [1/n, 1].

    [1, 1] -> 1.0, [1, 0] -> 0.5. Empty input or all zeros -> NaN (nothing was
    shared, so fairness is undefined). Negative values raise ValueError.
    """
    xs = [float(v) for v in values]
    if any(x < 0 for x in xs):
        raise ValueError("Jain's index needs non-negative values")
    sq = sum(x * x for x in xs)
    if not xs or sq == 0.0:
        return NAN
    return sum(xs) ** 2 / (len(xs) * sq)


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> MeanCI:
    """Mean and Student-t confidence half-width: t(1-(1-c)/2, n-1) * s / sqrt(n).

    s is the sample standard deviation (n-1). n == 0 -> (NaN, NaN, 0); n == 1 ->
    (x, NaN, 1): one repetition gives no spread to build an interval from.
    """
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return MeanCI(NAN, NAN, 0)
    mean = sum(xs) / n
    if n < 2:
        return MeanCI(mean, NAN, n)
    s = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    t = _t_quantile(0.5 + confidence / 2.0, n - 1)
    return MeanCI(mean, t * s / math.sqrt(n), n)


def paired_delta_pct(
    base: Sequence[float], variant: Sequence[float], confidence: float = 0.95
) -> DeltaPct:
    """Percent change of `variant` against `base`, e.g. after vs before a patch.

    Same length (repetition i of both ran under the same conditions): paired, the
    per-repetition deltas (variant_i / base_i - 1) * 100 with their mean_ci.
    Different lengths: unpaired, (mean(variant) / mean(base) - 1) * 100 with a
    Welch t half-width of the difference of means divided by mean(base) -- an
    approximation that ignores the baseline mean's own uncertainty.
    A zero baseline raises ValueError; empty inputs give NaN.
    """
    b = [float(x) for x in base]
    v = [float(x) for x in variant]
    if len(b) == len(v):
        if any(x == 0.0 for x in b):
            raise ValueError("a zero baseline has no percent change")
        deltas = tuple((vi / bi - 1.0) * 100.0 for bi, vi in zip(b, v, strict=True))
        ci = mean_ci(deltas, confidence)
        return DeltaPct(ci.mean, ci.half_width, True, len(b), len(v), deltas)
    if not b or not v:
        return DeltaPct(NAN, NAN, False, len(b), len(v), ())
    mb, mv = sum(b) / len(b), sum(v) / len(v)
    if mb == 0.0:
        raise ValueError("a zero baseline has no percent change")
    return DeltaPct(
        (mv / mb - 1.0) * 100.0,
        _welch_half_width(b, v, confidence) / mb * 100.0,
        False,
        len(b),
        len(v),
        (),
    )


def utilization_pct(throughput_bps: float, rate_bps: float) -> float:
    """Throughput as a percentage of the bottleneck rate.

    A shaper that counts 1514-byte frames lets TCP goodput (MSS 1448) reach at most
    1448 / 1514 = 95.6 % of its rate, not 100 %. rate_bps <= 0 raises ValueError.
    """
    if rate_bps <= 0:
        raise ValueError("rate_bps must be positive")
    return 100.0 * throughput_bps / rate_bps


def mathis_bps(mss_bytes: float, rtt_s: float, loss_p: float, c: float = math.sqrt(1.5)) -> float:
    """Mathis et al. (1997) steady-state Reno throughput: MSS*8 / RTT * C / sqrt(p).

    MSS 1448 B, RTT 40 ms, p = 1 % -> about 3.55 Mbit/s. loss_p == 0 -> inf (the
    model has no loss limit); loss_p outside [0, 1] or rtt_s <= 0 raises ValueError.
    """
    if rtt_s <= 0:
        raise ValueError("rtt_s must be positive")
    if not 0.0 <= loss_p <= 1.0:
        raise ValueError("loss_p is a probability in [0, 1]")
    if loss_p == 0.0:
        return math.inf
    return mss_bytes * 8.0 / rtt_s * c / math.sqrt(loss_p)


def percentile(values: Sequence[float], q: float) -> float:
    """The one percentile of ccbench (probe RTT, srtt, queue backlog, calibration):
    nearest rank, the smallest sample with at least q % of the samples at or below it,
    so it is always a value that was measured (q 0 is the minimum, 100 the maximum).
    ValueError on no values."""
    xs = sorted(values)
    return float(xs[nearest_rank(len(xs), q) - 1])


def nearest_rank(n: int, q: float) -> int:
    """`percentile`'s rule: the rank (1 to n) of the smallest of n sorted samples with at
    least q % of them at or below it. ValueError on no samples or q outside [0, 100]."""
    if not n:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is not in [0, 100]")
    return min(max(1, math.ceil(q / 100 * n)), n)


def srtt_stats(rtts_us: Sequence[float]) -> SrttStats:
    """Mean, 95th percentile (`percentile`) and max of RTT samples in us. Empty input
    -> all NaN."""
    xs = sorted(float(r) for r in rtts_us)
    if not xs:
        return SrttStats(NAN, NAN, NAN)
    return SrttStats(sum(xs) / len(xs), percentile(xs, 95.0), xs[-1])


def jain_over_time(per_flow_series: Mapping[str, Sequence[float]]) -> list[float]:
    """Jain's index per time bin across flows.

    per_flow_series maps a flow name to its throughput per bin; bins must be aligned
    (same length for every flow, bin i = the same time span). A bin where every
    flow is 0 gives NaN. No flows -> []. Unequal lengths raise ValueError.
    """
    series = list(per_flow_series.values())
    if not series:
        return []
    n_bins = len(series[0])
    if any(len(s) != n_bins for s in series):
        raise ValueError("per-flow series must have the same number of bins")
    return [jain([s[i] for s in series]) for i in range(n_bins)]


def convergence_time_s(
    times_s: Sequence[float],
    jain_values: Sequence[float],
    threshold: float = 0.95,
    window_s: float | None = None,
) -> float | None:
    """Earliest time from which Jain's index stays >= threshold.

    times_s[i] is the time of sample jain_values[i] (e.g. a bin's end, seconds since
    the run started), ascending. The result is the smallest times_s[k] such that
    every sample i with times_s[k] <= times_s[i] <= times_s[k] + window_s has
    jain_values[i] >= threshold (NaN counts as below), and the series reaches
    times_s[k] + window_s (so a short tail cannot count as converged). window_s=None
    means "until the last sample". Returns None if no such k exists or the input is
    empty; mismatched lengths raise ValueError.
    """
    if len(times_s) != len(jain_values):
        raise ValueError("times_s and jain_values must have the same length")
    n = len(times_s)
    if n == 0:
        return None
    t_last = times_s[-1]
    ok = [j >= threshold for j in jain_values]  # NaN >= x is False
    # first_bad_after[i]: index of the first failing sample at or after i (n if none)
    first_bad_after = [n] * (n + 1)
    for i in range(n - 1, -1, -1):
        first_bad_after[i] = i if not ok[i] else first_bad_after[i + 1]
    for k in range(n):
        if not ok[k]:
            continue
        end = t_last if window_s is None else times_s[k] + window_s
        if end > t_last:
            return None  # later k only start later: none can cover a full window
        bad = first_bad_after[k]
        if bad == n or times_s[bad] > end:
            return float(times_s[k])
    return None


def _welch_half_width(a: list[float], b: list[float], confidence: float) -> float:
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return NAN
    va, vb = _var(a) / na, _var(b) / nb
    se2 = va + vb
    if se2 == 0.0:
        return 0.0
    dof = se2**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return _t_quantile(0.5 + confidence / 2.0, dof) * math.sqrt(se2)


def _var(xs: list[float]) -> float:
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / (len(xs) - 1)


def _t_quantile(q: float, dof: float) -> float:
    """Student t quantile. scipy is imported here, not at module load: it costs about a
    second, and `ccbench run` only needs the cheap metrics between runs."""
    from scipy import stats

    return float(stats.t.ppf(q, dof))


# Linux's receiver holds the ACK of a lone segment until a second arrives or its
# delayed-ACK timer fires: TCP_DELACK_MIN, 40 ms, at first (include/net/tcp.h; the
# timer's later growth is capped near its own srtt: net/ipv4/tcp_output.c,
# tcp_send_delayed_ack). A sender whose window is below the path's BDP leaves the
# bottleneck idle about RTT x (1 - cwnd/BDP) each round trip; a burst's last segment
# then waits for the next burst or the timer, and its RTT sample with it (at 3 % random
# loss at 40 ms, srtt samples 8-20 ms above RTT + a full queue; none with the receivers'
# delayed ACKs off: `ip route ... quickack 1`).
DELAYED_ACK_MS = 40.0


@dataclass(frozen=True)
class RttBound:
    """The most RTT the configured path can give a sender's sample: `ms` (its RTT + a
    full drop-tail queue + slack), plus the delayed ACK's wait while the sender's window
    was below the BDP: min(DELAYED_ACK_MS, rtt_ms x (1 - cwnd / bdp_bytes)). A sample
    with no window known gets none."""

    ms: float
    rtt_ms: float
    bdp_bytes: float

    @property
    def delayed_ack_max_ms(self) -> float:
        return min(DELAYED_ACK_MS, self.rtt_ms)

    @property
    def no_window_us(self) -> float:
        """The bound of a sample with no window (the probe's): `ms` alone, in µs."""
        return self.ms * 1e3

    def us(self, cwnd_bytes: Any) -> Any:
        """Each sample's bound (µs) for its window (bytes; an array, NaN: unknown)."""
        import numpy as np

        idle_ms = self.rtt_ms * np.clip(1 - np.asarray(cwnd_bytes, float) / self.bdp_bytes, 0, 1)
        return (self.ms + np.nan_to_num(np.minimum(DELAYED_ACK_MS, idle_ms), nan=0.0)) * 1e3


def rtt_excess(
    bound: RttBound,
    timed: Mapping[str, Sequence[tuple[float, float, float]]],
    untimed: Sequence[float] = (),
) -> dict[str, Any]:
    """RTT samples above what the path can give (`bound`): their share of all samples,
    the worst excess over a sample's own bound, and the longest stretch a timed series
    (t_s, rtt_us, cwnd_bytes) stayed above (walked by time; at one instant, the samples
    below first). `untimed` (the probe's) are held to bound.no_window_us: no window delays them.
    Such samples are host stalls, not the path (validity.check_rtt_excess)."""
    excess = [u - bound.no_window_us for u in untimed if u > bound.no_window_us]
    n = len(untimed)
    longest = 0.0
    for series in timed.values():
        n += len(series)
        limits = bound.us([c for _, _, c in series]).tolist() if series else []
        walk = sorted((t, r > b, r - b) for (t, r, _), b in zip(series, limits, strict=True))
        start: float | None = None
        for t, above, over in walk:
            if above:
                excess.append(over)
                start = t if start is None else start
                longest = max(longest, t - start)
            else:
                start = None
    return {
        "bound_ms": bound.ms,
        "delayed_ack_max_ms": bound.delayed_ack_max_ms,
        "samples": n,
        "above": len(excess),
        "share": len(excess) / n if n else None,
        "max_excess_ms": max(excess) / 1e3 if excess else 0.0,
        "longest_above_s": longest,
    }


def delta_by_repetition(base: Mapping[Any, float], variant: Mapping[Any, float]) -> DeltaPct | None:
    """% change of `variant` vs `base`, each a {repetition: value} of valid runs: paired
    (repetition i with i) when both have the same >= 2 repetitions, else the delta of
    means with the variant's spread around the baseline mean (equal counts would make
    paired_delta_pct pair runs that did not run side by side). None: nothing to compare
    or a zero baseline. The one delta the tables, figures and verdicts use."""
    if not base or not variant or any(x == 0 for x in base.values()):
        return None
    common = sorted(set(base) & set(variant))
    if len(common) >= 2 and len(common) == len(base) == len(variant):
        return paired_delta_pct([base[k] for k in common], [variant[k] for k in common])
    b, v = list(base.values()), list(variant.values())
    if len(b) != len(v):
        return paired_delta_pct(b, v)
    mb = sum(b) / len(b)
    ci = mean_ci([(x / mb - 1) * 100 for x in v])
    return DeltaPct(ci.mean, ci.half_width, False, len(b), len(v), ())


def repetitions_to_resolve(
    deltas: Sequence[float], distance: float, confidence: float = 0.95, most: int = 1000
) -> int | None:
    """Repetitions whose CI half-width t*s/sqrt(n), at the spread s of the per-repetition
    `deltas`, would be below `distance` (how far the mean lies from the threshold): how
    many runs would settle the question. None: no spread known (< 2 deltas), the mean on
    the threshold, or more than `most`."""
    xs = [float(x) for x in deltas]
    if len(xs) < 2 or distance <= 0:
        return None
    m = sum(xs) / len(xs)
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    if s == 0:
        return len(xs)
    for n in range(2, most + 1):
        if _t_quantile(0.5 + confidence / 2.0, n - 1) * s / math.sqrt(n) < distance:
            return n
    return None
