"""Integration: what the report draws over time is what crossed the wire, on real runs.

The throughput series comes from the receiver's own iperf3 intervals (raw/server-K.json),
not from the bytes the sender's application wrote; each flow's minimum RTT is the
kernel's (ss minrtt); a flow held at its receiver's advertised window is flagged.
100 Mbit/s x 40 ms, 0.5 s intervals, as the default comparison.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from ccbench import timeseries
from tests.conftest import ccbench
from tests.integration.conftest import measure_fidelity, namespaces, write_config

pytestmark = pytest.mark.netns

INTERVAL_S = 0.5
STEADY_AFTER_S = 3.0  # slow start and its overshoot are over by then at 100 Mbit/s x 40 ms


def _run(
    cfg: Path, out: Path, flows: list[dict[str, Any]], duration: float, attempts: int = 2
) -> dict[str, Any]:
    """One real run and its parse (the time series the report reads)."""
    c = yaml.safe_load(cfg.read_text())
    c["run"] = {"duration_s": duration, "interval_s": INTERVAL_S, "attempts": attempts,
                "flows": flows}  # fmt: skip
    cfg.write_text(yaml.safe_dump(c))
    shutil.rmtree(out, ignore_errors=True)
    ccbench("run", "--config", str(cfg), "--out", str(out))
    ccbench("parse", str(out))
    return json.loads((out / "summary.json").read_text())


def _drawn(out: Path, flow: int) -> pd.DataFrame:
    """The throughput rows the report draws for `flow` (tsplot: throughput_source)."""
    ts = pd.read_parquet(out / "timeseries.parquet")
    src = timeseries.throughput_source(ts)
    assert src == timeseries.DELIVERED, "the receiver's intervals are missing"
    return ts[(ts["source"] == src) & (ts["flow"] == flow)].sort_values("t_s")


def _time_weighted_mean(rows: pd.DataFrame, start_s: float) -> float:
    t = rows["t_s"].to_numpy(float)
    dt = np.diff(np.concatenate([[start_s], t]))
    return float((rows["throughput_bps"].to_numpy(float) * dt).sum() / dt.sum())


@pytest.fixture(scope="module")
def testbeds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """Two real dumbbells: a 1-BDP queue (one steady flow) and 48 packets (two flows)."""
    d = tmp_path_factory.mktemp("wire")
    cfgs = {
        "bdp": write_config(d / "bdp.yaml", "itwbdp", queue={"limit_bdp": 1}),
        "q48": write_config(d / "q48.yaml", "itwq48", queue={"limit_pkts": 48}),
    }
    try:
        for cfg in cfgs.values():
            ccbench("testbed", "up", "--config", str(cfg))
        yield cfgs
    finally:
        for tb in ("itwbdp", "itwq48"):
            ccbench("testbed", "down", "--id", tb)
            assert namespaces(f"ccb-{tb}-") == []


def test_steady_flow_is_drawn_steady(testbeds: dict[str, Path], tmp_path: Path) -> None:
    """One CUBIC flow through a 1-BDP drop-tail queue is steady on the wire: the drawn
    series varies by <= 3 % after slow start and its mean is the receiver's goodput
    within 2 % (the sender's writes showed 75-100 Mbit/s intervals, CV 0.06-0.12)."""
    out = tmp_path / "out"

    def steady() -> None:
        # 9 s: 12 half-second intervals after slow start for the CV
        s = _run(testbeds["bdp"], out, [{"cc": "cubic"}], duration=9)
        assert s["valid"], s["reasons"]
        f = s["flows"][0]
        rows = _drawn(out, 1)
        late = rows[rows["t_s"] > STEADY_AFTER_S]["throughput_bps"]
        cv = float(late.std() / late.mean())
        assert cv <= 0.03, f"drawn throughput CV {cv:.3f}"
        mean = _time_weighted_mean(rows, f["start_s"])
        assert abs(mean / f["throughput_bps"] - 1) <= 0.02, (mean, f["throughput_bps"])

    measure_fidelity(steady)
    f = json.loads((out / "summary.json").read_text())["flows"][0]
    # The kernel's minimum is the path's base RTT; iperf3's smallest srtt is not, with a
    # standing queue of one BDP (about 40 ms more).
    assert f["min_rtt_source"].startswith("ss minrtt")
    assert 40_000 - 1_000 <= f["min_rtt_us"] <= 40_000 + 1_500, f
    assert f["min_rtt_us"] <= f["srtt_min_us"], f
    assert f["rwnd_limited_share"] is not None and f["rwnd_limited_share"] <= 0.05, f


def test_two_flows_drawn_means_are_goodputs(testbeds: dict[str, Path], tmp_path: Path) -> None:
    """BBR and CUBIC through 48 packets: a standing queue, a valid run (the base-RTT check
    reads the kernel's minimum), each flow's drawn mean its goodput within 3 %."""
    out = tmp_path / "out"

    def means() -> None:
        s = _run(testbeds["q48"], out, [{"cc": "bbr", "pair": 1}, {"cc": "cubic", "pair": 2}], 10)
        assert s["valid"], s["reasons"]
        for f in s["flows"]:
            mean = _time_weighted_mean(_drawn(out, f["flow"]), f["start_s"])
            assert abs(mean / f["throughput_bps"] - 1) <= 0.03, (f["flow"], mean, f)
            assert abs(f["min_rtt_us"] / 1000 - 40) <= 1.0, f
            assert f["rwnd_limited_share"] <= 0.05, f

    measure_fidelity(means)


def test_small_receive_buffer_is_flagged(testbeds: dict[str, Path], tmp_path: Path) -> None:
    """r1's receive buffer cut to 64 KB (well under the 500 KB BDP): the flow sits at its
    advertised window, and the run says it measured the buffer, naming r1's limits."""
    ns = "ccb-itwq48-r1"
    sysctl = ["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_rmem"]
    before = subprocess.run(sysctl, capture_output=True, text=True, check=True).stdout.split()
    small = ["ip", "netns", "exec", ns, "sysctl", "-w", "net.ipv4.tcp_rmem=4096 32768 65536"]
    subprocess.run(small, check=True, capture_output=True)
    try:
        s = _run(testbeds["q48"], tmp_path / "out", [{"cc": "cubic"}], duration=5, attempts=1)
    finally:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-w",
                        f"net.ipv4.tcp_rmem={' '.join(before)}"], check=True)  # fmt: skip
    assert not s["valid"]
    f = s["flows"][0]
    assert f["rwnd_limited_share"] > 0.5, f
    why = [r for r in s["reasons"] if "receive buffer" in r]
    assert why and "r1" in why[0] and "net.ipv4.tcp_rmem = 4096" in why[0], s["reasons"]
    facts = json.loads((tmp_path / "out" / "raw" / "facts.json").read_text())
    assert "net.ipv4.tcp_rmem" in facts["receivers"]["r1"]["buffers"]
