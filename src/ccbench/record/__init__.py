"""A run's record (summary.json) without its instruments' parts: the record's own
fields (`RecordFields`), its pieces (parts.py) and its writer. ccbench.run_record
composes `RunRecord`, what `ccbench parse` writes and every reader (aggregate, the
report) reads, of these fields and each registered instrument's part.

The record is versioned (`schema`); ccbench.record_load reads a summary.json, brought
forward by ccbench.upgrade from an earlier version, into it, so no reader knows older
layouts. This package is the data only: besides the pieces it imports the spec (a
record's `run_spec`), jsonio (the writer) and upgrade (the version), nothing that reads
runs and no instrument. Every key is a described field (parts.py, or an instrument's own
module), and a key a writer adds without describing it is refused: the summary.json
reference (docs/summary-reference.md) is generated from these descriptions and cannot
drift from what is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Self

from pydantic import Field

from ccbench import jsonio, upgrade
from ccbench.reasons import Reason
from ccbench.record.parts import (
    Bottleneck,
    CalibrationSummary,
    DelayElement,
    FlowResult,
    KernelRecord,
    LossLedger,
    Mathis,
    Part,
    ProbeRecord,
    Recorded,
    RttExcess,
    Srtt,
    Waiting,
    d,
)
from ccbench.spec import RunSpec

SCHEMA = upgrade.SUMMARY_SCHEMA


class RecordFields(Part):
    """The run record's own fields, in summary.json's order (ccbench.run_record places
    each instrument's part among them)."""

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
    delay_element: DelayElement | None = d("the native delay element's statistics", None)
    loss_ledger: LossLedger | None = d("every lost packet, by where it was lost", None)
    nics: list[dict[str, Any]] | None = d(
        "SSH testbeds: every node's NIC records from its start-up script", None
    )
    nic_notes: list[str] | None = d(
        "where a TX ring or TX queue count asked and the one in use differ, or a NIC record's "
        "channels/BQL do not parse", None)  # fmt: skip
    kernel: KernelRecord | None = d("every sender's kernel as the run read it", None)
    probe: ProbeRecord | None = d("the concurrent latency probe (RTT under load)", None)
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
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls.model_validate(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(jsonio.clean(self.model_dump(mode="json", by_alias=True)))


def write(path: Path, rec: RecordFields) -> None:
    jsonio.write_json(path, rec.to_dict())


__all__ = ["SCHEMA", "FlowResult", "RecordFields", "write"]
