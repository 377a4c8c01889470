"""Time-series figure of one variant: throughput, cwnd and srtt over time, and, where
the runs sampled it, the bottleneck queue (backlog and drop events) on the same axis.

Data in, Figure out; sizes are printed sizes (inches), as in plots.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from ccbench import instruments, timeseries  # noqa: E402
from ccbench.report import (
    data,  # noqa: E402
    style,  # noqa: E402
)
from ccbench.report.data import Conditions  # noqa: E402
from ccbench.report.plots import legend_ncol  # noqa: E402


@dataclass(frozen=True)
class RunSeries:
    run_id: str
    repetition: int
    ts: pd.DataFrame
    # flow -> {"rto_s": [...], "recovery_s": [...]} (summary.json tcp_events); empty: none
    events: dict[int, dict[str, list[float]]] = field(default_factory=dict)


@dataclass(frozen=True)
class Limits:
    """Axis limits shared by all variants of a scenario, so panels compare directly."""

    t_max: float
    tput_max: float
    cwnd_max: float
    rtt_max: float
    cwnd_scale: float  # bytes per displayed unit
    cwnd_unit: str
    queue_max: float = math.nan  # packets; NaN: no run sampled the queue


def queue_series(ts: pd.DataFrame) -> pd.DataFrame:
    """The bottleneck queue's rows (source "qdisc"), sorted by time; empty for runs
    made without queue sampling (their parquet may lack the columns)."""
    if "backlog_pkts" not in ts.columns:
        return ts.iloc[0:0]
    return ts[ts["source"] == "qdisc"].sort_values("t_s")


def has_queue(series: Sequence[RunSeries]) -> bool:
    return any(not queue_series(s.ts).empty for s in series)


def drop_events(q: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(time, drops) of each sampling interval in which the drop counter rose."""
    d = np.diff(q["drops"].to_numpy(float), prepend=np.nan)
    m = d > 0
    return q["t_s"].to_numpy(float)[m], d[m]


def _flow_series(ts: pd.DataFrame, flow: int, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(t, y) of one flow; throughput as delivered (the receiver's intervals) where the
    run has them; cwnd and RTT from the finest sender source the run has."""
    tput = timeseries.throughput_source(ts) if metric == "tput" else None
    col = timeseries.throughput_column(tput) if tput else {"cwnd": "cwnd_bytes",
                                                           "rtt": "rtt_us"}[metric]  # fmt: skip
    f = ts[(ts["flow"] == flow) & ts[col].notna()]
    # cwnd and RTT: the sender's own finer samples, tcp_probe, ss (Linux) or siftr (FreeBSD)
    src = tput or timeseries.finest_source(f)
    f = f[f["source"] == src].sort_values("t_s")
    return f["t_s"].to_numpy(float), f[col].to_numpy(float)


def _steps(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # iperf3 stamps interval ends: draw each value over its interval, not as a point.
    if len(t) < 2:
        return t, y
    t0 = max(0.0, t[0] - (t[1] - t[0]))
    return np.concatenate([[t0], t]), np.concatenate([[y[0]], y])


@dataclass(frozen=True)
class Extent:
    """How far some runs' series reach (the maxima the shared axes need): one variant's
    are found where its figure is drawn, and a scenario's axes hold the union."""

    t_max: float = 0.0
    tput_mbps: float = 0.0  # of the throughput each run draws (delivered, or written)
    cwnd_bytes: float = 0.0
    rtt_ms: float = 0.0
    queue_pkts: float = math.nan  # the largest backlog sampled; NaN: none
    has_queue: bool = False  # a run sampled the queue

    def union(self, other: Extent) -> Extent:
        return Extent(
            max(self.t_max, other.t_max),
            max(self.tput_mbps, other.tput_mbps),
            max(self.cwnd_bytes, other.cwnd_bytes),
            max(self.rtt_ms, other.rtt_ms),
            float(np.fmax(self.queue_pkts, other.queue_pkts)),
            self.has_queue or other.has_queue,
        )


def extent(series: Sequence[RunSeries]) -> Extent:
    out = Extent()
    for s in series:
        ts = s.ts
        if ts.empty:
            continue
        src = timeseries.throughput_source(ts)
        tp = ts.loc[ts["source"] == src, timeseries.throughput_column(src)]
        q = queue_series(ts)
        # max(a, NaN) keeps a: a run without a column leaves the extent as it was
        out = out.union(Extent(
            max(0.0, float(ts["t_s"].max())),
            max(0.0, float(tp.max()) / 1e6),
            max(0.0, float(ts["cwnd_bytes"].max())),
            max(0.0, float(ts["rtt_us"].max()) / 1e3),
            float(q["backlog_pkts"].max()) if not q.empty else math.nan,
            not q.empty,
        ))  # fmt: skip
    return out


def limits(ext: Extent, cond: Conditions) -> Limits:
    """The axes that hold `ext` and the path's own references (BDP + queue, the line
    rate, the RTT bound)."""
    cwnd_ref = cond.bdp_bytes + (0 if math.isnan(cond.queue_bytes) else cond.queue_bytes)
    qmax = ext.queue_pkts
    if ext.has_queue:
        qmax = max(np.nan_to_num(qmax), float(cond.topology.queue_limit_pkts or 0)) * 1.2
    cwnd = max(ext.cwnd_bytes, cwnd_ref)
    scale, unit = (1e6, "MB") if cwnd >= 2e6 else (1e3, "kB")
    full_rtt = np.nan_to_num(cond.rtt_bound_ms, nan=cond.topology.rtt_ms)
    return Limits(
        t_max=max(ext.t_max, cond.traffic_s if math.isfinite(cond.traffic_s) else 0.0),
        tput_max=max(ext.tput_mbps, cond.topology.rate_mbit) * 1.08,
        cwnd_max=cwnd / scale * 1.08,
        rtt_max=max(ext.rtt_ms, full_rtt) * 1.08,
        cwnd_scale=scale,
        cwnd_unit=unit,
        queue_max=qmax if qmax > 0 else math.nan,
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
    queue = has_queue(series)
    axes = fig.subplots(4 if queue else 3, 1, sharex=True,
                        height_ratios=[1, 1, 1, 0.9] if queue else None)  # fmt: skip
    flows = sorted({int(f) for s in series
                    for f in s.ts.loc[s.ts["source"] != "qdisc", "flow"].unique()})  # fmt: skip
    ordered = sorted(series, key=lambda s: s.run_id == rep_id)  # representative on top
    for s in ordered:
        _flow_panels(axes, s, flows, s.run_id == rep_id, colour, lim)

    if queue:
        _queue_panel(axes[3], ordered, rep_id, cond, colour, lim)
    _flow_axes(axes, cond, lim)
    fig.suptitle(title)

    rep_events = next((s.events for s in series if s.run_id == rep_id), {})
    marked = _event_marks(axes[1], rep_events, colour, lim)
    handles = _legend_handles(flows, colour, queue, len(series) > 1) + marked
    ncol = legend_ncol([str(h.get_label()) for h in handles], size[0], 3)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def _flow_panels(
    axes: Sequence[plt.Axes],
    s: RunSeries,
    flows: Sequence[int],
    rep: bool,
    colour: str,
    lim: Limits,
) -> None:
    """Throughput, cwnd and srtt of each flow of one run on the top three panels: the
    representative run in the flow's colour and line style, any other faint."""
    for k in flows:
        kw = (
            {
                "color": style.flow_colour(colour, k),
                "ls": style.flow_linestyle(k),
                "lw": 1.2,
                "alpha": 1.0,
                "zorder": 3,
            }
            if rep
            else {"color": colour, "ls": "-", "lw": 0.6, "alpha": 0.22, "zorder": 2}
        )
        t, y = _steps(*_flow_series(s.ts, k, "tput"))
        axes[0].plot(t, y / 1e6, drawstyle="steps-pre", **kw)
        t, y = _flow_series(s.ts, k, "cwnd")
        axes[1].plot(t, y / lim.cwnd_scale, **kw)
        t, y = _flow_series(s.ts, k, "rtt")
        axes[2].plot(t, y / 1e3, **kw)


# Congestion events of the representative run on the cwnd panel: RTOs (TCP_CA_Loss) as
# crosses along the top, fast-recovery entries as ticks along the bottom.
EVENT_MARKS = {"rto_s": ("x", 0.96, "RTO"), "recovery_s": ("|", 0.03, "recovery")}


def _event_marks(
    ax: plt.Axes, events: dict[int, dict[str, list[float]]], colour: str, lim: Limits
) -> list[Line2D]:
    """Mark each flow's events; the legend entries of the kinds drawn."""
    drawn = []
    for key, (marker, y, label) in EVENT_MARKS.items():
        for k, ev in sorted(events.items()):
            ts = ev.get(key) or []
            if ts:
                ax.plot(ts, [y * lim.cwnd_max] * len(ts), ls="none", marker=marker, ms=5,
                        mew=1.0, color=style.flow_colour(colour, k), zorder=4)  # fmt: skip
                if label not in drawn:
                    drawn.append(label)
    return [Line2D([], [], color=style.REF_COLOUR, marker=EVENT_MARKS[key][0], ls="none",
                   ms=5, label=EVENT_MARKS[key][2])
            for key in EVENT_MARKS if EVENT_MARKS[key][2] in drawn]  # fmt: skip


def _flow_axes(axes: Sequence[plt.Axes], cond: Conditions, lim: Limits) -> None:
    """Limits shared by the scenario's variants, the reference lines (rate and fair
    share, BDP, base RTT and full queue) and the labels."""
    axes[0].set_ylim(0, lim.tput_max)
    axes[1].set_ylim(0, lim.cwnd_max)
    axes[2].set_ylim(0, lim.rtt_max)
    axes[-1].set_xlim(0, lim.t_max)
    rate, rtt_ms = cond.topology.rate_mbit, cond.topology.rtt_ms
    fair = [(rate / cond.n_flows, "fair share")] if cond.n_flows > 1 else []
    _refs(axes[0], [(rate, "rate"), *fair], lim.tput_max)
    cw = lim.cwnd_scale
    _refs(
        axes[1],
        [(cond.bdp_bytes / cw, "BDP"), ((cond.bdp_bytes + cond.queue_bytes) / cw, "BDP+queue")],
        lim.cwnd_max,
    )
    _refs(
        axes[2],
        [(rtt_ms, "base RTT"), (cond.rtt_bound_ms, "full queue")],
        lim.rtt_max,
    )
    axes[0].set_ylabel("throughput (Mbit/s)")
    axes[1].set_ylabel(f"cwnd ({lim.cwnd_unit})")
    axes[2].set_ylabel("srtt (ms)")
    axes[-1].set_xlabel("time since run start (s)")


def _legend_handles(flows: Sequence[int], colour: str, queue: bool, others: bool) -> list[Line2D]:
    """One entry per flow, then the queue drop marker and the faint other repetitions
    where the figure shows them."""
    handles: list[Line2D] = [
        Line2D(
            [],
            [],
            color=style.flow_colour(colour, k),
            ls=style.flow_linestyle(k),
            lw=1.2,
            label=f"flow {k}",
        )
        for k in flows
    ]
    if queue:
        handles.append(Line2D([], [], color=style.REF_COLOUR, marker="v", ls="none", ms=4,
                              label="queue drops"))  # fmt: skip
    if others:
        handles.append(Line2D([], [], color=colour, lw=0.6, alpha=0.35, label="other repetitions"))
    return handles


def _queue_panel(
    ax: plt.Axes, ordered: Sequence[RunSeries], rep_id: str, cond: Conditions, colour: str,
    lim: Limits,
) -> None:  # fmt: skip
    """Backlog (packets) of the representative run in full colour, the other runs faint;
    a marker at the top for each sampling interval with drops (bigger: more drops)."""
    for s in ordered:
        q = queue_series(s.ts)
        if q.empty:
            continue
        t, y = q["t_s"].to_numpy(float), q["backlog_pkts"].to_numpy(float)
        if s.run_id != rep_id:
            ax.plot(t, y, color=colour, lw=0.5, alpha=0.22, drawstyle="steps-post", zorder=2)
            continue
        ax.plot(t, y, color=colour, lw=0.9, drawstyle="steps-post", zorder=3)
        ax.fill_between(t, y, step="post", color=colour, alpha=0.18, lw=0, zorder=2)
        dt, dn = drop_events(q)
        if len(dt):
            top = lim.queue_max * 0.93
            sizes = 8 + 40 * np.sqrt(dn / dn.max())
            ax.scatter(dt, np.full(len(dt), top), s=sizes, marker="v", color=style.REF_COLOUR,
                       lw=0, zorder=4, clip_on=False)  # fmt: skip
    ymax = lim.queue_max if math.isfinite(lim.queue_max) else 1.0
    ax.set_ylim(0, ymax)
    if cond.topology.queue_limit_pkts:
        _refs(ax, [(float(cond.topology.queue_limit_pkts), "limit")], ymax)
    ax.set_ylabel("queue (pkts)")


def throughput_caption(series: Sequence[RunSeries]) -> str:
    """What the throughput panel draws (timeseries.throughput_label), naming both kinds
    when the runs differ (some made before servers reported intervals)."""
    srcs = sorted({timeseries.throughput_source(s.ts) for s in series if not s.ts.empty})
    return "; ".join(timeseries.throughput_label(s) for s in srcs) or "per iperf3 interval"


def cwnd_source(series: Sequence[RunSeries], runs_dir: Path) -> str:
    """Where the figures' cwnd and srtt come from, for the caption: the finest source
    the runs have, and how finely its instrument took it (Instrument.series_caption)."""
    if not series:
        return "iperf3 intervals"
    src = timeseries.finest_source(pd.concat([s.ts[["source"]] for s in series]))
    if src not in instruments.REGISTRY:
        return "iperf3 intervals"
    recs = [data.run_summary(runs_dir, s.run_id) for s in series]
    return instruments.REGISTRY[src].series_caption(recs)
