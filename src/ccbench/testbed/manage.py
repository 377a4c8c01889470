"""Making, removing and finding testbeds of any kind: what `testbed up/down/status`
and a run ask before they hold a Testbed. The kinds registry (ccbench.testbed.kinds)
is passed in where a caller brings its own set (a test's fake kind); the package's is
the default."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from ccbench import safe
from ccbench.errors import CcbenchError
from ccbench.jsonio import read_json
from ccbench.spec import Topology
from ccbench.testbed import base, local
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import DEFAULT, REGISTRY, TestbedConfig, TestbedKind, kind


def make(cfg: TestbedConfig, topo: Topology,
         kinds: Mapping[str, TestbedKind] = REGISTRY) -> Testbed:  # fmt: skip
    k = kind(cfg.kind, kinds)
    t: Testbed = k.load(k.testbed_class)(cfg, topo)
    return t


def down(tb_id: str, kinds: Mapping[str, TestbedKind] = REGISTRY) -> str:
    """Remove testbed `tb_id` of any kind, also a stale one; returns what was done. A
    testbed without a readable state is the default kind's (namespaces may outlive it)."""
    tb_id = safe.testbed_id(tb_id)
    st = _state(tb_id)
    return kind(st.get("kind", DEFAULT), kinds).down(tb_id, st)


class Downed(NamedTuple):
    """One testbed's `down`: what was done, or (not `ok`) why it is not as found."""

    id: str
    said: str
    ok: bool


def down_each(ids: Iterable[str], kinds: Mapping[str, TestbedKind] = REGISTRY) -> Iterator[Downed]:
    """`down` of every testbed in `ids`, each tried whatever the one before left (`down
    --all`: one lab host gone must not keep the other testbeds up); each result as it
    comes, its line naming the testbed."""
    for tb_id in ids:
        try:
            yield Downed(tb_id, down(tb_id, kinds), True)
        except CcbenchError as e:
            said = str(e) if str(e).startswith(f"testbed {tb_id}:") else f"testbed {tb_id}: {e}"
            yield Downed(tb_id, said, False)


class Found(NamedTuple):
    """A testbed found on this machine, as `testbed status` lists it."""

    id: str
    kind: str
    complete: bool  # its state says it was built and calibrated
    namespaces: int


def found() -> list[Found]:
    """Every testbed ccbench has here: namespaces (local) and state directories (any
    kind)."""
    out = []
    for tb_id in local.all_ids():
        st = _state(tb_id)
        out.append(Found(tb_id, str(st.get("kind", DEFAULT)), bool(st.get("complete")),
                         len(local.list_namespaces(local.ns_prefix(tb_id)))))  # fmt: skip
    return out


def _state(tb_id: str) -> dict[str, Any]:
    """Testbed `tb_id`'s state.json; {} when it has none or it cannot be read."""
    st = read_json(base.STATE_ROOT / tb_id / "state.json")
    return st if isinstance(st, dict) else {}
