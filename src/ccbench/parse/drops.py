"""Drop counters from every place a packet can be lost, as the tools print them.

Pure parsers (text in, numbers out) for the loss ledger (ccbench.ledger):
- `ip -s -s -j link show` (Linux, per interface: rx/tx dropped, errors and missed; for an interface
  whose peer is in another namespace, a veth end: its and its peer's ifindex),
- `/proc/net/softnet_stat` (Linux, per CPU: backlog drops, time squeezes; hex columns),
- `iptables-save -c` (packets the configured loss rules dropped: `-j DROP` rules),
- `ipfw pipe show` / `dnctl pipe show` (FreeBSD dummynet, Emulab's delay node: per pipe,
  the flow buckets' Tot_pkt, Tot_bytes, queued Pkt/Byte and Drp columns).
Each raises ValueError naming what it could not read.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Interface counters that mean "a packet was lost here".
# rx_missed_errors (`ip -s -s` only) is a NIC's receive ring overflowing: igb, the
# d430's 1 GbE, counts it there and in neither rx_dropped nor rx_errors.
LINK_LOSS = (
    "rx_dropped", "tx_dropped", "rx_errors", "tx_errors", "rx_over_errors", "rx_missed_errors",
)  # fmt: skip


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{what}: {value!r} is not a packet count")
    return value


def links(text: str) -> dict[str, dict[str, int]]:
    """`ip -s [-s] -j link show` -> {ifname: {rx_packets, tx_packets, rx_dropped, ...}}
    (rx_missed_errors is 0 where a single -s did not print it)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"ip -s -j link: not JSON ({e})") from None
    if not isinstance(data, list):
        raise ValueError("ip -s -j link: not a list of interfaces")
    out: dict[str, dict[str, int]] = {}
    for link in data:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            raise ValueError("ip -s -j link: an entry without ifname")
        name = link["ifname"]
        st = link.get("stats64") or link.get("stats")
        if not isinstance(st, dict) or not isinstance(st.get("rx"), dict):
            raise ValueError(f"ip -s -j link: {name} has no statistics (was -s given?)")
        rx, tx = st["rx"], st.get("tx") or {}
        out[name] = {
            "rx_packets": _count(rx.get("packets", 0), f"{name} rx packets"),
            "tx_packets": _count(tx.get("packets", 0), f"{name} tx packets"),
            "rx_dropped": _count(rx.get("dropped", 0), f"{name} rx dropped"),
            "tx_dropped": _count(tx.get("dropped", 0), f"{name} tx dropped"),
            "rx_errors": _count(rx.get("errors", 0), f"{name} rx errors"),
            "tx_errors": _count(tx.get("errors", 0), f"{name} tx errors"),
            "rx_over_errors": _count(rx.get("over_errors", 0), f"{name} rx over_errors"),
            "rx_missed_errors": _count(rx.get("missed_errors", 0), f"{name} rx missed_errors"),
        }
    return out


def netns_peers(text: str) -> dict[str, tuple[int, int]]:
    """`ip -s -j link show` -> {ifname: (ifindex, peer ifindex)} for the interfaces whose
    peer lives in another network namespace (`link_netnsid` present): veth ends. The
    netns id is a number private to the namespace that prints it, so it is not kept."""
    out: dict[str, tuple[int, int]] = {}
    for link in json.loads(text):
        if isinstance(link, dict) and "link_netnsid" in link and "link_index" in link:
            name = str(link.get("ifname"))
            out[name] = (
                _count(link.get("ifindex"), f"{name} ifindex"),
                _count(link["link_index"], f"{name} link_index"),
            )
    return out


def softnet(text: str) -> dict[str, int]:
    """/proc/net/softnet_stat summed over CPUs: processed, dropped (backlog full),
    time_squeeze (budget ran out: a sign of a CPU that fell behind)."""
    tot = {"processed": 0, "dropped": 0, "time_squeeze": 0, "cpus": 0}
    for n, line in enumerate(text.splitlines(), 1):
        cols = line.split()
        if not cols:
            continue
        try:
            vals = [int(c, 16) for c in cols[:3]]
        except ValueError:
            raise ValueError(f"softnet_stat line {n}: not hex counters") from None
        if len(vals) < 3:
            raise ValueError(f"softnet_stat line {n}: fewer than 3 columns")
        tot["processed"] += vals[0]
        tot["dropped"] += vals[1]
        tot["time_squeeze"] += vals[2]
        tot["cpus"] += 1
    if not tot["cpus"]:
        raise ValueError("softnet_stat: no CPU lines")
    return tot


_RULE = re.compile(r"^\[(\d+):(\d+)\] -A (\S+) (.*)$")


def iptables_drops(text: str) -> int:
    """Packets dropped by `-j DROP` rules in `iptables-save -c` output (the loss rules)."""
    total = 0
    for line in text.splitlines():
        m = _RULE.match(line.strip())
        if m and re.search(r"(^| )-j DROP( |$)", m.group(4)):
            total += int(m.group(1))
    return total


# "00001: 100.000 Mbit/s   20 ms burst 0" (FreeBSD 8+) or "60111: 100.000 Mbit/s 1 ms
# 50 sl. 1 queues ..." (older, as on Emulab delay nodes): a pipe's first line.
_PIPE = re.compile(r"^(\d{5}):\s+(\S+\s+\S*bit/s|unlimited)\s+(\d+)\s+ms\b(.*)$")
_SLOTS = re.compile(r"\b(\d+)\s+sl\.")
_FLOW = re.compile(
    r"^\s*\d+\*?\s+\S+\s+\S+/\d+\s+\S+/\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$"
)


def dummynet_pipes(text: str) -> dict[int, dict[str, Any]]:
    """`ipfw pipe show` -> {pipe: {bandwidth, delay_ms, slots, tot_pkts, tot_bytes,
    queued_pkts, queued_bytes, drops}}, flow buckets summed per pipe."""
    pipes: dict[int, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    for line in text.splitlines():
        m = _PIPE.match(line.strip())
        if m:
            slots = _SLOTS.search(m.group(4))
            cur = pipes[int(m.group(1))] = {
                "bandwidth": m.group(2).strip(), "delay_ms": int(m.group(3)),
                "slots": int(slots.group(1)) if slots else None, "tot_pkts": 0,
                "tot_bytes": 0, "queued_pkts": 0, "queued_bytes": 0, "drops": 0,
            }  # fmt: skip
            continue
        if re.match(r"^\s*q\d+\s", line):  # the pipe's queue line: "q131073  50 sl. ..."
            slots = _SLOTS.search(line)
            if cur is not None and slots and cur["slots"] is None:
                cur["slots"] = int(slots.group(1))
            continue
        f = _FLOW.match(line)
        if f:
            if cur is None:
                raise ValueError("ipfw pipe show: a flow line before any pipe")
            for key, v in zip(("tot_pkts", "tot_bytes", "queued_pkts", "queued_bytes",
                               "drops"), f.groups(), strict=True):  # fmt: skip
                cur[key] += int(v)
    if not pipes:
        raise ValueError("ipfw pipe show: no pipes")
    return pipes
