"""One run's record: what `ccbench parse` writes as summary.json and every reader
(aggregate, the report) reads, through this one typed model.

The record is versioned (`schema`); ccbench.record_load reads a summary.json, brought
forward by ccbench.upgrade from an earlier version, into it, so no reader knows older
layouts. This package is the data only: it imports nothing that reads runs.
Every key is a described field (parts.py, or an instrument's own module), and a key a
writer adds without describing it is refused: the summary.json reference
(docs/summary-reference.md) is generated from these descriptions and cannot drift from
what is written. An instrument's part is a field by its `summary_key`: declared below
for the instruments that predate this, added from the registry for any other (its
`summary_type`, declared once in its module).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic.fields import FieldInfo

from ccbench import instruments, jsonio, upgrade
from ccbench.instruments.events import TcpEvents
from ccbench.instruments.siftr import SiftrLogging
from ccbench.reasons import Reason
from ccbench.record.parts import (
    BblogFiles,
    Bottleneck,
    CalibrationSummary,
    DelayElement,
    FlowResult,
    KernelRecord,
    LossLedger,
    Mathis,
    Part,
    ProbeRecord,
    QueueStats,
    Recorded,
    RetransmitCauses,
    RouterCpu,
    RttExcess,
    Sockstat,
    Srtt,
    Waiting,
    d,
)
from ccbench.spec import RunSpec

SCHEMA = upgrade.SUMMARY_SCHEMA


class RunRecord(Part):
    version: str = Field(SCHEMA, alias="schema", description=(
        "the record's version (ccbench.upgrade brings older ones forward)"))  # fmt: skip
    run_id: str = d("the run's id: scenario-variant-rREP-<hash of spec>")
    scenario: str = d("scenario name")
    variant: str = d("variant label")
    repetition: int = d("repetition, 1..N")
    spec: dict[str, Any] = d("what was asked: the run spec (hashes to the id)")
    started_unix: float | None = d("wall-clock start of the traffic (null: not run)")
    recorded: Recorded | None = d("copies of raw/ the report's appendix shows", None)
    flows: list[FlowResult] = d("per flow results")
    throughput_sum_bps: float | None = d(
        "all bytes received x 8 / the traffic window (staggered flows not double counted)"
    )
    utilization_pct: float | None = d(
        "throughput_sum_bps / bottleneck rate x 100 (goodput over 1514-byte frames tops "
        "out at 95.6 %)"
    )
    jain: float | None = d("Jain's index of the per-flow throughputs")
    bottleneck: Bottleneck = d("rt1's queue and shaper counters during the run")
    queue: QueueStats | None = d("rt1's queue sampled every qdisc_interval_s (0: off)", None)
    delay_element: DelayElement | None = d("the native delay element's statistics", None)
    loss_ledger: LossLedger | None = d("every lost packet, by where it was lost", None)
    sockstat: Sockstat | None = d("FreeBSD senders: each flow's connections (CC, stack)", None)
    nics: list[dict[str, Any]] | None = d(
        "SSH testbeds: every node's NIC records from its start-up script", None
    )
    nic_notes: list[str] | None = d(
        "where a TX ring or TX queue count asked and the one in use differ, or a NIC record's "
        "channels/BQL do not parse", None)  # fmt: skip
    kernel: KernelRecord | None = d("every sender's kernel as the run read it", None)
    siftr: dict[str, SiftrLogging] | None = d(
        "FreeBSD senders: node -> how its siftr log was taken", None)  # fmt: skip
    retransmit_causes: dict[str, RetransmitCauses] | None = d(
        "every sender's TCP counters over the run (nstat, netstat -s): node -> the causes "
        "of its retransmissions", None)  # fmt: skip
    bblog: dict[str, BblogFiles] | None = d(
        "FreeBSD senders with bblog: node -> its black-box log files", None)  # fmt: skip
    tcp_events: TcpEvents | None = d(
        "runs with a per-ACK trace: each flow's recoveries, RTOs and retransmissions",
        None)  # fmt: skip
    probe: ProbeRecord | None = d("the concurrent latency probe (RTT under load)", None)
    router_cpu: RouterCpu | None = d("CPU of the bottleneck router over the traffic", None)
    calibration: CalibrationSummary = d("the testbed's calibration the run used")
    rtt_excess: RttExcess | None = d("drop-tail queues: RTT samples above the path's bound",
                                     None)  # fmt: skip
    srtt: Srtt | None = d("the senders' srtt from the finest source; null without samples",
                          None)  # fmt: skip
    convergence_s: float | None = d(
        "s from the last flow's start until Jain over iperf3 intervals stays >= 0.95 for "
        "2 s; null with one flow or never", None)  # fmt: skip
    mathis: Mathis | None = d("with configured loss: the Mathis prediction", None)
    not_checkable: list[str] | None = d(
        "a lab's own network: the checks that need the bottleneck's counters, each 'not "
        "checkable' (ccbench.unproven)", None)  # fmt: skip
    valid: bool = d("the verdict: every check passed")
    reasons: list[Reason] = d("every check that failed (a not-run run: why), in the order "
                              "the checks ran")  # fmt: skip
    skipped: bool = d("the run was not run (its testbed could not be built, or its "
                      "kernel or boot tunables are not booted)", False)  # fmt: skip
    waiting: Waiting | None = d("not run yet: waiting for the kernel or the boot tunables "
                                "its variant needs", None)  # fmt: skip
    attempt: int | None = d("which attempt this is", None)

    model_config = {**Part.model_config, "populate_by_name": True}

    @property
    def run_spec(self) -> RunSpec:
        return RunSpec.from_dict(self.spec)

    @property
    def status(self) -> str:
        """valid / invalid (ran, failed a check) / not run / waiting (for its kernel or
        boot tunables)."""
        if self.waiting is not None:
            return "waiting"
        return "not run" if self.skipped else "valid" if self.valid else "invalid"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunRecord:
        return cls.model_validate(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(jsonio.clean(self.model_dump(mode="json", by_alias=True)))


def _instrument_parts() -> None:
    """Each registered instrument's part that RunRecord does not declare itself, as a
    field named by its `summary_key`, of its `summary_type` or null: an instrument
    declares its part once, in its own module. (pydantic builds a model's fields when
    the class is made; these are added to them and the model rebuilt.)"""
    added = False
    for cls in instruments.REGISTRY.values():
        key = cls.summary_key
        if key is None or key in RunRecord.model_fields:
            continue
        if cls.summary_type is None:
            raise TypeError(f"instrument {cls.name}: part {key} has no summary_type")
        RunRecord.__pydantic_fields__[key] = FieldInfo.from_annotated_attribute(
            cls.summary_type | None, d(cls.summary_doc, None)
        )
        added = True
    if added:
        RunRecord.model_rebuild(force=True)


_instrument_parts()


def write(path: Path, rec: RunRecord) -> None:
    jsonio.write_json(path, rec.to_dict())


__all__ = ["SCHEMA", "FlowResult", "RunRecord", "write"]
