"""Integration: scenario-library miniatures on the real local dumbbell."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ccbench import metrics
from tests.conftest import ccbench
from tests.integration.conftest import namespaces

pytestmark = pytest.mark.netns


def test_random_loss_throughput_is_within_2x_of_mathis(tmp_path: Path) -> None:
    """Seed 004's check: reno through 1 % random loss at 40 ms vs MSS/RTT*sqrt(3/2)/sqrt(p)."""
    cfg = {
        "testbed": {"id": "itloss"},
        "topology": {"pairs": 1, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_bdp": 1},
                     "loss": {"mode": "random", "rate": 0.01}},
        "run": {"duration_s": 15, "interval_s": 1, "flows": [{"cc": "reno"}]},
    }  # fmt: skip
    (tmp_path / "loss.yaml").write_text(yaml.safe_dump(cfg))
    ccbench("run", "--config", str(tmp_path / "loss.yaml"), "--out", str(tmp_path / "out"))
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["valid"], s["reasons"]
    mathis = metrics.mathis_bps(1448, 0.040, 0.01)
    ratio = s["throughput_sum_bps"] / mathis
    assert 0.5 <= ratio <= 2.0, f"measured/Mathis = {ratio:.2f}"
    # The loss really happened: the sender retransmitted about 1 % of its segments.
    assert s["flows"][0]["retransmits"] > 0
    assert namespaces("ccb-itloss-") == []


def test_nth_loss_drops_every_nth_data_packet(tmp_path: Path) -> None:
    cfg = {
        "testbed": {"id": "itnth"},
        "topology": {"pairs": 1, "rate_mbit": 50, "rtt_ms": 20, "queue": {"limit_bdp": 1},
                     "loss": {"mode": "nth", "rate": 0.02}},
        "run": {"duration_s": 4, "interval_s": 1, "flows": [{"cc": "cubic"}]},
    }  # fmt: skip
    (tmp_path / "nth.yaml").write_text(yaml.safe_dump(cfg))
    ccbench("run", "--config", str(tmp_path / "nth.yaml"), "--out", str(tmp_path / "out"))
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert s["valid"], s["reasons"]
    f = s["flows"][0]
    segs = f["bytes_received"] / 1448
    # every 50th packet dropped at the receiver -> about 2 % of segments resent
    assert 0.01 <= f["retransmits"] / segs <= 0.04
