"""Drop counters from every place a packet can be lost, as the tools print them.

Pure parsers (text in, numbers out) for the loss ledger (ccbench.ledger):
- `ip -s -s -j link show` (Linux, per interface: rx/tx dropped, errors and missed; for an interface
  whose peer is in another namespace, a veth end: its and its peer's ifindex),
- `/proc/net/softnet_stat` (Linux, per CPU: backlog drops, time squeezes; hex columns),
- `iptables-save -c` (packets the configured loss rules dropped: `-j DROP` rules),
- `ipfw pipe show` / `dnctl pipe show` (FreeBSD dummynet, Emulab's delay node: per pipe,
  its bandwidth, delay, queue size and loss rate (ccbench.delaynode checks them) and the
  flow buckets' Tot_pkt, Tot_bytes, queued Pkt/Byte and Drp columns).
Each raises ValueError naming what it could not read.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
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


# ccbench's own rules carry this comment (a lab's; testbed.lab_plans.COMMENT): where
# any DROP rule has it, only those are the loss rules, not the host's own firewall.
_OWN_RULE = re.compile(r'(^| )--comment "?ccbench"?( |$)')


def iptables_drops(text: str) -> int:
    """Packets dropped by the loss rules in `iptables-save -c` output: the `-j DROP`
    rules commented ccbench where there are such, else every `-j DROP` rule (the
    testbeds whose hosts have no firewall of their own, and runs made before)."""
    drops = []
    for line in text.splitlines():
        m = _RULE.match(line.strip())
        if m and re.search(r"(^| )-j DROP( |$)", m.group(4)):
            drops.append((int(m.group(1)), bool(_OWN_RULE.search(m.group(4)))))
    own = [n for n, mine in drops if mine]
    return sum(own) if own else sum(n for n, _ in drops)


def nft_drops(text: str) -> int:
    """Packets counted by rules that `counter` and `drop` in `nft -j list table ...`
    output (a lab's nftables loss rules); 0 for an empty read (no table yet)."""
    if not text.strip():
        return 0
    total = 0
    for item in json.loads(text).get("nftables", []):
        expr = item.get("rule", {}).get("expr", []) if isinstance(item, dict) else []
        kinds = {k for e in expr if isinstance(e, dict) for k in e}
        if "drop" in kinds:
            total += sum(int(e["counter"].get("packets", 0)) for e in expr
                         if isinstance(e, dict) and isinstance(e.get("counter"), dict))  # fmt: skip
    return total


# A pipe's first line, as sbin/ipfw/dummynet.c prints it: "%05d: %s %4d ms burst %s" (FreeBSD
# 8+: "00001:   1.000 Gbit/s   20 ms burst 0"; bandwidth 0 prints "unlimited") or, on older
# dummynet (Emulab's early delay nodes), the queue on the same line: "60111: 100.000 Mbit/s
# 1 ms   50 sl. 1 queues (1 buckets) droptail".
_PIPE = re.compile(r"^(\d{5}):\s+(\S+\s+[KMG]?bit/s|unlimited)\s+(\d+)\s+ms\b(.*)$")
_BW_UNIT = {"bit/s": 1, "Kbit/s": 10**3, "Mbit/s": 10**6, "Gbit/s": 10**9}
# The queue size (print_flowset_parms: "%3d sl." slots, or "%d KB" / "%d B" for a byte
# limit) and the loss rate ("plr %f", printed right after the size, without a space).
_SLOTS = re.compile(r"\b(\d+)\s+sl\.")
_QBYTES = re.compile(r"\s(\d+) (KB|B)(?:plr|\s)")
_PLR = re.compile(r"plr (\d+\.\d+)")
_FLOW = re.compile(
    r"^\s*\d+\*?\s+\S+\s+\S+/\d+\s+\S+/\d+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$"
)
_COUNTERS = ("tot_pkts", "tot_bytes", "queued_pkts", "queued_bytes", "drops")


@dataclass(frozen=True)
class DummynetPipe:
    """One `ipfw pipe show` pipe: its configuration and its flow buckets' counters summed.
    bandwidth_bps is None for an unlimited pipe (bw 0), else bit/s to the printed precision
    ("%7.3f" of the unit); the queue is in slots or, with `queue NKB`, in bytes."""

    number: int
    bandwidth: str  # as printed: "1.000 Gbit/s", "unlimited"
    bandwidth_bps: int | None
    delay_ms: int
    queue_slots: int | None
    queue_bytes: int | None
    plr: float
    tot_pkts: int = 0
    tot_bytes: int = 0
    queued_pkts: int = 0
    queued_bytes: int = 0
    drops: int = 0


def _bandwidth_bps(text: str) -> int | None:
    if text == "unlimited":
        return None
    value, unit = text.split()
    return round(float(value) * _BW_UNIT[unit])


def _queue(text: str) -> tuple[int | None, int | None, float | None]:
    """(slots, bytes, plr) from the part of a line that print_flowset_parms wrote."""
    slots, qbytes, plr = _SLOTS.search(text), _QBYTES.search(text + " "), _PLR.search(text)
    nbytes = None
    if qbytes:
        nbytes = int(qbytes.group(1)) * (1024 if qbytes.group(2) == "KB" else 1)
    return (
        int(slots.group(1)) if slots else None,
        nbytes,
        float(plr.group(1)) if plr else None,
    )


def dummynet(text: str) -> dict[int, DummynetPipe]:
    """`ipfw pipe show` -> {pipe number: DummynetPipe}. The pipe's queue is on its own
    `q<N>` line (FreeBSD 8+) or on the pipe's line (older dummynet)."""
    pipes: dict[int, dict[str, Any]] = {}
    cur: dict[str, Any] | None = None
    for line in text.splitlines():
        m = _PIPE.match(line.strip())
        if m:
            slots, nbytes, plr = _queue(m.group(4))
            cur = pipes[int(m.group(1))] = {
                "number": int(m.group(1)), "bandwidth": m.group(2).strip(),
                "bandwidth_bps": _bandwidth_bps(" ".join(m.group(2).split())),
                "delay_ms": int(m.group(3)), "queue_slots": slots, "queue_bytes": nbytes,
                "plr": plr or 0.0, **dict.fromkeys(_COUNTERS, 0),
            }  # fmt: skip
            continue
        if re.match(r"^\s*q\d+\s", line):  # the pipe's queue line: "q191182  50 sl. ..."
            slots, nbytes, plr = _queue(line)
            if cur is not None and cur["queue_slots"] is None and cur["queue_bytes"] is None:
                cur.update(queue_slots=slots, queue_bytes=nbytes, plr=plr or cur["plr"])
            continue
        f = _FLOW.match(line)
        if f:
            if cur is None:
                raise ValueError("ipfw pipe show: a flow line before any pipe")
            for key, v in zip(_COUNTERS, f.groups(), strict=True):
                cur[key] += int(v)
    if not pipes:
        raise ValueError("ipfw pipe show: no pipes")
    return {n: DummynetPipe(**p) for n, p in pipes.items()}


def dummynet_pipes(text: str) -> dict[int, dict[str, Any]]:
    """`ipfw pipe show` -> {pipe: {bandwidth, delay_ms, slots, tot_pkts, tot_bytes,
    queued_pkts, queued_bytes, drops}}, flow buckets summed per pipe (the loss ledger's
    view; dummynet() has the whole configuration)."""
    return {
        n: {"bandwidth": p.bandwidth, "delay_ms": p.delay_ms, "slots": p.queue_slots,
            **{key: getattr(p, key) for key in _COUNTERS}}
        for n, p in dummynet(text).items()
    }  # fmt: skip
