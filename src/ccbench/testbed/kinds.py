"""Testbed kinds, as classes registered by name, each declaring what it can do.

Everything that depends on the kind of testbed asks its class here (`kind(name)`):
whether it needs root, whether its senders run this machine's kernel, which sender
OSes it hosts, how many dumbbells it has. No other module compares kind names.
Adding a kind (a VM per node, say) is one class here and its Testbed implementation.

Standard library only (and ccbench.topology and ccbench.safe, which are): the CLI asks
`needs_root` before anything heavy is imported. A TestbedConfig (what a config's
`testbed` section asks for) is checked against its kind here; ccbench.spec, which
describes runs, imports no testbed module.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from ccbench import safe, topology
from ccbench.errors import CcbenchError, registered

# The most dumbbells a comparison may spread its runs over: one Snakemake resource per
# dumbbell keeps runs on one dumbbell one at a time (rules/common.smk).
MAX_DUMBBELLS = 4


@dataclass(frozen=True)
class Capabilities:
    needs_root: bool  # builds namespaces on this machine
    senders_here: bool  # the senders run this machine's kernel and tools
    one_kernel: bool  # every sender runs the same kernel: reading one reads all
    nic_records: bool  # nodes have NICs whose start-up scripts recorded them
    needs_inventory: bool  # its hosts come from an inventory file
    oses: tuple[str, ...]  # sender OSes it hosts
    delay_directions: tuple[str, ...]  # testbed.delay_direction values it supports
    layouts: tuple[str, ...]  # testbed.layout values it builds (ccbench.topology)
    dumbbells: int  # most independent dumbbells
    # Calibration times pings on this machine's CPU: no other job may run beside it.
    exclusive_calibration: bool
    # Its dumbbells share hosts (a lab's sender sets send to the same receivers): their
    # runs take turns, as one dumbbell's do (rules/common.smk).
    dumbbells_share_hosts: bool = False
    # It builds every data interface of the path with the topology's MTU (a variant's
    # `host.mtu` gives its runs a testbed of that MTU).
    sets_mtu: bool = False


def _load(path: str) -> Any:
    """'package.module:name' -> the object (the implementations are loaded when a kind
    is used, so this registry stays below them in the package's layers)."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


class TestbedKind:
    name: ClassVar[str]
    caps: ClassVar[Capabilities]
    description: ClassVar[str]
    testbed_class: ClassVar[str]  # 'module:Class' of its Testbed (base.Testbed protocol)
    remover: ClassVar[str]  # 'module:function(tb_id, state) -> what was done'
    # 'module:function(path, dumbbell) -> sender/receiver pairs' of its inventory format
    inventory_reader: ClassVar[str] = "ccbench.inventory:pairs_in"
    # Its hosts are booked with profile.py (`ccbench matrix` lists what to instantiate),
    # and how its inventory comes to be.
    booked_by_profile: ClassVar[bool] = False
    inventory_hint: ClassVar[str] = "it can be made once the experiment exists"

    @staticmethod
    def load(path: str) -> Any:
        """One of its 'module:name' implementations (testbed_class, remover, ...):
        ccbench.testbed.manage makes the Testbed, typed there."""
        return _load(path)

    def down(self, tb_id: str, state: dict[str, Any]) -> str:
        """Remove testbed `tb_id` (its state.json as `state`, {} if none); what was done."""
        return str(_load(self.remover)(tb_id, state))

    def inventory_pairs(self, path: str, dumbbell: int) -> int:
        """The pairs `dumbbell` of inventory `path` holds (CcbenchError if unusable)."""
        return int(_load(self.inventory_reader)(path, dumbbell))

    def check_delay_direction(self, direction: str) -> None:
        if direction not in self.caps.delay_directions:
            raise CcbenchError(
                f"testbed.delay_direction: {direction} is not for a {self.name} testbed "
                f"(it supports: {', '.join(self.caps.delay_directions)}); "
                + self.delay_direction_hint
            )

    delay_direction_hint: ClassVar[str] = ""

    def check_layout(self, name: str, direction: str) -> None:
        """testbed.layout: one this kind builds, with a delay direction it offers."""
        lay = topology.layout(name)
        if name not in self.caps.layouts:
            raise CcbenchError(
                f"testbed.layout: {name} is not for a {self.name} testbed "
                f"(it builds: {', '.join(self.caps.layouts)})"
            )
        if direction not in lay.delay_directions:
            raise CcbenchError(
                f"testbed.layout: {name} needs testbed.delay_direction "
                f"{' or '.join(lay.delay_directions)}, not {direction}: {lay.directions_why}"
            )


class LocalKind(TestbedKind):
    name = "local"
    description = "network namespaces on this machine"
    caps = Capabilities(
        needs_root=True, senders_here=True, one_kernel=True, nic_records=False,
        needs_inventory=False, oses=("linux",), delay_directions=("both", "reverse"),
        layouts=topology.NAMES, dumbbells=1, exclusive_calibration=True, sets_mtu=True,
    )  # fmt: skip
    testbed_class = "ccbench.testbed.local:LocalTestbed"
    remover = "ccbench.testbed.local:down_from_state"


class SshKind(TestbedKind):
    name = "ssh"
    description = "hosts of an Emulab/CloudLab experiment (or any SSH hosts) from an inventory"
    caps = Capabilities(
        needs_root=False, senders_here=False, one_kernel=False, nic_records=True,
        needs_inventory=True, oses=("linux", "freebsd"), delay_directions=("both",),
        layouts=(topology.DEFAULT,), dumbbells=MAX_DUMBBELLS, exclusive_calibration=False,
    )  # fmt: skip
    delay_direction_hint = "on Emulab the delay node's dummynet pipes set the delay (profile.py)"
    booked_by_profile = True
    testbed_class = "ccbench.testbed.remote:RemoteTestbed"
    remover = "ccbench.testbed.remote:down_from_state"


class LabKind(TestbedKind):
    name = "lab"
    description = (
        "your own hosts over SSH from a lab inventory: senders, receivers (one may serve "
        "several senders), an optional router, emulation on the receivers (docs/lab.md)"
    )
    caps = Capabilities(
        needs_root=False, senders_here=False, one_kernel=False, nic_records=False,
        needs_inventory=True, oses=("linux", "freebsd"), delay_directions=("both",),
        layouts=(topology.DEFAULT,), dumbbells=MAX_DUMBBELLS, exclusive_calibration=False,
        dumbbells_share_hosts=True,
    )  # fmt: skip
    delay_direction_hint = "in a lab the inventory's emulation.delay says where the delay sits"
    testbed_class = "ccbench.testbed.lab:LabTestbed"
    remover = "ccbench.testbed.lab:down_from_state"
    inventory_reader = "ccbench.lab_inventory:pairs_in"
    inventory_hint = "it is written by hand (docs/lab.md)"


REGISTRY: dict[str, TestbedKind] = {k.name: k for k in (LocalKind(), SshKind(), LabKind())}
NAMES = tuple(REGISTRY)
DEFAULT = "local"  # what a config without testbed.kind means, and a testbed with no state


def kind(name: str, kinds: Mapping[str, TestbedKind] = REGISTRY) -> TestbedKind:
    """Kind `name` of `kinds` (the package's registry unless a caller brings its own)."""
    return registered(kinds, name, "testbed.kind", "kind")


@dataclass(frozen=True)
class TestbedConfig:
    """Where runs happen: what `ccbench testbed up` builds (or, on SSH hosts, readies)."""

    kind: str = DEFAULT
    id: str = "ccb"
    delay: str = "auto"
    delay_direction: str = "both"
    shaper: str = "tbf"
    tools: str = "host"
    inventory: str | None = None
    dumbbell: int = 1
    layout: str = topology.DEFAULT  # ccbench.topology's layouts; the seeds' shape

    def __post_init__(self) -> None:
        # Whatever the source (config, matrix, state file, --id), the id names
        # namespaces and a state directory: check it before anything uses it.
        safe.testbed_id(self.id, "testbed.id")
        kind(self.kind).check_delay_direction(self.delay_direction)
        kind(self.kind).check_layout(self.layout, self.delay_direction)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TestbedConfig:
        if not isinstance(d, dict):
            raise CcbenchError("testbed: not a mapping")
        unknown = set(d) - set(TestbedConfig.__dataclass_fields__)
        if unknown:
            raise CcbenchError(f"testbed: unknown keys {', '.join(sorted(unknown))}")
        return TestbedConfig(**d)

    def to_dict(self) -> dict[str, Any]:
        """As matrix.json and state files hold it: the defaults of later keys
        (delay_direction, inventory, layout) left out, so older files read back the same."""
        d = asdict(self)
        if self.delay_direction == "both":
            del d["delay_direction"]
        if self.layout == topology.DEFAULT:
            del d["layout"]
        if self.inventory is None:
            del d["inventory"]
        return d
