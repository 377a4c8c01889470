"""Testbeds: the kinds (ccbench.testbed.kinds: local namespaces, SSH hosts), what a run
needs of one (base.Testbed), and finding or removing the testbeds ccbench has here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ccbench.testbed.kinds import DEFAULT, kind

if TYPE_CHECKING:  # imported when used: spec and base import this package's kinds
    from ccbench.spec import Topology
    from ccbench.testbed.base import Testbed
    from ccbench.testbed.kinds import TestbedConfig


def make(cfg: TestbedConfig, topo: Topology) -> Testbed:
    return kind(cfg.kind).make(cfg, topo)


def down(tb_id: str) -> str:
    """Remove testbed `tb_id` of any kind, also a stale one; returns what was done. A
    testbed without a readable state is the default kind's (namespaces may outlive it)."""
    from ccbench import safe

    tb_id = safe.testbed_id(tb_id)
    st = _state(tb_id)
    return kind(st.get("kind", DEFAULT)).down(tb_id, st)


class Found(NamedTuple):
    """A testbed found on this machine, as `testbed status` lists it."""

    id: str
    kind: str
    complete: bool  # its state says it was built and calibrated
    namespaces: int


def found() -> list[Found]:
    """Every testbed ccbench has here: namespaces (local) and state directories (any
    kind)."""
    from ccbench.testbed import local

    out = []
    for tb_id in local.all_ids():
        st = _state(tb_id)
        out.append(Found(tb_id, str(st.get("kind", DEFAULT)), bool(st.get("complete")),
                         len(local.list_namespaces(local.ns_prefix(tb_id)))))  # fmt: skip
    return out


def _state(tb_id: str) -> dict[str, Any]:
    """Testbed `tb_id`'s state.json; {} when it has none or it cannot be read."""
    from ccbench.jsonio import read_json
    from ccbench.testbed import base

    st = read_json(base.STATE_ROOT / tb_id / "state.json")
    return st if isinstance(st, dict) else {}
