"""One run's raw/ opened once (`open_run`): its spec, its reader and what every part of
the verdict reads of it (meta.json, the calibration and the scope it proves), or, for a
run recorded as not run, why. The summary's builders, the time series and the checks on
it all take these from here, so nothing is read or derived twice.

The order of reading is the rule's (ccbench.summarize): spec.json first (the only file
that aborts), then skipped.json (a run not run reads nothing else), then meta.json and
calibration.json, each problem reported once, on this RawDir, in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench import layout, runmeta, unproven
from ccbench.layout import RawDir, load_spec
from ccbench.runmeta import RunMeta
from ccbench.spec import RunSpec
from ccbench.summarize.runfiles import calibration_of


@dataclass(frozen=True)
class RunContext:
    """A run that ran (or tried to): its raw/ reader (which gathers the files' problems),
    spec, meta.json, calibration.json (None: unreadable, {}: none) and scope."""

    rd: RawDir
    spec: RunSpec
    meta: RunMeta
    calibration: dict[str, Any] | None
    scope: unproven.Scope  # a lab's own network: what it cannot prove

    @property
    def raw(self) -> Path:
        return self.rd.path

    @property
    def files(self) -> tuple[RawDir, RunMeta]:
        """What the time series reads: the files and meta.json (timeseries.write_checked)."""
        return self.rd, self.meta


@dataclass(frozen=True)
class Skipped:
    """A run recorded as not run (raw/skipped.json): why, and what it waits for (the
    kernel or boot tunables its variant needs; None: nothing)."""

    rd: RawDir
    spec: RunSpec
    reason: str
    waiting: dict[str, Any] | None

    files = None  # no rows: the run did not run (timeseries.write_checked)


def open_run(raw: Path) -> RunContext | Skipped:
    """raw/ opened: CcbenchError (one line) only for spec.json; a skipped.json without a
    reason string is a problem of a run read as run."""
    spec = load_spec(raw)
    rd = RawDir(raw)
    if rd.exists(layout.SKIPPED):
        marker = rd.json(layout.SKIPPED)
        if marker and isinstance(marker.get("reason"), str):
            waiting = marker.get("waiting")
            waits = waiting if isinstance(waiting, dict) else None
            return Skipped(rd, spec, marker["reason"], waits)
        if marker is not None:
            rd.problem(layout.SKIPPED, "no reason string")
    meta = runmeta.load(rd, len(spec.flows))
    cal = calibration_of(rd)
    return RunContext(rd, spec, meta, cal, unproven.scope_of(cal))
