"""The dumbbell model: node roles, links and the local addressing plan, per layout.

`routed` (the default; what profile.py requests on Emulab, checked by a test):

    s1 ─┐                                         ┌─ r1
    s2 ─┼─ rt1 ══[shaper + queue]══ dl ══ rt2 ────┼─ r2
    sN ─┘        (bottleneck egress)  (delay)     └─ rN

`macvlan` (local only; fewer hops, for rates near 1 Gbit/s on a few cores):

    s1 =┐                                   ┌= r1
    s2 =┼ hubs ── rt1 ══[shaper + queue]══ hubr ┼= r2
    sN =┘       (delay: ACKs in FORWARD)     └= rN

  Each host is a macvlan (bridge mode) on its side's hub, a namespace that holds only
  the lower end of one veth into rt1: a packet crosses 2 veths each way instead of 4
  and is forwarded once instead of three times. The delay element sits in rt1 and holds
  only what comes back from the receivers (delay_direction reverse): held data would be
  released into the shaper inside the element's verdicts, on its CPU.

Only the addresses differ from Emulab's, since the local plan lives inside private
namespaces. Local addresses come from 198.18.0.0/15, the range set aside for
benchmarking (RFC 2544): each testbed's namespaces are isolated, so every testbed
reuses the plan. Layouts are classes registered by name (`layout(name)`); nothing else
compares layout names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccbench.errors import registered

ROUTERS = ("rt1", "dl", "rt2")


def senders(pairs: int) -> list[str]:
    return [f"s{i}" for i in range(1, pairs + 1)]


def receivers(pairs: int) -> list[str]:
    return [f"r{i}" for i in range(1, pairs + 1)]


def nodes(pairs: int) -> list[str]:
    return [*senders(pairs), "rt1", "dl", "rt2", *receivers(pairs)]


def role(node: str) -> str:
    if node in ROUTERS:
        return {"rt1": "router", "dl": "delay", "rt2": "router"}[node]
    return {"s": "sender", "r": "receiver"}[node[0]]


@dataclass(frozen=True)
class Link:
    """A veth pair: (node a, its interface, its address/prefix) <-> (node b, ...); an
    address of None: that end has none (a hub's lower device)."""

    a: str
    a_if: str
    a_addr: str | None
    b: str
    b_if: str
    b_addr: str | None
    prefix: int = 30


@dataclass(frozen=True)
class Macvlan:
    """A host's interface: a macvlan in bridge mode on `hub`'s device `lower`."""

    node: str
    dev: str
    hub: str
    lower: str
    addr: str
    prefix: int = 24


LEFT_NET = "198.18.1.0/24"  # senders' side
CORE_A_NET = "198.18.2.0/30"  # rt1 <-> dl
CORE_B_NET = "198.18.3.0/30"  # dl <-> rt2
RIGHT_NET = "198.18.4.0/24"  # receivers' side


def _p2p(third: int, pair: int) -> tuple[str, str]:
    """Router-side and host-side address of the /30 for `pair` inside 198.18.<third>.0/24."""
    base = 4 * (pair - 1)
    return f"198.18.{third}.{base + 1}", f"198.18.{third}.{base + 2}"


def links(pairs: int) -> list[Link]:
    out = []
    for i in range(1, pairs + 1):
        rt, host = _p2p(1, i)
        out.append(Link(f"s{i}", "to-rt1", host, "rt1", f"to-s{i}", rt))
    out.append(Link("rt1", "to-dl", "198.18.2.1", "dl", "to-rt1", "198.18.2.2"))
    out.append(Link("dl", "to-rt2", "198.18.3.1", "rt2", "to-dl", "198.18.3.2"))
    for i in range(1, pairs + 1):
        rt, host = _p2p(4, i)
        out.append(Link("rt2", f"to-r{i}", rt, f"r{i}", "to-rt2", host))
    return out


def _host_index(node: str, pairs: int) -> int:
    i = int(node[1:])
    if not 1 <= i <= pairs:
        raise ValueError(f"{node} is not in a {pairs}-pair dumbbell")
    return i


def address(node: str, pairs: int) -> str:
    """The address a host is reached at (senders and receivers)."""
    return _p2p(1 if node[0] == "s" else 4, _host_index(node, pairs))[1]


def routes(pairs: int) -> dict[str, list[tuple[str, str]]]:
    """node -> [(destination, via)]; hosts use a default route."""
    r: dict[str, list[tuple[str, str]]] = {}
    for i in range(1, pairs + 1):
        r[f"s{i}"] = [("default", _p2p(1, i)[0])]
        r[f"r{i}"] = [("default", _p2p(4, i)[0])]
    r["rt1"] = [(RIGHT_NET, "198.18.2.2"), (CORE_B_NET, "198.18.2.2")]
    r["dl"] = [(LEFT_NET, "198.18.2.1"), (RIGHT_NET, "198.18.3.2")]
    r["rt2"] = [(LEFT_NET, "198.18.3.1"), (CORE_A_NET, "198.18.3.1")]
    return r


BOTTLENECK = ("rt1", "to-dl")  # (node, interface) where the shaper and queue sit
DELAY_IFS = ("to-rt1", "to-rt2")  # dl's interfaces (netem goes on both egresses)
# delay_direction reverse: the element sees only what comes from rt2 (r -> s), which
# leaves dl towards rt1.
DELAY_REVERSE_INGRESS, DELAY_REVERSE_EGRESS = "to-rt2", "to-rt1"


class Layout:
    """How the dumbbell's roles are laid out in namespaces. Every layout has senders
    s1..sN and receivers r1..rN at `address()`, rt1 holding the bottleneck, and one
    place for the delay element (`delay_node`)."""

    name: ClassVar[str]
    description: ClassVar[str]
    delay_directions: ClassVar[tuple[str, ...]]  # testbed.delay_direction values offered
    directions_why: ClassVar[str] = ""  # why the others are not
    bottleneck: ClassVar[tuple[str, str]]  # (node, interface): shaper + queue on its egress
    delay_node: ClassVar[str]
    forwarders: ClassVar[tuple[str, ...]]  # namespaces that route (ip_forward on)

    def nodes(self, pairs: int) -> list[str]:
        raise NotImplementedError

    def links(self, pairs: int) -> list[Link]:
        """The veth pairs."""
        raise NotImplementedError

    def macvlans(self, pairs: int) -> list[Macvlan]:
        """Hosts attached as macvlans on a hub (none by default)."""
        return []

    def address(self, node: str, pairs: int) -> str:
        raise NotImplementedError

    def routes(self, pairs: int) -> dict[str, list[tuple[str, str]]]:
        raise NotImplementedError

    def delay_egress(self, reverse: bool) -> tuple[str, ...]:
        """delay_node's devices whose egress carries netem's delay."""
        raise NotImplementedError

    def delay_ingress(self, reverse: bool) -> str | None:
        """The device whose arrivals go to the native delay element (None: all that is
        forwarded)."""
        raise NotImplementedError

    def on_releaser_cpu(self, node: str, dev: str) -> bool:
        """Whether `dev`'s receive processing (RPS) goes to the delay element's
        releaser's CPU (the last) rather than to the others."""
        return False

    def stacked(self, pairs: int) -> dict[str, str]:
        """'<node> <dev>' of each macvlan -> '<hub> <lower>' it transmits through (the
        loss ledger counts a lower device's drop once, not again as its macvlan's)."""
        return {f"{m.node} {m.dev}": f"{m.hub} {m.lower}" for m in self.macvlans(pairs)}


class RoutedLayout(Layout):
    name = "routed"
    description = "s_i -> rt1 -> dl -> rt2 -> r_i, a veth per hop (as the seeds' Emulab dumbbell)"
    delay_directions = ("both", "reverse")
    bottleneck = BOTTLENECK
    delay_node = "dl"
    forwarders = ROUTERS

    def nodes(self, pairs: int) -> list[str]:
        return nodes(pairs)

    def links(self, pairs: int) -> list[Link]:
        return links(pairs)

    def address(self, node: str, pairs: int) -> str:
        return address(node, pairs)

    def routes(self, pairs: int) -> dict[str, list[tuple[str, str]]]:
        return routes(pairs)

    def delay_egress(self, reverse: bool) -> tuple[str, ...]:
        return (DELAY_REVERSE_EGRESS,) if reverse else DELAY_IFS

    def delay_ingress(self, reverse: bool) -> str | None:
        return DELAY_REVERSE_INGRESS if reverse else None


SENDER_HUB, RECEIVER_HUB = "hubs", "hubr"
HOST_DEV = "mv0"  # every host's one interface in the macvlan layout


class MacvlanLayout(Layout):
    name = "macvlan"
    description = (
        "s_i, r_i macvlans on a hub each side -> rt1 (shaper, delay element): 2 veths and "
        "1 forwarding step each way"
    )
    delay_directions = ("reverse",)
    directions_why = (
        "its delay element sits in rt1, where held data would enter the shaper inside the "
        "element's releases, on its CPU (measured: 24-64 % of packets late at 1 Gbit/s)"
    )
    bottleneck = ("rt1", f"to-{RECEIVER_HUB}")
    delay_node = "rt1"
    forwarders = ("rt1",)

    def nodes(self, pairs: int) -> list[str]:
        return [*senders(pairs), SENDER_HUB, "rt1", RECEIVER_HUB, *receivers(pairs)]

    def links(self, pairs: int) -> list[Link]:
        return [
            Link(SENDER_HUB, "to-rt1", None, "rt1", f"to-{SENDER_HUB}", "198.18.1.1", 24),
            Link("rt1", f"to-{RECEIVER_HUB}", "198.18.4.1", RECEIVER_HUB, "to-rt1", None, 24),
        ]

    def macvlans(self, pairs: int) -> list[Macvlan]:
        out = [Macvlan(f"s{i}", HOST_DEV, SENDER_HUB, "to-rt1", self.address(f"s{i}", pairs))
               for i in range(1, pairs + 1)]  # fmt: skip
        out += [Macvlan(f"r{i}", HOST_DEV, RECEIVER_HUB, "to-rt1", self.address(f"r{i}", pairs))
                for i in range(1, pairs + 1)]  # fmt: skip
        return out

    def address(self, node: str, pairs: int) -> str:
        # One /24 per side: rt1 is .1, host i is .(i + 1).
        return f"198.18.{1 if node[0] == 's' else 4}.{_host_index(node, pairs) + 1}"

    def routes(self, pairs: int) -> dict[str, list[tuple[str, str]]]:
        r: dict[str, list[tuple[str, str]]] = {}
        for i in range(1, pairs + 1):
            r[f"s{i}"] = [("default", "198.18.1.1")]
            r[f"r{i}"] = [("default", "198.18.4.1")]
        return r

    def delay_egress(self, reverse: bool) -> tuple[str, ...]:
        return (f"to-{SENDER_HUB}",)  # reverse only: rt1's egress toward the senders

    def delay_ingress(self, reverse: bool) -> str | None:
        return f"to-{RECEIVER_HUB}"  # the receivers' ACKs entering rt1

    def on_releaser_cpu(self, node: str, dev: str) -> bool:
        # Measured on 2 vCPUs (docs/fidelity.md): only rt1's data ingress (forwarding
        # into the shaper, its watchdog) keeps the other CPUs; the hubs' receive and
        # the ACKs into rt1 go to the releaser's CPU, or CPU 0's backlog becomes a
        # hidden queue.
        return (node, dev) != ("rt1", f"to-{SENDER_HUB}")


LAYOUTS: dict[str, Layout] = {x.name: x for x in (RoutedLayout(), MacvlanLayout())}
NAMES = tuple(LAYOUTS)
DEFAULT = "routed"


def layout(name: str) -> Layout:
    return registered(LAYOUTS, name, "testbed.layout", "layout")
