"""The event-zoom figure of one run: its first loss episodes side by side, each at the
resolution the run has, as CC developers plot them by hand. Rows on one time axis (ms
from the episode's start): the episode's flow's cwnd, ssthresh and bytes in flight
(the other flows' cwnd faint behind), every flow's srtt, the bottleneck's backlog and
drops, and, for flows that have BBR's model, its bandwidth estimate and pacing gain.

Data in (report.episodes.Zoom), Figure out; sizes are printed sizes (inches).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from ccbench.instruments import SENDER_SOURCES  # noqa: E402
from ccbench.report import episodes, style  # noqa: E402
from ccbench.report.data import Conditions  # noqa: E402
from ccbench.report.episodes import CA_SOURCE, QUEUE_SOURCE, Zoom  # noqa: E402
from ccbench.report.plots import legend_ncol  # noqa: E402

ROW_H = 1.2  # inches per row: 4 rows, the legend and the caption fit an A4 landscape page
OTHER_COLOUR = "#9a9a9a"  # the other flows
# The episode's flow: cwnd in the variant's colour, these apart from every variant's.
SSTHRESH_COLOUR = "#7B3294"
INFLIGHT_COLOUR = "#5AAE61"
QUEUE_COLOUR = "#444444"
# Congestion states shaded behind the episode's flow (enum tcp_ca_state codes).
STATE_SHADES = {3: ("#E69F00", 0.16, "in Recovery"), 4: ("#CC3311", 0.14, "in Loss (RTO)")}
DROP_COLOUR = "#CC3311"
SPARSE_MS = 5.0  # samples further apart than this (median) get a marker each


@dataclass(frozen=True)
class Panel:
    """What the figure knows of the run beyond its rows."""

    cond: Conditions
    colour: str  # the variant's
    source: str  # the rows' source its cwnd and srtt come from (the episodes')


def _ms(t: np.ndarray | pd.Series, z: Zoom) -> np.ndarray:
    return (np.asarray(t, dtype=float) - z.t0) * 1e3


def _rows(z: Zoom, source: str, flow: int, col: str) -> pd.DataFrame:
    """One flow's rows of `source` that have `col`, by time."""
    r = z.rows
    if col not in r.columns:
        return r.iloc[0:0]
    f = r[(r["source"] == source) & (r["flow"] == flow)]
    return f[f[col].notna()].sort_values("t_s")


def _any_source(z: Zoom, flow: int, col: str, prefer: str) -> pd.DataFrame:
    """`col` of a flow from the preferred source, else from the first sender source that
    has it in the window (ss has BBR's model and the kernel's min RTT, a trace not)."""
    src = source_of(z, flow, col, prefer)
    return z.rows.iloc[0:0] if src is None else _rows(z, src, flow, col)


def source_of(z: Zoom, flow: int, col: str, prefer: str) -> str | None:
    """Where the figure takes `col` of `flow` from (None: nowhere in the window)."""
    if col in ("cwnd_bytes", "rtt_us"):  # the episode's source's own, nothing mixed in
        return prefer if len(_rows(z, prefer, flow, col)) else None
    return next((s for s in (prefer, *SENDER_SOURCES) if len(_rows(z, s, flow, col))), None)


# What each column drawn is (captions), for the episode's flow unless ALL_FLOWS.
DRAWN = {
    "cwnd_bytes": "cwnd",
    "rtt_us": "srtt",
    "ssthresh_bytes": "ssthresh",
    "inflight_bytes": "bytes in flight",
    "rwnd_bytes": "the peer's receive window",
    "min_rtt_us": "the kernel's min RTT",
    "bbr_bw_bps": "BBR's bandwidth estimate",
    "bbr_min_rtt_us": "BBR's min RTT estimate",
    "bbr_pacing_gain": "BBR's pacing gain",
}
ALL_FLOWS = ("cwnd_bytes", "rtt_us", "bbr_bw_bps")


def drawn_from(z: Zoom, prefer: str) -> dict[str, set[str]]:
    """Column -> the sources the figure drew it from in this zoom."""
    out: dict[str, set[str]] = {}
    for col in DRAWN:
        for k in flows_of(z) if col in ALL_FLOWS else [z.event.flow]:
            src = source_of(z, k, col, prefer)
            if src is not None:
                out.setdefault(col, set()).add(src)
    return out


def flows_of(z: Zoom) -> list[int]:
    r = z.rows
    return sorted({int(k) for k in r.loc[r["source"].isin(SENDER_SOURCES), "flow"]})


def has_bbr(zs: Sequence[Zoom]) -> bool:
    return any("bbr_bw_bps" in z.rows.columns and z.rows["bbr_bw_bps"].notna().any() for z in zs)


def has_queue(zs: Sequence[Zoom]) -> bool:
    return any("backlog_pkts" in z.rows.columns and (z.rows["source"] == QUEUE_SOURCE).any()
               for z in zs)  # fmt: skip


def figure(zs: Sequence[Zoom], p: Panel, title: str, width: float) -> Figure:
    rows = ["window", "srtt", *(["queue"] if has_queue(zs) else []),
            *(["bbr"] if has_bbr(zs) else [])]  # fmt: skip
    draw = {"window": _window_panel, "srtt": _srtt_panel, "queue": _queue_panel,
            "bbr": _bbr_panel}  # fmt: skip
    fig = plt.figure(figsize=(width, 0.9 + ROW_H * len(rows)), layout="constrained")
    axes = fig.subplots(len(rows), len(zs), sharex="col", sharey="row", squeeze=False)
    seen: set[str] = set()
    for j, z in enumerate(zs):
        col = axes[:, j]
        for ax in col:
            ax.set_xlim(_ms(np.array([z.lo, z.hi]), z))
            _marks(ax, z, seen)
        _states(col[0], z, seen)
        for ax, row in zip(col, rows, strict=True):
            draw[row](ax, z, p, seen)
        col[0].set_title(_column_title(j, z), loc="left")
        col[-1].set_xlabel("ms from the episode's start")
    _limits(dict(zip(rows, axes[:, 0], strict=True)), zs, p)
    fig.suptitle(title)
    handles = _legend(seen, p)
    ncol = legend_ncol([str(h.get_label()) for h in handles], width, 5)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def _column_title(j: int, z: Zoom) -> str:
    ev = z.event
    t = f"({j + 1}) flow {ev.flow} {ev.what} at {ev.t_s:.3f} s"
    if ev.after_s is not None and math.isfinite(ev.after_s):
        t = f"({j + 1}) flow {ev.flow} {ev.what} in {ev.after_s:.2f}-{ev.t_s:.2f} s"
    if len(z.others) > 2:
        return f"{t}\n{len(z.others)} other events in the window (dotted)"
    more = [f"flow {e.flow} {e.what} {(e.t_s - z.t0) * 1e3:+.0f} ms" for e in z.others]
    return t + "\n" + (", ".join(more) or " ")


def _marks(ax: plt.Axes, z: Zoom, seen: set[str]) -> None:
    """The episode's start (and end), the other events in the window and, for an event
    found in samples, the interval it lies in."""
    ev = z.event
    ax.axvline(0, color=style.REF_COLOUR, lw=0.8, zorder=1)
    if z.end_s is not None:
        ax.axvline((z.end_s - z.t0) * 1e3, color=style.REF_COLOUR, lw=0.8, ls=(0, (2, 2)))
        seen.add("end")
    for e in z.others:
        ax.axvline((e.t_s - z.t0) * 1e3, color=OTHER_COLOUR, lw=0.6, ls=(0, (1, 2)), zorder=1)
        seen.add("other event")
    if ev.after_s is not None and math.isfinite(ev.after_s):
        ax.axvspan((ev.after_s - z.t0) * 1e3, 0, color=style.REF_COLOUR, alpha=0.12, lw=0)
        seen.add("between samples")


def _states(ax: plt.Axes, z: Zoom, seen: set[str]) -> None:
    """The episode's flow's congestion states shaded, where the run recorded them."""
    s = _rows(z, CA_SOURCE, z.event.flow, "ca_state")
    if s.empty:
        return
    t = np.append(_ms(s["t_s"], z), (z.hi - z.t0) * 1e3)
    for i, state in enumerate(s["ca_state"].to_numpy(float)):
        shade = STATE_SHADES.get(int(state))
        if shade is not None and t[i + 1] > t[i]:
            ax.axvspan(t[i], t[i + 1], color=shade[0], alpha=shade[1], lw=0, zorder=0)
            seen.add(f"state {int(state)}")


def _steps(
    ax: plt.Axes, f: pd.DataFrame, col: str, z: Zoom, scale: float, p: Panel, **kw: object
) -> None:
    """A sampled quantity as steps (each value holds until the next ACK or sample);
    markers at the samples when they are sparse (not per ACK)."""
    if f.empty:
        return
    x, y = _ms(f["t_s"], z), f[col].to_numpy(float) / scale
    if col == "ssthresh_bytes":
        y = episodes.ssthresh_values(f[col].to_numpy(float)) / scale
    marker = "." if len(x) > 1 and np.median(np.diff(x)) > SPARSE_MS else None
    ax.plot(x, y, drawstyle="steps-post", marker=marker, ms=2.5, **kw)  # type: ignore[arg-type]


def _window_panel(ax: plt.Axes, z: Zoom, p: Panel, seen: set[str]) -> None:
    mss = float(p.cond.topology.mss_bytes)
    k0 = z.event.flow
    for k in flows_of(z):
        if k != k0:
            f = _rows(z, p.source, k, "cwnd_bytes")
            _steps(
                ax,
                f,
                "cwnd_bytes",
                z,
                mss,
                p,
                color=OTHER_COLOUR,
                lw=0.7,
                ls=style.flow_linestyle(k),
                zorder=2,
            )
            if len(f):
                seen.add("other cwnd")
    fl = _any_source(z, k0, "inflight_bytes", p.source)
    if len(fl):
        _steps(ax, fl, "inflight_bytes", z, mss, p, color=INFLIGHT_COLOUR, lw=0.8, zorder=3)
        seen.add("inflight")
    st = _any_source(z, k0, "ssthresh_bytes", p.source)
    if len(st) and np.isfinite(episodes.ssthresh_values(st["ssthresh_bytes"].to_numpy())).any():
        _steps(ax, st, "ssthresh_bytes", z, mss, p, color=SSTHRESH_COLOUR, lw=1.2,
               ls=(0, (4, 2)), zorder=4)  # fmt: skip
        seen.add("ssthresh")
    cwnd = _rows(z, p.source, k0, "cwnd_bytes")
    _steps(ax, cwnd, "cwnd_bytes", z, mss, p, color=p.colour, lw=1.4, zorder=5)
    rw = _any_source(z, k0, "rwnd_bytes", p.source)
    if len(rw):  # drawn only where it comes near the others (_limits: else off the axis)
        _steps(ax, rw, "rwnd_bytes", z, mss, p, color=OTHER_COLOUR, lw=0.9, ls=(0, (1, 1.5)))
        seen.add("rwnd")
    ax.set_ylabel(f"flow {k0}: segments\n(MSS {p.cond.topology.mss_bytes} B)")


def _srtt_panel(ax: plt.Axes, z: Zoom, p: Panel, seen: set[str]) -> None:
    k0 = z.event.flow
    for k in flows_of(z):
        mine = k == k0
        kw = (
            {"color": p.colour, "lw": 1.2, "zorder": 4}
            if mine
            else {"color": OTHER_COLOUR, "lw": 0.7, "ls": style.flow_linestyle(k), "zorder": 3}
        )
        _steps(ax, _rows(z, p.source, k, "rtt_us"), "rtt_us", z, 1e3, p, **kw)
        if mine:
            m = _any_source(z, k, "min_rtt_us", p.source)
            _steps(ax, m, "min_rtt_us", z, 1e3, p, color=p.colour, lw=0.8, ls=(0, (1, 1.5)))
            b = _any_source(z, k, "bbr_min_rtt_us", p.source)
            _steps(
                ax, b, "bbr_min_rtt_us", z, 1e3, p, color=p.colour, lw=0.8, ls=(0, (5, 1.5, 1, 1.5))
            )
            seen.update(n for n, f in (("min_rtt", m), ("bbr_min_rtt", b)) if len(f))
    ax.axhline(p.cond.topology.rtt_ms, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
    ax.set_ylabel("srtt (ms)")


def _queue_panel(ax: plt.Axes, z: Zoom, p: Panel, seen: set[str]) -> None:
    q = z.rows[z.rows["source"] == QUEUE_SOURCE].sort_values("t_s")
    if "backlog_pkts" not in q.columns or q.empty:
        ax.text(
            0.5,
            0.5,
            "queue not sampled",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color=style.REF_COLOUR,
            fontsize=7,
        )
        ax.set_ylabel("queue (pkts)")
        return
    x, y = _ms(q["t_s"], z), q["backlog_pkts"].to_numpy(float)
    ax.fill_between(x, y, step="post", color=QUEUE_COLOUR, alpha=0.2, lw=0, zorder=2)
    ax.plot(x, y, drawstyle="steps-post", color=QUEUE_COLOUR, lw=0.8, zorder=3)
    seen.add("queue")
    limit = p.cond.topology.queue_limit_pkts
    if limit:
        ax.axhline(limit, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)), zorder=1)
    d = np.diff(q["drops"].to_numpy(float), prepend=np.nan)
    # a sample's drops happened in the interval it ends: marked at its middle
    mid = x - np.diff(x, prepend=x[0]) / 2
    inside = (d > 0) & (mid >= (z.lo - z.t0) * 1e3) & (mid <= (z.hi - z.t0) * 1e3)
    if inside.any():
        seen.add("drops")
        top = max(float(limit or 0), float(np.nanmax(y))) * 1.08
        n = d[inside]
        ax.scatter(
            mid[inside],
            np.full(len(n), top),
            marker="v",
            s=6 + 30 * np.sqrt(n / n.max()),
            color=DROP_COLOUR,
            lw=0,
            zorder=5,
            clip_on=False,
        )
        ax.text(
            0.99,
            0.04,
            f"{int(n.sum())} dropped",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=6.5,
            color=DROP_COLOUR,
            zorder=6,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1},
        )
    ax.set_ylabel("queue (pkts)")


def _bbr_panel(ax: plt.Axes, z: Zoom, p: Panel, seen: set[str]) -> None:
    gain = ax.twinx()
    for k in flows_of(z):
        mine = k == z.event.flow
        kw = {
            "color": p.colour if mine else OTHER_COLOUR,
            "lw": 1.1 if mine else 0.7,
            "ls": "-" if mine else style.flow_linestyle(k),
        }
        _steps(ax, _any_source(z, k, "bbr_bw_bps", p.source), "bbr_bw_bps", z, 1e6, p, **kw)
        if mine:
            g = _any_source(z, k, "bbr_pacing_gain", p.source)
            _steps(
                gain,
                g,
                "bbr_pacing_gain",
                z,
                1.0,
                p,
                color=p.colour,
                lw=0.7,
                alpha=0.6,
                ls=(0, (1, 1.5)),
            )
            seen.update(["bbr_bw"] + (["pacing_gain"] if len(g) else []))
    ax.axhline(p.cond.topology.rate_mbit, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)))
    ax.set_ylabel("BBR bw est.\n(Mbit/s)")
    gain.set_ylim(0, 3.2)
    gain.tick_params(labelsize=6.5, colors=style.REF_COLOUR)
    gain.grid(False)
    gain.spines["right"].set_visible(True)


def _limits(axes: dict[str, plt.Axes], zs: Sequence[Zoom], p: Panel) -> None:
    """Shared per row (each column's window its own): 0 to a little above the largest
    value drawn (srtt: around what was drawn); the receive window does not set the limit
    (it rarely comes near)."""
    mss = float(p.cond.topology.mss_bytes)
    top = 0.0
    for z in zs:
        r = _inside(z)
        r = r[r["source"].isin(SENDER_SOURCES)]
        for col in ("cwnd_bytes", "inflight_bytes", "ssthresh_bytes"):
            if col in r.columns and len(r):
                v = episodes.ssthresh_values(r[col].to_numpy(float))
                if np.isfinite(v).any():
                    top = max(top, float(np.nanmax(v)) / mss)
    axes["window"].set_ylim(0, (top or 1.0) * 1.1)
    rtt = float(p.cond.topology.rtt_ms)
    lo = min(rtt, _bottom(zs, "rtt_us", 1e3))
    hi = _top(zs, "rtt_us", 1e3, np.nan_to_num(p.cond.rtt_bound_ms, nan=rtt))
    axes["srtt"].set_ylim(lo - 0.1 * (hi - lo) - 0.5, hi + 0.1 * (hi - lo) + 0.5)
    if "queue" in axes:
        qmax = _top(zs, "backlog_pkts", 1.0, float(p.cond.topology.queue_limit_pkts or 1))
        axes["queue"].set_ylim(0, qmax * 1.12)
    if "bbr" in axes:
        bw = _top(zs, "bbr_bw_bps", 1e6, p.cond.topology.rate_mbit)
        axes["bbr"].set_ylim(0, bw * 1.15)


def _bottom(zs: Sequence[Zoom], col: str, scale: float) -> float:
    vals = [
        float(r.min()) / scale
        for z in zs
        if col in z.rows.columns and (r := _inside(z)[col]).notna().any()
    ]
    return min(vals, default=math.inf)


def _inside(z: Zoom) -> pd.DataFrame:
    return z.rows[(z.rows["t_s"] >= z.lo) & (z.rows["t_s"] <= z.hi)]


def _top(zs: Sequence[Zoom], col: str, scale: float, floor: float) -> float:
    best = floor
    for z in zs:
        if col in z.rows.columns:
            r = _inside(z)[col]
            if r.notna().any():
                best = max(best, float(r.max()) / scale)
    return best


LEGEND = {  # key -> how its handle looks and says
    "cwnd": (dict(color="C", lw=1.3), "cwnd"),
    "ssthresh": (dict(color=SSTHRESH_COLOUR, lw=1.2, ls=(0, (4, 2))), "ssthresh"),
    "inflight": (dict(color=INFLIGHT_COLOUR, lw=0.8), "in flight: sent, not cum. ACKed"),
    "rwnd": (dict(color=OTHER_COLOUR, lw=0.9, ls=(0, (1, 1.5))), "peer's receive window"),
    "other cwnd": (dict(color=OTHER_COLOUR, lw=0.7), "other flows (cwnd, srtt)"),
    "min_rtt": (dict(color="C", lw=0.8, ls=(0, (1, 1.5))), "kernel's min RTT"),
    "bbr_min_rtt": (dict(color="C", lw=0.8, ls=(0, (5, 1.5, 1, 1.5))), "BBR min RTT est."),
    "queue": (dict(color=QUEUE_COLOUR, lw=0.8), "bottleneck backlog"),
    "drops": (dict(color=DROP_COLOUR, marker="v", ls="none", ms=4), "drops (bigger: more)"),
    "bbr_bw": (dict(color="C", lw=1.1), "BBR bw est."),
    "pacing_gain": (dict(color="C", lw=0.7, ls=(0, (1, 1.5)), alpha=0.6), "pacing gain (right)"),
    "end": (dict(color=style.REF_COLOUR, lw=0.8, ls=(0, (2, 2))), "Open again"),
    "other event": (dict(color=OTHER_COLOUR, lw=0.6, ls=(0, (1, 2))), "other events"),
}


def _legend(seen: set[str], p: Panel) -> list[Line2D | Patch]:
    out: list[Line2D | Patch] = []
    for key in LEGEND:
        if key != "cwnd" and key not in seen:
            continue
        kw, label = LEGEND[key]
        kw = {k: (p.colour if v == "C" else v) for k, v in kw.items()}
        out.append(Line2D([], [], label=label, **kw))  # type: ignore[arg-type]
    for code, (c, a, label) in STATE_SHADES.items():
        if f"state {code}" in seen:
            out.append(Patch(color=c, alpha=a * 2, label=label))
    if "between samples" in seen:
        out.append(Patch(color=style.REF_COLOUR, alpha=0.24, label="cut between these samples"))
    return out
