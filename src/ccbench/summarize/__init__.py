"""raw/ of one run -> its run record (summary.json): per-flow results, bottleneck,
validity.

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

from pathlib import Path
from typing import Any

from ccbench import instruments, layout, metrics, runmeta, unproven, validity
from ccbench.layout import RawDir, load_spec
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec, run_identity
from ccbench.summarize.bottleneck import bottleneck_of
from ccbench.summarize.delay import delay_element
from ccbench.summarize.flows import flows_of, jain_of, throughput_sum
from ccbench.summarize.hosts import kernel_of, nics_of
from ccbench.summarize.losses import dsack_dups, ledger_reasons, loss_ledger
from ccbench.summarize.probe import probe_record
from ccbench.summarize.runfiles import (
    calibration_of,
    calibration_reasons,
    calibration_record,
    recorded,
    run_failed,
    sender_setup_reasons,
)


def summarize(raw: Path) -> dict[str, Any]:
    """summary.json's content for one raw/ directory (module docstring: the rule for
    damaged files). Raises CcbenchError only for spec.json."""
    spec = load_spec(raw)
    rd = RawDir(raw)
    skipped = _skipped_marker(rd, spec)
    if skipped is not None:
        return skipped
    meta = runmeta.load(rd, len(spec.flows))
    rcs = meta.client_rc
    cal = calibration_of(rd)
    reasons = run_failed(rd)
    scope = unproven.scope_of(cal)  # a lab's own network: what it cannot prove
    delay_method = cal.get("delay_method") if cal else None
    delay = delay_element(rd, needed=delay_method == "ccdelay")
    losses = loss_ledger(rd)
    held_cause = validity.hidden_queue_cause(losses, delay, cal)
    flows, results, flow_reasons = flows_of(rd, spec, rcs, held_cause, scope.buffer_known)
    reasons += flow_reasons
    total = throughput_sum(spec, flows)
    reasons += sender_setup_reasons(rd)
    reasons += calibration_reasons(rd, cal, delay, delay_method)
    if scope.buffer_known:
        bneck = bottleneck_of(rd)
        reasons += validity.check_bottleneck_config(spec, bneck.get("configured"))
    else:
        bneck = unproven.uncontrolled_bottleneck(scope)
    if losses is not None:
        reasons += ledger_reasons(losses, flows, bneck, delay, dsack_dups(rd))
    probe = probe_record(rd, meta.probe_run(spec.traffic_s))
    if meta.probe_argv and not (probe and probe.get("tool") == "unreadable"):
        reasons += validity.check_probe(probe, spec.probe_tool)
    util = metrics.utilization_pct(total, spec.topology.rate_bps) if total is not None else None
    reasons += validity.check_plausibility(spec, results, util, bneck)
    # queue, sockstat, siftr, retransmit_causes, bblog, interfaces, router_cpu, and what
    # was read of a NIC (its BQL): the instruments' parts
    got = instruments.summary_parts(rd, spec, meta.instruments, t0=meta.started_unix,
                                    before_records=meta.before_records)  # fmt: skip
    reasons += got.reasons
    reasons += validity.check_steal(got.parts.get("router_cpu"))
    nics = nics_of(rd, got.nics)  # provenance: facts.json is checked to be an object here
    kern, kern_reasons = kernel_of(rd, spec)
    reasons += kern_reasons
    reasons += rd.problems
    return {
        **_header(spec),
        "started_unix": meta.started_unix,
        "recorded": recorded(rd.path),
        "flows": flows,
        "throughput_sum_bps": total,
        "utilization_pct": util,
        "jain": jain_of(flows),
        "bottleneck": bneck,
        "delay_element": delay,
        **({"loss_ledger": losses} if losses is not None else {}),
        **({"nics": nics["records"], "nic_notes": nics["notes"]} if nics is not None else {}),
        **({"kernel": kern} if kern is not None else {}),
        **got.parts,
        "probe": probe,
        "calibration": calibration_record(cal),
        **({"not_checkable": unproven.not_checkable(scope)} if not scope.buffer_known else {}),
        "valid": not reasons,
        "reasons": reasons,
    }


def _skipped_marker(rd: RawDir, spec: RunSpec) -> dict[str, Any] | None:
    """The summary of a run recorded as not run (raw/skipped.json with its reason), else
    None; a skipped.json without a reason string is a problem of a run summarized as run."""
    if not rd.exists(layout.SKIPPED):
        return None
    skipped = rd.json(layout.SKIPPED)
    if skipped and isinstance(skipped.get("reason"), str):
        return _skipped(spec, skipped["reason"], skipped.get("waiting"))
    if skipped is not None:
        rd.problem(layout.SKIPPED, "no reason string")
    return None


def _header(spec: RunSpec) -> dict[str, Any]:
    return {**run_identity(spec), "spec": spec.to_dict()}


def _skipped(spec: RunSpec, reason: str, waiting: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        **_header(spec),
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
        **({"waiting": waiting} if isinstance(waiting, dict) else {}),
        "reasons": [
            Reason.of(
                Code.WAITING if isinstance(waiting, dict) else Code.SKIPPED, f"skipped: {reason}"
            )
        ],
    }
