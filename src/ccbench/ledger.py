"""The loss ledger: every packet a run lost, by where it was lost.

A run's numbers are the configured path's only if the path's configured elements (the
bottleneck queue and shaper on rt1, the loss rules at the receivers) are the only
places that dropped packets. Before and after each run, the testbed snapshots the drop
counters of every place a packet can be lost (`drops-before.json`, `drops-after.json`):
each node's interfaces (rx/tx dropped and errors), the kernel's per-CPU backlogs
(softnet_stat), the loss rules' iptables counters, and on Emulab the delay node's
dummynet pipes. The delay element's own drops come from its statistics (summarize.delay).

Two rules make a run invalid (validity reasons, never averaged in):
1. a packet was dropped anywhere but the configured elements ("lost outside the
   bottleneck", naming where);
2. the senders retransmitted more than the configured elements dropped, beyond
   RETX_SLACK: packets vanished where no counter saw them, or were held so long in the
   host that the sender gave them up (a stall, not the path).

Each lost packet is counted once, though the kernel counts some in two or three places
(Linux net/core/dev.c and drivers/net/veth.c):
- A veth pair counts, per direction, max(sender's tx_dropped, peer's rx_dropped): a
  packet the peer refused is counted by veth_xmit in the sender's tx_dropped and by the
  receive path that refused it in the peer's rx_dropped (____dev_forward_skb: peer down
  or packet too long; enqueue_to_backlog: backlog full). Exact when every drop is seen
  by both ends or by one only; a lower bound when both kinds happen in one run. Ends are
  paired by the local testbed's names (node X's "to-Y" is node Y's "to-X",
  topology.links), checked against each end's ifindex and peer ifindex; `ip -j link`
  names the peer's namespace only by a number private to each namespace, so indexes
  alone cannot say which node holds the peer. Other interfaces count both counters.
- A macvlan transmits through its lower device (the local `macvlan` layout: a host's
  macvlan on its hub's veth end): a packet the lower veth drops is also the macvlan's
  tx_dropped (dev_queue_xmit returns the drop to macvlan_start_xmit; checked here by
  taking the peer down, 2026-11-25). The snapshot names each such stacking ("stacked":
  "<node> <macvlan>" -> "<hub> <lower>", from the testbed), and the lower's direction
  counts max(its pair's count, the sum of its macvlans' tx_dropped): a macvlan counts
  an skb (with TSO, several frames) the veth counts as frames, so each lost packet is
  counted once at most, a lower bound where both happen. A macvlan's rx and error
  counters are its own.
- softnet_stat is counted once per kernel: nodes whose snapshots recorded one boot_id
  share a kernel; in a snapshot with a "host" entry (the local testbed reads softnet
  once, for all its namespaces) a node without a boot_id is on the host's kernel, any
  other node without one (snapshots older than boot_id) is a kernel of its own.
- A backlog drop is also the rx_dropped of the device it arrived on (enqueue_to_backlog),
  so softnet's drops are a place of their own only beyond the rx_dropped of the
  interfaces counted on that kernel.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ccbench import jsonio, layout
from ccbench.errors import CcbenchError
from ccbench.exec import Executor
from ccbench.hosts import node_driver
from ccbench.layout import AFTER, BEFORE, RawDir
from ccbench.parse import drops as parse_drops

SCHEMA = "ccbench-drops/1"
# Retransmissions without a counted drop behind them that are tolerated: TCP may
# retransmit a segment that was not lost (a tail-loss probe, an early RTO); a handful
# per run is normal, a share of the drops more is not.
RETX_SLACK_PKTS = 10
RETX_SLACK_SHARE = 0.05
# Read once per kernel, not per namespace, when the nodes share one (softnet_host_wide).
_HOST_WIDE = ("softnet", "boot_id")


def collect(
    executors: dict[str, Executor], oses: dict[str, str], dest: Path, *,
    control_route: bool, softnet_host_wide: bool, stacked: dict[str, str] | None = None,
    extra_reads: dict[str, dict[str, list[str]]] | None = None,
) -> None:  # fmt: skip
    """Snapshot every node's drop counters into `dest` (raw tool output, parsed later).

    `control_route`: nodes have a control network (Emulab): record the default route so
    its interface is left out. `softnet_host_wide`: the nodes share one kernel (network
    namespaces): softnet_stat and the boot id are read once, as node "host". `stacked`:
    "<node> <dev>" of each macvlan -> "<node> <dev>" of the device it transmits
    through (module docstring), kept in the snapshot. `extra_reads`: node -> {key: argv}
    read besides its driver's (a lab's nftables loss rules: "nft"). A counter that cannot be read is
    listed under "errors" (the ledger says what it could not count)."""
    reads: dict[tuple[str, str], tuple[str, list[str]]] = {}  # (owner, key) -> node, argv
    for node in executors:
        for key, argv in node_driver(oses[node]).drop_counters().items():
            if key == "default_route" and not control_route:
                continue
            owner = "host" if key in _HOST_WIDE and softnet_host_wide else node
            reads.setdefault((owner, key), (node, argv))
        for key, argv in (extra_reads or {}).get(node, {}).items():
            reads[(node, key)] = (node, argv)

    def read(item: tuple[tuple[str, str], tuple[str, list[str]]]) -> tuple[str, str, Any]:
        (owner, key), (node, argv) = item
        try:
            return owner, key, executors[node].run(argv, check=False, timeout=30)
        except CcbenchError as e:
            return owner, key, str(e)

    # All at once: each read is a process start (ip netns exec, or ssh), so a snapshot
    # of a dumbbell's nodes takes about as long as one read, not the sum.
    nodes: dict[str, dict[str, str]] = {}
    errors: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for owner, key, res in pool.map(read, reads.items()):
            node = reads[(owner, key)][0]
            if isinstance(res, str):
                errors[f"{node} {key}"] = res
            elif res.ok:
                nodes.setdefault(owner, {})[key] = res.stdout
            else:
                errors[f"{node} {key}"] = (res.stderr.strip().splitlines() or ["failed"])[-1]
    snap: dict[str, Any] = {"schema": SCHEMA, "time_unix": time.time(), "nodes": nodes,
                            "errors": errors}  # fmt: skip
    if stacked:
        snap["stacked"] = dict(stacked)
    jsonio.write_json(dest, snap)


def _delta(after: int, before: int) -> int:
    return max(0, after - before)


def _link_deltas(b: dict[str, Any], a: dict[str, Any]) -> dict[str, dict[str, int]]:
    """{iface: {counter: growth}} for one node's interfaces on the path (not lo, not the
    control network's); interfaces absent from either snapshot are left out."""
    lb, la = parse_drops.links(b["links"]), parse_drops.links(a["links"])
    control = set(_control_ifaces(a.get("default_route")))
    return {
        iface: {key: _delta(ca[key], lb[iface][key]) for key in parse_drops.LINK_LOSS}
        for iface, ca in la.items()
        if iface != "lo" and iface not in control and iface in lb
    }


def _veth_peer(
    node: str, iface: str, ends: dict[tuple[str, str], tuple[int, int]]
) -> tuple[str, str] | None:
    """The other end of `node`'s veth `iface`: by the local testbed's names (node X's
    "to-Y" is node Y's "to-X"), if its ifindex and peer ifindex say the same."""
    if not iface.startswith("to-") or (node, iface) not in ends:
        return None
    peer = (iface.removeprefix("to-"), f"to-{node}")
    index, peer_index = ends[node, iface]
    return peer if ends.get(peer) == (peer_index, index) else None


def _stacked_tx(
    deltas: dict[str, dict[str, dict[str, int]]], stacked: Any
) -> dict[tuple[str, str], int]:
    """{(lower node, lower iface): sum of its macvlans' tx_dropped growth} for the
    snapshot's `stacked` entries whose both devices were read."""
    out: dict[tuple[str, str], int] = {}
    for upper, lower in (stacked or {}).items() if isinstance(stacked, dict) else ():
        un, _, ui = str(upper).partition(" ")
        ln, _, li = str(lower).partition(" ")
        if ui in deltas.get(un, {}) and li in deltas.get(ln, {}):
            out[ln, li] = out.get((ln, li), 0) + deltas[un][ui]["tx_dropped"]
            deltas[un][ui] = {**deltas[un][ui], "tx_dropped": 0}  # counted at the lower
    return out


def _interface_losses(
    deltas: dict[str, dict[str, dict[str, int]]], ends: dict[tuple[str, str], tuple[int, int]],
    stacked: Any = None,
) -> dict[str, int]:  # fmt: skip
    """Per place: {"<node> <iface> <counter>": n} for counters that grew, but a veth
    pair's dropped counters once per direction: {"<x> <if> -> <y> <if> dropped": n},
    which also holds the tx drops of macvlans stacked on <x> <if> (module docstring)."""
    deltas = {n: dict(ifs) for n, ifs in deltas.items()}
    upper_tx = _stacked_tx(deltas, stacked)
    out: dict[str, int] = {}
    for node, ifaces in sorted(deltas.items()):
        for iface, grew in sorted(ifaces.items()):
            counters = dict(grew)
            above = upper_tx.get((node, iface), 0)
            peer = _veth_peer(node, iface, ends)
            if peer is not None and peer[1] in deltas.get(peer[0], {}):
                # A refused packet is this end's tx_dropped and the peer's rx_dropped
                # (module docstring); the peer's own tx_dropped is the other direction.
                n = max(counters.pop("tx_dropped"), deltas[peer[0]][peer[1]]["rx_dropped"],
                        above)  # fmt: skip
                counters.pop("rx_dropped")
                if n:
                    out[f"{node} {iface} -> {peer[0]} {peer[1]} dropped"] = n
            else:
                counters["tx_dropped"] = max(counters["tx_dropped"], above)
            out.update({f"{node} {iface} {key}": n for key, n in counters.items() if n})
    return out


def _dummynet_losses(name: str, b: dict[str, Any], a: dict[str, Any]) -> dict[str, int]:
    pb, pa = parse_drops.dummynet_pipes(b["dummynet"]), parse_drops.dummynet_pipes(a["dummynet"])
    out: dict[str, int] = {}
    for pipe, ca in pa.items():
        n = _delta(ca["drops"], pb.get(pipe, {}).get("drops", 0))
        if n:
            out[f"{name} dummynet pipe {pipe} drops"] = n
    return out


def _kernels(nodes: dict[str, Any]) -> dict[str, str]:
    """{node: the kernel it runs on}: its boot_id, else the "host" entry's kernel when
    the snapshot has one (local testbed), else its own name (module docstring)."""

    def boot_id(snap: Any) -> str | None:
        bid = snap.get("boot_id") if isinstance(snap, dict) else None
        return (bid.strip() or None) if isinstance(bid, str) else None

    host = (boot_id(nodes["host"]) or "host") if "host" in nodes else None
    return {name: boot_id(snap) or host or name for name, snap in nodes.items()}


def _control_ifaces(route_json: str | None) -> list[str]:
    """Interfaces of the default route: the control network (Emulab), not the path."""
    if not route_json:
        return []
    try:
        routes = json.loads(route_json)
    except ValueError:
        return []
    return [r["dev"] for r in routes if isinstance(r, dict) and isinstance(r.get("dev"), str)]


def account(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The ledger between two snapshots: configured loss-rule drops, drops elsewhere
    (by place, each lost packet once), softnet backlog drops (all of them, once per
    kernel) and time squeezes. ValueError if unreadable."""
    for s, name in ((before, layout.drops(BEFORE)), (after, layout.drops(AFTER))):
        if not isinstance(s, dict) or s.get("schema") != SCHEMA:
            raise ValueError(f"{name}: not a drop-counter snapshot ({SCHEMA})")
    nb, na = before.get("nodes") or {}, after.get("nodes") or {}
    kernel = _kernels(na)
    outside: dict[str, int] = {}
    deltas: dict[str, dict[str, dict[str, int]]] = {}
    ends: dict[tuple[str, str], tuple[int, int]] = {}
    loss_rules = 0
    snaps: list[tuple[str, dict[str, Any], dict[str, Any]]] = []  # (node, before, after)
    for name, a in sorted(na.items()):
        b = nb.get(name)
        if not isinstance(a, dict) or not isinstance(b, dict):
            continue
        snaps.append((name, b, a))
        if "links" in a and "links" in b:
            deltas[name] = _link_deltas(b, a)
            ends.update({(name, i): e for i, e in parse_drops.netns_peers(a["links"]).items()})
        if "dummynet" in a and "dummynet" in b:
            outside.update(_dummynet_losses(name, b, a))
        if "iptables" in a and "iptables" in b:
            loss_rules += _delta(
                parse_drops.iptables_drops(a["iptables"]), parse_drops.iptables_drops(b["iptables"])
            )
        if "nft" in a and "nft" in b:  # a lab's nftables loss rules (testbed.lab_plans)
            loss_rules += _delta(parse_drops.nft_drops(a["nft"]), parse_drops.nft_drops(b["nft"]))
    outside.update(_interface_losses(deltas, ends, after.get("stacked")))
    # rx_dropped seen per kernel: a backlog drop is counted there too (module docstring)
    rx_dropped: dict[str, int] = {}
    for name, ifaces in deltas.items():
        rx = sum(d["rx_dropped"] for d in ifaces.values())
        rx_dropped[kernel[name]] = rx_dropped.get(kernel[name], 0) + rx
    backlog = squeeze = 0
    counted: set[str] = set()
    for name, b, a in snaps:
        if "softnet" not in a or "softnet" not in b or kernel[name] in counted:
            continue
        counted.add(kernel[name])
        sb, sa = parse_drops.softnet(b["softnet"]), parse_drops.softnet(a["softnet"])
        n = _delta(sa["dropped"], sb["dropped"])
        backlog += n
        if n > rx_dropped.get(kernel[name], 0):
            outside[f"{name} softnet backlog"] = n - rx_dropped.get(kernel[name], 0)
        squeeze += _delta(sa["time_squeeze"], sb["time_squeeze"])
    return {
        "loss_rules_pkts": loss_rules,
        "outside": outside,
        "outside_pkts": sum(outside.values()),
        "softnet_backlog_pkts": backlog,
        "softnet_time_squeeze": squeeze,
        "unread": sorted(set(after.get("errors") or {}) | set(before.get("errors") or {})),
    }


def read(rd: RawDir) -> dict[str, Any] | None:
    """The account (`account`) of a run's drop snapshots (drops-before/after.json in
    raw/ `rd`); None for runs recorded before ccbench took them, or when one is missing
    or damaged (its problem is on `rd`)."""
    names = layout.drops(BEFORE), layout.drops(AFTER)
    if not any(rd.exists(n) for n in names):
        return None
    before, after = (rd.json(n, required=True) for n in names)
    if before is None or after is None:
        return None
    try:
        return account(before, after)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        rd.problem(names[1], f"drop counters unreadable ({e})")
        return None
