"""Calibration's pure parts: the idle-RTT statistic, the retry policy, the rate probe's
reading."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from ccbench import calibration as cal
from ccbench import roles
from ccbench.errors import CcbenchError
from ccbench.metrics import percentile


def test_percentile_is_nearest_rank() -> None:
    xs = [float(x) for x in range(50, 0, -1)]  # 50 pings, in any order
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 10) == 5.0  # the 5th lowest of 50
    assert percentile(xs, 50) == 25.0
    assert percentile(xs, 95) == 48.0  # ceil(47.5) = 48th
    assert percentile(xs, 99) == 50.0  # ceil(49.5) = 50th
    assert percentile(xs, 100) == 50.0
    assert percentile([7.0], 10) == 7.0
    with pytest.raises(ValueError):
        percentile([], 10)
    with pytest.raises(ValueError):
        percentile(xs, 101)


def test_a_host_stall_does_not_move_the_judged_rtt() -> None:
    # 50 pings at 40.3 ms; a 50 ms stall delays 20 of them (and the median) a lot.
    rtts_us = [40_300.0] * 30 + [40_300.0 + 50_000 - k * 2_500 for k in range(20)]
    st = cal.rtt_stats(rtts_us)
    assert st["judged_on"] == "p10" and st["judged_ms"] == pytest.approx(40.3)
    assert st["min_ms"] == pytest.approx(40.3) and st["max_ms"] == pytest.approx(90.3)
    assert st["spread_ms"] > 20  # the jitter is recorded beside it
    assert cal.rtt_problem(1, st, 40) is None


def test_a_path_off_the_configured_rtt_is_a_problem_either_way() -> None:
    late = cal.rtt_stats([41_600.0] * 50)  # every reply late: the path adds delay
    p = cal.rtt_problem(2, late, 40)
    assert p is not None and p.startswith("pair 2: idle RTT 41.60 ms (p10;")
    assert "configured 40 ms" in p
    # Delay not applied to more than 10 % of the replies: the low percentile sees it.
    early = cal.rtt_stats([100.0] * 6 + [40_200.0] * 44)
    assert cal.rtt_problem(1, early, 40) is not None
    # One stray early reply is not enough to pass a late path, nor to fail a good one.
    assert cal.rtt_problem(1, cal.rtt_stats([40_000.0] + [45_000.0] * 49), 40) is not None
    assert cal.rtt_problem(1, cal.rtt_stats([100.0] + [40_200.0] * 49), 40) is None


def _tries(outcomes: list[tuple[list[str], bool]]) -> Any:
    seq = iter(outcomes)

    def one() -> dict[str, Any]:
        problems, retryable = next(seq)
        return {"problems": problems, "retryable": retryable}

    return one


def test_a_failed_try_is_retried_after_its_pause_and_every_try_kept() -> None:
    slept: list[float] = []
    last, tries = cal.with_retries(
        _tries([(["pair 1: idle RTT"], True), ([], True)]), (5.0, 20.0), slept.append
    )
    assert last["problems"] == [] and last["try"] == 2
    assert [t["try"] for t in tries] == [1, 2] and tries[0]["problems"] == ["pair 1: idle RTT"]
    assert slept == [5.0]


def test_retries_stop_after_the_last_pause() -> None:
    slept: list[float] = []
    last, tries = cal.with_retries(_tries([(["x"], True)] * 3), (5.0, 20.0), slept.append)
    assert len(tries) == 3 and last["problems"] == ["x"] and slept == [5.0, 20.0]


def test_a_problem_a_retry_cannot_fix_fails_at_once() -> None:
    slept: list[float] = []
    last, tries = cal.with_retries(
        _tries([(["offloads still on"], False)]), (5.0, 20.0), slept.append
    )
    assert len(tries) == 1 and slept == []


def test_pauses_come_from_the_environment_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cal.PAUSES_ENV, raising=False)
    assert cal.retry_pauses() == cal.RETRY_PAUSES_S
    assert len(cal.RETRY_PAUSES_S) >= 2 and all(p > 0 for p in cal.RETRY_PAUSES_S)
    monkeypatch.setenv(cal.PAUSES_ENV, "0.5, 1")
    assert cal.retry_pauses() == (0.5, 1.0)
    monkeypatch.setenv(cal.PAUSES_ENV, "")
    assert cal.retry_pauses() == ()  # one try, no retry
    for bad in ("soon", "-1"):
        monkeypatch.setenv(cal.PAUSES_ENV, bad)
        with pytest.raises(CcbenchError):
            cal.retry_pauses()


def _gate(tmp_path: Path, skipped: list[bool]) -> int:
    import argparse

    from ccbench.workflow_cli import cmd_gate

    pd.DataFrame({"passed": [], "gate": []}).to_csv(tmp_path / "v.csv", index=False)
    reasons = ["skipped: testbed t calibration failed" if s else "" for s in skipped]
    pd.DataFrame({"skipped": skipped, "reasons": reasons}).to_csv(tmp_path / "r.csv", index=False)
    a = argparse.Namespace(verdicts=str(tmp_path / "v.csv"), runs=str(tmp_path / "r.csv"),
                           ok=str(tmp_path / "ok"))  # fmt: skip
    return cmd_gate(a)


def test_runs_not_run_pass_the_gate_unless_nothing_ran(tmp_path: Path) -> None:
    assert _gate(tmp_path, [True, False]) == 0 and (tmp_path / "ok").exists()
    with pytest.raises(CcbenchError, match="nothing could run .*calibration failed"):
        _gate(tmp_path, [True, True])


class _RateProbeTestbed:
    """Just what measure_rate touches: pair 1's iperf3 UDP client prints `stdout`."""

    def __init__(self, stdout: str, rate_bps: float) -> None:
        self.stdout = stdout
        self.topo = SimpleNamespace(rate_bps=rate_bps, rate_mbit=rate_bps / 1e6)
        self.roles = roles.dumbbell(1, None, roles.NoDelay())

    def ex(self, node: str) -> Any:
        return SimpleNamespace(
            spawn=lambda argv: SimpleNamespace(stop=lambda: None),
            run=lambda argv, check, timeout: SimpleNamespace(stdout=self.stdout),
        )

    def driver(self, node: str) -> Any:
        return SimpleNamespace(
            iperf3_server=lambda port: ["iperf3", "-s"],
            iperf3_udp_client=lambda *args: ["iperf3", "-u"],
        )

    def address(self, node: str) -> str:
        return "198.18.4.2"

    def wait_listening(self, node: str, port: int) -> None:
        pass


def test_rate_probe_reads_iperf39_udp_without_sum_received() -> None:
    # iperf3 <= 3.10 writes no end.sum_received for UDP (a real 3.9 document, about
    # 1.05 Mbit/s received); the probe reads end.sum instead of reporting a failure.
    doc = Path(__file__).resolve().parents[1] / "captures/iperf3.9-udp-openwisp-monitoring.json"
    problems: list[str] = []
    res = cal.measure_rate(_RateProbeTestbed(doc.read_text(), 1e6), problems)  # type: ignore[arg-type]
    assert problems == []
    assert res["measured_goodput_bps"] == pytest.approx(1310720 * 8 / 10.000115)
    assert res["ratio"] == pytest.approx(res["measured_goodput_bps"] / (1e6 * 1400 / 1442))
    # No output at all (iperf3 missing) is still a failed probe.
    problems = []
    assert cal.measure_rate(_RateProbeTestbed("", 1e6), problems)["measured_goodput_bps"] is None  # type: ignore[arg-type]
    assert problems == ["bottleneck rate probe failed (iperf3 UDP)"]
