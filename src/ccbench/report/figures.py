"""Every figure of a results set, plus figures.json (the manifest the document reads).

Per scenario: one time-series figure per variant (throughput, cwnd, srtt), a bar chart
of the throughput sum and a throughput-vs-delay scatter. Only valid runs are plotted;
captions count the invalid ones so nothing disappears silently.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ccbench.report import data, plots, style, tsplot  # noqa: E402
from ccbench.report.fmt import fmt  # noqa: E402

# Printed sizes (inches) on an A4 landscape page with 14 mm margins (10.5 in wide).
PAGE_W = 10.4
TS_H = 5.6
TS_PER_ROW = 3
PAIR_SIZE = (5.1, 3.45)
# Runs-table columns shown as small multiples (the bars and scatter show the rest).
OTHER_METRICS = ["srtt_mean_ms", "srtt_p95_ms", "retransmits", "drops_pkts", "jain"]


def ts_size(n_variants: int) -> tuple[float, float]:
    per_row = max(1, min(TS_PER_ROW, n_variants))
    return (round(min(PAGE_W / per_row - 0.1, 5.6), 2), TS_H)


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "x"


def _invalid_note(runs: pd.DataFrame) -> str:
    bad = runs[~runs["valid"]]
    if bad.empty:
        return "No invalid runs."
    per = ", ".join(f"{v} {n}" for v, n in bad.groupby("variant", sort=False).size().items())
    return f"Not plotted: {len(bad)} invalid run(s) ({per}); see the invalid-runs table."


def _stats(
    tables: data.Tables,
    scen: str,
    variants: list[str],
    matrix: dict[str, Any],
    colours: dict[str, str],
) -> list[plots.VariantStats]:
    out = []
    for v in variants:
        runs = data.group(tables.runs, scen, v)
        valid = runs[runs["valid"]]
        s = data.group(tables.summary, scen, v)
        row = s.iloc[0] if not s.empty else None
        st = plots.VariantStats(
            label=v,
            colour=colours.get(v, style.PALETTE[-1]),
            baseline=v == matrix.get("baseline"),
            n_valid=len(valid),
            n_total=len(runs),
            tputs=valid["throughput_sum_mbps"].dropna().tolist(),
            srtts=valid["srtt_mean_ms"].dropna().tolist(),
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


class _Writer:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.entries: list[dict[str, Any]] = []

    def save(self, fig: Figure, name: str, **entry: Any) -> None:
        fig.savefig(self.out_dir / name, dpi=style.DPI)
        w, h = fig.get_size_inches()
        plt.close(fig)
        self.entries.append({"file": name, **entry, "width_in": float(w), "height_in": float(h)})


def _cwnd_source(series: list[tsplot.RunSeries]) -> str:
    has_ss = any((s.ts["source"] == "ss").any() for s in series)
    return "ss samples" if has_ss else "iperf3 intervals"


def _timeseries(
    w: _Writer,
    tables: data.Tables,
    runs_dir: Path,
    scen: str,
    cond: data.Conditions,
    variants: list[str],
    colours: dict[str, str],
    baseline: str,
) -> None:
    per_variant: dict[str, list[tsplot.RunSeries]] = {}
    for v in variants:
        valid = data.group(tables.runs, scen, v)
        valid = valid[valid["valid"]]
        per_variant[v] = []
        for _, r in valid.iterrows():
            ts = data.load_timeseries(runs_dir, str(r["run_id"]))
            if ts is not None:
                per_variant[v].append(tsplot.RunSeries(str(r["run_id"]), int(r["repetition"]), ts))
    lim = tsplot.limits_for([s for ss in per_variant.values() for s in ss], cond)
    size = ts_size(len(variants))
    tags = {v: " (baseline)" if v == baseline else "" for v in variants}
    titles = dict(
        zip(
            variants,
            plots.wrap_titles([f"{scen} · {v}{tags[v]}" for v in variants], size[0]),
            strict=True,
        )
    )
    for i, v in enumerate(variants, 1):
        runs = data.group(tables.runs, scen, v)
        series = per_variant[v]
        name = f"{_slug(scen)}-ts-{i:02d}-{_slug(v)}.png"
        tag = " (baseline)" if v == baseline else ""
        rep = data.representative(
            runs[runs["valid"] & runs["run_id"].isin([s.run_id for s in series])]
        )
        if rep is None:
            fig = plots.placeholder_figure(
                f"{scen} · {v}{tag}\n\nno valid run with a time series\n({len(runs)} run(s), "
                f"{int((~runs['valid']).sum())} invalid)",
                size,
            )
            cap = f"{v}{tag} in {scen}: nothing to plot. {_invalid_note(runs)}"
            w.save(fig, name, scenario=scen, kind="timeseries", variant=v, caption=cap)
            continue
        r = runs[runs["run_id"] == rep].iloc[0]
        fig = tsplot.timeseries_figure(series, rep, cond, colours[v], lim, titles[v], size)
        cap = (
            f"{v}{tag} in {scen}: throughput per iperf3 interval, cwnd and srtt from "
            f"{_cwnd_source(series)}. Full colour: the flows of {rep} (repetition "
            f"{int(r['repetition'])}, the valid run closest to the median throughput sum, "
            f"{fmt(r['throughput_sum_mbps'], 1)} Mbit/s); "
            + (
                f"faint: the other {len(series) - 1} valid repetition(s). "
                if len(series) > 1
                else "no other valid repetition. "
            )
            + _invalid_note(runs)
        )
        w.save(fig, name, scenario=scen, kind="timeseries", variant=v, caption=cap)


def _panels(cond: data.Conditions) -> list[plots.Panel]:
    base = fmt(cond.rtt_ms)
    panels = [
        plots.Panel("srtt_mean_ms", "srtt avg (ms)", cond.rtt_ms, f"base RTT {base} ms"),
        plots.Panel("srtt_p95_ms", "srtt p95 (ms)", cond.rtt_ms, f"base RTT {base} ms"),
        plots.Panel("retransmits", "retransmits (segments)"),
        plots.Panel("drops_pkts", "bottleneck drops (packets)"),
    ]
    if cond.n_flows > 1:  # Jain of one flow is 1 by definition
        panels.append(plots.Panel("jain", "Jain fairness index", floor=1 / cond.n_flows))
    return panels


def _scenario(
    w: _Writer,
    tables: data.Tables,
    runs_dir: Path,
    matrix: dict[str, Any],
    scen: str,
    colours: dict[str, str],
) -> None:
    cond = data.conditions(matrix, scen)
    if cond is None:
        raise ValueError(f"scenario {scen!r} is in the tables but not in the matrix")
    runs = data.group(tables.runs, scen)
    variants = [v for v in data.variant_labels(matrix) if v in set(runs["variant"])]
    baseline = str(matrix.get("baseline", ""))
    _timeseries(w, tables, runs_dir, scen, cond, variants, colours, baseline)
    stats = _stats(tables, scen, variants, matrix, colours)
    note = _invalid_note(runs)
    w.save(
        plots.bars_figure(stats, cond, scen, PAIR_SIZE),
        f"{_slug(scen)}-bars.png",
        scenario=scen,
        kind="bars",
        variant=None,
        caption=f"{scen}: mean throughput sum over the valid runs of each variant; "
        f"whiskers: 95 % CI (Student t); dots: the valid runs; right axis: the same as % of "
        f"the {fmt(cond.rate_mbit)} Mbit/s bottleneck (dashed line: 100 %); hatched: baseline. "
        f"{note}",
    )
    w.save(
        plots.scatter_figure(stats, cond, scen, PAIR_SIZE),
        f"{_slug(scen)}-scatter.png",
        scenario=scen,
        kind="scatter",
        variant=None,
        caption=f"{scen}: throughput sum vs mean srtt, one dot per valid run; markers: "
        f"variant means with 95 % CI whiskers on both axes. {note}",
    )
    panels = _panels(cond)
    w.save(
        plots.metrics_figure(stats, panels, scen, PAGE_W),
        f"{_slug(scen)}-metrics.png",
        scenario=scen,
        kind="metrics",
        variant=None,
        caption=f"{scen}: " + ", ".join(p.ylabel for p in panels) + " of each variant: "
        f"dots: the valid runs; markers: mean with 95 % CI (Student t). {note}",
    )


def make_all(tables_dir: Path, runs_dir: Path, matrix: dict[str, Any], out_dir: Path) -> None:
    """Write every figure as PNG into out_dir and the manifest out_dir/figures.json:
    a list of {file, scenario, kind, variant, caption, width_in, height_in}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = data.load_tables(tables_dir)
    colours = style.variant_colours(matrix)
    w = _Writer(out_dir)
    with plt.rc_context(cast(Any, style.RC)):  # RC keys are checked by matplotlib
        for scen in data.scenario_names(matrix, tables.runs):
            if not data.group(tables.runs, scen).empty:
                _scenario(w, tables, runs_dir, matrix, scen, colours)
    (out_dir / "figures.json").write_text(json.dumps(w.entries, indent=1) + "\n")
