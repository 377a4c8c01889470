"""A lab of your own hosts (testbed.kind: lab): the hand-written inventory.

    ssh: {user: root, identity: ~/.ssh/id_ed25519, sudo: false, options: []}
    senders:
      s1: {host: n1fbsd.lan, os: freebsd, address: 192.168.50.37, receiver: r1}
      s2: {host: n1linux.lan, os: linux, address: 192.168.50.154, receiver: r1, server_port: 5203}
    receivers:
      r1: {host: n2linux.lan, address: 192.168.50.89}
    router: {host: edge.lan, address: 192.168.50.1}     # optional: ccbench shapes its egress
    emulation: {delay: netem, loss: iptables}          # on the receivers
    sender_sets:                                       # optional: more senders, by number
      2: {s1: {host: n1linux.lan, os: linux, address: 192.168.50.154, receiver: r1}}

Senders are s1..sN, receivers r1..rM (several senders may share one: each flow has its
own server port); `receiver` says where a sender sends, `server_port` optionally pins
the port its flow is served on (layout.flow_port: 5201, iperf3's default, .. 6201; two
senders of a set on one port are refused, as is a run giving a pinned sender two
flows). `emulation.delay` is a registered element (ccbench.roles.LAB_DELAY_ELEMENTS:
netem, netem-ifb, ccdelay, none) and `emulation.loss` a registered tool
(testbed.lab_plans.LOSS_TOOLS: iptables, nftables); `emulation.ccdelay` is the element's
path on the receivers. `senders` is sender set 1; `sender_sets` may add others (2, 3,
...) sending to the same receivers: a variant's `dumbbell: N` runs on set N, so one
comparison can hold FreeBSD and Linux senders (seed 000). Sets take turns on the shared
receivers (testbed.kinds: dumbbells_share_hosts). Every problem is refused in one line
naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench import inventory, layout, roles
from ccbench.errors import CcbenchError
from ccbench.inventory import Node
from ccbench.roles import BOTTLENECK_ROUTER, LAB_DELAY_ELEMENTS, NoDelay
from ccbench.testbed.lab_plans import LOSS_TOOLS

OSES = ("linux", "freebsd")
_TOP_KEYS = {"ssh", "senders", "receivers", "router", "emulation", "sender_sets"}
_HOST_KEYS = {"host", "port", "user", "identity", "os", "address"}
_SENDER_KEYS = _HOST_KEYS | {"receiver", "server_port"}
_EMULATION_KEYS = {"delay", "loss", "ccdelay"}


@dataclass(frozen=True)
class LabSender:
    node: Node
    receiver: str  # the receiver's name in the inventory
    port: int | None = None  # a pinned server port (None: flow k's is BASE_PORT + k)


@dataclass(frozen=True)
class Emulation:
    """What ccbench emulates on the receivers."""

    delay: str = NoDelay.name  # a roles.LAB_DELAY_ELEMENTS name
    loss: str | None = "iptables"  # a lab_plans.LOSS_TOOLS name; None: no loss tool here
    ccdelay: str = "ccdelay"  # the element's path on the receivers


@dataclass(frozen=True)
class LabInventory:
    source: str
    sudo: bool
    user: str | None
    senders: tuple[LabSender, ...]  # the sender set in use (`set_no`)
    receivers: dict[str, Node]
    router: Node | None
    emulation: Emulation
    set_no: int = 1
    sets: tuple[int, ...] = (1,)  # every sender set the inventory has

    @property
    def hosts(self) -> dict[str, Node]:
        """Every host ccbench logs in to, by its name here."""
        out = {s.node.name: s.node for s in self.senders}
        out.update(self.receivers)
        if self.router is not None:
            out[self.router.name] = self.router
        return out

    def receiver_of(self, pair: int) -> str:
        """The receiver (its name here) that sender `pair` sends to."""
        return self.senders[pair - 1].receiver

    def as_ssh_inventory(self) -> inventory.Inventory:
        """The hosts as the SSH testbed's machinery holds them (one 'dumbbell')."""
        return inventory.Inventory({1: self.hosts}, sudo=self.sudo, source=self.source,
                                   user=self.user)  # fmt: skip


def _mapping(v: Any, where: str) -> dict[Any, Any]:
    if not isinstance(v, dict):
        raise CcbenchError(f"{where}: not a mapping")
    return v


def _host(where: str, name: str, n: Any, keys: set[str], ssh: dict[str, Any], port: int) -> Node:
    n = _mapping(n, where)
    if set(n) - keys:
        raise CcbenchError(f"{where}: unknown keys {', '.join(sorted(map(str, set(n) - keys)))}")
    if "host" not in n:
        raise CcbenchError(f"{where}: no host")
    os_name = n.get("os", "linux")
    if os_name not in OSES:
        raise CcbenchError(f"{where}: unknown os '{os_name}' (one of {', '.join(OSES)})")
    entry = {k: v for k, v in n.items() if k in _HOST_KEYS}
    return inventory.ssh_node(where, name, entry, ssh, port, os_name)


def _names(p: Path, section: str, data: Any, is_role: Any, first: str) -> dict[str, Any]:
    entries = _mapping(data, f"{p}: {section}") if data is not None else {}
    if not entries:
        raise CcbenchError(f"{p}: {section}: none listed (a lab needs at least {first})")
    for name in entries:
        if not isinstance(name, str) or not is_role(name):
            raise CcbenchError(f"{p}: {section}: '{name}' is not a role name ({first}, ...)")
    return entries


def _emulation(p: Path, data: Any) -> Emulation:
    e = _mapping(data, f"{p}: emulation") if data is not None else {}
    if set(e) - _EMULATION_KEYS:
        raise CcbenchError(f"{p}: emulation: unknown keys "
                           f"{', '.join(sorted(map(str, set(e) - _EMULATION_KEYS)))}")  # fmt: skip
    delay = e.get("delay", NoDelay.name)
    if delay not in LAB_DELAY_ELEMENTS:
        raise CcbenchError(f"{p}: emulation.delay: unknown element '{delay}' "
                           f"(one of {', '.join(LAB_DELAY_ELEMENTS)})")  # fmt: skip
    loss = e.get("loss", "iptables")
    if loss is not None and loss not in LOSS_TOOLS:
        raise CcbenchError(f"{p}: emulation.loss: unknown tool '{loss}' "
                           f"(one of {', '.join(LOSS_TOOLS)})")  # fmt: skip
    binary = e.get("ccdelay", "ccdelay")
    if not isinstance(binary, str) or not binary or binary.startswith("-"):
        raise CcbenchError(f"{p}: emulation.ccdelay: a path on the receivers")
    return Emulation(delay, loss, binary)


def load(path: str | Path, sender_set: int = 1) -> LabInventory:
    """Read and check a whole lab inventory before any ssh starts (module docstring),
    with sender set `sender_set` in use."""
    from ccbench.config import load_yaml

    p = Path(path)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such lab inventory")
    data = load_yaml(p)
    return parse(p, data, sender_set)


def parse(p: Path, data: dict[str, Any], sender_set: int = 1) -> LabInventory:
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise CcbenchError(f"{p}: unknown keys {', '.join(sorted(map(str, unknown)))}")
    ssh, port = inventory.ssh_section(p, data)
    first_s, first_r = roles.sender(1), roles.receiver(1)
    snd = _names(p, "senders", data.get("senders"), roles.is_sender, first_s)
    rcv = _names(p, "receivers", data.get("receivers"), roles.is_receiver, first_r)
    emu = _emulation(p, data.get("emulation"))
    receivers = {name: _host(f"{p}: receivers: {name}", name, n, _HOST_KEYS, ssh, port)
                 for name, n in rcv.items()}  # fmt: skip
    for name, node in receivers.items():
        _check_receiver(p, name, node, emu, "loss" in (data.get("emulation") or {}))
    sets = {1: _sender_set(p, "senders", snd, receivers, ssh, port)}
    more = _mapping(data["sender_sets"], f"{p}: sender_sets") if "sender_sets" in data else {}
    for n, entries in more.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 2:
            raise CcbenchError(f"{p}: sender_sets: {n!r} is not a set number from 2 "
                               "(set 1 is `senders`)")  # fmt: skip
        section = f"sender_sets.{n}"
        found = _names(p, section, entries, roles.is_sender, first_s)
        sets[n] = _sender_set(p, section, found, receivers, ssh, port)
    if sender_set not in sets:
        raise CcbenchError(f"{p}: no sender set {sender_set} (it has "
                           f"{', '.join(map(str, sorted(sets)))}; set 1 is `senders`)")  # fmt: skip
    router = None
    if data.get("router") is not None:
        router = _host(f"{p}: router", BOTTLENECK_ROUTER, data["router"], _HOST_KEYS, ssh, port)
        if router.os != "linux":
            raise CcbenchError(f"{p}: router: os '{router.os}' (ccbench configures a Linux "
                               "router's qdisc only)")  # fmt: skip
        if router.address is None:
            raise CcbenchError(f"{p}: router: no address (the one on its egress toward the "
                               "receivers, which is how its interface is found)")  # fmt: skip
    labs = {n: LabInventory(str(p), bool(ssh.get("sudo", False)), ssh.get("user"), senders,
                            receivers, router, emu, n, tuple(sorted(sets)))
            for n, senders in sets.items()}  # fmt: skip
    for lab in labs.values():
        _check_distinct(p, lab)
    return labs[sender_set]


def _sender_set(
    p: Path, section: str, snd: dict[str, Any], receivers: dict[str, Node],
    ssh: dict[str, Any], port: int,
) -> tuple[LabSender, ...]:  # fmt: skip
    """One set of senders s1..sN (`section` of the inventory), each with its receiver."""
    first_r = roles.receiver(1)
    senders = []
    for i in range(1, len(snd) + 1):
        name = roles.sender(i)
        if name not in snd:
            raise CcbenchError(f"{p}: {section}: {name} is missing (senders are s1..s{len(snd)})")
        entry = _mapping(snd[name], f"{p}: {section}: {name}")
        node = _host(f"{p}: {section}: {name}", name, entry, _SENDER_KEYS, ssh, port)
        to = entry.get("receiver", first_r if len(receivers) == 1 else None)
        if to is None:
            raise CcbenchError(f"{p}: {section}: {name}: no receiver (which of "
                               f"{', '.join(receivers)} it sends to)")  # fmt: skip
        if to not in receivers:
            raise CcbenchError(f"{p}: {section}: {name}: receiver '{to}' is not among the "
                               f"receivers ({', '.join(receivers)})")  # fmt: skip
        senders.append(LabSender(node, str(to), _server_port(p, name, entry.get("server_port"))))
    _check_ports(p, section, senders)
    return tuple(senders)


def _check_receiver(p: Path, name: str, node: Node, emu: Emulation, loss_asked: bool) -> None:
    """netem, ifb, NFQUEUE, iptables and nftables are Linux's: a FreeBSD receiver may
    only serve a real path."""
    where = f"{p}: receivers: {name}"
    if node.address is None:
        raise CcbenchError(f"{where}: no address (the one its senders send to)")
    if node.os == "linux":
        return
    if emu.delay != NoDelay.name:
        raise CcbenchError(f"{where}: emulation.delay {emu.delay} asked of a FreeBSD "
                           "receiver (it is Linux's; use delay: none there)")  # fmt: skip
    if loss_asked and emu.loss is not None:
        raise CcbenchError(f"{where}: emulation.loss {emu.loss} asked of a FreeBSD "
                           "receiver (it is Linux's; leave loss out)")  # fmt: skip


def _server_port(p: Path, name: str, port: Any) -> int | None:
    """A pinned port: iperf3's default (BASE_PORT, seed 001's 5201) or one of the flows'
    (.. BASE_PORT + MAX_FLOWS), the range the loss rule and the delay element cover
    (lab_plans.covered_ports); never a port of other services (ssh's among them)."""
    if port is None:
        return None
    lo, hi = layout.BASE_PORT, layout.BASE_PORT + layout.MAX_FLOWS
    if isinstance(port, bool) or not isinstance(port, int) or not lo <= port <= hi:
        raise CcbenchError(f"{p}: senders: {name}: server_port {port!r} is not a flow's port "
                           f"({lo}..{hi})")  # fmt: skip
    return port


def _check_ports(p: Path, section: str, senders: list[LabSender]) -> None:
    """The senders of a set are served on different ports (each sending one flow: flow
    i on sender i's pinned port or BASE_PORT + i, as layout.flow_port gives it)."""
    seen: dict[int, str] = {}
    for i, s in enumerate(senders, start=1):
        port = s.port if s.port is not None else layout.BASE_PORT + i
        if port in seen:
            raise CcbenchError(f"{p}: {section}: {seen[port]} and {s.node.name} on one server "
                               f"port ({port}): pin another with server_port")  # fmt: skip
        seen[port] = s.node.name


def _check_distinct(p: Path, lab: LabInventory) -> None:
    seen: dict[tuple[str, int], str] = {}
    for name, node in lab.hosts.items():
        key = (node.target.host, node.target.port)
        if key in seen:
            raise CcbenchError(f"{p}: {name}: same host and port as {seen[key]} "
                               f"({key[0]}:{key[1]})")  # fmt: skip
        seen[key] = name


def pairs_in(path: str, dumbbell: int) -> int:
    """The pairs of sender set `dumbbell`: one per sender (testbed.kinds)."""
    return len(load(path, dumbbell).senders)
