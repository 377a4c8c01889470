"""Integration: what the report draws over time is what crossed the wire, on real runs.

The throughput series comes from the receiver's own iperf3 intervals (raw/server-K.json),
not from the bytes the sender's application wrote; each flow's minimum RTT is the
kernel's (ss minrtt); a flow held at its receiver's advertised window is flagged.
100 Mbit/s x 40 ms, 0.5 s intervals, as the default comparison.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ccbench.reasons import Code
from tests.conftest import ccbench
from tests.integration.shared_runs import Q48, SharedRun, run_config

pytestmark = pytest.mark.netns


@pytest.mark.quiet  # after the idle job, as the shared run's other readers (test_local_testbed)
def test_a_flow_is_drawn_as_the_wire_carried_it(cubic_bdp_run: SharedRun) -> None:
    """One CUBIC flow through a 1-BDP drop-tail queue: after slow start each drawn
    interval is within 4 % (mean) of what the bottleneck's qdisc sent in it, the drawn
    series varies no more than the wire did, and its mean is the receiver's goodput
    within 2 % (shared_runs.cubic_bdp_check, the run's fidelity check)."""
    f = cubic_bdp_run.summary["flows"][0]
    # The kernel's minimum is the path's base RTT; iperf3's smallest srtt is not, with a
    # standing queue of one BDP (about 40 ms more).
    assert f["min_rtt_source"].startswith("ss minrtt")
    assert 40_000 - 1_000 <= f["min_rtt_us"] <= 40_000 + 1_500, f
    assert f["min_rtt_us"] <= f["srtt_min_us"], f
    assert f["rwnd_limited_share"] is not None and f["rwnd_limited_share"] <= 0.05, f


def test_two_flows_drawn_means_are_goodputs(traced_q48_run: SharedRun) -> None:
    """BBR and CUBIC through 48 packets: a standing queue, a valid run (the base-RTT check
    reads the kernel's minimum), each flow's drawn mean its goodput within 3 %
    (shared_runs.traced_q48_check, the run's fidelity check)."""
    s = traced_q48_run.summary
    assert s["valid"] and [f["cc_used"] for f in s["flows"]] == ["cubic", "bbr"]
    for f in s["flows"]:
        assert f["min_rtt_source"].startswith("ss minrtt")
        assert abs(f["min_rtt_us"] / 1000 - 40) <= 1.0, f
        assert f["rwnd_limited_share"] <= 0.05, f


def test_small_receive_buffer_is_flagged(q48_testbed: tuple[str, Path], tmp_path: Path) -> None:
    """r1's receive buffer cut to 64 KB (well under the 500 KB BDP): the flow sits at its
    advertised window, and the run says it measured the buffer, naming r1's limits."""
    tb_id = q48_testbed[0]
    ns = f"ccb-{tb_id}-r1"
    sysctl = ["ip", "netns", "exec", ns, "sysctl", "-n", "net.ipv4.tcp_rmem"]
    before = subprocess.run(sysctl, capture_output=True, text=True, check=True).stdout.split()
    small = ["ip", "netns", "exec", ns, "sysctl", "-w", "net.ipv4.tcp_rmem=4096 32768 65536"]
    subprocess.run(small, check=True, capture_output=True)
    try:
        cfg = run_config(
            tmp_path / "run.yaml",
            tb_id,
            Q48,
            # 3 s: the window holds the flow from its first few round trips on
            {"duration_s": 3, "attempts": 1, "flows": [{"cc": "cubic"}]},
        )
        ccbench("run", "--config", str(cfg), "--out", str(tmp_path / "out"))
        ccbench("parse", str(tmp_path / "out"))
        s = json.loads((tmp_path / "out" / "summary.json").read_text())
    finally:
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-w",
                        f"net.ipv4.tcp_rmem={' '.join(before)}"], check=True)  # fmt: skip
    assert not s["valid"]
    f = s["flows"][0]
    assert f["rwnd_limited_share"] > 0.5, f
    why = [r for r in s["reasons"] if r["code"] == Code.RWND_LIMITED]
    assert why and why[0]["evidence"]["receiver"] == "r1", s["reasons"]
    assert "net.ipv4.tcp_rmem = 4096" in why[0]["text"]  # its buffer limits, from facts.json
    facts = json.loads((tmp_path / "out" / "raw" / "facts.json").read_text())
    assert "net.ipv4.tcp_rmem" in facts["receivers"]["r1"]["buffers"]
