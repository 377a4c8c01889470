"""A flow whose iperf3 server report (raw/server-K.json: its delivered intervals) is
empty, unreadable or missing is a reason on the run, never a throughput line that
silently falls back to the sender's writes or vanishes. The run is a real one
(tests/captures/run-local-wire-cubic-bdp: one cubic flow, 15 s, its server's JSON)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ccbench import timeseries
from ccbench.reasons import Code
from ccbench.summarize import summarize
from tests.conftest import codes, damaged_files

CAP = Path(__file__).resolve().parents[1] / "captures"
RUN = CAP / "run-local-wire-cubic-bdp" / "raw"
LACKS = "(flow 1's delivered throughput per interval is not known)"


@pytest.fixture
def raw(tmp_path: Path) -> Path:
    dst = tmp_path / "raw"
    shutil.copytree(RUN, dst)
    return dst


def test_the_captured_run_is_valid_with_its_servers_intervals(raw: Path) -> None:
    s = summarize(raw)
    assert s["valid"], s["reasons"]
    ts = timeseries.build(raw)
    assert (ts["source"] == timeseries.DELIVERED).sum() == 31  # its server's intervals


def test_an_empty_server_json_is_a_reason(raw: Path) -> None:
    (raw / "server-1.json").write_text("")
    s = summarize(raw)
    assert not s["valid"]
    assert codes(s["reasons"]) == [Code.FILE_DAMAGED]
    assert damaged_files(s["reasons"]) == ["server-1.json"]
    assert s["reasons"][0].text.endswith(LACKS)  # what is lost, named
    # what the reason stands for: the series has no delivered rows for the flow
    ts = timeseries.build(raw)
    assert not (ts["source"] == timeseries.DELIVERED).any()


def test_an_unreadable_server_json_is_a_reason_naming_the_file(raw: Path) -> None:
    text = (raw / "server-1.json").read_text()
    (raw / "server-1.json").write_text(text[: len(text) // 2])  # cut short
    s = summarize(raw)
    assert not s["valid"] and len(s["reasons"]) == 1
    assert damaged_files(s["reasons"]) == ["server-1.json"]


def test_a_missing_server_json_beside_another_flows_is_a_reason(tmp_path: Path) -> None:
    """Two flows (tests/captures/run-local-3pct-loss), the second's server report gone:
    the run's servers wrote JSON (the first's is there), so the second's is missing."""
    raw = tmp_path / "raw"
    shutil.copytree(CAP / "run-local-3pct-loss", raw)
    assert summarize(raw)["valid"]
    (raw / "server-2.json").unlink()
    s = summarize(raw)
    assert codes(s["reasons"]) == [Code.FILE_DAMAGED]
    assert damaged_files(s["reasons"]) == ["server-2.json"]


def test_a_run_from_before_servers_wrote_json_has_no_such_reason() -> None:
    """run-local-2cubic-ledger: server-K.txt (text logs), no JSON: nothing to check."""
    s = summarize(CAP / "run-local-2cubic-ledger")
    assert s["valid"] and s["reasons"] == []
