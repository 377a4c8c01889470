"""An SSH testbed whose nodes are stand-ins, for unit tests of its command plans (no
hosts): the inventory of one dumbbell written, state kept under `tmp_path`, and each
node's executor the test's own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench.spec import Topology

DUMBBELL = ("s1", "rt1", "rt2", "r1")


def ssh_testbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tb_id: str, topo: Topology,
    ex: Callable[[str], Any], nodes: Sequence[str] = DUMBBELL, **cfg: Any,
) -> Any:  # fmt: skip
    """A RemoteTestbed `tb_id` on `nodes` (hosts <node>.example.org) whose `ex(node)` is
    the test's; `cfg`: more TestbedConfig keys (tools=...)."""
    from ccbench.testbed import base, kinds, remote

    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    inv = tmp_path / "hosts.yaml"
    inv.write_text(yaml.safe_dump({"dumbbells": {1: {n: {"host": f"{n}.example.org"}
                                                     for n in nodes}}}))  # fmt: skip
    tb = remote.RemoteTestbed(
        kinds.TestbedConfig(kind="ssh", id=tb_id, inventory=str(inv), **cfg), topo
    )
    monkeypatch.setattr(tb, "ex", ex)
    return tb
