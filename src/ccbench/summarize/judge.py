"""The verdict on one run's raw/ (judge) and `ccbench parse` (parse_run_dir)."""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

from ccbench import __version__, jsonio, layout, record, record_load, safe, validity
from ccbench.errors import CcbenchError
from ccbench.reasons import Reason
from ccbench.run_record import RunRecord
from ccbench.summarize import FromSeries, NotRun, Summary, extract, min_rtt, window
from ccbench.summarize.checks import verdict
from ccbench.summarize.context import open_run
from ccbench.summarize.run_metrics import rtt_excess, run_metrics
from ccbench.timeseries_sink import Series
from ccbench.timeseries_stats import SeriesStats


def judge(raw: Path, series_path: Path | None = None) -> tuple[RunRecord, Series]:
    """The whole verdict on one run's raw/, in one pass: raw/ opened once
    (summarize.context), what its files say (summarize.extract), its time series written
    as they are read, what only the series shows (sampler files cut short or
    unparsable, RTT samples above what the path can give, each flow's kernel minimum RTT
    and receive-window share) and the per-run metrics; every check made once on these
    (summarize.checks.verdict); the record assembled once. The
    one place a run is found valid or not: `ccbench run` retries on it and `parse`
    writes it, so attempts.json and summary.json agree. Returns the run record and the
    time series, written to `series_path` (default: a temporary name beside raw/) as its
    files are read (ccbench.timeseries_sink): the file goes when the Series does, unless
    it is moved into place."""
    from ccbench import timeseries

    run = open_run(raw)
    s = extract(run)
    if series_path is None:
        fd, name = tempfile.mkstemp(prefix=".timeseries-", suffix=".parquet.tmp", dir=raw.parent)
        os.close(fd)
        series_path = Path(name)
    series, st, problems = timeseries.write_checked(series_path, run.spec, run.files,
                                                    validity.excess_bound(run.spec))  # fmt: skip
    got = _from_series(s, st, series.path, problems)
    reasons = verdict(s, got)
    return RunRecord.from_dict({
        **s.record(reasons),
        **got.record(),
        # Skipped runs too: the Mathis prediction is the configuration's.
        **run_metrics(run.spec, s.throughput_sum_bps, st),
        "valid": not reasons,
        "reasons": reasons,
    }), series  # fmt: skip


def _from_series(
    s: Summary | NotRun, st: SeriesStats, path: Path, problems: list[Reason]
) -> FromSeries:
    """What the time series of `s`'s run says (it is at `path` and gave `st`; `problems`:
    its sampler files')."""
    from ccbench import timeseries

    if isinstance(s, NotRun):
        return FromSeries(problems=problems)
    run = s.run
    excess = None
    # A lab's own network (bottleneck not ccbench's) bounds no RTT: not checkable.
    if run.scope.buffer_known:
        excess = rtt_excess(st, s.probe, functools.partial(timeseries.sender_samples, path))
    flows = window.with_window_share(min_rtt.with_kernel_min_rtt(s.flows.records, st), st)
    events = None
    if st.tcp_events is not None:
        ev = st.tcp_events
        events = {**ev, "flows": [ev["flows"][k] for k in sorted(ev["flows"])],
                  "others": [ev["others"][a] for a in sorted(ev["others"])]}  # fmt: skip
    return FromSeries(flows, excess, events, problems)


def parse_run_dir(run_dir: Path) -> RunRecord:
    """`ccbench parse RUN_DIR`: raw/ -> summary.json and timeseries.parquet; returns the
    record. The time series is written first and the record last, each to a temporary
    name renamed when complete, so a summary.json is never older than the time series
    it goes with. Problems the time series finds in sampler files (ss, siftr) are
    reasons too. CcbenchError (one line) only when RUN_DIR is not a run directory or
    its raw/spec.json is unusable (see ccbench.summarize).

    Where `ccbench run` kept what it judged (keep_for_parse) and neither the raw files,
    the attempts nor ccbench's code changed since, those outputs are moved into place
    instead of judging again: the same bytes, without the work."""
    rd = layout.RunDir(run_dir)
    if not (rd.raw / layout.SPEC).exists():
        raise CcbenchError(f"{run_dir}: not a run directory (no raw/spec.json)")
    if _take_kept(rd):
        return record_load.load(run_dir)
    rec, series = judge(rd.raw, rd.timeseries.with_name(rd.timeseries.name + ".tmp"))
    if rd.attempts.exists():
        att = jsonio.read_json(rd.attempts)
        try:
            rec = rec.model_copy(update={"attempt": len(att["attempts"])})
        except (KeyError, TypeError):
            rec = rec.model_copy(update={
                "reasons": [*rec.reasons, layout.file_problem(
                    layout.ATTEMPTS, "unreadable (not the run's attempt list)")],
                "valid": False,
            })  # fmt: skip
    _write(rd.summary, rd.timeseries, rec, series, run_dir)
    return rec


def _write(summary: Path, timeseries: Path, rec: RunRecord, series: Series, run_dir: Path) -> None:
    text = jsonio.dumps(rec.to_dict())
    try:
        timeseries.parent.mkdir(parents=True, exist_ok=True)
        series.move_to(timeseries)
        jsonio.write_text_atomic(summary, text)
    except OSError as e:
        raise CcbenchError(f"{run_dir}: cannot write its outputs ({e.strerror or e})") from None
    finally:
        series.discard()  # not moved: its temporary file goes


KEPT = ".judged"  # in the run directory: what `ccbench run` judged, for `parse`


def keep_for_parse(run_dir: Path, rec: RunRecord, series: Series) -> None:
    """`ccbench run` judged its last attempt (judge): keep the outputs `parse` would
    write, with the key of what they were made from (see _key)."""
    kept = run_dir / KEPT
    _write(kept / layout.SUMMARY, kept / layout.TIMESERIES, rec, series, run_dir)
    jsonio.write_json(kept / "key.json", {"key": _key(layout.RunDir(run_dir))})


def _take_kept(rd: layout.RunDir) -> bool:
    """Move the kept outputs into place if their key still holds; False otherwise (they
    are removed: parse judges anew)."""
    kept = rd.path / KEPT
    if not kept.is_dir():
        return False
    ok = (jsonio.read_json(kept / "key.json") or {}).get("key") == _key(rd)
    try:
        if ok:
            (kept / layout.TIMESERIES).replace(rd.timeseries)
            (kept / layout.SUMMARY).replace(rd.summary)
    except OSError:
        ok = False
    safe.remove_tree(kept, rd.path)
    return ok


def _key(rd: layout.RunDir) -> str:
    """What the verdict is made from: every raw file (name, size, modification time),
    attempts.json, and ccbench's own code (version and source)."""
    h = hashlib.sha256(__version__.encode())
    pkg = Path(__file__).resolve().parents[1]
    for src in sorted(pkg.rglob("*.py")):
        h.update(src.read_bytes())
    for p in sorted(rd.raw.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(rd.raw)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    if rd.attempts.exists():
        h.update(rd.attempts.read_bytes())
    return h.hexdigest()


__all__ = ["judge", "keep_for_parse", "parse_run_dir", "record"]
