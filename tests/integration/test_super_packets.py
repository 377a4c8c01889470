"""Integration: a sender's TSO/GSO on makes the bottleneck queue hold super-packets, and
the run is judged invalid for it (issue 39, "the emulation stays honest").

A real local dumbbell (100 Mbit/s x 40 ms, pfifo 48); s1's data interface gets
`ethtool -K DEV tso on gso on` in its namespace after the build (which turned them
off), one cubic flow of 4 s from s1, and the run must be invalid with the queue's
super-packet reason, its largest bytes per queued packet above one frame. The offloads
are put back with ccbench's own plan and checked off; a second run on the same path,
as built, must not have the reason. The testbed is removed whatever happens. Not a
fidelity test: only the reason is asserted (shares_cpu).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench.config import load_testbed_config
from ccbench.reasons import Code
from ccbench.testbed import manage
from ccbench.testbed.local import LocalTestbed
from ccbench.testbed.local_layouts import offload_devices, offload_state
from tests.conftest import ccbench, codes
from tests.integration.conftest import testbed_up as built
from tests.integration.conftest import write_config

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]

TB_ID = "itsup"
SENDER = "s1"


def _offloads(tb: LocalTestbed, dev: str) -> dict[str, str]:
    return offload_state(tb.ex(SENDER).run(tb.driver(SENDER).offloads_show(dev)).stdout)


def test_sender_offloads_make_the_run_invalid(tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "tb.yaml", TB_ID, queue={"limit_pkts": 48})
    doc = yaml.safe_load(cfg.read_text())
    doc["run"].update(duration_s=4, attempts=1, flows=[{"cc": "cubic", "pair": 1}])
    cfg.write_text(yaml.safe_dump(doc))
    with built(cfg, TB_ID):
        tb = manage.make(*load_testbed_config(cfg))
        assert isinstance(tb, LocalTestbed)
        [dev] = [d for node, d, _ in offload_devices(tb.lay, tb.topo.pairs) if node == SENDER]
        try:
            tb.ex(SENDER).run(["ethtool", "-K", dev, "tso", "on", "gso", "on"])
            on = _offloads(tb, dev)
            assert on["tso"] == "on" and on["gso"] == "on", on
            s = _run(cfg, tmp_path / "on")
        finally:
            tb.ex(SENDER).run(tb.driver(SENDER).offloads_off(dev))
        assert set(_offloads(tb, dev).values()) == {"off"}
        off = _run(cfg, tmp_path / "off")  # the same path as built: frames only
    q = s["queue"]
    assert not s["valid"]
    mine = [r for r in s["reasons"] if r["code"] == Code.SUPER_PACKETS]
    assert mine and mine[0]["evidence"]["where"] == "/".join(tb.bottleneck), s["reasons"]
    assert q["super_packets"] is True and q["frame_bytes"] == tb.topo.frame_bytes == 1514
    assert q["pkt_bytes_max"] > q["frame_bytes"], q
    assert off["queue"]["super_packets"] is False, off["queue"]
    assert Code.SUPER_PACKETS not in codes(off["reasons"])


def _run(cfg: Path, out: Path) -> dict[str, Any]:
    ccbench("run", "--config", str(cfg), "--out", str(out), "--attempts", "1")
    s: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return s
