"""The report names which element paces the bottleneck and the buffer in front of it
(issue 21): at the seeds' 1000 Mbit/s tbf on 1 GbE the NIC is slower (1538 wire bytes a
frame against tbf's 1514), so rt1's TX ring joins the queue; at or below 984 Mbit/s the
tbf is; local veths have no wire."""

from __future__ import annotations

import shutil
from pathlib import Path

from ccbench import record, record_load
from ccbench.report import data
from ccbench.spec import Flow, Topology

SMALL = Path(__file__).resolve().parents[1] / "fixtures" / "results-small" / "runs"
RID = "two-flows-bbr-r1-3c359d7e"
NIC = {"node": "rt1", "interface": "eth5", "driver": "igb", "speed_mbps": 1000,
       "tx_ring_asked": 48, "tx_ring_set": 64, "offloads": {}}  # fmt: skip


def cond(rate: float) -> data.Conditions:
    return data.Conditions(scenario="s", description="", flows=(Flow(1, "cubic"),),
                           topology=Topology(pairs=1, rate_mbit=rate, queue_limit_pkts=48),
                           testbed_id="t", traffic_s=10)  # fmt: skip


def runs_with(tmp_path: Path, nics: list[dict] | None) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(SMALL / RID, runs / RID)
    rec = record_load.load(runs / RID)
    cal = {**(rec.recorded.calibration or {}), "bottleneck": {"node": "rt1", "dev": "eth5"}}
    recorded = rec.recorded.model_copy(update={"calibration": cal}) if rec.recorded else None
    record.write(runs / RID / "summary.json",
                 rec.model_copy(update={"nics": nics, "recorded": recorded}))  # fmt: skip
    return runs


def test_the_nic_paces_1000_mbit_tbf_on_1gbe_and_its_ring_joins_the_buffer(
    tmp_path: Path,
) -> None:
    text = data.bottleneck_text(runs_with(tmp_path, [NIC]), [RID], cond(1000))
    assert text.startswith("bottleneck: rt1's NIC at wire rate")
    assert "984.4 Mbit/s of frames" in text and text.endswith("48 + 64 TX ring = 112 pkts")


def test_tbf_at_or_below_the_wire_rate_is_the_only_bottleneck(tmp_path: Path) -> None:
    text = data.bottleneck_text(runs_with(tmp_path, [NIC]), [RID], cond(984))
    assert text == "bottleneck: tbf at 984 Mbit/s (the wire carries 984.4); buffer 48 pkts"


def test_local_veths_have_no_wire(tmp_path: Path) -> None:
    text = data.bottleneck_text(runs_with(tmp_path, None), [RID], cond(1000))
    assert text == "bottleneck: tbf at 1000 Mbit/s; buffer 48 pkts"
