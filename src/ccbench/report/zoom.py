"""The report's event zooms: per scenario and variant, the first loss episodes of the
run whose time series the report shows (the valid repetition closest to the median
throughput sum; with `tracing: separate`, of the traced twins), found by
report.episodes and drawn by report.zoomplot, with a caption that names the run, the
raw files every curve comes from, their resolution and each episode's time.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from ccbench import instruments, layout
from ccbench.instruments.events import lost_text
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.instruments.tcp_probe import FILE_GLOB as TCP_PROBE_GLOB
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.report import data, episodes, plots, zoomplot
from ccbench.report.episodes import Found, Zoom
from ccbench.report.fmt import fmt
from ccbench.run_record import RunRecord

# Each sender source's raw files (the caption names those the run has).
RAW_GLOBS = {"tcp_probe": TCP_PROBE_GLOB, "ss": layout.SS_GLOB, "siftr": layout.SIFTR_GLOB}
# docs/configs.md, "Event zooms": ss may start tens of ms after its loop asks it to.
SS_STAMPS = (
    "An ss sample is stamped when ss returned (it read the socket shortly before); files "
    "from before ccbench wrote that stamp keep the time its loop started ss, up to tens of "
    "ms before the read."
)
MAX_ALSO = 2  # other events in an episode's window named in the caption (the figure marks all)
NOTHING_H = 1.1  # inches: the figure of a variant with nothing to zoom


def pick(tables: data.Tables, scen: str, variant: str) -> pd.Series | None:
    """The run the zooms show: the variant's representative valid run, of its traced
    twins when the comparison ran `tracing: separate` (only those hold the trace)."""
    traced = data.group(tables.traced, scen, variant)
    pool = traced if not traced.empty else data.group(tables.runs, scen, variant)
    rid = data.representative(pool[pool["valid"]])
    return None if rid is None else pool[pool["run_id"] == rid].iloc[0]


def rtt_s(cond: data.Conditions) -> float:
    """The RTT a window counts in: the base RTT plus a full drop-tail queue (the RTT a
    flow sees when the queue drops), else the base RTT."""
    ms = cond.rtt_bound_ms if math.isfinite(cond.rtt_bound_ms) else cond.topology.rtt_ms
    return ms / 1e3


def variant_figure(
    tables: data.Tables,
    runs_dir: Path,
    cond: data.Conditions,
    variant: str,
    colour: str,
    tag: str,
    width: float,
) -> tuple[Figure, str] | None:
    """The zoom figure of one variant and its caption; None when it has no valid run."""
    run = pick(tables, cond.scenario, variant)
    if run is None:
        return None
    rid = str(run["run_id"])
    who = (
        f"{rid} (repetition {int(run['repetition'])}, the valid run closest to the "
        f"median throughput sum{', traced' if run.get('tracing') == 'traced' else ''})"
    )
    head = f"{variant}{tag} in {cond.scenario}"
    path = runs_dir / rid / layout.TIMESERIES
    rec = data.run_summary(runs_dir, rid)
    found = episodes.find(rec, path) if path.exists() else None
    zs = episodes.zooms(found, path, rtt_s(cond)) if found else []
    if found is None or not zs:
        why = (
            "no time series with the senders' samples"
            if found is None
            else f"no loss episode found ({found.how})"
        )
        fig = plots.placeholder_figure(f"{head}: {rid}\n{why}", (width, NOTHING_H))
        return fig, f"{head}: nothing to zoom in {who}: {why}."
    step = _ss_every(rec) if found.source == "ss" else found.step_s
    p = zoomplot.Panel(cond, colour, found.source)
    title = f"{head}{'' if found.per_ack else ' (no per-ACK trace)'}: loss episodes of {rid}"
    fig = zoomplot.figure(zs, p, title, width)
    return fig, caption(head, who, found, zs, rec, runs_dir / rid, cond, step)


def caption(
    head: str,
    who: str,
    found: Found,
    zs: list[Zoom],
    rec: RunRecord | None,
    run_dir: Path,
    cond: data.Conditions,
    step: float,
) -> str:
    n = len(zs)
    rtt_ms = rtt_s(cond) * 1e3
    what = f"{n} loss episodes" if n > 1 else "loss episode"
    out = [
        f"{head}: the first {what} of {who}, each on its own time axis (ms from its "
        f"start; from {fmt(episodes.BEFORE_RTTS, None)} RTTs before "
        f"it to {fmt(episodes.AFTER_RTTS, None)} after its end, at least "
        f"{fmt(episodes.AFTER_UNKNOWN_RTTS, None)} after its start; RTT {fmt(rtt_ms, 1)} ms, "
        f"the base RTT plus a full queue). Found in {found.how}:",
        "; ".join(_episode_text(i, z) for i, z in enumerate(zs, 1)) + ".",
        *([SS_STAMPS] if found.source == "ss" else []),
        *_sources_text(zs, found, rec, run_dir, step),
    ]
    out.append(_queue_text(rec, zs))
    if any(
        "ca_state" in z.rows.columns and (z.rows["source"] == episodes.CA_SOURCE).any() for z in zs
    ):
        out.append(
            "Shaded: the episode's flow in Recovery or Loss (the trace's congestion "
            "states, rows of source ca_state)."
        )
    return " ".join(out)


def _episode_text(i: int, z: Zoom) -> str:
    ev = z.event
    if ev.after_s is not None and math.isfinite(ev.after_s):
        when = f"between the samples at {ev.after_s:.3f} and {ev.t_s:.3f} s"
    else:
        when = f"at {ev.t_s:.4f} s"
    end = (
        f", Open again at {z.end_s:.4f} s{_brief_text(z)}"
        if z.end_s is not None
        else ""
        if ev.what == "cwnd cut"
        else f", its end not recorded{_brief_text(z)}"
    )
    s = f"({i}) flow {ev.flow} {ev.what} {when}{end}, window {z.lo:.3f}-{z.hi:.3f} s"
    if z.others:
        also = [f"flow {e.flow} {e.what} at {e.t_s:.4f} s" for e in z.others[:MAX_ALSO]]
        more = len(z.others) - MAX_ALSO
        s += f" (also {', '.join(also)}{f' and {more} more' if more > 0 else ''})"
    return s


# enum tcp_ca_state codes (include/net/tcp.h) a brief return to Open went back to
STATE_NAMES = {1: "Disorder", 2: "CWR", 3: "Recovery", 4: "Loss"}


def _brief_text(z: Zoom) -> str:
    """The returns to Open before the episode's end that the same ACK left again
    (episodes.REENTRY_S): the end drawn (dashed) is the return that lasted."""
    if not z.brief_opens:
        return ""
    first = ", ".join(f"{t:.4f} s (back in {STATE_NAMES.get(code, code)})"
                      for t, code in z.brief_opens[:MAX_ALSO])  # fmt: skip
    more = len(z.brief_opens) - MAX_ALSO
    return (
        f" and staying Open (dashed); before that Open for an instant only, at {first}"
        f"{f' and {more} more times' if more > 0 else ''}: left within "
        f"{fmt(episodes.REENTRY_S * 1e3, None)} ms, by the ACK that ended the state"
    )


def _sources_text(
    zs: list[Zoom], found: Found, rec: RunRecord | None, run_dir: Path, step: float
) -> list[str]:
    """Which source each drawn quantity came from, how finely, and its raw files."""
    by_src: dict[str, list[str]] = {}
    for z in zs:
        for col, srcs in zoomplot.drawn_from(z, found.source).items():
            for s in sorted(srcs):
                what = zoomplot.DRAWN[col]
                if what not in by_src.setdefault(s, []):
                    by_src[s].append(what)
    order = sorted(by_src, key=lambda s: s != found.source)  # the episode's source first
    return [
        f"{_join(by_src[s])}: {_resolution(s, found, rec, step)} ({_files(run_dir, s)})."
        for s in order
    ]


def _join(xs: list[str]) -> str:
    return ", ".join(xs[:-1]) + (" and " if len(xs) > 1 else "") + xs[-1]


def _resolution(src: str, found: Found, rec: RunRecord | None, step: float) -> str:
    if src == found.source and found.per_ack:
        ev = TcpProbe.part_of(rec)
        thin = ev.acks_thinned if ev else None
        how = f"{src}, {thin}" if thin else f"{src}, every ACK"
        # a run judged before lost events made it invalid may still be shown: say so
        return how + (f" but {lost_text(ev.lost_events)}" if ev and ev.lost_events else "")
    if src == "ss":
        every = step if src == found.source else _ss_every(rec)
        return f"ss every {fmt(every, None)} s, not per ACK" if math.isfinite(every) else "ss"
    if src in instruments.REGISTRY:
        return instruments.REGISTRY[src].series_caption([rec])
    return src


def _ss_every(rec: RunRecord | None) -> float:
    """The run's ss interval as its spec asked it."""
    v = (rec.spec if rec else {}).get("ss_interval_s")
    return float(v) if isinstance(v, (int, float)) and v > 0 else math.nan


def _files(run_dir: Path, source: str) -> str:
    """The raw files of `source` the run has (names only), or the pattern they follow."""
    glob = RAW_GLOBS.get(source)
    if glob is None:
        return f"the run's {source} files"
    names = layout.RawDir(run_dir / layout.RAW).glob(glob)
    return ", ".join(f"raw/{n}" for n in names) or f"raw/{glob}"


def _queue_text(rec: RunRecord | None, zs: list[Zoom]) -> str:
    q = QdiscSampler.part_of(rec)
    if (
        q is None
        or not q.sampled
        or not any((z.rows["source"] == episodes.QUEUE_SOURCE).any() for z in zs)
    ):
        return "The bottleneck queue was not sampled in this run."
    every = q.interval_achieved_s or q.interval_s
    how = f"every {fmt(every * 1e3, 0)} ms" if every else "at its sampling interval"
    where = f"raw/{q.file}" if q.file else "its qdisc samples"
    return (
        f"Queue: rt1's backlog (packets) sampled {how} ({where}); dashed: its limit; ▼: a "
        "sample whose drop counter rose, drawn between it and the sample before (bigger: "
        "more dropped); in the corner, the drops in the window (the counter's rise)."
    )
