"""The per-scenario summary figures (throughput bars, throughput vs delay, other
metrics) and helpers shared with tsplot: data in, Figure out, no file access.

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
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

from ccbench.report import style  # noqa: E402
from ccbench.report.data import Conditions, Tables, group  # noqa: E402
from ccbench.report.fmt import fmt  # noqa: E402


@dataclass
class VariantStats:
    label: str
    colour: str
    baseline: bool
    n_valid: int
    n_total: int  # runs that ran (valid or not); skipped runs never ran
    tput_mean: float = math.nan
    tput_ci: float = math.nan
    srtt_mean: float = math.nan
    srtt_ci: float = math.nan
    tputs: list[float] = field(default_factory=list)  # per valid run
    srtts: list[float] = field(default_factory=list)
    # runs-table column -> (mean, ci95, values of the valid runs)
    metrics: dict[str, tuple[float, float, list[float]]] = field(default_factory=dict)
    skipped: bool = False  # every run of this variant was skipped

    @property
    def empty_text(self) -> str:
        return "not run" if self.skipped else "no valid runs"


# Runs-table columns shown as small multiples (the bars and scatter show the rest).
OTHER_METRICS = [
    "srtt_mean_ms",
    "srtt_p95_ms",
    "probe_rtt_p95_ms",
    "retransmits",
    "drops_pkts",
    "jain",
]


def variant_stats(
    tables: Tables, scen: str, variants: Sequence[str], baseline: str, colours: dict[str, str]
) -> list[VariantStats]:
    """Each variant's numbers in one scenario as the summary figures draw them: its valid
    runs' values and the summary table's means and CIs."""
    out = []
    for v in variants:
        runs = group(tables.runs, scen, v)
        valid = runs[runs["valid"]]
        s = group(tables.summary, scen, v)
        row = s.iloc[0] if not s.empty else None
        st = VariantStats(
            label=v,
            colour=colours.get(v, style.PALETTE[-1]),
            baseline=v == baseline,
            n_valid=len(valid),
            n_total=int((~runs["skipped"]).sum()),
            tputs=valid["throughput_sum_mbps"].dropna().tolist(),
            srtts=valid["srtt_mean_ms"].dropna().tolist(),
            skipped=bool(len(runs)) and bool(runs["skipped"].all()),
        )
        for key in OTHER_METRICS:
            vals = valid[key].dropna().tolist()
            if row is not None:
                st.metrics[key] = (float(row[f"{key}_mean"]), float(row[f"{key}_ci95"]), vals)
            else:
                st.metrics[key] = (math.nan, math.nan, vals)
        if row is not None:
            st.tput_mean = float(row["throughput_sum_mbps_mean"])
            st.tput_ci = float(row["throughput_sum_mbps_ci95"])
            st.srtt_mean = float(row["srtt_mean_ms_mean"])
            st.srtt_ci = float(row["srtt_mean_ms_ci95"])
        out.append(st)
    return out


@dataclass(frozen=True)
class Panel:
    key: str  # runs-table column
    ylabel: str
    ref: float = math.nan  # a reference line (e.g. the base RTT)
    ref_label: str = ""
    floor: float | None = None  # lowest value axis shows (Jain >= 1/n); the top follows the data


def legend_ncol(labels: Sequence[str], width_in: float, max_cols: int = 4) -> int:
    """As many legend columns as fit the figure width (7 pt text: ~0.065 in/char plus
    the handle), so long variant labels wrap into rows instead of overflowing."""
    entry = max((len(lab) for lab in labels), default=1) * 0.065 + 0.45
    return max(1, min(max_cols, len(labels), int(width_in * 0.95 // entry)))


def _wrap(s: str, width: int) -> str:
    return "\n".join(textwrap.wrap(s, width)) or s


def wrap_titles(titles: Sequence[str], width_in: float) -> list[str]:
    """Wrap figure titles to the figure width and pad them to the same number of lines,
    so figures shown side by side keep their axes level."""
    wrapped = [_wrap(t, int(width_in * 12)) for t in titles]
    n = max((w.count("\n") for w in wrapped), default=0)
    return [w + "\n " * (n - w.count("\n")) for w in wrapped]


def placeholder_figure(text: str, size: tuple[float, float]) -> Figure:
    fig = plt.figure(figsize=size)
    fig.text(0.5, 0.5, text, ha="center", va="center", wrap=True, color="#555555", fontsize=9)
    return fig


def _tick_label(v: VariantStats) -> str:
    n = "not run" if v.skipped else f"n = {v.n_valid}/{v.n_total}"
    lines = [_wrap(v.label, 14), "(baseline)" if v.baseline else "", n]
    return "\n".join(x for x in lines if x)


def bars_figure(
    stats: Sequence[VariantStats], cond: Conditions, scenario: str, size: tuple[float, float]
) -> Figure:
    """Mean throughput sum per variant with its 95 % CI and every valid run as a dot;
    the right axis reads the same bars as utilization of the bottleneck."""
    fig, ax = plt.subplots(figsize=size, layout="constrained")
    x = np.arange(len(stats))
    top = cond.topology.rate_mbit
    rng = np.random.default_rng(0)  # fixed jitter: the same figure on every build
    for i, v in enumerate(stats):
        if v.n_valid == 0:
            ax.text(
                i,
                cond.topology.rate_mbit * 0.05,
                v.empty_text,
                rotation=90,
                ha="center",
                va="bottom",
                fontsize=7.5,
                color="#555555",
            )
            continue
        ax.bar(
            i,
            v.tput_mean,
            width=0.6,
            color=v.colour,
            alpha=0.35,
            edgecolor=v.colour,
            lw=1.2,
            hatch="///" if v.baseline else None,
            zorder=2,
        )
        if math.isfinite(v.tput_ci):
            ax.errorbar(i, v.tput_mean, yerr=v.tput_ci, color="black", capsize=4, lw=1, zorder=4)
        jit = rng.uniform(-0.12, 0.12, len(v.tputs))
        ax.scatter(i + jit, v.tputs, s=12, color=v.colour, edgecolor="white", lw=0.5, zorder=5)
        hi = v.tput_mean + (v.tput_ci if math.isfinite(v.tput_ci) else 0)
        hi = max([hi, *v.tputs])
        top = max(top, hi)
        ax.annotate(
            fmt(v.tput_mean, 1),
            (i, hi),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=7.5,
            zorder=6,
            bbox={"fc": "white", "ec": "none", "pad": 0.6, "alpha": 0.85},
        )
    ax.axhline(cond.topology.rate_mbit, color=style.REF_COLOUR, lw=0.8, ls=(0, (4, 2)), zorder=1)
    ax.set_ylim(0, top * 1.16)
    ax.set_xlim(-0.6, len(stats) - 0.4)
    ax.set_xticks(x, [_tick_label(v) for v in stats])
    ax.grid(axis="x", visible=False)
    ax.set_ylabel("throughput sum (Mbit/s)")
    rate = cond.topology.rate_mbit

    def to_pct(y: ArrayLike) -> ArrayLike:
        return np.asarray(y, float) / rate * 100

    def to_mbps(u: ArrayLike) -> ArrayLike:
        return np.asarray(u, float) * rate / 100

    sec = ax.secondary_yaxis("right", functions=(to_pct, to_mbps))
    sec.set_ylabel("utilization of bottleneck (%)")
    ax.set_title(
        f"{scenario}: mean throughput sum per variant\n"
        "bars: mean of valid runs, whiskers: 95 % CI, dots: runs"
    )
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
        ax.errorbar(
            v.srtt_mean,
            v.tput_mean,
            xerr=xe,
            yerr=ye,
            color=v.colour,
            capsize=3,
            lw=1.1,
            marker="D" if v.baseline else "o",
            ms=5.5,
            mec="white",
            mew=0.6,
            zorder=4,
        )
        handles.append(
            Line2D(
                [],
                [],
                color=v.colour,
                marker="D" if v.baseline else "o",
                ms=5,
                lw=1.1,
                label=f"{v.label}{' (baseline)' if v.baseline else ''}",
            )
        )
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
    ax.set_title(
        f"{scenario}: throughput vs delay\ndots: valid runs, markers: variant mean ± 95 % CI"
    )
    ncol = legend_ncol([str(h.get_label()) for h in handles], size[0])
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
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


def metrics_height(n_variants: int) -> float:
    return round(1.0 + 0.3 * max(n_variants, 2), 2)


def metrics_figure(
    stats: Sequence[VariantStats], panels: Sequence[Panel], scenario: str, width_in: float
) -> Figure:
    """Small multiples of the other table metrics, one row per variant as in the tables:
    the valid runs as dots and the mean with its 95 % CI. Variant labels are written
    once, on the left, however long they are. No zero baseline: these are not bars."""
    size = (width_in, metrics_height(len(stats)))
    fig = plt.figure(figsize=size, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True)[0]
    rng = np.random.default_rng(0)
    for ax, p in zip(axes, panels, strict=True):
        for i, v in enumerate(stats):
            if v.n_valid == 0:
                ax.annotate(
                    v.empty_text,
                    (0.5, i),
                    xycoords=("axes fraction", "data"),
                    ha="center",
                    va="center",
                    fontsize=6.5,
                    color="#555555",
                )
                continue
            mean, ci, vals = v.metrics.get(p.key, (math.nan, math.nan, []))
            ax.scatter(
                vals,
                i + rng.uniform(-0.15, 0.15, len(vals)),
                s=10,
                color=v.colour,
                alpha=0.5,
                lw=0,
                zorder=3,
            )
            if math.isfinite(mean):
                ax.errorbar(
                    mean,
                    i,
                    xerr=ci if math.isfinite(ci) else None,
                    color=v.colour,
                    marker="D" if v.baseline else "o",
                    ms=4.5,
                    capsize=2.5,
                    lw=1.1,
                    mec="white",
                    mew=0.5,
                    zorder=4,
                )
        if math.isfinite(p.ref):
            ax.axvline(p.ref, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
        if p.floor is not None:
            ax.set_xlim(left=p.floor)
        ax.grid(axis="y", visible=False)
        ax.set_title(p.ylabel)
        ax.tick_params(axis="y", length=0)
    axes[0].set_ylim(len(stats) - 0.5, -0.5)  # first variant on top, as in the tables
    axes[0].set_yticks(range(len(stats)), [_wrap(v.label, 26) for v in stats])
    refs = [p for p in panels if math.isfinite(p.ref)]
    note = f"; dashed: {refs[0].ref_label}" if refs else ""
    fig.suptitle(
        f"{scenario}: other metrics per variant (dots: valid runs, markers: mean ± 95 % CI{note})"
    )
    return fig


def metric_panels(cond: Conditions, probe: bool) -> list[Panel]:
    """The metrics figure's panels; `probe`: the runs measured RTT under load."""
    base = f"base RTT {fmt(cond.topology.rtt_ms)} ms"
    panels = [
        Panel("srtt_mean_ms", "srtt avg (ms)", cond.topology.rtt_ms, base),
        Panel("srtt_p95_ms", "srtt p95 (ms)", cond.topology.rtt_ms, base),
        Panel("retransmits", "retransmits (segments)"),
        Panel("drops_pkts", "bottleneck drops (packets)"),
    ]
    if cond.n_flows > 1:  # Jain of one flow is 1 by definition
        panels.append(Panel("jain", "Jain fairness index", floor=1 / cond.n_flows))
    if probe:
        panels.insert(2, Panel("probe_rtt_p95_ms", "RTT under load p95 (probe, ms)",
                               cond.topology.rtt_ms, base))  # fmt: skip
    return panels
