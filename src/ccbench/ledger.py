"""The loss ledger: every packet a run lost, by where it was lost.

A run's numbers are the configured path's only if the path's configured elements (the
bottleneck queue and shaper on rt1, the loss rules at the receivers) are the only
places that dropped packets. Before and after each run, the testbed snapshots the drop
counters of every place a packet can be lost (`drops-before.json`, `drops-after.json`):
each node's interfaces (rx/tx dropped and errors), the kernel's per-CPU backlogs
(softnet_stat), the loss rules' iptables counters, and on Emulab the delay node's
dummynet pipes. The delay element's own drops come from its statistics (summary.py).

Two rules make a run invalid (validity reasons, never averaged in):
1. a packet was dropped anywhere but the configured elements ("lost outside the
   bottleneck", naming where);
2. the senders retransmitted more than the configured elements dropped, beyond
   RETX_SLACK: packets vanished where no counter saw them, or were held so long in the
   host that the sender gave them up (a stall, not the path).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from ccbench.errors import CcbenchError
from ccbench.exec import Executor
from ccbench.parse import drops as parse_drops

SCHEMA = "ccbench-drops/1"
# Retransmissions without a counted drop behind them that are tolerated: TCP may
# retransmit a segment that was not lost (a tail-loss probe, an early RTO); a handful
# per run is normal, a share of the drops more is not.
RETX_SLACK_PKTS = 10
RETX_SLACK_SHARE = 0.05


def snapshot_plan(os_name: str) -> dict[str, list[str]]:
    """What to read on a node of `os_name` (linux, freebsd, dummynet: the delay node)."""
    if os_name == "linux":
        return {
            "links": ["ip", "-s", "-j", "link", "show"],
            "iptables": ["iptables-save", "-c"],
            "softnet": ["cat", "/proc/net/softnet_stat"],
            "default_route": ["ip", "-j", "route", "show", "default"],
        }
    if os_name == "dummynet":  # Emulab's FreeBSD delay node: its pipes, nothing else
        return {"dummynet": ["ipfw", "pipe", "show"]}
    return {}  # FreeBSD senders: their losses show as retransmits (rule 2)


def collect(
    executors: dict[str, Executor], oses: dict[str, str], dest: Path, *,
    control_route: bool, softnet_host_wide: bool,
) -> None:  # fmt: skip
    """Snapshot every node's drop counters into `dest` (raw tool output, parsed later).

    `control_route`: nodes have a control network (Emulab): record the default route so
    its interface is left out. `softnet_host_wide`: the nodes share one kernel (network
    namespaces): softnet_stat is read once, as node "host". A counter that cannot be
    read is listed under "errors" (the ledger says what it could not count)."""
    nodes: dict[str, dict[str, str]] = {}
    errors: dict[str, str] = {}
    for node, ex in executors.items():
        for key, argv in snapshot_plan(oses[node]).items():
            if key == "default_route" and not control_route:
                continue
            owner = "host" if key == "softnet" and softnet_host_wide else node
            if key in nodes.get(owner, {}):
                continue
            try:
                res = ex.run(argv, check=False, timeout=30)
            except CcbenchError as e:
                errors[f"{node} {key}"] = str(e)
                continue
            if res.ok:
                nodes.setdefault(owner, {})[key] = res.stdout
            else:
                errors[f"{node} {key}"] = (res.stderr.strip().splitlines() or ["failed"])[-1]
    snap = {"schema": SCHEMA, "time_unix": time.time(), "nodes": nodes, "errors": errors}
    dest.write_text(json.dumps(snap, indent=1))


def _delta(after: int, before: int) -> int:
    return max(0, after - before)


def _node_losses(name: str, b: dict[str, Any], a: dict[str, Any]) -> dict[str, int]:
    """Per place on one node: {"<node> <iface> rx_dropped": n, ...} for counters that grew."""
    out: dict[str, int] = {}
    if "links" in a and "links" in b:
        lb, la = parse_drops.links(b["links"]), parse_drops.links(a["links"])
        control = set(_control_ifaces(a.get("default_route")))
        for iface, ca in la.items():
            cb = lb.get(iface)
            if iface == "lo" or iface in control or cb is None:
                continue
            for key in parse_drops.LINK_LOSS:
                n = _delta(ca[key], cb[key])
                if n:
                    out[f"{name} {iface} {key}"] = n
    if "dummynet" in a and "dummynet" in b:
        pb, pa = (
            parse_drops.dummynet_pipes(b["dummynet"]),
            parse_drops.dummynet_pipes(a["dummynet"]),
        )
        for pipe, ca in pa.items():
            n = _delta(ca["drops"], pb.get(pipe, {}).get("drops", 0))
            if n:
                out[f"{name} dummynet pipe {pipe} drops"] = n
    return out


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
    (by place), softnet backlog drops and time squeezes. ValueError if unreadable."""
    for s, name in ((before, "drops-before.json"), (after, "drops-after.json")):
        if not isinstance(s, dict) or s.get("schema") != SCHEMA:
            raise ValueError(f"{name}: not a drop-counter snapshot ({SCHEMA})")
    nb, na = before.get("nodes") or {}, after.get("nodes") or {}
    outside: dict[str, int] = {}
    loss_rules = 0
    squeeze = 0
    for name, a in sorted(na.items()):
        b = nb.get(name)
        if not isinstance(a, dict) or not isinstance(b, dict):
            continue
        outside.update(_node_losses(name, b, a))
        if "iptables" in a and "iptables" in b:
            loss_rules += _delta(
                parse_drops.iptables_drops(a["iptables"]), parse_drops.iptables_drops(b["iptables"])
            )
        if "softnet" in a and "softnet" in b:
            sb, sa = parse_drops.softnet(b["softnet"]), parse_drops.softnet(a["softnet"])
            n = _delta(sa["dropped"], sb["dropped"])
            if n:
                outside[f"{name} softnet backlog"] = n
            squeeze += _delta(sa["time_squeeze"], sb["time_squeeze"])
    return {
        "loss_rules_pkts": loss_rules,
        "outside": outside,
        "outside_pkts": sum(outside.values()),
        "softnet_time_squeeze": squeeze,
        "unread": sorted(set(after.get("errors") or {}) | set(before.get("errors") or {})),
    }


def check(
    ledger: dict[str, Any], bottleneck_pkts: int | None, delay_pkts: int, retransmits: int | None
) -> list[str]:
    """Validity reasons from a ledger (empty: every lost packet is accounted for).
    The delay element's own drops (`delay_pkts`) are reported by its check
    (validity.check_delay); here they only count as drops that were seen."""
    reasons = []
    outside = ledger["outside"]
    if outside:
        where = ", ".join(f"{k} {v}" for k, v in sorted(outside.items(), key=lambda kv: -kv[1]))
        reasons.append(
            f"{ledger['outside_pkts']} packets were lost outside the bottleneck ({where})"
        )
    if bottleneck_pkts is None or retransmits is None:
        return reasons
    configured = bottleneck_pkts + ledger["loss_rules_pkts"]
    seen = configured + ledger["outside_pkts"] + delay_pkts
    slack = max(RETX_SLACK_PKTS, RETX_SLACK_SHARE * configured)
    if retransmits > seen + slack:
        reasons.append(
            f"the senders retransmitted {retransmits} packets, the path dropped {configured} "
            f"(bottleneck {bottleneck_pkts}, loss rules {ledger['loss_rules_pkts']}): "
            f"{retransmits - seen} retransmissions have no counted drop behind them "
            "(packets lost or held in the host)"
        )
    return reasons
