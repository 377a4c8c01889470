"""A testbed kind of a caller's own, in a registry it passes in (docs/architecture.md,
"Adding a testbed kind", step 1): made and removed through ccbench.testbed.manage
without touching the package's registry, its capabilities asked like any kind's. A
config names a kind of the package's registry (TestbedConfig checks it when made); a
registry passed in may put another implementation behind that name, as mininet's
callers pass their own classes in."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ccbench import topology
from ccbench.errors import CcbenchError
from ccbench.spec import Topology
from ccbench.testbed import base, kinds, manage
from ccbench.testbed.kinds import Capabilities, TestbedKind

REMOVED: list[tuple[str, dict[str, Any]]] = []


@dataclass
class VmTestbed:
    """Its implementation (what testbed_class names)."""

    cfg: kinds.TestbedConfig
    topo: Topology
    kind = "vm"


def down_from_state(tb_id: str, state: dict[str, Any]) -> str:
    REMOVED.append((tb_id, state))
    return "stopped its VMs"


class VmKind(TestbedKind):
    name = "vm"
    description = "a VM per node"
    caps = Capabilities(
        needs_root=False, senders_here=False, one_kernel=False, nic_records=False,
        needs_inventory=False, oses=("linux",), delay_directions=("both",),
        layouts=(topology.DEFAULT,), dumbbells=1, exclusive_calibration=False,
    )  # fmt: skip
    testbed_class = f"{__name__}:VmTestbed"
    remover = f"{__name__}:down_from_state"


MINE = {"vm": VmKind(), **kinds.REGISTRY}


def test_a_kind_of_ones_own_is_made_and_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path)
    # TestbedConfig checks its kind against the package's registry: "vm" is not there
    with pytest.raises(CcbenchError, match=r"testbed.kind: unknown kind 'vm' \(one of local"):
        kinds.TestbedConfig(kind="vm", id="vm1")
    cfg = kinds.TestbedConfig(id="vm1")  # the default kind's name, "local"
    topo = Topology(pairs=1)
    tb = manage.make(cfg, topo, {"local": VmKind()})
    assert isinstance(tb, VmTestbed) and tb.cfg == cfg and tb.topo == topo
    assert kinds.kind("vm", MINE).caps.layouts == (topology.DEFAULT,)
    (tmp_path / "vm1").mkdir()
    (tmp_path / "vm1" / "state.json").write_text('{"kind": "vm", "complete": true}')
    assert manage.down("vm1", MINE) == "stopped its VMs"
    assert REMOVED == [("vm1", {"kind": "vm", "complete": True})]
    assert "vm" not in kinds.REGISTRY
