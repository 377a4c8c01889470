"""`record: [receiver_tcp]` on real namespaces: each receiver's TCP receive side in
summary.json, read in that receiver's own namespace, and nothing left behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ccbench.instruments.receiver_tcp import COUNTS, DROPS, file
from ccbench.layout import AFTER, BEFORE
from tests.conftest import ccbench
from tests.integration.conftest import namespaces

pytestmark = pytest.mark.netns


def _nstat_history() -> set[Path]:
    return set(Path("/tmp").glob(".nstat*"))


@pytest.mark.shares_cpu
def test_receivers_tcp_counters_in_the_summary(tmp_path: Path) -> None:
    """Two cubic flows for 3 s through 48 packets: each receiver's part, after minus
    before of its own namespace's counters (the senders' differ: they received ACKs)."""
    tb_id = "itrcvtcp"
    cfg = {
        "testbed": {"id": tb_id},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 20, "queue": {"limit_pkts": 48}},
        "run": {"duration_s": 3, "interval_s": 0.5, "attempts": 1, "record": ["receiver_tcp"],
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "cubic", "pair": 2}]},
    }  # fmt: skip
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    history = _nstat_history()
    try:
        ccbench("run", "--config", str(path), "--out", str(out))
    finally:
        ccbench("testbed", "down", "--id", tb_id)
    s = json.loads((out / "summary.json").read_text())
    meta = json.loads((out / "raw" / "meta.json").read_text())
    assert meta["instruments"]["receiver_tcp"] == {"nodes": ["r1", "r2"]}
    part = s["receiver_tcp"]
    assert set(part) == {"r1", "r2"}
    for node, c in part.items():
        counts = [c[k] for k in (*DROPS.values(), *COUNTS.values())]
        assert all(isinstance(n, int) and n >= 0 for n in counts), (node, c)
        assert c["dropped_segments"] == sum(c[k] for k in DROPS.values())
        # the flow's data arrived here and was coalesced into the receive queue
        assert c["coalesced"] > 0, (node, c)
        assert c["raw"] == [file(node, BEFORE), file(node, AFTER)]
    # each read is its receiver's namespace's: a sender's reads of the same run (the
    # tcp_counters instrument) never coalesced data into a receive queue
    for snd in ("s1", "s2"):
        after = json.loads((out / "raw" / f"tcp-counters-{snd}-{AFTER}.json").read_text())
        before = json.loads((out / "raw" / f"tcp-counters-{snd}-{BEFORE}.json").read_text())
        rose = after["kernel"]["TcpExtTCPRcvCoalesce"] - before["kernel"]["TcpExtTCPRcvCoalesce"]
        assert rose < min(c["coalesced"] for c in part.values()), snd
    # nothing left: the testbed's namespaces, an nstat running, nstat's history file
    # (-s: never written)
    assert namespaces(f"ccb-{tb_id}-") == []
    assert subprocess.run(["pgrep", "-x", "nstat"], capture_output=True).returncode == 1
    assert _nstat_history() == history
