"""The report's matplotlib figures: data in, Figure out (no file or table access).

Sizes are the printed sizes (inches), so the fonts in style.RC are the fonts on paper.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display on testbed hosts or CI

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

from ccbench.report import style  # noqa: E402
from ccbench.report.data import Conditions  # noqa: E402
from ccbench.report.fmt import fmt  # noqa: E402


@dataclass(frozen=True)
class RunSeries:
    run_id: str
    repetition: int
    ts: pd.DataFrame


@dataclass(frozen=True)
class Limits:
    """Axis limits shared by all variants of a scenario, so panels compare directly."""

    t_max: float
    tput_max: float
    cwnd_max: float
    rtt_max: float
    cwnd_scale: float  # bytes per displayed unit
    cwnd_unit: str


@dataclass
class VariantStats:
    label: str
    colour: str
    baseline: bool
    n_valid: int
    n_total: int
    tput_mean: float = math.nan
    tput_ci: float = math.nan
    srtt_mean: float = math.nan
    srtt_ci: float = math.nan
    tputs: list[float] = field(default_factory=list)  # per valid run
    srtts: list[float] = field(default_factory=list)
    # runs-table column -> (mean, ci95, values of the valid runs)
    metrics: dict[str, tuple[float, float, list[float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Panel:
    key: str  # runs-table column
    ylabel: str
    ref: float = math.nan  # a reference line (e.g. the base RTT)
    ref_label: str = ""
    ylim: tuple[float, float] | None = None


def _flow_series(ts: pd.DataFrame, flow: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(t, y) of one flow; cwnd and RTT from ss (finer) when the run has it."""
    col = {"tput": "throughput_bps", "cwnd": "cwnd_bytes", "rtt": "rtt_us"}[metric]
    f = ts[(ts["flow"] == flow) & ts[col].notna()]
    src = "iperf3" if metric == "tput" or not (f["source"] == "ss").any() else "ss"
    f = f[f["source"] == src].sort_values("t_s")
    return f["t_s"].to_numpy(float), f[col].to_numpy(float)


def _steps(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # iperf3 stamps interval ends: draw each value over its interval, not as a point.
    if len(t) < 2:
        return t, y
    t0 = max(0.0, t[0] - (t[1] - t[0]))
    return np.concatenate([[t0], t]), np.concatenate([[y[0]], y])


def limits_for(series: Sequence[RunSeries], cond: Conditions) -> Limits:
    t_max = tput = cwnd = rtt = 0.0
    for s in series:
        ts = s.ts
        if ts.empty:
            continue
        t_max = max(t_max, float(ts["t_s"].max()))
        tput = max(tput, float(ts.loc[ts["source"] == "iperf3", "throughput_bps"].max()) / 1e6)
        cwnd = max(cwnd, float(ts["cwnd_bytes"].max()))
        rtt = max(rtt, float(ts["rtt_us"].max()) / 1e3)
    cwnd_ref = cond.bdp_bytes + (0 if math.isnan(cond.queue_bytes) else cond.queue_bytes)
    cwnd = max(np.nan_to_num(cwnd), cwnd_ref)
    scale, unit = (1e6, "MB") if cwnd >= 2e6 else (1e3, "kB")
    full_rtt = cond.rtt_ms + np.nan_to_num(cond.full_queue_ms)
    return Limits(
        t_max=max(t_max, cond.traffic_s if math.isfinite(cond.traffic_s) else 0.0),
        tput_max=max(np.nan_to_num(tput), cond.rate_mbit) * 1.08,
        cwnd_max=cwnd / scale * 1.08,
        rtt_max=max(np.nan_to_num(rtt), full_rtt) * 1.08,
        cwnd_scale=scale,
        cwnd_unit=unit,
    )


def _refs(ax: plt.Axes, refs: Sequence[tuple[float, str]], ymax: float) -> None:
    """Reference lines labelled on the right-hand axis, outside the data area, so no
    label or legend covers a curve. Labels of lines closer than 7 % merge."""
    shown = sorted((y, lab) for y, lab in refs if math.isfinite(y) and 0 < y < ymax)
    merged: list[tuple[float, str]] = []
    for y, lab in shown:
        ax.axhline(y, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
        if merged and y - merged[-1][0] < 0.07 * ymax:
            merged[-1] = (merged[-1][0], f"{merged[-1][1]}, {lab}")
        else:
            merged.append((y, lab))
    sec = ax.secondary_yaxis("right")
    sec.set_yticks([y for y, _ in merged], labels=[lab for _, lab in merged])
    sec.tick_params(length=0, labelsize=6.5, labelcolor=style.REF_COLOUR)
    sec.spines["right"].set_visible(False)


def timeseries_figure(
    series: Sequence[RunSeries],
    rep_id: str,
    cond: Conditions,
    colour: str,
    lim: Limits,
    title: str,
    size: tuple[float, float],
) -> Figure:
    """Throughput, cwnd and srtt over time of one variant: the representative run per
    flow in full colour, every other valid repetition faint behind it."""
    fig = plt.figure(figsize=size, layout="constrained")
    axes = fig.subplots(3, 1, sharex=True)
    flows = sorted({int(f) for s in series for f in s.ts["flow"].unique()})
    ordered = sorted(series, key=lambda s: s.run_id == rep_id)  # representative on top
    for s in ordered:
        rep = s.run_id == rep_id
        for k in flows:
            kw = (
                {"color": style.flow_colour(colour, k), "ls": style.flow_linestyle(k),
                 "lw": 1.2, "alpha": 1.0, "zorder": 3}
                if rep
                else {"color": colour, "ls": "-", "lw": 0.6, "alpha": 0.22, "zorder": 2}
            )  # fmt: skip
            t, y = _steps(*_flow_series(s.ts, k, "tput"))
            axes[0].plot(t, y / 1e6, drawstyle="steps-pre", **kw)
            t, y = _flow_series(s.ts, k, "cwnd")
            axes[1].plot(t, y / lim.cwnd_scale, **kw)
            t, y = _flow_series(s.ts, k, "rtt")
            axes[2].plot(t, y / 1e3, **kw)

    axes[0].set_ylim(0, lim.tput_max)
    axes[1].set_ylim(0, lim.cwnd_max)
    axes[2].set_ylim(0, lim.rtt_max)
    axes[2].set_xlim(0, lim.t_max)
    fair = [(cond.rate_mbit / cond.n_flows, "fair share")] if cond.n_flows > 1 else []
    _refs(axes[0], [(cond.rate_mbit, "rate"), *fair], lim.tput_max)
    cw = lim.cwnd_scale
    _refs(
        axes[1],
        [(cond.bdp_bytes / cw, "BDP"), ((cond.bdp_bytes + cond.queue_bytes) / cw, "BDP+queue")],
        lim.cwnd_max,
    )
    _refs(axes[2], [(cond.rtt_ms, "base RTT"),
                    (cond.rtt_ms + cond.full_queue_ms, "full queue")], lim.rtt_max)  # fmt: skip
    axes[0].set_ylabel("throughput (Mbit/s)")
    axes[1].set_ylabel(f"cwnd ({lim.cwnd_unit})")
    axes[2].set_ylabel("srtt (ms)")
    axes[2].set_xlabel("time since run start (s)")
    fig.suptitle(title)

    handles: list[Line2D] = [
        Line2D([], [], color=style.flow_colour(colour, k), ls=style.flow_linestyle(k), lw=1.2,
               label=f"flow {k}")
        for k in flows
    ]  # fmt: skip
    if len(series) > 1:
        handles.append(Line2D([], [], color=colour, lw=0.6, alpha=0.35, label="other repetitions"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 3),
               frameon=False)  # fmt: skip
    return fig


def placeholder_figure(text: str, size: tuple[float, float]) -> Figure:
    fig = plt.figure(figsize=size)
    fig.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#555555", fontsize=9)
    return fig


def _tick_label(v: VariantStats) -> str:
    name = "\n".join(textwrap.wrap(v.label, 14)) or v.label
    return f"{name}{chr(10) + '(baseline)' if v.baseline else ''}\nn = {v.n_valid}/{v.n_total}"


def bars_figure(
    stats: Sequence[VariantStats], cond: Conditions, scenario: str, size: tuple[float, float]
) -> Figure:
    """Mean throughput sum per variant with its 95 % CI and every valid run as a dot;
    the right axis reads the same bars as utilization of the bottleneck."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    x = np.arange(len(stats))
    top = cond.rate_mbit
    rng = np.random.default_rng(0)  # fixed jitter: the same figure on every build
    for i, v in enumerate(stats):
        if v.n_valid == 0:
            ax.text(i, cond.rate_mbit * 0.05, "no valid runs", rotation=90, ha="center",
                    va="bottom", fontsize=7.5, color="#555555")  # fmt: skip
            continue
        ax.bar(i, v.tput_mean, width=0.6, color=v.colour, alpha=0.35, edgecolor=v.colour,
               lw=1.2, hatch="///" if v.baseline else None, zorder=2)  # fmt: skip
        if math.isfinite(v.tput_ci):
            ax.errorbar(i, v.tput_mean, yerr=v.tput_ci, color="black", capsize=4, lw=1, zorder=4)
        jit = rng.uniform(-0.12, 0.12, len(v.tputs))
        ax.scatter(i + jit, v.tputs, s=12, color=v.colour, edgecolor="white", lw=0.5, zorder=5)
        hi = v.tput_mean + (v.tput_ci if math.isfinite(v.tput_ci) else 0)
        hi = max([hi, *v.tputs])
        top = max(top, hi)
        ax.annotate(fmt(v.tput_mean, 1), (i, hi), xytext=(0, 3), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7.5)  # fmt: skip
    ax.axhline(cond.rate_mbit, color=style.REF_COLOUR, lw=0.8, ls=(0, (4, 2)), zorder=1)
    ax.set_ylim(0, top * 1.16)
    ax.set_xlim(-0.6, len(stats) - 0.4)
    ax.set_xticks(x, [_tick_label(v) for v in stats])
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("throughput sum (Mbit/s)")
    rate = cond.rate_mbit

    def to_pct(y: ArrayLike) -> ArrayLike:
        return np.asarray(y, float) / rate * 100

    def to_mbps(u: ArrayLike) -> ArrayLike:
        return np.asarray(u, float) * rate / 100

    sec = ax.secondary_yaxis("right", functions=(to_pct, to_mbps))
    sec.set_ylabel("utilization of bottleneck (%)")
    ax.set_title(f"{scenario}: mean throughput sum per variant\n"
                 "bars: mean of valid runs, whiskers: 95 % CI, dots: runs")  # fmt: skip
    return fig


def scatter_figure(
    stats: Sequence[VariantStats], cond: Conditions, scenario: str, size: tuple[float, float]
) -> Figure:
    """Pantheon-style throughput vs delay: one dot per valid run, the variant mean with
    95 % CI whiskers in both directions. The delay axis is inverted: better is up-right."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    handles: list[Line2D] = []
    for v in stats:
        if v.n_valid == 0:
            continue
        ax.scatter(v.srtts, v.tputs, s=14, color=v.colour, alpha=0.45, lw=0, zorder=3)
        xe = v.srtt_ci if math.isfinite(v.srtt_ci) else None
        ye = v.tput_ci if math.isfinite(v.tput_ci) else None
        ax.errorbar(v.srtt_mean, v.tput_mean, xerr=xe, yerr=ye, color=v.colour, capsize=3,
                    lw=1.1, marker="D" if v.baseline else "o", ms=5.5, mec="white", mew=0.6,
                    zorder=4)  # fmt: skip
        handles.append(
            Line2D([], [], color=v.colour, marker="D" if v.baseline else "o", ms=5, lw=1.1,
                   label=f"{v.label}{' (baseline)' if v.baseline else ''}")
        )  # fmt: skip
    handles.append(
        Line2D([], [], color="#555555", marker="o", ms=3.5, lw=0, alpha=0.45, label="one valid run")
    )
    # Range from the data and whiskers only: reference lines would squeeze the
    # differences between variants into a corner.
    xs, ys = _extent(stats)
    if xs:
        xpad = max(0.2, (max(xs) - min(xs)) * 0.08)
        ypad = max(0.2, (max(ys) - min(ys)) * 0.1)
        ax.set_xlim(max(xs) + xpad, max(0.0, min(xs) - xpad))  # inverted: lower delay right
        ax.set_ylim(max(0.0, min(ys) - ypad), max(ys) + ypad)
    else:
        ax.text(0.5, 0.5, "no valid runs", transform=ax.transAxes, ha="center", color="#555555")
    ax.set_xlabel("mean srtt (ms, axis inverted: lower is right)")
    ax.set_ylabel("throughput sum (Mbit/s)")
    ax.set_title(f"{scenario}: throughput vs delay\n"
                 "dots: valid runs, markers: variant mean ± 95 % CI")  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4),
               frameon=False)  # fmt: skip
    return fig


def _extent(stats: Sequence[VariantStats]) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for v in stats:
        if v.n_valid == 0:
            continue
        xs += v.srtts
        ys += v.tputs
        for m, c, acc in ((v.srtt_mean, v.srtt_ci, xs), (v.tput_mean, v.tput_ci, ys)):
            if math.isfinite(m):
                acc += [m - c, m + c] if math.isfinite(c) else [m]
    return xs, ys


def metrics_figure(
    stats: Sequence[VariantStats], panels: Sequence[Panel], scenario: str,
    size: tuple[float, float],
) -> Figure:  # fmt: skip
    """Small multiples of the other table metrics: per variant the valid runs as dots
    and the mean with its 95 % CI. No zero baseline: these are not bars."""
    fig = plt.figure(figsize=size, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    shown = [v for v in stats if v.n_valid > 0]
    rng = np.random.default_rng(0)
    for ax, p in zip(axes, panels, strict=True):
        for i, v in enumerate(shown):
            mean, ci, vals = v.metrics.get(p.key, (math.nan, math.nan, []))
            ax.scatter(i + rng.uniform(-0.12, 0.12, len(vals)), vals, s=10, color=v.colour,
                       alpha=0.5, lw=0, zorder=3)  # fmt: skip
            if math.isfinite(mean):
                ax.errorbar(i, mean, yerr=ci if math.isfinite(ci) else None, color=v.colour,
                            marker="D" if v.baseline else "o", ms=4.5, capsize=3, lw=1.1,
                            mec="white", mew=0.5, zorder=4)  # fmt: skip
        if math.isfinite(p.ref):
            ax.axhline(p.ref, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
            ax.annotate(p.ref_label, (0, p.ref), xycoords=("axes fraction", "data"),
                        xytext=(2, 2), textcoords="offset points", fontsize=6.5,
                        color=style.REF_COLOUR)  # fmt: skip
        if p.ylim:
            ax.set_ylim(*p.ylim)
        ax.set_xlim(-0.6, len(shown) - 0.4)
        ax.set_xticks(range(len(shown)), [v.label for v in shown], rotation=30 if len(shown) > 3
                      else 0, ha="right" if len(shown) > 3 else "center")  # fmt: skip
        ax.grid(axis="x", visible=False)
        ax.set_title(p.ylabel)
    fig.suptitle(f"{scenario}: other metrics per variant (dots: valid runs, markers: mean ± "
                 "95 % CI)")  # fmt: skip
    return fig
