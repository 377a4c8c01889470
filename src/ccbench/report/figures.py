"""Every figure of a results set, plus figures.json (the manifest the document reads).

Per scenario: one time-series figure per variant (throughput, cwnd, srtt) and one of its
first loss episodes zoomed (report.zoom), a bar chart of the throughput sum, a
throughput-vs-delay scatter, the other metrics, throughput against the endpoints' CPU
(report.cpu), the CDF of RTT under load (the probe) and, with several flows, Jain's
index over time. Across scenarios that differ only in their loss: throughput vs loss
rate with the Mathis model. Only valid runs are plotted; captions count the invalid
(and skipped) ones so nothing disappears silently. A scenario whose runs were all
skipped has no figures.

Every figure is drawn alone from the tables and the runs' files, so worker processes
draw them side by side (matplotlib draws on one core): each writes the same bytes and
the manifest lists them in the same order as drawn one after another. The time-series
figures of a scenario share their axes: each variant's series are first measured
(tsplot.Extent, side by side too), then each figure is drawn on the union.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ccbench import jsonio, timeseries  # noqa: E402
from ccbench.metrics import JAIN_CONVERGED, JAIN_WINDOW_S  # noqa: E402
from ccbench.model import Matrix  # noqa: E402
from ccbench.report import behaviour, cpu, data, plots, style, tsplot, zoom  # noqa: E402
from ccbench.report.figscene import (  # noqa: E402
    LOSS_SIZE,
    PAGE_W,
    PAIR_SIZE,
    Scene,
    Writer,
    invalid_note,
    slug,
    ts_size,
)
from ccbench.report.fmt import fmt  # noqa: E402


def _qinterval(series: list[tsplot.RunSeries]) -> str:
    steps = [float(np.median(np.diff(q["t_s"].to_numpy(float))))
             for s in series if len(q := tsplot.queue_series(s.ts)) > 1]  # fmt: skip
    return f"{fmt(float(np.median(steps)) * 1e3, 0)} ms" if steps else "?"


def _queue_cdf(w: Writer, sc: Scene) -> None:
    """Per variant, the CDF of the queue's backlog over every sample taken while the
    flows ran, pooled over the variant's valid runs."""
    scen, cond = sc.scen, sc.cond
    curves: list[tuple[str, str, np.ndarray, int]] = []
    for v in sc.variants:
        qs = [q for s in sc.valid_series(v) if not (q := tsplot.queue_series(s.ts)).empty]
        vals = [q[(q["t_s"] >= 0) & (q["t_s"] <= cond.traffic_s)]["backlog_pkts"].to_numpy(float)
                for q in qs]  # fmt: skip
        if vals:
            curves.append((v, sc.colours[v], np.sort(np.concatenate(vals)), len(vals)))
    if not curves:
        return
    fig = plt.figure(figsize=PAIR_SIZE, layout="constrained")
    ax = fig.subplots()
    for v, c, x, n in curves:
        y = np.arange(1, len(x) + 1) / len(x)
        tag = sc.tag(v)
        ax.plot(x, y, drawstyle="steps-post", color=c, lw=1.3, ls="--" if tag else "-",
                label=f"{v}{tag}: {len(x)} samples, {n} run(s)")  # fmt: skip
    limit = cond.topology.queue_limit_pkts
    if limit:
        ax.axvline(limit, color=style.REF_COLOUR, lw=0.7, ls=(0, (4, 2)))
        ax.text(limit, 0.02, " limit", color=style.REF_COLOUR, fontsize=6.5,
                rotation=90, va="bottom", ha="right")  # fmt: skip
    ax.set_xlim(left=0)
    ax.set_ylim(0, 1)
    ax.set_xlabel("bottleneck backlog (packets)")
    ax.set_ylabel("share of samples ≤ x")
    ax.set_title(f"{scen}: bottleneck queue backlog")
    fig.legend(loc="outside lower center", frameon=False, ncol=1)
    w.save(
        fig,
        f"{slug(scen)}-queue-cdf.png",
        scenario=scen,
        kind="queue_cdf",
        variant=None,
        caption=f"{scen}: CDF of the bottleneck queue's backlog (rt1, packets) over every "
        f"sample taken while the flows ran, pooled over each variant's valid runs; the "
        f"table's queue columns give the mean and the share of time the queue was full "
        f"(backlog ≥ limit − 1). {invalid_note(sc.runs())}",
    )


def _timeseries(w: Writer, sc: Scene, i: int) -> None:
    """The time series of the scenario's i-th variant (0-based), on the axes all its
    variants share (`sc.limits`)."""
    scen, cond, variants = sc.scen, sc.cond, sc.variants
    assert sc.limits is not None  # make_all measured the scenario first
    lim = sc.limits
    size = ts_size(len(variants))
    wrapped = plots.wrap_titles([f"{scen} · {v}{sc.tag(v)}" for v in variants], size[0])
    v = variants[i]
    runs = sc.runs(v)
    series = sc.valid_series(v)
    name = f"{slug(scen)}-ts-{i + 1:02d}-{slug(v)}.png"
    tag = sc.tag(v)
    rep = data.representative(runs[runs["valid"] & runs["run_id"].isin([s.run_id for s in series])])
    if rep is None:
        if len(runs) and runs["skipped"].all():
            why = "not run: " + "; ".join(data.skip_reasons(runs))
        else:
            why = (
                f"no valid run with a time series\n({len(runs)} run(s), "
                f"{int(data.is_invalid(runs).sum())} invalid)"
            )
        fig = plots.placeholder_figure(f"{scen} · {v}{tag}\n\n{why}", size)
        cap = f"{v}{tag} in {scen}: nothing to plot. {invalid_note(runs)}"
        w.save(fig, name, scenario=scen, kind="timeseries", variant=v, caption=cap)
        return
    r = runs[runs["run_id"] == rep].iloc[0]
    queue = tsplot.has_queue(series)
    fig = tsplot.timeseries_figure(series, rep, cond, sc.colours[v], lim, wrapped[i], size)
    qtext = (
        " Bottom: the bottleneck queue on rt1 (backlog in packets, sampled every "
        f"{_qinterval(series)}; triangles: sampling intervals with drops, bigger = more)."
        if queue
        else ""
    )
    cap = (
        f"{v}{tag} in {scen}: throughput {tsplot.throughput_caption(series)}; cwnd and "
        f"srtt from {tsplot.cwnd_source(series, sc.runs_dir)}.{qtext} Full colour: the "
        f"flows of {rep} "
        "(repetition "
        f"{int(r['repetition'])}, the valid run closest to the median throughput sum, "
        f"{fmt(r['throughput_sum_mbps'], 1)} Mbit/s); "
        + (
            f"faint: the other {len(series) - 1} valid repetition(s). "
            if len(series) > 1
            else "no other valid repetition. "
        )
        + invalid_note(runs)
    )
    w.save(fig, name, scenario=scen, kind="timeseries", variant=v, caption=cap)


def _zoom(w: Writer, sc: Scene, i: int) -> None:
    """The event zoom of the scenario's i-th variant (0-based); none without a valid run."""
    v = sc.variants[i]
    z = zoom.variant_figure(sc.tables, sc.runs_dir, sc.cond, v, sc.colour(v), sc.tag(v), PAGE_W)
    if z is not None:
        w.save(z[0], f"{slug(sc.scen)}-zoom-{i + 1:02d}-{slug(v)}.png", scenario=sc.scen,
               kind="zoom", variant=v, caption=z[1])  # fmt: skip


def _probe(w: Writer, sc: Scene) -> None:
    scen, cond = sc.scen, sc.cond
    runs = sc.runs()
    if not runs["probe_rtt_p50_ms"].notna().any():
        return  # a results set from before the probe existed
    samples = []
    for v in sc.variants:
        valid = sc.runs(v)
        valid = valid[valid["valid"]]
        rtts: list[float] = []
        for rid in valid["run_id"]:
            rtts += data.probe_rtts_ms(sc.runs_dir, str(rid))
        samples.append(behaviour.ProbeSamples(v, sc.colour(v), v == sc.baseline, len(valid), rtts))
    sources = data.probe_tools(sc.runs_dir, [str(r) for r in runs["run_id"]])
    short = ", ".join(dict.fromkeys(t.split(" (")[0].split(";")[0] for t in sources[0]))
    short = short or "ping"
    title = f"{scen}: RTT under load ({short}), all samples\nCDF per variant over its valid runs"
    w.save(
        behaviour.probe_cdf_figure(samples, cond, title, PAIR_SIZE),
        f"{slug(scen)}-probe.png",
        scenario=scen,
        kind="probe",
        variant=None,
        caption=f"{scen}: RTT under load: {data.probe_what(sources, cond)}; the CDF of every "
        f"sample of each variant's valid runs pooled; dashed: the base "
        f"RTT and the RTT with a full queue. srtt in the other figures is the TCP sender's "
        f"own estimate ({data.SRTT_TOOLS}). {invalid_note(runs)}",
    )


def _jain_time(w: Writer, sc: Scene) -> None:
    scen, cond = sc.scen, sc.cond
    runs = sc.runs()
    series = []
    sources: set[str] = set()
    for v in sc.variants:
        g = sc.runs(v)
        rep = data.representative(g[g["valid"]])
        if rep is None:
            continue
        r = g[g["run_id"] == rep].iloc[0]
        ts = data.load_timeseries(sc.runs_dir, rep)
        if ts is None:
            continue
        t, j = timeseries.jain_series(ts, data.run_flows(sc.matrix, rep), cond.interval_s)
        sources.add(timeseries.throughput_source(ts))
        conv = float(r["convergence_s"])  # the run's, computed once when it was parsed
        series.append(
            behaviour.JainRun(v, sc.colour(v), v == sc.baseline, int(r["repetition"]), t, j, conv)
        )
    title = f"{scen}: fairness over time\nJain's index per iperf3 interval, representative runs"
    w.save(
        behaviour.jain_time_figure(
            series, cond.n_flows, JAIN_CONVERGED, JAIN_WINDOW_S, title, PAIR_SIZE
        ),
        f"{slug(scen)}-jain-time.png",
        scenario=scen,
        kind="jain_time",
        variant=None,
        caption=f"{scen}: Jain's fairness index over the flows' throughput "
        f"({'; '.join(timeseries.throughput_label(s) for s in sorted(sources))}), per "
        f"{fmt(cond.interval_s, None)} s interval, from the last flow start "
        f"until the first flow ends, of each variant's representative run (the valid run "
        f"closest to the median throughput sum). Dot: convergence, the first interval from "
        f"which the index stays ≥ {fmt(JAIN_CONVERGED, None)} for {fmt(JAIN_WINDOW_S, None)} s "
        f"(as the convergence column of the tables is computed). {invalid_note(runs)}",
    )


def _bars(w: Writer, sc: Scene) -> None:
    cond, scen = sc.cond, sc.scen
    w.save(
        plots.bars_figure(_stats(sc), cond, scen, PAIR_SIZE),
        f"{slug(scen)}-bars.png",
        scenario=scen,
        kind="bars",
        variant=None,
        caption=f"{scen}: mean throughput sum over the valid runs of each variant; "
        f"whiskers: 95 % CI (Student t); dots: the valid runs; right axis: the same as % of "
        f"the {fmt(cond.topology.rate_mbit)} Mbit/s bottleneck (dashed line: 100 %); hatched: "
        f"baseline. "
        f"{invalid_note(sc.runs())}",
    )


def _scatter(w: Writer, sc: Scene) -> None:
    w.save(
        plots.scatter_figure(_stats(sc), sc.cond, sc.scen, PAIR_SIZE),
        f"{slug(sc.scen)}-scatter.png",
        scenario=sc.scen,
        kind="scatter",
        variant=None,
        caption=f"{sc.scen}: throughput sum vs mean srtt, one dot per valid run; markers: "
        f"variant means with 95 % CI whiskers on both axes. {invalid_note(sc.runs())}",
    )


def _metrics(w: Writer, sc: Scene) -> None:
    runs = sc.runs()
    panels = plots.metric_panels(sc.cond, bool(runs["probe_rtt_p95_ms"].notna().any()))
    w.save(
        plots.metrics_figure(_stats(sc), panels, sc.scen, PAGE_W),
        f"{slug(sc.scen)}-metrics.png",
        scenario=sc.scen,
        kind="metrics",
        variant=None,
        caption=f"{sc.scen}: " + ", ".join(p.ylabel for p in panels) + " of each variant: "
        f"dots: the valid runs; markers: mean with 95 % CI (Student t). {invalid_note(runs)}",
    )


def _stats(sc: Scene) -> list[plots.VariantStats]:
    return plots.variant_stats(sc.tables, sc.scen, sc.variants, sc.baseline, sc.colours)


# A scenario's figures in the manifest's order; i: the variant's index where per variant.
_DRAW: dict[str, Callable[[Writer, Scene, int], None]] = {
    "timeseries": _timeseries,
    "zoom": _zoom,
    "probe": lambda w, sc, i: _probe(w, sc),
    "queue_cdf": lambda w, sc, i: _queue_cdf(w, sc),
    "jain_time": lambda w, sc, i: _jain_time(w, sc),
    "bars": lambda w, sc, i: _bars(w, sc),
    "scatter": lambda w, sc, i: _scatter(w, sc),
    "metrics": lambda w, sc, i: _metrics(w, sc),
    "cpu": lambda w, sc, i: cpu.draw(w, sc),
}
# Rough drawing time (relative), so the workers start with the longest figures.
_COST = {"zoom": 4, "timeseries": 3, "metrics": 2, "loss": 2}


@dataclass(frozen=True)
class _Inputs:
    """What every job reads: given to each worker once, as it starts (forked: inherited,
    not pickled per job)."""

    tables: data.Tables
    runs_dir: Path
    matrix: Matrix
    out_dir: Path


_INPUTS: _Inputs | None = None  # this process's (_start)


def _start(inputs: _Inputs) -> None:
    global _INPUTS
    _INPUTS = inputs


def _inputs() -> _Inputs:
    assert _INPUTS is not None, "figures: a job ran before _start"
    return _INPUTS


@dataclass(frozen=True)
class _Job:
    """One figure to draw: `what` (a key of _DRAW, or "loss") of scenario `scen`, `i` the
    variant's index (per-variant figures) or the loss group's number; `limits`: the
    time series' shared axes."""

    what: str
    scen: str = ""
    i: int = 0
    limits: tsplot.Limits | None = None


def _variants(matrix: Matrix, runs: pd.DataFrame) -> list[str]:
    """The variants that ran in a scenario, in the matrix's order."""
    return [v for v in matrix.variant_labels if v in set(runs["variant"])]


def _jobs(tables: data.Tables, matrix: Matrix) -> list[_Job]:
    out = []
    for scen in data.scenario_names(matrix, tables.runs):
        runs = data.group(tables.runs, scen)
        if runs.empty:
            continue
        cond = data.conditions(matrix, scen)
        if cond is None:
            raise ValueError(f"scenario {scen!r} is in the tables but not in the matrix")
        if runs["skipped"].all():
            continue  # nothing ran: the report shows the reason instead of empty figures
        n = len(_variants(matrix, runs))
        whats = [(k, i) for k in ("timeseries", "zoom") for i in range(n)]
        whats += [(k, 0) for k in _DRAW if k not in ("timeseries", "zoom")
                  and (k != "jain_time" or cond.n_flows > 1)]  # fmt: skip
        out += [_Job(k, scen, i) for k, i in whats]
    groups = data.loss_groups(matrix, tables.runs)
    return out + [_Job("loss", "", i) for i in range(1, len(groups) + 1)]


def _conditions(matrix: Matrix, scen: str) -> data.Conditions:
    cond = data.conditions(matrix, scen)
    assert cond is not None  # _jobs checked
    return cond


def _scene(job: _Job) -> Scene:
    d = _inputs()
    cond = _conditions(d.matrix, job.scen)
    variants = _variants(d.matrix, data.group(d.tables.runs, job.scen))
    return Scene(d.tables, d.runs_dir, d.matrix, job.scen, cond, variants,
                  style.variant_colours(d.matrix), d.matrix.baseline, job.limits)  # fmt: skip


def _extent(job: _Job) -> tsplot.Extent:
    """How far the series of the job's variant reach."""
    sc = _scene(job)
    return tsplot.extent(sc.valid_series(sc.variants[job.i]))


def _draw(job: _Job) -> list[dict[str, Any]]:
    """Draw one job's figure; its manifest entries (none: nothing to draw)."""
    d = _inputs()
    w = Writer(d.out_dir)
    with plt.rc_context(cast(Any, style.RC)):  # RC keys are checked by matplotlib
        if job.what == "loss":
            group = data.loss_groups(d.matrix, d.tables.runs)[job.i - 1]
            _loss(w, d.tables, d.matrix, group, style.variant_colours(d.matrix), job.i)
        else:
            _DRAW[job.what](w, _scene(job), job.i)
    return w.entries


def _with_limits(
    jobs: list[_Job], measured: list[_Job], extents: list[tsplot.Extent]
) -> list[_Job]:
    """The jobs, each time-series one with its scenario's shared axes: the union of the
    extents of its variants (`extents[k]`: `measured[k]`'s)."""
    union: dict[str, tsplot.Extent] = {}
    for j, e in zip(measured, extents, strict=True):
        union[j.scen] = union.get(j.scen, tsplot.Extent()).union(e)
    matrix = _inputs().matrix
    return [dataclasses.replace(j, limits=tsplot.limits(union[j.scen], _conditions(matrix, j.scen)))
            if j.what == "timeseries" else j for j in jobs]  # fmt: skip


def make_all(
    tables_dir: Path, runs_dir: Path, matrix: Matrix, out_dir: Path, workers: int | None = None
) -> None:
    """Write every figure as PNG into out_dir and the manifest out_dir/figures.json:
    a list of {file, scenario, kind, variant, caption, width_in, height_in}. `workers`
    processes draw them (default: one per CPU; 1: this one, one figure after another)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    inputs = _Inputs(data.load_tables(tables_dir), runs_dir, matrix, out_dir)
    _start(inputs)
    jobs = _jobs(inputs.tables, matrix)
    n = min(workers or len(os.sched_getaffinity(0)), len(jobs))
    if n <= 1:
        drawn = _measure_and_draw(jobs, _Here())
    else:
        # Forked: a worker starts with what this process imported (~2 s to import anew)
        # and its inputs (_start).
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(n, mp_context=ctx, initializer=_start,
                                 initargs=(inputs,)) as pool:  # fmt: skip
            drawn = _measure_and_draw(jobs, pool)
    jsonio.write_json(out_dir / "figures.json", [e for d in drawn for e in d])


_T = TypeVar("_T")


class _Here:
    """One worker: what is submitted runs at once, in this process."""

    def submit(self, fn: Callable[[_Job], _T], job: _Job) -> Future[_T]:
        done: Future[_T] = Future()
        done.set_result(fn(job))
        return done


def _measure_and_draw(
    jobs: list[_Job], workers: _Here | ProcessPoolExecutor
) -> list[list[dict[str, Any]]]:
    """Each variant's time-series extent first (the scenario's shared axes are their
    union), then every figure, the longest first; the manifest entries in job order."""
    measure = [j for j in jobs if j.what == "timeseries"]
    extents = [f.result() for f in [workers.submit(_extent, j) for j in measure]]
    jobs = _with_limits(jobs, measure, extents)
    longest = sorted(range(len(jobs)), key=lambda k: -_COST.get(jobs[k].what, 1))
    futures = {k: workers.submit(_draw, jobs[k]) for k in longest}
    return [futures[k].result() for k in range(len(jobs))]


def _loss(
    w: Writer,
    tables: data.Tables,
    matrix: Matrix,
    group: list[data.Conditions],
    colours: dict[str, str],
    i: int,
) -> None:
    """Throughput vs loss rate across the scenarios of one loss group, with Mathis."""
    series = behaviour.loss_series(tables, matrix.variant_labels, matrix.baseline, group, colours)
    cond = next(c for c in group if c.has_loss)
    runs = tables.runs[tables.runs["scenario"].isin([c.scenario for c in group])]
    scen_text = ", ".join(f"{c.scenario} ({c.loss_text()})" for c in group)
    n = cond.n_flows
    w.save(
        behaviour.loss_figure(series, cond, LOSS_SIZE),
        f"loss-resilience-{i}.png",
        scenario=None,
        kind="loss",
        variant=None,
        scenarios=[c.scenario for c in group],
        group=i,
        caption=f"Throughput sum vs packet loss rate across the scenarios {scen_text}: "
        f"markers: mean of each variant's valid runs with 95 % CI whiskers (Student t), "
        f"dots: the valid runs; loss-free scenario left of the axis break. Dashed: the "
        f"Mathis et al. prediction {f'{n} × ' if n > 1 else ''}MSS/RTT·√(3/2)/√p with MSS = "
        f"MTU − 52 = {cond.topology.mss_bytes} B and the configured RTT "
        f"{fmt(cond.topology.rtt_ms)} ms. "
        f"{invalid_note(runs)}",
    )
