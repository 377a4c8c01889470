"""Testbeds: `local` (network namespaces on this machine) and `ssh` (real hosts)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

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
    from ccbench import safe
    from ccbench.testbed import local

    tb_id = safe.testbed_id(tb_id)
    st = _state(tb_id)
    if st.get("kind") == "ssh":
        from ccbench.testbed.remote import RemoteTestbed

        try:
            remote = RemoteTestbed(TestbedConfig(**st["testbed"]), Topology(**st["topology"]))
        except (TypeError, KeyError, ValueError) as e:
            # Which hosts it used is not readable: its state goes, the hosts are not
            # touched (`up` then `down` with its config removes what it left there).
            safe.remove_tree(local.STATE_ROOT / tb_id, local.STATE_ROOT)
            return (f"state.json was damaged ({type(e).__name__}: {e}): removed it; loss "
                    "rules it left on its SSH hosts, if any, stay until `testbed up` and "
                    "`down` with its config")  # fmt: skip
        remote.down()
        return "remote loss rules removed"
    removed = local.down(tb_id)
    return f"removed {len(removed)} namespace(s)"


class Found(NamedTuple):
    """A testbed found on this machine, as `testbed status` lists it."""

    id: str
    complete: bool  # its state says it was built and calibrated
    namespaces: int


def found() -> list[Found]:
    """Every testbed ccbench has here (local.all_ids: namespaces and state directories)."""
    from ccbench.testbed import local

    return [
        Found(tb_id, bool(_state(tb_id).get("complete")),
              len(local.list_namespaces(local.ns_prefix(tb_id))))
        for tb_id in local.all_ids()
    ]  # fmt: skip


def _state(tb_id: str) -> dict[str, Any]:
    """Testbed `tb_id`'s state.json; {} when it has none or it cannot be read."""
    from ccbench.testbed import local

    try:
        st = json.loads((local.STATE_ROOT / tb_id / "state.json").read_text())
    except (OSError, ValueError):
        return {}
    return st if isinstance(st, dict) else {}
