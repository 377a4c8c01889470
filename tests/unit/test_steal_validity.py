"""Hypervisor steal as a validity input: a run whose bottleneck router lost
validity.STEAL_MAX_PCT or more of its CPU time to other guests while the flows ran is
invalid, with a reason of the host-stall class (the retry and the integration tests
treat it as they treat the other stalls).

The run is a real one (tests/captures/run-local-wire-cubic-bdp: its cpu-before.txt and
cpu-after.txt are the machine's /proc/stat around the traffic, 3093 jiffies with 4
stolen). No steal could be captured here while this was written (a watcher reading
/proc/stat every 3 s for 15 minutes on 2026-11-29 saw at most 0.5 % in any 3 s), so
the stolen reads are derived from the run's own: its after-read with the aggregate
`cpu` line's steal counter raised by the jiffies that give the share asked, every
other field as read."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from ccbench import validity
from ccbench.parse.procstat import usage_between
from ccbench.reasons import Code, host_stalled_only
from ccbench.summarize import summarize

CAP = Path(__file__).resolve().parents[1] / "captures"
RUN = CAP / "run-local-wire-cubic-bdp" / "raw"
STEAL = 7  # the steal field's index on a `cpu` line (proc(5): the 8th value)


def _with_steal(before: str, after: str, pct: float) -> str:
    """`after` with its aggregate `cpu` line's steal raised so that the share of the
    jiffies between `before` and it that were stolen is `pct` (the rest as read)."""
    lines = after.splitlines(keepends=True)
    head = lines[0].split()
    assert head[0] == "cpu"
    d = usage_between(before, after)
    total, stolen = d["jiffies"], d["steal_pct"] * d["jiffies"] / 100
    # (stolen + x) / (total + x) = pct / 100
    x = math.ceil((pct / 100 * total - stolen) / (1 - pct / 100))  # at least pct
    head[1 + STEAL] = str(int(head[1 + STEAL]) + x)
    return " ".join(head) + "\n" + "".join(lines[1:])


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    dst = tmp_path / "raw"
    shutil.copytree(RUN, dst)
    return dst


def test_the_captured_runs_steal_is_low_and_it_is_valid(raw: Path) -> None:
    s = summarize(raw)
    assert s["router_cpu"]["jiffies"] == 3093
    assert s["router_cpu"]["steal_pct"] == pytest.approx(100 * 4 / 3093)
    assert s["valid"] and validity.check_steal(s["router_cpu"]) == []


@pytest.mark.parametrize("pct", [10.8, 16.7])  # single-bdp bbr's, two-flows-48 reno's
def test_a_run_at_the_measured_steal_is_invalid_as_a_host_stall(raw: Path, pct: float) -> None:
    before = (raw / "cpu-before.txt").read_text()
    after = _with_steal(before, (raw / "cpu-after.txt").read_text(), pct)
    (raw / "cpu-after.txt").write_text(after)
    s = summarize(raw)
    assert s["router_cpu"]["steal_pct"] == pytest.approx(pct, abs=0.05)
    assert not s["valid"]
    assert [(r.code, r.evidence) for r in s["reasons"]] == [
        (Code.STEAL, {"steal_pct": s["router_cpu"]["steal_pct"], "limit_pct": 10.0})
    ]
    # the class the integration tests accept as a stall (conftest.assert_judged), alone
    # or beside the other stall reasons; their fidelity retries skip on its code
    # (conftest.measure_fidelity)
    assert host_stalled_only(s["reasons"])
    excess = validity.check_rtt_excess({"share": 0.05, "bound_ms": 85.1, "max_excess_ms": 9.0,
                                        "longest_above_s": 0.1})  # fmt: skip
    assert host_stalled_only([*s["reasons"], *excess])


def test_the_limit_is_inclusive_and_below_it_a_run_stays_valid(raw: Path) -> None:
    """Runs at 7.5-9.2 % steal kept their utilization (quickstart-tables): valid."""
    before = (raw / "cpu-before.txt").read_text()
    for pct, valid in ((9.2, True), (9.9, True), (10.0, False)):
        after = _with_steal(before, (RUN / "cpu-after.txt").read_text(), pct)
        (raw / "cpu-after.txt").write_text(after)
        s = summarize(raw)
        assert s["valid"] is valid, (pct, s["router_cpu"], s["reasons"])
    assert validity.check_steal({"steal_pct": validity.STEAL_MAX_PCT}) != []
    assert validity.check_steal({"steal_pct": None}) == validity.check_steal(None) == []
