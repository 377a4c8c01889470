"""The work beneath `ccbench testbed` and `ccbench run` (cli.py parses their arguments
and prints what these functions return): which testbed or run a command names,
bringing a testbed up or recording why it cannot be, and the testbed a run uses: one
kept up for its topology is reused, else one is built for the run and taken down
after it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccbench import jsonio
from ccbench.errors import CcbenchError, Unavailable
from ccbench.model import Matrix, RunAsked

if TYPE_CHECKING:
    from ccbench.hosts.loader import NodeWait
    from ccbench.run_record import RunRecord
    from ccbench.spec import RunSpec, Topology
    from ccbench.testbed.base import Testbed
    from ccbench.testbed.kinds import TestbedConfig

# Beside `testbed up --calibration-out FILE`: one line per calibration that failed every
# try (rules/common.smk counts them to retry that testbed when the workflow is rerun).
FAILURES_LOG = "calibration-failures.jsonl"


# --- ccbench testbed ---------------------------------------------------------------


def ids_to_remove(all_: bool, config: str | None, tb_id: str | None) -> list[str]:
    """The testbeds `testbed down` removes: every one here, `tb_id` (which overrides a
    config's id, as for every testbed command), or the config's."""
    from ccbench import safe
    from ccbench.config import load_testbed_config
    from ccbench.testbed import local

    if all_:
        return local.all_ids()
    if tb_id:
        return [safe.testbed_id(tb_id, "--id")]
    if config:
        return [load_testbed_config(config)[0].id]
    raise CcbenchError("down: say which testbed: --id ID, --config FILE or --all")


def named_testbed(
    config: str | None,
    matrix: str | None,
    matrix_testbed: str | None,
    tb_id: str | None,
) -> Testbed:
    """The testbed a command names: a matrix.json's testbed `matrix_testbed`, testbed +
    topology as inline JSON, or a config file; `tb_id` replaces its id."""
    from ccbench import safe
    from ccbench.config import load_testbed_config
    from ccbench.testbed import manage

    if matrix:
        tbs = Matrix.load(matrix).testbeds
        if matrix_testbed is None or matrix_testbed not in tbs:
            raise CcbenchError(f"{matrix}: no testbed '{matrix_testbed}' (--testbed ID)")
        tbc, topo = tbs[matrix_testbed].testbed, tbs[matrix_testbed].topology
    elif config:
        tbc, topo = load_testbed_config(config)
    else:
        raise CcbenchError("--config FILE is needed")
    if tb_id:
        tbc = replace(tbc, id=safe.testbed_id(tb_id, "--id"))
    return manage.make(tbc, topo)


def bring_up(
    tb: Testbed, replace_existing: bool, calibration_out: str | None, skip_unavailable: bool
) -> dict[str, Any]:
    """`testbed up`: build and calibrate `tb` (after removing any testbed with its id if
    `replace_existing`); returns the calibration, also written to `calibration_out`.
    With `skip_unavailable` and `calibration_out`, a testbed this machine cannot build
    (errors.Unavailable) returns and writes a record whose `skipped` says why instead."""
    from ccbench.testbed import manage

    if replace_existing:
        manage.down(tb.id)
    try:
        cal = tb.up()
    except Unavailable as e:
        if not (skip_unavailable and calibration_out):
            raise
        # The workflow goes on; this testbed's runs are reported as not run. A
        # failed calibration (`retry`) is tried again when the workflow is rerun;
        # its record keeps every try.
        rec = {**getattr(e, "record", {}), "skipped": str(e), "retry": e.retry}
        out = Path(calibration_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        jsonio.write_json(out, rec)
        if e.retry:  # one line per failed `up`: the workflow reruns it when this grows
            jsonio.append_line(
                out.with_name(FAILURES_LOG), {"time": rec.get("time"), "reason": str(e)}
            )
        return rec
    if calibration_out:
        jsonio.write_json(Path(calibration_out), cal)
    return cal


# --- ccbench run -------------------------------------------------------------------


@dataclass(frozen=True)
class RunRequest(RunAsked):
    """A run as a command names it."""

    testbed: TestbedConfig


def run_request(
    config: str | None,
    matrix: str | None,
    run_id: str | None,
    attempts: int | None = None,
) -> RunRequest:
    """The run a command names: a matrix.json's run `run_id`, a spec as JSON (a file, or
    inline), or a single-run config file; `attempts` (if given) replaces its attempts."""
    from ccbench.config import load_run_config

    if matrix:
        if not run_id:
            raise CcbenchError("--matrix needs --run-id")
        runs = Matrix.load(matrix).runs
        if run_id not in runs:
            raise CcbenchError(f"{matrix}: no run '{run_id}'")
        r = runs[run_id]
        req = RunRequest(r.testbed, spec=r.spec, attempts=r.attempts, kernel=r.kernel)
    elif config:
        tbc, spec, n = load_run_config(config)
        req = RunRequest(tbc, spec=spec, attempts=n)
    else:
        raise CcbenchError("--config FILE is needed")
    return replace(req, attempts=attempts) if attempts else req


@dataclass(frozen=True)
class Skipped:
    """Not run: its testbed's calibration recorded a skip (`testbed up` could not build
    it here)."""

    reason: str


@dataclass(frozen=True)
class Waiting:
    """Not run: no sender runs the kernel its variant needs, or an endpoint has not
    booted with its boot tunables; `senders`: node -> the kernel identity it runs now."""

    reason: str
    senders: dict[str, str]


def run_on_testbed(
    req: RunRequest, out: Path, calibration: str | None, keep_testbed: bool, write_summary: bool
) -> Skipped | Waiting | RunRecord:
    """`ccbench run`: `req` into run directory `out`, on a testbed kept up for it or one
    built for it (ccbench.run.execute); returns the run's summary, or why it was not run
    (both recorded in `out`). `calibration`: the testbed's calibration JSON, whose skip
    is honoured."""
    from ccbench import kernel
    from ccbench.attempts import execute, record_skip, record_wait
    from ccbench.run_senders import kernel_identities

    skipped = _skip_reason(calibration)
    if skipped is not None:
        record_skip(req.spec, out, skipped)
        return Skipped(skipped)
    with testbed_for_run(req.testbed, req.spec.topology, keep=keep_testbed) as tb:
        seen = kernel_identities(tb, req.spec) if req.kernel else {}
        # Booted into another kernel, or without the boot tunables asked: nothing is
        # measured under the wrong label. The tunables are written now even while the
        # kernel is waited for, so one reboot can bring both.
        wrong_kernel = req.kernel is not None and not any(
            kernel.matches(req.kernel["match"], i) for i in seen.values())  # fmt: skip
        loader_waits = _loader_waits(tb, req.spec)
        if wrong_kernel or loader_waits:
            seen = seen or kernel_identities(tb, req.spec)
            req_k = req.kernel if wrong_kernel else None
            return Waiting(record_wait(req.spec, out, req_k, seen, loader_waits), seen)
        summary = execute(tb, req.spec, out, req.attempts, write_summary=write_summary,
                          kernel_req=req.kernel)  # fmt: skip
    return summary


def _loader_waits(tb: Testbed, spec: RunSpec) -> list[NodeWait]:
    """The run's FreeBSD endpoints that do not report the boot tunables their role asks,
    each with ccbench's lines written into its /boot/loader.conf (hosts.loader). Another
    OS asking them is refused before the run (host_apply)."""
    from ccbench.hosts import loader
    from ccbench.instruments.host_settings import endpoints

    waits = []
    for node, role in endpoints(spec).items():
        asked = dict(spec.host.role(role).loader)
        if asked and tb.driver(node).os == loader.OS:
            wait = loader.pending(tb.ex(node), node, role, asked)
            waits += [wait] if wait else []
    return waits


def _skip_reason(calibration: str | None) -> str | None:
    """The skip `testbed up --skip-unavailable` recorded in the calibration file, if any."""
    if not calibration:
        return None
    cal = json.loads(Path(calibration).read_text())
    if "skipped" not in cal:
        return None
    return cal["skipped"]


@contextlib.contextmanager
def testbed_for_run(tbc: TestbedConfig, topo: Topology, keep: bool) -> Iterator[Testbed]:
    """The testbed a run uses: one up for this topology is reused and left up; else one
    is built now and taken down when the run is done (left up if `keep`)."""
    from ccbench.privileges import require_root
    from ccbench.testbed import manage
    from ccbench.testbed.base import signals_deferred
    from ccbench.testbed.kinds import kind

    if kind(tbc.kind).caps.needs_root:
        require_root()
    tb = manage.make(tbc, topo)
    ephemeral = not tb.is_up()
    if ephemeral:
        # A testbed with this id may exist for another topology, or be stale.
        manage.down(tb.id)
        tb.up()
    try:
        yield tb
    finally:
        if ephemeral and not keep:
            with signals_deferred():
                manage.down(tb.id)
