"""Figures beyond the per-scenario means: the distribution of RTT under load (the probe),
Jain's fairness index over time, and throughput across loss rates with the Mathis
model. Data in, Figure out, no file access; sizes are printed sizes (inches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import NullLocator  # noqa: E402

from ccbench import metrics  # noqa: E402
from ccbench.report import style  # noqa: E402
from ccbench.report.data import Conditions, Tables, group  # noqa: E402
from ccbench.report.fmt import fmt  # noqa: E402
from ccbench.report.plots import legend_ncol  # noqa: E402


@dataclass
class ProbeSamples:
    label: str
    colour: str
    baseline: bool
    n_runs: int  # valid runs whose samples are pooled
    rtts_ms: list[float] = field(default_factory=list)


def _vref(ax: plt.Axes, x: float, text: str) -> None:
    """A dashed vertical reference line, labelled just above the axes."""
    ax.axvline(x, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
    ax.annotate(
        text,
        (x, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(2, 2),
        textcoords="offset points",
        fontsize=6.5,
        color=style.REF_COLOUR,
        ha="left",
        va="bottom",
    )


def probe_cdf_figure(
    samples: Sequence[ProbeSamples],
    cond: Conditions,
    title: str,
    size: tuple[float, float],
) -> Figure:
    """Empirical CDF of every RTT-under-load sample of the valid runs, per variant;
    dashed: the base RTT and the RTT with a full tail-drop queue."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    handles: list[Line2D] = []
    xs_all: list[float] = []
    for s in samples:
        if not s.rtts_ms:
            continue
        x = np.sort(np.asarray(s.rtts_ms, float))
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(
            np.concatenate([[x[0]], x]),
            np.concatenate([[0.0], y]),
            where="post",
            color=s.colour,
            lw=1.3,
            ls="-" if not s.baseline else (0, (5, 1.5)),
            zorder=3,
        )
        xs_all += s.rtts_ms
        tag = " (baseline)" if s.baseline else ""
        handles.append(
            Line2D(
                [],
                [],
                color=s.colour,
                lw=1.3,
                ls="-" if not s.baseline else (0, (5, 1.5)),
                label=f"{s.label}{tag}: {len(x)} samples, {s.n_runs} run(s)",
            )
        )
    if not xs_all:
        ax.text(0.5, 0.5, "no RTT-under-load samples", transform=ax.transAxes, ha="center")
    else:
        lo = min(min(xs_all), cond.topology.rtt_ms)
        hi = max(xs_all)
        full = cond.rtt_bound_ms
        if math.isfinite(full):
            hi = max(hi, full)
        pad = (hi - lo) * 0.05 or 1.0
        ax.set_xlim(max(0.0, lo - pad), hi + pad)
        _vref(ax, cond.topology.rtt_ms, "base RTT")
        if math.isfinite(full):
            _vref(ax, full, "full queue")
    ax.set_ylim(0, 1.02)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 0.95, 1.0], ["0", "0.25", "0.5", "0.75", "0.95", "1"])
    ax.set_xlabel("RTT under load (ms), probe s1 → r1 through the bottleneck")
    ax.set_ylabel("fraction of samples ≤ x")
    ax.set_title(title)
    if handles:
        ncol = legend_ncol([str(h.get_label()) for h in handles], size[0], 2)
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


@dataclass
class JainRun:
    label: str
    colour: str
    baseline: bool
    repetition: int
    times_s: list[float]
    jains: list[float]
    convergence_s: float  # from the runs table; NaN: never


def jain_time_figure(
    series: Sequence[JainRun],
    n_flows: int,
    threshold: float,
    window_s: float,
    title: str,
    size: tuple[float, float],
) -> Figure:
    """Jain's index per iperf3 interval of each variant's representative run, from the
    last flow start on; a dot where the run converged (held >= threshold for window_s)."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    handles: list[Line2D] = []
    t_max = 0.0
    for s in series:
        if not s.times_s:
            continue
        handle, t_end = _jain_run(ax, s, threshold)
        handles.append(handle)
        t_max = max(t_max, t_end)
    floor = 1.0 / n_flows if n_flows > 0 else 0.0
    ax.axhline(threshold, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
    ax.annotate(
        f"{fmt(threshold, None)} (held {fmt(window_s, None)} s = converged)",
        (0.0, threshold),
        xycoords=("axes fraction", "data"),
        xytext=(3, -3),
        textcoords="offset points",
        fontsize=6.5,
        color=style.REF_COLOUR,
        va="top",
    )
    lows = [min(s.jains) for s in series if s.jains]
    low = min([*lows, threshold]) - 0.05
    ax.set_ylim(max(floor - 0.01, low), 1.01)
    ax.set_xlim(0, max(t_max, 1e-3))
    ax.set_xlabel("time since the last flow started (s)")
    ax.set_ylabel("Jain's fairness index")
    ax.set_title(title)
    if not handles:
        ax.text(0.5, 0.5, "no valid multi-flow run", transform=ax.transAxes, ha="center")
    else:
        ncol = legend_ncol([str(h.get_label()) for h in handles], size[0], 2)
        fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def _jain_run(ax: plt.Axes, s: JainRun, threshold: float) -> tuple[Line2D, float]:
    """Draw one run's index and its convergence dot; returns its legend handle and the
    time of its last interval."""
    ls = (0, (5, 1.5)) if s.baseline else "-"
    t = np.asarray(s.times_s, float)
    # Each value covers the interval that ends at its time stamp.
    step = float(np.min(np.diff(t))) if len(t) > 1 else t[0]
    ax.step(
        np.concatenate([[t[0] - step], t]),
        np.concatenate([[s.jains[0]], s.jains]),
        where="pre",
        color=s.colour,
        lw=1.3,
        ls=ls,
        zorder=3,
    )
    c = s.convergence_s
    if math.isfinite(c):
        at = [j for tt, j in zip(s.times_s, s.jains, strict=True) if abs(tt - c) < 1e-6]
        y = at[0] if at else threshold
        ax.plot([c], [y], "o", color=s.colour, ms=5, mec="white", mew=0.6, zorder=4)
        what = f"converged after {fmt(c, 1)} s"
    else:
        what = "did not converge"
    tag = " (baseline)" if s.baseline else ""
    handle = Line2D(
        [],
        [],
        color=s.colour,
        lw=1.3,
        ls=ls,
        marker="o" if math.isfinite(c) else None,
        ms=4,
        label=f"{s.label}{tag}, rep. {s.repetition}: {what}",
    )
    return handle, float(t[-1])


@dataclass
class LossPoint:
    scenario: str
    loss_rate: float  # 0 for the loss-free scenario
    loss_mode: str  # "none", "random", "nth", ...
    mean: float  # throughput sum, Mbit/s
    ci: float
    runs: list[float] = field(default_factory=list)  # valid runs' throughput sums


@dataclass
class LossSeries:
    label: str
    colour: str
    baseline: bool
    points: list[LossPoint] = field(default_factory=list)


def loss_series(
    tables: Tables,
    variants: Sequence[str],
    baseline: str,
    scenarios: Sequence[Conditions],
    colours: dict[str, str],
) -> list[LossSeries]:
    """Each variant's points across the scenarios of one loss group: the summary table's
    mean and CI of the throughput sum and its valid runs' values."""
    series = []
    for v in variants:
        pts = []
        for c in scenarios:
            g = group(tables.runs, c.scenario, v)
            if g.empty:
                continue
            s = group(tables.summary, c.scenario, v)
            valid = g[g["valid"]]
            pts.append(
                LossPoint(
                    c.scenario,
                    c.topology.loss_rate if c.has_loss else 0.0,
                    c.topology.loss_mode if c.has_loss else "none",
                    float(s["throughput_sum_mbps_mean"].iloc[0]) if len(s) else math.nan,
                    float(s["throughput_sum_mbps_ci95"].iloc[0]) if len(s) else math.nan,
                    valid["throughput_sum_mbps"].dropna().tolist(),
                )
            )
        if pts:
            series.append(LossSeries(v, colours.get(v, style.PALETTE[-1]), v == baseline, pts))
    return series


MODE_MARKERS = {"none": "D", "random": "o", "nth": "s"}
ZERO_DECADES = 0.8  # the loss-free points sit this many decades left of the lowest loss


def loss_figure(
    series: Sequence[LossSeries],
    cond: Conditions,
    size: tuple[float, float],
) -> Figure:
    """Throughput sum vs loss rate (log x) per variant with 95 % CI whiskers, and the
    Mathis prediction n × MSS/RTT·sqrt(3/2)/sqrt(p) (dashed). The loss-free scenario is
    drawn left of an axis break (log axes have no 0); one line per variant and loss
    mode, each through the loss-free point."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    pos = sorted({p.loss_rate for s in series for p in s.points if p.loss_rate > 0})
    if not pos:
        ax.text(0.5, 0.5, "no loss scenario", transform=ax.transAxes, ha="center")
        return fig
    x0 = pos[0] / 10**ZERO_DECADES
    modes = sorted(
        {p.loss_mode for s in series for p in s.points if p.loss_rate > 0},
        key=lambda m: (m != "random", m),  # random loss first: the solid line
    )
    top = cond.topology.rate_mbit
    handles: list[Line2D] = []
    n = len(series)
    for i, s in enumerate(series):
        dodge = 10 ** ((i - (n - 1) / 2) * 0.025)  # keep whiskers of variants apart
        top = _loss_variant(ax, s, _mode_groups(s, modes), x0, dodge, top)
        tag = " (baseline)" if s.baseline else ""
        handles.append(Line2D([], [], color=s.colour, lw=1.1, label=f"{s.label}{tag}"))
    handles.append(_mathis_line(ax, cond, pos))
    handles += [_mode_handle(mode) for mode in ["none", *modes]]
    _loss_axes(ax, cond, pos, x0, top)
    ax.set_title(
        f"Throughput vs loss rate: {cond.n_flows} flow(s), "
        f"{fmt(cond.topology.rate_mbit)} Mbit/s × {fmt(cond.topology.rtt_ms)} ms\n"
        "markers: mean of valid runs ± 95 % CI, dots: runs, dashed: Mathis model"
    )
    ncol = legend_ncol([str(h.get_label()) for h in handles], size[0], 3)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def _mode_groups(s: LossSeries, modes: Sequence[str]) -> list[tuple[str, list[LossPoint]]]:
    """One variant's points per loss mode, each by loss rate; first the loss-free ones."""
    groups = [("none", [p for p in s.points if p.loss_rate <= 0])]
    for mode in modes:
        pts = [p for p in s.points if p.loss_mode == mode and p.loss_rate > 0]
        groups.append((mode, sorted(pts, key=lambda p: p.loss_rate)))
    return groups


def _loss_variant(
    ax: plt.Axes,
    s: LossSeries,
    groups: Sequence[tuple[str, Sequence[LossPoint]]],
    x0: float,
    dodge: float,
    top: float,
) -> float:
    """Draw one variant: per loss mode a line through the means, each mean with its
    whisker and the runs as dots. Returns top raised to the highest whisker or run."""
    for k, (mode, pts) in enumerate(groups):
        if not pts:
            continue
        xs = [(p.loss_rate if p.loss_rate > 0 else x0) * dodge for p in pts]
        if mode != "none":  # no line across the axis break: its slope would mean nothing
            ls = "-" if k == 1 else (0, (1, 1.5))
            ax.plot(xs, [p.mean for p in pts], color=s.colour, lw=1.1, ls=ls, zorder=3)
        for p, x in zip(pts, xs, strict=True):
            if not math.isfinite(p.mean):
                continue
            ax.errorbar(
                x,
                p.mean,
                yerr=p.ci if math.isfinite(p.ci) else None,
                color=s.colour,
                marker=MODE_MARKERS.get(mode, "^"),
                ms=5,
                mec="white",
                mew=0.6,
                capsize=3,
                lw=1.0,
                zorder=4,
            )
            ax.scatter([x] * len(p.runs), p.runs, s=9, color=s.colour, alpha=0.45, lw=0)
            top = max(top, p.mean + (p.ci if math.isfinite(p.ci) else 0), *p.runs)
    return top


def _mathis_line(ax: plt.Axes, cond: Conditions, pos: Sequence[float]) -> Line2D:
    """Draw the Mathis model over the loss rates of the scenarios (it is infinite at
    p = 0); returns its legend handle."""
    p_grid = np.geomspace(pos[0] / 1.5, pos[-1] * 1.5, 80)
    mss, rtt_ms = cond.topology.mss_bytes, cond.topology.rtt_ms
    rtt_s = rtt_ms / 1e3
    model = [cond.n_flows * metrics.mathis_bps(mss, rtt_s, float(p)) / 1e6 for p in p_grid]
    ax.plot(p_grid, model, color="#333333", lw=1.0, ls=(0, (5, 3)), zorder=2)
    n_txt = f"{cond.n_flows} × " if cond.n_flows > 1 else ""
    return Line2D(
        [],
        [],
        color="#333333",
        lw=1.0,
        ls=(0, (5, 3)),
        label=f"Mathis: {n_txt}MSS/RTT·√(3/2)/√p (MSS {mss} B, RTT {fmt(rtt_ms)} ms)",
    )


def _mode_handle(mode: str) -> Line2D:
    """Legend entry of a loss mode's marker."""
    return Line2D(
        [],
        [],
        color="#555555",
        lw=0,
        marker=MODE_MARKERS.get(mode, "^"),
        ms=4.5,
        label="no loss" if mode == "none" else f"{mode} loss",
    )


def _loss_axes(ax: plt.Axes, cond: Conditions, pos: Sequence[float], x0: float, top: float) -> None:
    """The bottleneck rate line, the log x axis with the loss-free point left of a
    break, and the axis labels."""
    ax.axhline(cond.topology.rate_mbit, color=style.REF_COLOUR, lw=0.7, ls=(0, (1, 2)), zorder=1)
    ax.annotate(
        f"rate {fmt(cond.topology.rate_mbit)} Mbit/s",
        (1.0, cond.topology.rate_mbit),
        xycoords=("axes fraction", "data"),
        xytext=(-2, 2),
        textcoords="offset points",
        ha="right",
        va="bottom",
        fontsize=6.5,
        color=style.REF_COLOUR,
    )
    ax.set_xscale("log")
    ax.set_xlim(x0 / 10**0.35, pos[-1] * 10**0.25)
    ax.set_ylim(0, top * 1.12)
    ticks = _loss_ticks(pos, x0)
    ax.set_xticks(ticks, [_loss_tick(t, x0) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    # An axis break between the loss-free point and the log scale.
    xb = x0 * 10 ** (ZERO_DECADES / 2)
    for dx in (-0.04, 0.04):
        ax.plot(
            [xb * 10**dx], [0], transform=ax.get_xaxis_transform(), marker=(2, 0, -60),
            ms=9, mew=1.0, color="#333333", clip_on=False, zorder=5,
        )  # fmt: skip
    ax.set_xlabel("packet loss rate (log scale; left of the break: no loss)")
    ax.set_ylabel("throughput sum (Mbit/s)")


def _loss_ticks(pos: Sequence[float], x0: float) -> list[float]:
    """x ticks, sorted: the loss-free point, the decades within the loss rates, and each
    loss rate not too close to one of those."""
    decades = [10.0**e for e in range(math.floor(math.log10(pos[0])), 1)]
    ticks = [x0, *[d for d in decades if pos[0] / 1.01 <= d <= pos[-1] * 2]]
    ticks += [p for p in pos if all(abs(math.log10(p / t)) > 0.15 for t in ticks)]
    return sorted(ticks)


def _loss_tick(t: float, x0: float) -> str:
    if t == x0:
        return "0"
    return f"{fmt(t * 100, None)} %"
