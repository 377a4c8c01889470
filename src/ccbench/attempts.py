"""A run's attempts: run, judge (the verdict `parse` writes), retry an invalid one,
keep every attempt; and the records of a run not run (skipped, waiting for a kernel or
boot tunables)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ccbench import jsonio, kernel, layout, record, safe
from ccbench.errors import CcbenchError, Refused
from ccbench.exec import pid_alive
from ccbench.hosts import loader
from ccbench.progress import info
from ccbench.reasons import texts
from ccbench.run import run_once
from ccbench.run_record import RunRecord
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed, signals_deferred


def execute(
    tb: Testbed, spec: RunSpec, out: Path, attempts: int = 1, write_summary: bool = True,
    kernel_req: dict[str, str] | None = None,
) -> RunRecord:  # fmt: skip
    """Run, retrying invalid results; writes out/attempts.json (and out/summary.json);
    returns the last attempt's record."""
    if attempts < 1:
        raise CcbenchError(f"attempts: {attempts}; a run needs at least one")
    out.mkdir(parents=True, exist_ok=True)
    _remove_dead_attempts(out)
    since = rechecked_from(out)
    # The verdict's modules (pandas, pyarrow) load while the first attempt's traffic
    # runs, at the lowest CPU priority, instead of after it (a run's wall time).
    warm = threading.Thread(target=_load_judge, daemon=True)
    warm.start()
    summary: RunRecord | None = None
    tried: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        final = False
        tmp = layout.RunDir(out).raw_tmp(os.getpid())
        safe.remove_tree(tmp, out)
        tmp.mkdir()
        try:
            run_once(tb, spec, tmp, kernel_req)
        except CcbenchError as e:
            # The attempt failed (a tool hung, a host vanished): keep what it wrote and
            # why, so it is reported as an invalid run and retried, not lost.
            (tmp / layout.ERROR).write_text(f"{e}\n")
            final = isinstance(e, Refused)
            if not (tmp / layout.SPEC).exists():
                jsonio.write_json(tmp / layout.SPEC, spec.to_dict())
        except BaseException:
            with signals_deferred():
                safe.remove_tree(tmp, out)
            raise
        raw = out / layout.RAW
        if raw.exists() and not (raw / layout.SPEC).exists():
            # Only a previous run's raw/ is replaced, never a folder of something else.
            raise CcbenchError(f"{raw} exists and is not a ccbench run's raw data: "
                               "choose another --out")  # fmt: skip
        safe.remove_tree(raw, out)
        tmp.rename(raw)
        # The full verdict (time series and RTT excess included), as `parse` will
        # write it: a run that stalled on the host is retried, not found out later.
        warm.join()
        from ccbench.summarize.judge import judge

        judged, series = judge(raw)
        summary = judged.model_copy(update={"attempt": attempt})
        tried.append({"attempt": attempt, "valid": summary.valid,
                      "reasons": [r.model_dump(mode="json") for r in summary.reasons]})  # fmt: skip
        if summary.valid or attempt == attempts or final:
            break
        info(f"attempt {attempt} invalid ({'; '.join(texts(summary.reasons))}); retrying")
        keep = layout.RunDir(out).invalid_attempt(attempt)
        keep.parent.mkdir(exist_ok=True)
        safe.remove_tree(keep, out)
        raw.rename(keep)
    assert summary is not None
    if write_summary:
        record.write(out / layout.SUMMARY, summary)
    jsonio.write_json(out / layout.ATTEMPTS, {"run_id": spec.run_id, "attempts": tried, **since})
    from ccbench.summarize.judge import keep_for_parse

    # `parse` would judge the same raw files again: it takes these instead.
    keep_for_parse(out, summary, series)
    return summary


def _remove_dead_attempts(out: Path) -> None:
    """An attempt's raw files whose process died (killed with its workflow) are not a
    run: removed, and the run is measured again."""
    for tmp in out.glob(".raw.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            info(f"{out.name}: removing {tmp.name}, the raw files of an attempt whose "
                 "process died")  # fmt: skip
            safe.remove_tree(tmp, out)


def _load_judge() -> None:
    with contextlib.suppress(OSError):  # the thread's own priority (Linux: per thread)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    import ccbench.summarize.judge  # noqa: F401


def rechecked_from(out: Path) -> dict[str, Any]:
    """A run that was waiting for its kernel until now: its last check, kept in the
    attempts.json that replaces the waiting one. The workflow's `kernel_check` param
    (rules/common.smk) reads it back, so the run's params stay what its last execution
    recorded and Snakemake does not run it again. Read from raw/ (Snakemake has already
    removed the job's output, attempts.json, when the job starts)."""
    got = jsonio.read_json(out / layout.RAW / layout.SKIPPED)
    waiting = got.get("waiting") if isinstance(got, dict) else None
    if isinstance(waiting, dict) and "checked_unix" in waiting:
        return {"rechecked_from": {"checked_unix": waiting["checked_unix"]}}
    return {}


def record_skip(spec: RunSpec, out: Path, reason: str) -> None:
    """A run that cannot happen here (e.g. missing AQM): raw/ says why, nothing is faked."""
    since = rechecked_from(out)
    raw = out / layout.RAW
    raw.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(raw / layout.SPEC, spec.to_dict())
    jsonio.write_json(raw / layout.SKIPPED, {"reason": reason})
    jsonio.write_json(
        out / layout.ATTEMPTS,
        {"run_id": spec.run_id, "skipped": reason, "attempts": [], **since},
    )


def record_wait(
    spec: RunSpec, out: Path, req: dict[str, str] | None, seen: dict[str, str],
    loader_waits: Sequence[loader.NodeWait] = (),
) -> str:  # fmt: skip
    """A run whose variant needs a kernel no sender runs now (`req`), or boot tunables
    some endpoint has not booted with (`loader_waits`: ccbench has written them to its
    /boot/loader.conf): recorded as waiting for them (a run not run, not a failure);
    the workflow checks it again on every invocation (rules/common.smk), so it runs
    after a reboot into that kernel and those tunables."""
    reasons = [kernel.waiting_reason(req["label"])] if req else []
    reasons += [loader.waiting_reason(list(loader_waits))] if loader_waits else []
    reason = "; ".join(reasons)
    waiting: dict[str, Any] = {**(req or {}), "senders": seen, "checked_unix": time.time()}
    if loader_waits:
        waiting["loader"] = {w.node: w.to_dict() for w in loader_waits}
    raw = out / layout.RAW
    raw.mkdir(parents=True, exist_ok=True)
    jsonio.write_json(raw / layout.SPEC, spec.to_dict())
    jsonio.write_json(raw / layout.SKIPPED, {"reason": reason, "waiting": waiting})
    jsonio.write_json(out / layout.ATTEMPTS, {"run_id": spec.run_id, "skipped": reason,
                                       "waiting": waiting, "attempts": []})  # fmt: skip
    return reason
