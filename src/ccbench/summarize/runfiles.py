"""The run's own records: calibration.json, sender-setup.json, error.txt, and what the
report shows of them as recorded (summary.json `recorded`). The instruments' files
(siftr's logging, the router's CPU, ...) are read by their instruments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench import layout, validity
from ccbench.layout import RawDir
from ccbench.reasons import Code, Reason


def calibration_of(rd: RawDir) -> dict[str, Any] | None:
    """calibration.json; None when present but unreadable (a reason says so)."""
    if not rd.exists(layout.CALIBRATION):
        return {}
    cal = rd.json(layout.CALIBRATION)
    if cal is None:
        return None
    probs = cal.get("problems", [])
    if not (isinstance(probs, list) and all(isinstance(p, str) for p in probs)):
        rd.problem(layout.CALIBRATION, "problems is not a list of strings")
        return None
    if not isinstance(cal.get("rate") or {}, dict):
        rd.problem(layout.CALIBRATION, "rate is not an object")
        return None
    if not isinstance(cal.get("delay_method") or "", str):
        rd.problem(layout.CALIBRATION, "delay_method is not a string")
        return None
    return cal


def sender_setup_reasons(rd: RawDir) -> list[Reason]:
    setup = rd.json(layout.SENDER_SETUP) or {}
    reasons = []
    for node, rec in setup.items():
        if not (
            isinstance(rec, dict)
            and isinstance(rec.get("stack"), str)
            and isinstance(rec.get("problems", []), list)
        ):
            rd.problem(layout.SENDER_SETUP, f"{node}: not a stack record")
            continue
        reasons += [Reason.of(Code.STACK_MISMATCH, f"{node}: stack {rec['stack']}: {p}", node=node,
                              asked=rec["stack"]) for p in rec.get("problems", [])]  # fmt: skip
    return reasons


def run_failed(rd: RawDir) -> list[Reason]:
    """The run's own failure (raw/error.txt) as its first reason."""
    if not rd.failed:
        return []
    err = (rd.path / layout.ERROR).read_bytes().decode("utf-8", "replace").strip()
    return [Reason.of(Code.RUN_FAILED, f"run failed: {err}")]


def calibration_reasons(
    rd: RawDir, cal: dict[str, Any] | None, delay: dict[str, Any] | None, delay_method: str | None
) -> list[Reason]:
    """The testbed calibration's checks and the delay element's (which needs the
    calibration's delay method)."""
    if cal is None:  # calibration.json's own reason says it
        return []
    reasons = list(validity.check_calibration(cal))
    # Without statistics because a delay file is missing or damaged: its reason says it.
    delay_files = (layout.delay(layout.BEFORE), layout.delay(layout.AFTER))  # or NAME.gz ...
    if delay is not None or not any(r.text.startswith(delay_files) for r in rd.problems):
        reasons += validity.check_delay(delay, delay_method)
    return reasons


def calibration_record(cal: dict[str, Any] | None) -> dict[str, Any]:
    cal = cal or {}
    return {
        "delay_method": cal.get("delay_method"),
        # where the RTT sat: both ways (RTT/2 each; older calibrations) or reverse
        "delay_direction": cal.get("delay_direction") or "both",
        "idle_rtt": cal.get("idle_rtt"),
        "rate_ratio": (cal.get("rate") or {}).get("ratio"),
    }


def recorded(raw: Path) -> dict[str, Any]:
    """What the report's provenance shows, copied from raw/ as the run recorded it (the
    testbed's calibration, the hosts' facts, the qdisc configuration), so the report reads
    only summary.json, a declared output of `parse`. None where a file is missing or not
    JSON; their checks are summarize's (calibration, facts) and the reasons say so."""

    def load(name: str) -> Any:
        try:
            return json.loads((raw / name).read_text())
        except (OSError, ValueError):
            return None

    try:
        qdisc = (raw / layout.QDISC_CONFIG).read_text(errors="replace").splitlines()
    except OSError:
        qdisc = None
    return {"calibration": load(layout.CALIBRATION), "facts": load(layout.HOST_FACTS),
            "qdisc_config": qdisc}  # fmt: skip
