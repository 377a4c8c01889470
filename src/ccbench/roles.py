"""The dumbbell's roles as typed values: which nodes send and receive, which node and
device hold the bottleneck, what delays the path and where loss is applied.

Nodes are named by their role: senders s1..sN and receivers r1..rN (pair i sends from
s_i to r_i), the bottleneck router rt1, the delay node dl and the far router rt2. The
names are written here once; other modules ask for them (`sender(i)`,
`BOTTLENECK_ROUTER`, `pair_of(node)`). A testbed exposes its `Roles`: the local layouts
(ccbench.topology) and the Emulab dumbbell (ccbench.testbed.remote) are instances.

Delay elements are classes registered by name (`delay_element(name, node)`); nothing
else compares their names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from ccbench.errors import registered

BOTTLENECK_ROUTER = "rt1"  # the senders' router: its egress toward the receivers shapes
DELAY_NODE = "dl"  # between the routers (routed layout, Emulab's dummynet bridge)
FAR_ROUTER = "rt2"  # the receivers' router
ROUTERS = (BOTTLENECK_ROUTER, DELAY_NODE, FAR_ROUTER)
_SENDER, _RECEIVER = "s", "r"
# Any role's name (a sender or receiver of any pair, or a router), as a regex.
NODE_PATTERN = rf"{_SENDER}\d+|{_RECEIVER}\d+|" + "|".join(ROUTERS)
_HOST = re.compile(rf"({_SENDER}|{_RECEIVER})(\d+)")
_ROUTER_ROLES = {BOTTLENECK_ROUTER: "router", DELAY_NODE: "delay", FAR_ROUTER: "router"}


def sender(pair: int) -> str:
    return f"{_SENDER}{pair}"


def receiver(pair: int) -> str:
    return f"{_RECEIVER}{pair}"


def senders(pairs: int) -> list[str]:
    return [sender(i) for i in range(1, pairs + 1)]


def receivers(pairs: int) -> list[str]:
    return [receiver(i) for i in range(1, pairs + 1)]


def pair_of(node: str) -> int | None:
    """The pair a sender or receiver belongs to (s3, r3: 3); None for a router."""
    m = _HOST.fullmatch(node)
    return int(m.group(2)) if m else None


def is_sender(node: str) -> bool:
    m = _HOST.fullmatch(node)
    return m is not None and m.group(1) == _SENDER


def is_receiver(node: str) -> bool:
    m = _HOST.fullmatch(node)
    return m is not None and m.group(1) == _RECEIVER


def role(node: str) -> str:
    """What a node is: sender, receiver, router or delay (profile.py's words)."""
    if node in _ROUTER_ROLES:
        return _ROUTER_ROLES[node]
    if pair_of(node) is None:
        raise ValueError(f"{node} is not a role of the dumbbell")
    return "sender" if is_sender(node) else "receiver"


@dataclass(frozen=True)
class Bottleneck:
    """The shaper and queue ccbench configures: the egress of `dev` on router `node`."""

    node: str
    dev: str


@dataclass(frozen=True)
class DelayElement:
    """What puts the configured RTT on the path, where it sits (`node`; None: nowhere
    ccbench reaches) and what it can report about itself."""

    name: ClassVar[str]
    description: ClassVar[str]
    # Statistics around each run (Testbed.snapshot_delay: delay-{before,after}.json).
    snapshots: ClassVar[bool] = False
    # Its configuration, read from its node at `up` (ccbench.delaynode).
    read_back: ClassVar[bool] = False

    node: str | None = None


@dataclass(frozen=True)
class LocalElement(DelayElement):
    name = "local"
    description = (
        "netem, or ccbench's own element (ccdelay) where the kernel has none, in the layout's "
        "delay namespace on this machine"
    )
    snapshots = True  # ccdelay's per-packet lateness, when it carries the delay


@dataclass(frozen=True)
class DummynetNode(DelayElement):
    name = "dummynet"  # also what the inventory gives as the delay node's os
    description = "Emulab's delay node: a FreeBSD dummynet bridge ccbench only reads"
    read_back = True  # kern.hz and its pipes


@dataclass(frozen=True)
class NoDelay(DelayElement):
    name = "none"
    description = "nothing added: the path's own delay (Emulab's link-shaping mode, say)"


# --- a lab of your own hosts (ccbench.testbed.lab): emulation on a receiver -----------
@dataclass(frozen=True)
class ReceiverNetem(DelayElement):
    name = "netem"
    description = (
        "netem on the receiver's interface (its egress: the ACK path), as seeds 000 and 001 "
        "did (`tc qdisc add dev IF root netem delay 40ms`)"
    )


@dataclass(frozen=True)
class ReceiverNetemIngress(DelayElement):
    name = "netem-ifb"
    description = "netem on an ifb the receiver's ingress is redirected to (the data path)"


@dataclass(frozen=True)
class ReceiverCcdelay(DelayElement):
    name = "ccdelay"
    description = (
        "ccbench's own element (ccdelay) at the receiver: NFQUEUE in its OUTPUT for the "
        "flows' ACKs and echo replies, where the host has no netem"
    )
    snapshots = True  # its per-packet lateness, fetched over SSH


# Where each lab element puts the delay (calibration's `delay_direction`).
LAB_DIRECTIONS = {ReceiverNetem.name: "reverse", ReceiverCcdelay.name: "reverse",
                  ReceiverNetemIngress.name: "forward", NoDelay.name: "none"}  # fmt: skip

DELAY_ELEMENTS: dict[str, type[DelayElement]] = {
    c.name: c for c in (LocalElement, DummynetNode, NoDelay)
}
# The elements a lab inventory may ask of its receivers (`emulation.delay`).
LAB_DELAY_ELEMENTS: dict[str, type[DelayElement]] = {
    c.name: c for c in (ReceiverNetem, ReceiverNetemIngress, ReceiverCcdelay, NoDelay)
}


def delay_element(name: str, node: str | None = None) -> DelayElement:
    return registered(DELAY_ELEMENTS, name, "delay element", "element")(node)


def lab_delay_element(name: str, node: str | None = None) -> DelayElement:
    return registered(LAB_DELAY_ELEMENTS, name, "emulation.delay", "element")(node)


def path_between(senders: tuple[str, ...], receivers: tuple[str, ...]) -> str:
    """A bottleneck ccbench does not control, as the report names it."""
    return (f"the network between {', '.join(senders)} and {', '.join(sorted(set(receivers)))}; "
            "its buffer is not known")  # fmt: skip


@dataclass(frozen=True)
class LossSite:
    """Where emulated loss is applied: iptables `statistic` rules in `chain` of these
    nodes (incoming TCP at the receivers, on the flows' ports only)."""

    nodes: tuple[str, ...]
    chain: str = "INPUT"
    tool: str = "iptables"  # a lab may ask nftables (ccbench.testbed.lab_plans.LOSS_TOOLS)


@dataclass(frozen=True)
class Roles:
    """A testbed's roles: who sends and receives, the bottleneck (None: one ccbench
    does not control), the delay element and where loss is applied."""

    senders: tuple[str, ...]
    receivers: tuple[str, ...]
    bottleneck: Bottleneck | None
    delay: DelayElement
    loss: LossSite
    # (pair, port): the server port a lab's sender pins (its inventory's `server_port`);
    # layout.flow_port decides every flow's port from these.
    pinned_ports: tuple[tuple[int, int], ...] = ()

    @property
    def pairs(self) -> int:
        return len(self.senders)

    def pinned_port(self, pair: int) -> int | None:
        return dict(self.pinned_ports).get(pair)

    @property
    def hosts(self) -> tuple[str, ...]:
        """The senders and the receivers (what runs TCP's ends)."""
        return (*self.senders, *self.receivers)

    def pair(self, i: int) -> tuple[str, str]:
        """(sender, receiver) of pair i (from 1)."""
        return self.senders[i - 1], self.receivers[i - 1]


def dumbbell(pairs: int, bottleneck: Bottleneck | None, delay: DelayElement) -> Roles:
    """The seeds' dumbbell: pairs s_i -> r_i, loss on the receivers' INPUT."""
    return Roles(tuple(senders(pairs)), tuple(receivers(pairs)), bottleneck, delay,
                 LossSite(tuple(receivers(pairs))))  # fmt: skip
