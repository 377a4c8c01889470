"""A scenario's CPU: the senders' and receivers' CPU and service demand (CPU µs per KB
delivered, netperf's) per variant, as a table with the deltas vs the baseline and as a
figure of throughput against each (seed 003's "throughput, CPU on server and client"
table as a picture). The figures come from summary.json `host_cpu`
(ccbench.instruments.host_cpu) through the runs and summary tables; the source of each
(host counters or the iperf3 processes) is named in the table and the caption."""

from __future__ import annotations

import math
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from ccbench.metric_catalog import CPU, Metric  # noqa: E402
from ccbench.report import data, plots, tables  # noqa: E402
from ccbench.report.figscene import PAGE_W, Scene, Writer, invalid_note, slug  # noqa: E402
from ccbench.report.fmt import NA, fmt_ci  # noqa: E402

TPUT = "throughput_sum_mbps"
ROLES = ("sender", "receiver")
# What each source of the figures is, for the table's note and the figure's caption.
SOURCES = {
    "proc_stat": "each host's /proc/stat (all its CPU time: softirq and other processes too)",
    "kern_cp_time": "each FreeBSD host's kern.cp_time (interrupt threads, netisr among them, "
    "counted as irq)",
    "iperf3_process": "the iperf3 client's (sender) and server's (receiver) own CPU "
    "(getrusage): softirq work done outside them is not in it (where one kernel runs "
    "every node, its /proc/stat is the whole machine's, routers and delay element too, "
    "and this is the figure used)",
}
SIZE = (PAGE_W, 3.1)


def _keys() -> list[str]:
    return [m.key for m in CPU]


def has_cpu(runs: pd.DataFrame) -> bool:
    """Some valid run of these has a CPU figure (results sets before host_cpu: none)."""
    cols = [k for k in _keys() if k in runs]
    return bool(cols) and bool(runs.loc[runs["valid"].astype(bool), cols].notna().any().any())


def sources(runs: pd.DataFrame) -> list[str]:
    """The sources the valid runs' figures are, each once, in order of appearance."""
    got: list[str] = []
    for role in ROLES:
        col = f"{role}_cpu_source"
        if col in runs:
            vals = runs.loc[runs["valid"].astype(bool), col].dropna().astype(str)
            got += [s for v in vals for s in v.split("+") if s]
    return list(dict.fromkeys(got))


def sources_text(runs: pd.DataFrame) -> str:
    return "; ".join(f"{s}: {SOURCES.get(s, s)}" for s in sources(runs)) or NA


def cpu_table(summary: pd.DataFrame, runs: pd.DataFrame,
              colours: dict[str, str]) -> dict[str, Any] | None:  # fmt: skip
    """Per variant: each CPU metric's mean ± 95 % CI over the valid runs and its % delta
    vs the baseline (± CI, marked as the delta table marks it); None when no run has a
    CPU figure."""
    if not has_cpu(runs):
        return None
    heads: list[tuple[str, str]] = []
    for m in CPU:
        heads += [(m.header, m.unit), ("Δ", "%")]
    rows = []
    for _, r in summary.iterrows():
        cells: list[dict[str, Any]] = []
        for m in CPU:
            mean, ci = r.get(f"{m.key}_mean"), r.get(f"{m.key}_ci95")
            cells.append({"text": fmt_ci(mean, ci, m.digits), "sig": False})
            delta, sig = ("baseline", False) if r["baseline"] else tables._delta_text(r, m.key)
            cells.append({"text": delta, "sig": sig})
        label = str(r["variant"])
        rows.append({"label": label, "baseline": bool(r["baseline"]),
                     "colour": colours.get(label, "#999999"), "cells": cells})  # fmt: skip
    return {"heads": heads, "rows": rows, "sources": sources_text(runs)}


def _points(sc: Scene, v: str, key: str) -> pd.DataFrame:
    """The variant's valid runs' (metric, throughput sum) pairs."""
    runs = sc.runs(v)
    valid = runs[runs["valid"].astype(bool)]
    return valid[[key, TPUT]].dropna() if key in valid else pd.DataFrame()


def measured(sc: Scene) -> list[Metric]:
    """The CPU metrics some valid run of the scenario has (runs without host counters
    have no CPU %, only the iperf3 processes' service demand)."""
    return [m for m in CPU if any(not _points(sc, v, m.key).empty for v in sc.variants)]


def _panel(ax: Any, sc: Scene, m: Metric) -> list[float]:
    """One metric against the throughput sum: a dot per valid run, the variant's mean ±
    95 % CI on both axes (the summary table's); the throughputs drawn, whiskers' ends
    included (for the shared axis' range)."""
    ys: list[float] = []
    for v in sc.variants:
        pts = _points(sc, v, m.key)
        if pts.empty:
            continue
        c, base = sc.colour(v), v == sc.baseline
        ax.scatter(pts[m.key], pts[TPUT], s=14, color=c, alpha=0.45, lw=0, zorder=3)
        ys += pts[TPUT].tolist()
        s = data.group(sc.tables.summary, sc.scen, v)
        if s.empty or f"{m.key}_mean" not in s:
            continue
        row = s.iloc[0]
        xe, ye = (_finite(row.get(f"{k}_ci95")) for k in (m.key, TPUT))
        ax.errorbar(row[f"{m.key}_mean"], row[f"{TPUT}_mean"], xerr=xe, yerr=ye, color=c,
                    capsize=3, lw=1.1, marker="D" if base else "o", ms=5.5, mec="white",
                    mew=0.6, zorder=4)  # fmt: skip
        ys += [row[f"{TPUT}_mean"] + d for d in (-(ye or 0), ye or 0)]
    ax.set_xlim(left=0)
    ax.set_xlabel(f"{m.label} ({m.unit})")
    return [y for y in ys if math.isfinite(y)]


def _finite(x: Any) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def cpu_figure(sc: Scene, panels: list[Metric]) -> Figure:
    """Throughput sum against each of `panels` (the senders' and receivers' CPU % and
    service demand that the runs have), side by side on one throughput axis."""
    size = (max(PAGE_W / 2, PAGE_W * len(panels) / len(CPU)), SIZE[1])
    fig, axes = plt.subplots(1, len(panels), figsize=size, sharey=True, layout="constrained",
                             squeeze=False)  # fmt: skip
    ys = [y for ax, m in zip(axes[0], panels, strict=True) for y in _panel(ax, sc, m)]
    axes[0][0].set_ylabel("throughput sum (Mbit/s)")
    if ys:  # the data's range, as the throughput-vs-delay scatter: the bars show from 0
        pad = max(0.2, (max(ys) - min(ys)) * 0.1)
        axes[0][0].set_ylim(max(0.0, min(ys) - pad), max(ys) + pad)
    fig.suptitle(f"{sc.scen}: throughput against sender and receiver CPU\n"
                 "dots: valid runs, markers: variant mean ± 95 % CI")  # fmt: skip
    handles = [Line2D([], [], color=sc.colour(v), marker="D" if v == sc.baseline else "o",
                      ms=5, lw=1.1, label=f"{v}{sc.tag(v)}") for v in sc.variants]  # fmt: skip
    handles.append(Line2D([], [], color="#555555", marker="o", ms=3.5, lw=0, alpha=0.45,
                          label="one valid run"))  # fmt: skip
    ncol = plots.legend_ncol([str(h.get_label()) for h in handles], size[0], max_cols=6)
    fig.legend(handles=handles, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def draw(w: Writer, sc: Scene) -> None:
    """The scenario's CPU figure; none when no valid run has a CPU figure."""
    runs = sc.runs()
    panels = measured(sc)
    if not panels:
        return
    missing = [m.label for m in CPU if m not in panels]
    gap = f" Not measured in these runs: {', '.join(missing)}." if missing else ""
    w.save(
        cpu_figure(sc, panels),
        f"{slug(sc.scen)}-cpu.png",
        scenario=sc.scen,
        kind="cpu",
        variant=None,
        caption=f"{sc.scen}: throughput sum against the senders' and the receivers' CPU (% "
        f"of their CPUs over the traffic window) and service demand (CPU µs per KB "
        f"delivered, netperf's definition), one dot per valid run, markers: variant mean "
        f"± 95 % CI on both axes.{gap} Source: {sources_text(runs)}. {invalid_note(runs)}",
    )
