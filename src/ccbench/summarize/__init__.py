"""raw/ of one run -> what its files say of it (`extract`: a typed `Summary`, the run
record's parts and the values its checks judge, no check made), from the run's context
opened once (summarize.context); the verdict on them is summarize.checks'. summarize.judge
adds what the time series shows (`FromSeries`), judges once and assembles the record
(summary.json) once; `summarize(raw)` is the record's content without the series.

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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench import instruments, layout, ledger, metrics, unproven
from ccbench.parse.iperf3 import read_report
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec, run_identity
from ccbench.summarize.bottleneck import bottleneck_of
from ccbench.summarize.checks import verdict
from ccbench.summarize.context import RunContext, Skipped, open_run
from ccbench.summarize.delay import delay_element
from ccbench.summarize.flows import Flows, flows_of
from ccbench.summarize.hosts import kernel_of, nics_of
from ccbench.summarize.losses import loss_ledger
from ccbench.summarize.probe import probe_record
from ccbench.summarize.runfiles import calibration_record, error_text, recorded, sender_stacks


@dataclass(frozen=True)
class Summary:
    """What raw/ says of a run that ran (`run`), before its time series is read: the
    record's parts as summary.json holds them, and what its files say that the verdict
    (summarize.checks) judges: the run's error, the flows' iperf3 results, the senders'
    stacks, whether the delay element's files were damaged, the reasons its instruments'
    parts and the kernel requirement gave, and the raw files' problems, in the order
    found. An optional part is None where the run has none (`record` leaves its key
    out)."""

    run: RunContext
    started_unix: float | None
    recorded: dict[str, Any]
    error: str | None  # raw/error.txt: the run failed
    flows: Flows
    utilization_pct: float | None
    bottleneck: dict[str, Any]
    delay_element: dict[str, Any] | None
    delay_damaged: bool  # a delay element statistics file's problem says why there are none
    loss_ledger: dict[str, Any] | None
    sender_stacks: list[tuple[str, str, list[str]]]  # sender-setup.json: node, stack, problems
    nics: dict[str, Any] | None  # {records, notes}
    kernel: dict[str, Any] | None
    kernel_reasons: list[Reason]  # senders that do not run the kernel the variant needs
    buffers: dict[str, str]  # each receiver's buffer limits (facts.json), in words
    parts: dict[str, Any]  # the instruments' parts, by summary key
    part_reasons: list[Reason]
    probe: dict[str, Any] | None
    calibration: dict[str, Any]
    not_checkable: list[str] | None  # a lab's own network: the checks it cannot make
    problems: list[Reason]  # the raw files' (RawDir.problems), once extraction is done

    @property
    def throughput_sum_bps(self) -> float | None:
        return self.flows.throughput_sum_bps

    def record(self, reasons: list[Reason]) -> dict[str, Any]:
        """The run record's content (summary.json's keys) with the verdict `reasons`."""
        return {
            **header(self.run.spec),
            "started_unix": self.started_unix,
            "recorded": self.recorded,
            "flows": self.flows.records,
            "throughput_sum_bps": self.flows.throughput_sum_bps,
            "utilization_pct": self.utilization_pct,
            "jain": self.flows.jain,
            "bottleneck": self.bottleneck,
            "delay_element": self.delay_element,
            **({"loss_ledger": self.loss_ledger} if self.loss_ledger is not None else {}),
            **(_nics(self.nics) if self.nics is not None else {}),
            **({"kernel": self.kernel} if self.kernel is not None else {}),
            **self.parts,
            "probe": self.probe,
            "calibration": self.calibration,
            **({"not_checkable": self.not_checkable} if self.not_checkable is not None else {}),
            "valid": not reasons,
            "reasons": reasons,
        }


@dataclass(frozen=True)
class FromSeries:
    """What the time series says of a run (summarize.judge reads it): each flow's record
    with its kernel minimum RTT and receive-window share, the RTT excess, a traced run's
    events (None: not traced) and the sampler files' problems. `flows` None: the run did not run."""

    flows: list[dict[str, Any]] | None = None
    rtt_excess: dict[str, Any] | None = None
    tcp_events: dict[str, Any] | None = None
    problems: list[Reason] = field(default_factory=list)

    def record(self) -> dict[str, Any]:
        if self.flows is None:
            return {}
        return {"flows": self.flows, "rtt_excess": self.rtt_excess, "tcp_events": self.tcp_events}


@dataclass(frozen=True)
class NotRun:
    """A run recorded as not run (`run`): its record says why."""

    run: Skipped
    throughput_sum_bps = None

    @property
    def reasons(self) -> list[Reason]:
        code = Code.WAITING if self.run.waiting is not None else Code.SKIPPED
        return [Reason.of(code, f"skipped: {self.run.reason}")]

    def record(self, reasons: list[Reason]) -> dict[str, Any]:
        """The record of a run not run: every flow without results, and why (`reasons`:
        its verdict)."""
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
            "reasons": reasons,
        }


def summarize(raw: Path) -> dict[str, Any]:
    """summary.json's content for one raw/ directory, without what its time series adds
    (summarize.judge gives the whole record). Raises CcbenchError only for spec.json."""
    s = extract(open_run(raw))
    return s.record(verdict(s))


def extract(run: RunContext | Skipped) -> Summary | NotRun:
    """What raw/'s files say of a run, each read once in the rule's order (module
    docstring: a damaged file is a problem, never an abort); no check is made here
    (summarize.checks.verdict judges what this returns)."""
    if isinstance(run, Skipped):
        return NotRun(run)
    rd, spec, meta, cal, scope = run.rd, run.spec, run.meta, run.calibration, run.scope
    delay_method = cal.get("delay_method") if cal else None
    delay = delay_element(rd, needed=delay_method == "ccdelay")
    # Without statistics because a delay file is missing or damaged: its problem says it.
    delay_files = (layout.delay(layout.BEFORE), layout.delay(layout.AFTER))  # or NAME.gz ...
    delay_damaged = any(str(r.evidence.get("file", "")).startswith(delay_files)
                        for r in rd.problems)  # fmt: skip
    account = ledger.read(rd)
    reports = [read_report(rd, layout.iperf3(k)) for k in range(1, len(spec.flows) + 1)]
    flows = flows_of(rd, spec, reports)
    calib, error, files = calibration_record(cal), error_text(rd), recorded(rd.path)
    stacks = sender_stacks(rd)
    bneck = bottleneck_of(rd) if scope.buffer_known else unproven.uncontrolled_bottleneck(scope)
    losses = None if account is None else loss_ledger(rd, account, flows.records, bneck)
    probe = probe_record(rd, meta.probe_run(spec.traffic_s))
    # queue, sockstat, siftr, retransmit_causes, bblog, interfaces, router_cpu, and what
    # was read of a NIC (its BQL): the instruments' parts
    got = instruments.summary_parts(rd, spec, meta.instruments, t0=meta.started_unix,
                                    before_records=meta.before_records)  # fmt: skip
    # facts.json, read once: checked to be an object here (a problem if not)
    facts = rd.json(layout.HOST_FACTS) if rd.exists(layout.HOST_FACTS) else None
    nics = nics_of(rd, facts, got.nics)
    kern, kern_reasons, buffers = kernel_of(rd, spec, facts)
    total = flows.throughput_sum_bps
    util = metrics.utilization_pct(total, spec.topology.rate_bps) if total is not None else None
    return Summary(
        run=run,
        started_unix=meta.started_unix,
        recorded=files,
        error=error,
        flows=flows,
        utilization_pct=util,
        bottleneck=bneck,
        delay_element=delay,
        delay_damaged=delay_damaged,
        loss_ledger=losses,
        sender_stacks=stacks,
        nics=nics,
        kernel=kern,
        kernel_reasons=kern_reasons,
        buffers=buffers,
        parts=got.parts,
        part_reasons=got.reasons,
        probe=probe,
        calibration=calib,
        not_checkable=None if scope.buffer_known else unproven.not_checkable(scope),
        problems=list(rd.problems),
    )


def _nics(nics: dict[str, Any]) -> dict[str, Any]:
    return {"nics": nics["records"], "nic_notes": nics["notes"]}


def header(spec: RunSpec) -> dict[str, Any]:
    """The record's first keys: the run's identity and what was asked."""
    return {**run_identity(spec), "spec": spec.to_dict()}
