"""raw/ of one run -> what its files say of it (`extract`: a typed `Summary`, the run
record's parts with their reasons: per-flow results, bottleneck, validity), from the
run's context opened once (summarize.context). summarize.judge adds what the time
series shows and assembles the record (summary.json) once; `summarize(raw)` is the
record's content without the series.

Every number here is computed from a file in raw/, so `ccbench parse RUN_DIR`
reproduces it exactly; the record's fields are ccbench.record's.

Damaged raw files (the rule): a run is kept and marked invalid, never aborted, when
any of its measurement files is missing, unreadable, not the format its tool writes,
or implausible; each problem is one reason that starts with the file's name (e.g.
`tc-after.json: not valid JSON (...)`), so a comparison still lists the run and says
why it does not count. Only spec.json aborts (CcbenchError, one line naming it): it
says which run this is and what it was asked to do, so without it there is no run to
mark. Files a run always writes (meta.json, tc-before.json, tc-after.json, and the
delay element's statistics when it is ccdelay) make the run invalid when missing,
unless the run already failed (raw/error.txt says why). Optional files (facts.json,
sender-setup.json, cpu-*.txt, probe and sampler files) only count when present.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench import instruments, metrics, unproven, validity
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec, run_identity
from ccbench.summarize.bottleneck import bottleneck_of
from ccbench.summarize.context import RunContext, Skipped, open_run
from ccbench.summarize.delay import delay_element
from ccbench.summarize.flows import flows_of, jain_of, throughput_sum
from ccbench.summarize.hosts import kernel_of, nics_of
from ccbench.summarize.losses import dsack_dups, ledger_reasons, loss_ledger
from ccbench.summarize.probe import probe_record
from ccbench.summarize.runfiles import (
    calibration_reasons,
    calibration_record,
    recorded,
    run_failed,
    sender_setup_reasons,
)


@dataclass(frozen=True)
class Summary:
    """What raw/ says of a run that ran (`run`), before its time series is read: the
    record's parts as summary.json holds them, and the reasons found, in the order
    found. An optional part is None where the run has none (`record` leaves its key
    out)."""

    run: RunContext
    started_unix: float | None
    recorded: dict[str, Any]
    flows: list[dict[str, Any]]
    throughput_sum_bps: float | None
    utilization_pct: float | None
    jain: float | None
    bottleneck: dict[str, Any]
    delay_element: dict[str, Any] | None
    loss_ledger: dict[str, Any] | None
    nics: dict[str, Any] | None  # {records, notes}
    kernel: dict[str, Any] | None
    parts: dict[str, Any]  # the instruments' parts, by summary key
    probe: dict[str, Any] | None
    calibration: dict[str, Any]
    not_checkable: list[str] | None  # a lab's own network: the checks it cannot make
    reasons: list[Reason]

    def record(self) -> dict[str, Any]:
        """The run record's content (summary.json's keys) with the verdict on these
        reasons alone."""
        return {
            **header(self.run.spec),
            "started_unix": self.started_unix,
            "recorded": self.recorded,
            "flows": self.flows,
            "throughput_sum_bps": self.throughput_sum_bps,
            "utilization_pct": self.utilization_pct,
            "jain": self.jain,
            "bottleneck": self.bottleneck,
            "delay_element": self.delay_element,
            **({"loss_ledger": self.loss_ledger} if self.loss_ledger is not None else {}),
            **(_nics(self.nics) if self.nics is not None else {}),
            **({"kernel": self.kernel} if self.kernel is not None else {}),
            **self.parts,
            "probe": self.probe,
            "calibration": self.calibration,
            **({"not_checkable": self.not_checkable} if self.not_checkable is not None else {}),
            "valid": not self.reasons,
            "reasons": self.reasons,
        }


@dataclass(frozen=True)
class NotRun:
    """A run recorded as not run (`run`): its record says why."""

    run: Skipped
    throughput_sum_bps = None

    @property
    def reasons(self) -> list[Reason]:
        code = Code.WAITING if self.run.waiting is not None else Code.SKIPPED
        return [Reason.of(code, f"skipped: {self.run.reason}")]

    def record(self) -> dict[str, Any]:
        """The record of a run not run: every flow without results, and why."""
        spec = self.run.spec
        return {
            **header(spec),
            "started_unix": None,
            "flows": [
                {
                    "flow": k,
                    "pair": f.pair,
                    "cc_requested": f.cc,
                    "cc_used": None,
                    "start_s": f.start_s,
                    "duration_s": f.duration_s,
                    "streams": f.streams,
                    "throughput_bps": None,
                    "sender_throughput_bps": None,
                    "bytes_received": None,
                    "retransmits": None,
                    "srtt_min_us": None,
                    "srtt_mean_us": None,
                    "srtt_max_us": None,
                    "max_cwnd_bytes": None,
                    "raw": None,
                }
                for k, f in enumerate(spec.flows, start=1)
            ],  # fmt: skip
            "throughput_sum_bps": None,
            "utilization_pct": None,
            "jain": None,
            "bottleneck": {"drops": None},
            "delay_element": None,
            "probe": None,
            "calibration": {},
            "valid": False,
            "skipped": True,
            # Waiting for the kernel its variant needs (the senders run another one now).
            **({"waiting": self.run.waiting} if self.run.waiting is not None else {}),
            "reasons": self.reasons,
        }


def summarize(raw: Path) -> dict[str, Any]:
    """summary.json's content for one raw/ directory, without what its time series adds
    (summarize.judge gives the whole record). Raises CcbenchError only for spec.json."""
    return extract(open_run(raw)).record()


def extract(run: RunContext | Skipped) -> Summary | NotRun:
    """Every part raw/ gives of a run: first what its files say, each read once in the
    rule's order (module docstring: a damaged file is a reason, never an abort), then
    the checks on them, in the order their reasons are listed."""
    if isinstance(run, Skipped):
        return NotRun(run)
    rd, spec, meta, cal, scope = run.rd, run.spec, run.meta, run.calibration, run.scope
    failed, files, calibration = run_failed(rd), recorded(rd.path), calibration_record(cal)
    delay_method = cal.get("delay_method") if cal else None
    delay = delay_element(rd, needed=delay_method == "ccdelay")
    losses = loss_ledger(rd)
    held_cause = validity.hidden_queue_cause(losses, delay, cal)
    flows, results, flow_reasons = flows_of(rd, spec, meta.client_rc, held_cause,
                                            scope.buffer_known)  # fmt: skip
    total, jain = throughput_sum(spec, flows), jain_of(flows)
    setup_reasons = sender_setup_reasons(rd)
    cal_reasons = calibration_reasons(rd, cal, delay, delay_method)
    bneck = bottleneck_of(rd) if scope.buffer_known else unproven.uncontrolled_bottleneck(scope)
    loss_reasons = [] if losses is None else ledger_reasons(losses, flows, bneck, delay,
                                                            dsack_dups(rd))  # fmt: skip
    probe = probe_record(rd, meta.probe_run(spec.traffic_s))
    # queue, sockstat, siftr, retransmit_causes, bblog, interfaces, router_cpu, and what
    # was read of a NIC (its BQL): the instruments' parts
    got = instruments.summary_parts(rd, spec, meta.instruments, t0=meta.started_unix,
                                    before_records=meta.before_records)  # fmt: skip
    nics = nics_of(rd, got.nics)  # provenance: facts.json is checked to be an object here
    kern, kern_reasons = kernel_of(rd, spec)
    util = metrics.utilization_pct(total, spec.topology.rate_bps) if total is not None else None

    reasons = [*failed, *flow_reasons, *setup_reasons, *cal_reasons]
    if scope.buffer_known:
        reasons += validity.check_bottleneck_config(spec, bneck.get("configured"))
    reasons += loss_reasons
    if meta.probe_argv and not (probe and probe.get("tool") == "unreadable"):
        reasons += validity.check_probe(probe, spec.probe_tool)
    reasons += validity.check_plausibility(spec, results, util, bneck)
    reasons += got.reasons
    reasons += validity.check_steal(got.parts.get("router_cpu"))
    reasons += kern_reasons
    reasons += rd.problems
    return Summary(
        run=run,
        started_unix=meta.started_unix,
        recorded=files,
        flows=flows,
        throughput_sum_bps=total,
        utilization_pct=util,
        jain=jain,
        bottleneck=bneck,
        delay_element=delay,
        loss_ledger=losses,
        nics=nics,
        kernel=kern,
        parts=got.parts,
        probe=probe,
        calibration=calibration,
        not_checkable=None if scope.buffer_known else unproven.not_checkable(scope),
        reasons=reasons,
    )


def _nics(nics: dict[str, Any]) -> dict[str, Any]:
    return {"nics": nics["records"], "nic_notes": nics["notes"]}


def header(spec: RunSpec) -> dict[str, Any]:
    """The record's first keys: the run's identity and what was asked."""
    return {**run_identity(spec), "spec": spec.to_dict()}
