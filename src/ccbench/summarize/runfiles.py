"""The run's own records: calibration.json, sender-setup.json, error.txt, and what the
report shows of them as recorded (summary.json `recorded`). The instruments' files
(siftr's logging, the router's CPU, ...) are read by their instruments."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ccbench import layout
from ccbench.layout import RawDir


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


def sender_stacks(rd: RawDir) -> list[tuple[str, str, list[str]]]:
    """sender-setup.json: each sender's TCP stack and what setting it up could not do
    (node, stack, problems; validity.check_sender_setup)."""
    setup = rd.json(layout.SENDER_SETUP) or {}
    stacks = []
    for node, rec in setup.items():
        if not (
            isinstance(rec, dict)
            and isinstance(rec.get("stack"), str)
            and isinstance(rec.get("problems", []), list)
        ):
            rd.problem(layout.SENDER_SETUP, f"{node}: not a stack record")
            continue
        stacks.append((node, rec["stack"], list(rec.get("problems", []))))
    return stacks


def error_text(rd: RawDir) -> str | None:
    """Why the run failed (raw/error.txt); None when it did not."""
    if not rd.failed:
        return None
    return (rd.path / layout.ERROR).read_bytes().decode("utf-8", "replace").strip()


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
