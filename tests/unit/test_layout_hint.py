"""A local routed run that holds packets outside the bottleneck at a rate the macvlan
layout is documented to carry says so in its reason, and so in the report (issue 32).
A real run's raw files (tests/captures/run-local-2cubic-ledger: 2 x cubic, routed,
50 Mbit/s x 20 ms, 48 packets, with its loss ledger), told it ran at 1 Gbit/s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ccbench import topology, validity
from ccbench.aggregate import run_rows
from ccbench.reasons import Code
from ccbench.report.invalid_runs import rows as invalid_rows
from ccbench.summarize import summarize
from tests.conftest import texts_of

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "run-local-2cubic-ledger"
HINT = (
    "At 1000 Mbit/s use `testbed.layout: macvlan` (delay_direction: reverse): fewer hops "
    'per packet; docs/fidelity.md ("Layouts") measured it valid up to 1000 Mbit/s on 2 '
    "vCPUs, the routed layout up to 100 Mbit/s"
)


def _at(tmp_path: Path, rate_mbit: float, layout: str | None) -> Path:
    """The capture's run as if its spec and testbed had been at `rate_mbit` on
    `layout` (None: a calibration from before layouts were recorded: routed)."""
    run = tmp_path / "run"
    raw = run / "raw"
    shutil.copytree(CAPTURE, raw)
    spec = json.loads((raw / "spec.json").read_text())
    spec["topology"]["rate_mbit"] = rate_mbit
    (raw / "spec.json").write_text(json.dumps(spec))
    cal = json.loads((raw / "calibration.json").read_text())
    cal["rate_configured_mbit"] = rate_mbit
    if layout is not None:
        cal["layout"] = layout
    (raw / "calibration.json").write_text(json.dumps(cal))
    return run


def test_a_routed_run_at_1_gbit_is_told_of_the_macvlan_layout(tmp_path: Path) -> None:
    run = _at(tmp_path, 1000, None)
    s = summarize(run / "raw")
    # 48 packets at 1 Gbit/s hold 0.6 ms: the flows' 27 ms mean RTT was held elsewhere
    hidden = texts_of(s["reasons"], Code.HIDDEN_QUEUE)  # their words (the hint) are the subject
    assert len(hidden) == 2 and not s["valid"]
    assert hidden[0] == (
        "flow 1: mean RTT 27.2 ms above the 20.6 ms the path can give (RTT + a full queue): "
        "packets were held outside the bottleneck (seen: no softnet squeeze, backlog drop "
        f"or late release counted. {HINT})"
    )
    # and the report's list of invalid runs carries the reason as it is
    (run / "summary.json").write_text(json.dumps(s, default=lambda r: r.model_dump(mode="json")))
    row, _ = run_rows(run)
    table = pd.DataFrame([{**row, "skipped": False}])
    assert HINT in invalid_rows(table)[0]["reasons"]


@pytest.mark.parametrize(
    ("rate", "layout"),
    [
        (50, None),  # routed carries 50 Mbit/s: the hops are not why
        (1000, "macvlan"),  # already the layout the hint would name
        (2000, None),  # above what macvlan was measured to carry
    ],
)
def test_no_hint_where_no_layout_is_documented_to_do_better(
    tmp_path: Path, rate: float, layout: str | None
) -> None:
    run = _at(tmp_path, rate, layout)
    spec = json.loads((run / "raw" / "spec.json").read_text())
    spec["topology"]["queue_limit_pkts"] = 4  # a hidden queue at every rate
    (run / "raw" / "spec.json").write_text(json.dumps(spec))
    hidden = texts_of(summarize(run / "raw")["reasons"], Code.HIDDEN_QUEUE)
    assert hidden and not any("testbed.layout" in r for r in hidden)


def test_the_hint_follows_the_layouts_documented_rates() -> None:
    cal = {"kind": "local", "layout": "routed", "rate_configured_mbit": 500}
    assert validity.layout_hint(cal) is not None  # above routed's 100, within macvlan's
    routed = topology.layout("routed").carries_mbit
    assert routed is not None
    assert validity.layout_hint({**cal, "rate_configured_mbit": routed}) is None
    # a kind whose only layout is routed (Emulab, a lab): nothing to name
    assert validity.layout_hint({**cal, "kind": "ssh", "rate_configured_mbit": 1000}) is None
    # an unreadable calibration says nothing
    assert validity.layout_hint({"kind": "local", "rate_configured_mbit": "fast"}) is None
    assert validity.layout_hint({"kind": "nosuch", "rate_configured_mbit": 1000}) is None
    assert validity.layout_hint(None) is None
