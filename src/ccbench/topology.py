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
compares layout names. The node names are ccbench.roles'; each layout gives its roles
(`Layout.roles`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ccbench import roles
from ccbench.errors import registered
from ccbench.roles import (
    BOTTLENECK_ROUTER,
    DELAY_NODE,
    FAR_ROUTER,
    ROUTERS,
    Bottleneck,
    LocalElement,
    Roles,
    receiver,
    receivers,
    sender,
    senders,
)

RT1, DL, RT2 = BOTTLENECK_ROUTER, DELAY_NODE, FAR_ROUTER  # short, for the plans below


def to(node: str) -> str:
    """The name of an interface toward `node` (the loss ledger pairs veth ends by it)."""
    return f"to-{node}"


def nodes(pairs: int) -> list[str]:
    """The routed layout's nodes (profile.py's dumbbell has the same: test_profile)."""
    return [*senders(pairs), *ROUTERS, *receivers(pairs)]


role = roles.role  # what each node is, in profile.py's words


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
        out.append(Link(sender(i), to(RT1), host, RT1, to(sender(i)), rt))
    out.append(Link(RT1, to(DL), "198.18.2.1", DL, to(RT1), "198.18.2.2"))
    out.append(Link(DL, to(RT2), "198.18.3.1", RT2, to(DL), "198.18.3.2"))
    for i in range(1, pairs + 1):
        rt, host = _p2p(4, i)
        out.append(Link(RT2, to(receiver(i)), rt, receiver(i), to(RT2), host))
    return out


def _host_index(node: str, pairs: int) -> int:
    i = roles.pair_of(node)
    if i is None or not 1 <= i <= pairs:
        raise ValueError(f"{node} is not in a {pairs}-pair dumbbell")
    return i


def _side(node: str) -> int:
    """The third octet of a host's side: senders 198.18.1, receivers 198.18.4."""
    return 1 if roles.is_sender(node) else 4


def address(node: str, pairs: int) -> str:
    """The address a host is reached at (senders and receivers)."""
    return _p2p(_side(node), _host_index(node, pairs))[1]


def routes(pairs: int) -> dict[str, list[tuple[str, str]]]:
    """node -> [(destination, via)]; hosts use a default route."""
    r: dict[str, list[tuple[str, str]]] = {}
    for i in range(1, pairs + 1):
        r[sender(i)] = [("default", _p2p(1, i)[0])]
        r[receiver(i)] = [("default", _p2p(4, i)[0])]
    r[RT1] = [(RIGHT_NET, "198.18.2.2"), (CORE_B_NET, "198.18.2.2")]
    r[DL] = [(LEFT_NET, "198.18.2.1"), (RIGHT_NET, "198.18.3.2")]
    r[RT2] = [(LEFT_NET, "198.18.3.1"), (CORE_A_NET, "198.18.3.1")]
    return r


BOTTLENECK = (RT1, to(DL))  # (node, interface) where the shaper and queue sit
DELAY_IFS = (to(RT1), to(RT2))  # dl's interfaces (netem goes on both egresses)
# delay_direction reverse: the element sees only what comes from rt2 (r -> s), which
# leaves dl towards rt1.
DELAY_REVERSE_INGRESS, DELAY_REVERSE_EGRESS = to(RT2), to(RT1)


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
    # The highest rate (Mbit/s) at which every scenario docs/fidelity.md measured with
    # this layout ran valid on its 2-vCPU VM; None: none measured. A hidden queue in
    # another layout above that one's rate and at or below this names this layout
    # (validity.layout_hint).
    carries_mbit: ClassVar[float | None] = None

    def nodes(self, pairs: int) -> list[str]:
        raise NotImplementedError

    def roles(self, pairs: int) -> Roles:
        """The layout's roles: pairs s_i -> r_i, the bottleneck, the local delay element
        in `delay_node`, loss on the receivers."""
        return roles.dumbbell(pairs, Bottleneck(*self.bottleneck), LocalElement(self.delay_node))

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
    delay_node = DL
    forwarders = ROUTERS
    # docs/fidelity.md, "Layouts": all 30 paired runs valid at 100 Mbit/s
    # (bench/fidelity.py --paired, 2026-11-24); at 750 the envelope's 48-packet rows not.
    carries_mbit = 100.0

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
    bottleneck = (RT1, to(RECEIVER_HUB))
    delay_node = RT1
    forwarders = (RT1,)
    # docs/fidelity.md, "Layouts": bench/fidelity.py --envelope, 2026-11-24: 1 x cubic,
    # 2 x bbr and cubic + bbr 3/3 valid at 1000 Mbit/s; 2 x cubic through 48 packets
    # 6/6 with D-SACK counted, and config/examples/local-gigabit.yaml 6/6 (2026-11-25).
    carries_mbit = 1000.0

    def nodes(self, pairs: int) -> list[str]:
        return [*senders(pairs), SENDER_HUB, RT1, RECEIVER_HUB, *receivers(pairs)]

    def links(self, pairs: int) -> list[Link]:
        return [
            Link(SENDER_HUB, to(RT1), None, RT1, to(SENDER_HUB), "198.18.1.1", 24),
            Link(RT1, to(RECEIVER_HUB), "198.18.4.1", RECEIVER_HUB, to(RT1), None, 24),
        ]

    def macvlans(self, pairs: int) -> list[Macvlan]:
        out = [Macvlan(n, HOST_DEV, SENDER_HUB, to(RT1), self.address(n, pairs))
               for n in senders(pairs)]  # fmt: skip
        out += [Macvlan(n, HOST_DEV, RECEIVER_HUB, to(RT1), self.address(n, pairs))
                for n in receivers(pairs)]  # fmt: skip
        return out

    def address(self, node: str, pairs: int) -> str:
        # One /24 per side: rt1 is .1, host i is .(i + 1).
        return f"198.18.{_side(node)}.{_host_index(node, pairs) + 1}"

    def routes(self, pairs: int) -> dict[str, list[tuple[str, str]]]:
        r: dict[str, list[tuple[str, str]]] = {}
        for i in range(1, pairs + 1):
            r[sender(i)] = [("default", "198.18.1.1")]
            r[receiver(i)] = [("default", "198.18.4.1")]
        return r

    def delay_egress(self, reverse: bool) -> tuple[str, ...]:
        return (to(SENDER_HUB),)  # reverse only: rt1's egress toward the senders

    def delay_ingress(self, reverse: bool) -> str | None:
        return to(RECEIVER_HUB)  # the receivers' ACKs entering rt1

    def on_releaser_cpu(self, node: str, dev: str) -> bool:
        # Measured on 2 vCPUs (docs/fidelity.md): only rt1's data ingress (forwarding
        # into the shaper, its watchdog) keeps the other CPUs; the hubs' receive and
        # the ACKs into rt1 go to the releaser's CPU, or CPU 0's backlog becomes a
        # hidden queue.
        return (node, dev) != (RT1, to(SENDER_HUB))


LAYOUTS: dict[str, Layout] = {x.name: x for x in (RoutedLayout(), MacvlanLayout())}
NAMES = tuple(LAYOUTS)
DEFAULT = "routed"


def layout(name: str) -> Layout:
    return registered(LAYOUTS, name, "testbed.layout", "layout")
