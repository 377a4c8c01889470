"""Golden tests of ccbench.parse.procstat on /proc/stat captured on this machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse.procstat import parse_cpu_line, usage_between

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def test_aggregate_line_only() -> None:
    cpu = parse_cpu_line((CAPTURES / "procstat-before.txt").read_text())
    assert cpu == {"user": 474317, "nice": 2692, "system": 207029, "idle": 1133179,
                   "iowait": 4953, "irq": 0, "softirq": 161029, "steal": 99518}  # fmt: skip


def test_both_cpus_busy_with_a_little_steal() -> None:
    u = usage_between((CAPTURES / "procstat-before.txt").read_text(),
                      (CAPTURES / "procstat-after.txt").read_text())  # fmt: skip
    # deltas: user 261, system 335, idle 1, softirq 1, steal 5 -> 603 jiffies
    assert u["jiffies"] == 603
    assert u["busy_pct"] == pytest.approx(100 * 597 / 603)
    assert u["softirq_pct"] == pytest.approx(100 * 1 / 603)
    assert u["steal_pct"] == pytest.approx(100 * 5 / 603)


def test_no_time_passed_gives_no_shares() -> None:
    text = (CAPTURES / "procstat-before.txt").read_text()
    assert usage_between(text, text)["steal_pct"] is None


def test_text_without_cpu_line_is_an_error() -> None:
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        parse_cpu_line("intr 1 2 3\nctxt 4\n")
