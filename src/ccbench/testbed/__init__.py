"""Testbeds: `local` (network namespaces on this machine) and `ssh` (real hosts)."""

from __future__ import annotations

from ccbench.config import TestbedConfig
from ccbench.spec import Topology
from ccbench.testbed.base import Testbed


def make(cfg: TestbedConfig, topo: Topology) -> Testbed:
    if cfg.kind == "ssh":
        from ccbench.testbed.remote import RemoteTestbed

        return RemoteTestbed(cfg, topo)
    from ccbench.testbed.local import LocalTestbed

    return LocalTestbed(cfg, topo)


def down(tb_id: str) -> str:
    """Remove testbed `tb_id` of either kind, also a stale one; returns what was done."""
    import json

    from ccbench import safe
    from ccbench.testbed import local

    tb_id = safe.testbed_id(tb_id)
    st_path = local.STATE_ROOT / tb_id / "state.json"
    try:
        st = json.loads(st_path.read_text())
    except (OSError, ValueError):
        st = {}
    if st.get("kind") == "ssh":
        from ccbench.testbed.remote import RemoteTestbed

        RemoteTestbed(TestbedConfig(**st["testbed"]), Topology(**st["topology"])).down()
        return "remote loss rules removed"
    removed = local.down(tb_id)
    return f"removed {len(removed)} namespace(s)"
