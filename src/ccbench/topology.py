"""The dumbbell model: node roles, links and the local addressing plan.

    s1 ─┐                                         ┌─ r1
    s2 ─┼─ rt1 ══[shaper + queue]══ dl ══ rt2 ────┼─ r2
    sN ─┘        (bottleneck egress)  (delay)     └─ rN

The same roles and links are what profile.py requests on Emulab (checked by a test);
only the addresses differ, since the local plan lives inside private namespaces.
Local addresses come from 198.18.0.0/15, the range set aside for benchmarking
(RFC 2544): each testbed's namespaces are isolated, so every testbed reuses the plan.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """A veth pair: (node a, its interface, its address/prefix) <-> (node b, ...)."""

    a: str
    a_if: str
    a_addr: str
    b: str
    b_if: str
    b_addr: str
    prefix: int = 30


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


def address(node: str, pairs: int) -> str:
    """The address a host is reached at (senders and receivers)."""
    i = int(node[1:])
    if not 1 <= i <= pairs:
        raise ValueError(f"{node} is not in a {pairs}-pair dumbbell")
    return _p2p(1 if node[0] == "s" else 4, i)[1]


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
