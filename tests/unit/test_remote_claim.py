"""Two testbeds on one SSH dumbbell (command plans, no hosts): a run of one puts its own
queue and loss rules back when the other configured rt1 last (found by the Emulab
rehearsal: runs of a 48-packet scenario ran on the 331-packet queue of another)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccbench import instruments, leftovers
from ccbench.exec import Result
from ccbench.spec import Topology
from tests.lab_recording import commands
from tests.ssh_plans import ssh_testbed

NODES = ["r1", "rt1", "rt2", "s1"]


class Rec:
    def __init__(self, name: str, log: list[tuple[str, list[str]]]) -> None:
        self.name, self.log = name, log

    def run(self, argv: Any, **kw: Any) -> Result:
        for one in commands(list(argv)):  # a batch (one round trip): each of its commands
            self.log.append((self.name, one))
        return Result(tuple(argv), 0, "", "")

    def close(self) -> None:
        pass


@pytest.fixture
def beds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    log: list[tuple[str, list[str]]] = []

    def make(tb_id: str, topo: Topology) -> Any:
        tb = ssh_testbed(tmp_path, monkeypatch, tb_id, topo, lambda node: Rec(node, log))
        monkeypatch.setattr(tb, "_find_dev", lambda node: "eth5")
        return tb

    bdp = make("bdp", Topology(pairs=1, queue_limit_pkts=331))
    lossy = make("lossy", Topology(pairs=1, queue_limit_pkts=48, loss_mode="nth", loss_rate=0.01))
    return bdp, lossy, log


def _up_without_calibration(tb: Any) -> None:
    tb._release_dumbbell()
    rules = tb._configure_path("eth5")
    tb.write_state({"id": tb.id, "kind": "ssh", "bottleneck_dev": "eth5", "loss_rules": rules,
                    "complete": True})  # fmt: skip
    tb._write_claim()


def test_a_run_puts_its_own_queue_back_and_removes_the_others_loss_rules(beds: Any) -> None:
    bdp, lossy, log = beds
    _up_without_calibration(bdp)
    _up_without_calibration(lossy)  # rt1 now has 48 packets, r1 a loss rule
    log.clear()
    bdp.prepare_run()
    # every node swept first for what a crashed run left (ccbench.leftovers: processes,
    # on Linux also a tcp_probe trace instance) ...
    sweep, [trace_off] = leftovers.sweep_argv(), instruments.leftovers_argv("linux")
    assert sorted(n for n, argv in log if argv == sweep) == NODES
    assert sorted(n for n, argv in log if argv == trace_off) == NODES  # all Linux here
    first = [argv for _, argv in log[: 2 * len(NODES)]]
    assert all(argv in (sweep, trace_off) for argv in first)
    log[:] = log[2 * len(NODES) :]
    # ... then lossy's loss rule deleted on r1, then rt1's queue rebuilt for 331 packets
    deleted = [argv for node, argv in log if node == "r1" and "-D" in argv]
    assert len(deleted) == 1 and "statistic" in deleted[0]
    rt1 = [argv for node, argv in log if node == "rt1"]
    assert rt1[0][:3] == ["tc", "qdisc", "del"]
    assert any(argv[-3:] == ["pfifo", "limit", "331"] for argv in rt1)
    assert lossy.read_state()["loss_rules"] == []
    log.clear()
    bdp.prepare_run()  # still its own: nothing to do but the sweep
    assert sorted(n for n, argv in log if argv == leftovers.sweep_argv()) == NODES
    assert len(log) == 2 * len(NODES)  # the sweep and the trace clean-up, nothing else
    lossy.prepare_run()  # and back: lossy's rule is added again
    assert any(node == "r1" and "-A" in argv for node, argv in log)
    assert any(argv[-3:] == ["pfifo", "limit", "48"] for _, argv in log)
