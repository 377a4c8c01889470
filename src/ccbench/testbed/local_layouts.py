"""The local dumbbell's command plans, per layout (ccbench.topology): what `testbed up`
runs to build it, where the delay element goes, and what calibration reads back and
accepts (offloads by device kind, the qdisc of every device).

Pure: argv lists out, nothing started here (ccbench.testbed.local runs the plans), so
the unit tests check each layout's exact plan.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ccbench.hosts.linux import OFFLOADS, LinuxHost
from ccbench.hosts.settings import LinuxSettings
from ccbench.spec import Topology
from ccbench.topology import Layout


@dataclass(frozen=True)
class Cmd:
    """`argv` in `node`'s namespace (None: on the host)."""

    node: str | None
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Write:
    """`text` written to `path` as `node`'s namespace sees it (its /sys)."""

    node: str
    path: str
    text: str


Step = Cmd | Write


@dataclass(frozen=True)
class BuildPlan:
    """Building a layout, in order. `bottleneck` is apart: its failure may mean the
    kernel lacks the queue kind (the caller says so)."""

    namespaces: list[str]  # nodes, in creation order
    links: list[Step] = field(default_factory=list)
    nodes: list[Step] = field(default_factory=list)
    routes: list[Step] = field(default_factory=list)
    bottleneck: list[Step] = field(default_factory=list)
    loss: list[Step] = field(default_factory=list)


def _cmd(node: str | None, argv: list[str]) -> Cmd:
    return Cmd(node, tuple(argv))


def spare_mask(cpus: int) -> str:
    """Every CPU but the last (CPU 0 where there are at most 2)."""
    return format((1 << max(1, cpus - 1)) - 1, "x")


def releaser_mask(cpus: int) -> str:
    """The last CPU: the delay element's releaser's own."""
    return format(1 << max(0, cpus - 1), "x")


def rps_mask(lay: Layout, node: str, dev: str, cpus: int) -> str:
    """Where `dev`'s receive processing runs (RPS). One set per device stops reordering
    (net/core/dev.c get_rps_cpu: a flow's packets stay on one CPU); the last CPU is
    the releaser's, which forwards what it releases inside
    its verdicts (native/ccdelay/README.md), so by default receive work stays off it;
    a layout may give it devices whose work would otherwise queue behind the data's."""
    return releaser_mask(cpus) if lay.on_releaser_cpu(node, dev) else spare_mask(cpus)


def _end(lay: Layout, node: str, dev: str, addr: str | None, prefix: int, topo: Topology,
         host: LinuxHost, cpus: int) -> list[Step]:  # fmt: skip
    """One veth end: address, MTU, offloads off, RPS, up."""
    out: list[Step] = []
    if addr is not None:
        out.append(_cmd(node, ["ip", "addr", "add", f"{addr}/{prefix}", "dev", dev]))
    out += [
        _cmd(node, ["ip", "link", "set", dev, "mtu", str(topo.mtu)]),
        _cmd(node, host.offloads_off(dev)),
        Write(node, f"/sys/class/net/{dev}/queues/rx-0/rps_cpus", rps_mask(lay, node, dev, cpus)),
        _cmd(node, ["ip", "link", "set", dev, "up"]),
    ]
    return out


def build_plan(lay: Layout, ns: Callable[[str], str], topo: Topology, host: LinuxHost,
               shaper: str, cpus: int) -> BuildPlan:  # fmt: skip
    """Every command that builds `lay` for `topo`; `ns(node)` names a node's namespace."""
    pairs = topo.pairs
    plan = BuildPlan(namespaces=lay.nodes(pairs))
    for ln in lay.links(pairs):
        # Both ends made directly inside their namespaces: no names on the host.
        add = ["ip", "link", "add", ln.a_if, "netns", ns(ln.a), "type", "veth", "peer",
               "name", ln.b_if, "netns", ns(ln.b)]  # fmt: skip
        plan.links.append(_cmd(None, add))
        for node, dev, addr in ((ln.a, ln.a_if, ln.a_addr), (ln.b, ln.b_if, ln.b_addr)):
            plan.links.extend(_end(lay, node, dev, addr, ln.prefix, topo, host, cpus))
    for m in lay.macvlans(pairs):
        # Made by the hub on its lower device, straight into the host's namespace. No
        # RPS of its own: a macvlan receives inside its lower device's processing.
        plan.links.extend([
            _cmd(m.hub, ["ip", "link", "add", "link", m.lower, "name", m.dev, "netns",
                         ns(m.node), "type", "macvlan", "mode", "bridge"]),
            _cmd(m.node, ["ip", "addr", "add", f"{m.addr}/{m.prefix}", "dev", m.dev]),
            _cmd(m.node, ["ip", "link", "set", m.dev, "mtu", str(topo.mtu)]),
            _cmd(m.node, host.offloads_off(m.dev)),
            _cmd(m.node, ["ip", "link", "set", m.dev, "up"]),
        ])  # fmt: skip
    roles = lay.roles(pairs)
    hosts = set(roles.hosts)
    for node in lay.nodes(pairs):
        plan.nodes.append(_cmd(node, ["ip", "link", "set", "lo", "up"]))
        if node in lay.forwarders:
            plan.nodes.extend(_cmd(node, a) for a in host.forwarding())
        elif node in hosts:
            plan.nodes.extend(_cmd(node, a) for a in host.tune(netns_local=True))
    for node, rts in lay.routes(pairs).items():
        plan.routes.extend(_cmd(node, ["ip", "route", "add", d, "via", v]) for d, v in rts)
    node, dev = lay.bottleneck
    plan.bottleneck.extend(_cmd(node, a) for a in host.bottleneck(dev, topo, shaper)[1:])
    for node in roles.loss.nodes:
        plan.loss.extend(_cmd(node, a) for a in host.loss(topo, roles.loss.chain))
    return plan


# --- the delay --------------------------------------------------------------------


def one_way_ms(rtt_ms: float, reverse: bool) -> float:
    """The delay per direction that carries it: all of the RTT on r -> s, or half."""
    return rtt_ms if reverse else rtt_ms / 2


def netem_plan(lay: Layout, reverse: bool, delay_ms: float, host: LinuxHost) -> list[Cmd]:
    return [_cmd(lay.delay_node, a) for dev in lay.delay_egress(reverse)
            for a in host.netem_delay(dev, delay_ms)[1:]]  # fmt: skip


def ccdelay_argv(binary: str, delay_ms: float, stats: Path, last_cpu: int) -> list[str]:
    # Real-time priority keeps releases on time when iperf3 loads both cores
    # (native/ccdelay/README.md, Fidelity).
    return [binary, "--queue", "0", "--delay-us", str(round(delay_ms * 1000)), "--stats",
            str(stats), "--rt-prio", "10", "--cpu", f"0,{last_cpu}"]  # fmt: skip


def nfqueue_plan(lay: Layout, reverse: bool, host: LinuxHost) -> Cmd:
    """What sends packets to the native element: every forwarded one, or one direction's."""
    return _cmd(lay.delay_node, host.nfqueue_forwarded(0, lay.delay_ingress(reverse)))


# --- calibration read-backs ---------------------------------------------------------

VETH, MACVLAN = "veth", "macvlan"
# Why the read-back accepts what it does (the calibration record says it).
OFFLOAD_RULE = {
    VETH: "tso, gso and gro off on every veth end: the queues hold MTU frames",
    MACVLAN: (
        "gso and gro off on every macvlan; its tso stays 'on [fixed]' (the kernel does not "
        "let a macvlan's TSO be turned off), so senders build TSO-sized packets that are "
        "segmented in software at the hub's veth (tso/gso off): every queue still holds "
        "MTU frames"
    ),
}


def offload_devices(lay: Layout, pairs: int) -> list[tuple[str, str, str]]:
    """(node, device, kind) of every device whose offloads are read back."""
    out = [(n, d, VETH) for ln in lay.links(pairs) for n, d in ((ln.a, ln.a_if), (ln.b, ln.b_if))]
    return out + [(m.node, m.dev, MACVLAN) for m in lay.macvlans(pairs)]


# What the kernel will not turn off, per device kind, and so is accepted as "on [fixed]".
FIXED_ON = {VETH: (), MACVLAN: ("tso",)}


def offload_problem(where: str, dev_kind: str, state: dict[str, str]) -> str | None:
    """A device whose offloads (ethtool -k, as parsed) are not what its kind allows."""
    missing = [k for k in OFFLOADS if k not in state]
    if missing:
        return f"{where}: offloads not read back: {', '.join(missing)}"
    fixed = FIXED_ON[dev_kind]
    on = [
        k for k, v in state.items() if v.startswith("on") and not (k in fixed and v == "on [fixed]")
    ]
    return f"{where}: offloads still on: {', '.join(on)}" if on else None


def offload_state(ethtool_k: str) -> dict[str, str]:
    """`ethtool -k` -> {tso, gso, gro: their state as printed, e.g. 'off'}, read as
    every Linux endpoint's (hosts.settings.LinuxSettings.offloads_of: a macvlan's tso
    reads 'on [fixed]')."""
    read = LinuxSettings().offloads_of(ethtool_k)
    return {k: read[k] for k in OFFLOADS if k in read}


QDISCS_ARGV = ("tc", "-j", "qdisc", "show")  # every device of a namespace


def queue_devices(lay: Layout, netem: bool, reverse: bool) -> dict[tuple[str, str], str]:
    """(node, device) -> what may queue there: the bottleneck's shaper and queue, and
    netem's delay where netem carries it. Every other device must have no qdisc."""
    allowed = {lay.bottleneck: "the bottleneck"}
    if netem:
        allowed.update({(lay.delay_node, d): "netem" for d in lay.delay_egress(reverse)})
    return allowed


def queue_problems(node: str, tc_json: str, allowed: dict[tuple[str, str], str]
                   ) -> tuple[dict[str, list[str]], list[str]]:  # fmt: skip
    """`tc -j qdisc show` of `node` -> ({dev: [qdisc kinds]}, problems): a device with
    any qdisc but noqueue, other than the bottleneck (and netem's), is a queue the
    configured path does not have."""
    try:
        qdiscs = json.loads(tc_json)
    except ValueError:
        return {}, [f"{node}: tc -j qdisc show: not JSON"]
    seen: dict[str, list[str]] = {}
    for q in qdiscs if isinstance(qdiscs, list) else []:
        if isinstance(q, dict):
            seen.setdefault(str(q.get("dev")), []).append(str(q.get("kind")))
    problems = []
    for dev, kinds in sorted(seen.items()):
        what = allowed.get((node, dev))
        if what == "netem":
            extra = [k for k in kinds if k != "netem"]
        elif what is None:
            extra = [k for k in kinds if k != "noqueue"]
        else:
            extra = []
        if extra:
            problems.append(f"{node}/{dev}: a queue outside the bottleneck ({', '.join(extra)})")
    return seen, problems
