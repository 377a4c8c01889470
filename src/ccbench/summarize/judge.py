"""The verdict on one run's raw/ (judge) and `ccbench parse` (parse_run_dir)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ccbench import jsonio, layout, record, validity
from ccbench.errors import CcbenchError
from ccbench.record import RunRecord
from ccbench.spec import RunSpec
from ccbench.summarize import summarize
from ccbench.summarize.run_metrics import rtt_excess, run_metrics


def judge(raw: Path) -> tuple[RunRecord, Any]:
    """The whole verdict on one run's raw/: summarize, then what only the time series
    shows (sampler files cut short or unparsable, RTT samples above what the path can
    give), then the per-run metrics. The one place a run is found valid or not: `ccbench
    run` retries on it and `parse` writes it, so attempts.json and summary.json agree.
    Returns the run record and the time series (a DataFrame)."""
    from ccbench import timeseries

    s = summarize(raw)
    spec = RunSpec.from_dict(s["spec"])
    df, problems = timeseries.build_checked(raw, spec)
    if not s.get("skipped"):
        s["rtt_excess"] = rtt_excess(spec, df, s.get("probe"))
        problems += validity.check_rtt_excess(s["rtt_excess"])
    # Skipped runs too: the Mathis prediction is the configuration's.
    s.update(run_metrics(spec, s["throughput_sum_bps"], df))
    new = [p for p in problems if p not in s["reasons"]]
    if new and not s.get("skipped"):
        s["reasons"] = s["reasons"] + new
        s["valid"] = False
    return RunRecord.from_dict(s), df


def parse_run_dir(run_dir: Path) -> RunRecord:
    """`ccbench parse RUN_DIR`: raw/ -> summary.json and timeseries.parquet; returns the
    record. The time series is written first and the record last, each to a temporary
    name renamed when complete, so a summary.json is never older than the time series
    it goes with. Problems the time series finds in sampler files (ss, siftr) are
    reasons too. CcbenchError (one line) only when RUN_DIR is not a run directory or
    its raw/spec.json is unusable (see ccbench.summarize)."""
    rd = layout.RunDir(run_dir)
    if not (rd.raw / layout.SPEC).exists():
        raise CcbenchError(f"{run_dir}: not a run directory (no raw/spec.json)")
    rec, df = judge(rd.raw)
    if rd.attempts.exists():
        att = jsonio.read_json(rd.attempts)
        try:
            rec = rec.model_copy(update={"attempt": len(att["attempts"])})
        except (KeyError, TypeError):
            rec = rec.model_copy(update={
                "reasons": [*rec.reasons, "attempts.json: unreadable (not the run's attempt list)"],
                "valid": False,
            })  # fmt: skip
    text = jsonio.dumps(rec.to_dict())
    ts_tmp = rd.timeseries.with_name(rd.timeseries.name + ".tmp")
    try:
        df.to_parquet(ts_tmp, index=False)
        ts_tmp.replace(rd.timeseries)
        jsonio.write_text_atomic(rd.summary, text)
    except OSError as e:
        raise CcbenchError(f"{run_dir}: cannot write its outputs ({e.strerror or e})") from None
    finally:
        ts_tmp.unlink(missing_ok=True)
    return rec


__all__ = ["judge", "parse_run_dir", "record"]
