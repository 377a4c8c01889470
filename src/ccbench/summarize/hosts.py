"""What the run recorded about its hosts: NIC records (SSH testbeds) with their channels
and transmit queues' byte queue limits, the senders' kernels (summary.json `nics`,
`kernel`). What an instrument read of a NIC during the run (the bottleneck's BQL: the
tx_queue_limits instrument) comes in as that instrument's part (SummaryPart.nics)."""

from __future__ import annotations

import re
from typing import Any

from ccbench import jsonio, kernel, layout
from ccbench.jsonio import is_number
from ccbench.layout import RawDir
from ccbench.parse.bql import parse_bql
from ccbench.reasons import Reason
from ccbench.spec import RunSpec

# NIC record keys (emulab/lib-linux.sh record_nic) that name an offload -> short name.
NIC_OFFLOADS = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                "generic-receive-offload": "gro", "large-receive-offload": "lro"}  # fmt: skip


# `ethtool -l IF`: the channel counts under "Pre-set maximums:" and "Current hardware
# settings:" (ethtool netlink/channels.c channels_reply_cb prints "n/a" for a kind the
# driver does not have; the older ioctl path, ethtool.c dump_channels, prints 0).
CHANNEL_KINDS = {"RX": "rx", "TX": "tx", "Other": "other", "Combined": "combined"}
_CHANNEL_PARTS = {"Pre-set maximums:": "max", "Current hardware settings:": "current"}

# limit_max when nobody capped it: DQL_MAX_LIMIT (include/linux/dynamic_queue_limits.h).
BQL_NO_CAP = 1879048192


def parse_channels(text: str) -> dict[str, dict[str, int | None]]:
    """`ethtool -l IF` -> {"max": {rx, tx, other, combined}, "current": {...}}; a kind
    the driver does not have is None ("n/a") or 0 (older ethtool). ValueError when the
    text is not ethtool's channel table."""
    out: dict[str, dict[str, int | None]] = {}
    part: dict[str, int | None] | None = None
    for line in text.splitlines():
        s = line.strip()
        if s in _CHANNEL_PARTS:
            part = out.setdefault(_CHANNEL_PARTS[s], {})
            continue
        key, sep, value = s.partition(":")
        if part is None or not sep or key not in CHANNEL_KINDS:
            continue  # the "Channel parameters for IF:" header, blank lines
        value = value.strip()
        if value == "n/a":
            part[CHANNEL_KINDS[key]] = None
        elif value.isdigit():
            part[CHANNEL_KINDS[key]] = int(value)
        else:
            raise ValueError(f"channel count {s!r} is not a number")
    if set(out) != set(_CHANNEL_PARTS.values()):
        raise ValueError("not `ethtool -l` output (no maximums and current settings)")
    return out


def channel_tx_queues(channels: dict[str, dict[str, int | None]]) -> int | None:
    """Transmit queues the current channel counts give: combined plus TX-only ones
    (None where the driver reports neither)."""
    cur = channels.get("current") or {}
    counts = [cur.get("combined"), cur.get("tx")]
    return sum(c for c in counts if c) if any(c is not None for c in counts) else None


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def tx_queues_in_use(rec: dict[str, Any]) -> int | None:
    """How many transmit queues a NIC record's interface used: the kernel's count of
    queues/tx-N directories, else what its channels give; None where neither was
    recorded (records made before either was)."""
    used = _int(rec.get("tx_queues"))
    channels = rec.get("channels")
    if used is None and isinstance(channels, dict):
        used = channel_tx_queues(channels)
    return used


def _tx_queues(rec: dict[str, Any], node: str, notes: list[str]) -> None:
    """A record's channels (`ethtool_l`) and BQL state (`tx_bql`) parsed into `channels`
    and `bql`, and a note where the TX queues asked and in use differ."""
    where = f"{node} {rec['interface']}"
    text = rec.get("ethtool_l")
    if isinstance(text, str) and text.strip():
        try:
            rec["channels"] = parse_channels(text)
        except ValueError as e:
            notes.append(f"{where}: channels unknown, its ethtool -l output does not parse ({e})")
    used = tx_queues_in_use(rec)
    bql = rec.get("tx_bql")
    if isinstance(bql, str):
        try:
            rec["bql"] = parse_bql(bql).get(rec["interface"], [])
        except ValueError as e:
            notes.append(f"{where}: BQL unknown, its tx_bql does not parse ({e})")
    asked = _int(rec.get("tx_queues_asked"))
    if asked and asked != used:
        why = rec.get("tx_queues_note") or ""
        in_use = f"{used} in use" if used is not None else "the count in use unknown"
        notes.append(f"{where}: {asked} TX queue{'s' if asked > 1 else ''} asked, {in_use}"
                     + (f": {why}" if why else ""))  # fmt: skip


def nic_records(nics: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """facts.json `nics` (node -> the records its start-up script wrote, one JSON object
    per line) -> (records, notes, problems). Each record keeps its keys plus `node`,
    `offloads` ({tso: "off", ...}) and, where recorded, `channels` (parse_channels),
    `bql` (its transmit queues' byte queue limits at set-up, parse_bql); a note says
    where a TX ring or a TX queue count asked for and the one the driver set differ
    ("rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum")."""
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    problems: list[str] = []
    for node, text in sorted(nics.items()):
        if not isinstance(text, str):
            problems.append(f"nics {node}: not the text of NIC records")
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = jsonio.loads(line)
            except ValueError as e:
                problems.append(f"nics {node}: line {n} is not a NIC record ({e})")
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("interface"), str):
                problems.append(f"nics {node}: line {n} is not a NIC record (no interface)")
                continue
            rec = {"node": node, **rec}
            rec["offloads"] = {s: rec[k] for k, s in NIC_OFFLOADS.items() if rec.get(k)}
            records.append(rec)
            asked, got = rec.get("tx_ring_asked"), rec.get("tx_ring_set")
            if (
                isinstance(asked, int)
                and not isinstance(asked, bool)
                and asked > 0
                and asked != got
            ):
                why = rec.get("tx_ring_note") or ""
                set_text = f"{got} set" if is_number(got) else "the driver reports no ring size"
                notes.append(f"{node} {rec['interface']}: TX ring {asked} asked, {set_text}"
                             + (f": {why}" if why and is_number(got) else ""))  # fmt: skip
            _tx_queues(rec, node, notes)
    return records, notes, problems


def nics_of(
    rd: RawDir, facts: dict[str, Any] | None,
    readings: dict[tuple[str, str], dict[str, Any]] | None = None,
) -> dict[str, Any] | None:  # fmt: skip
    """The NIC records of an SSH testbed's nodes from facts.json (`facts`: None where
    missing or unreadable), each with what the run's instruments read of it
    (`readings`: (node, interface) -> keys, from instruments.summary_parts: the
    bottleneck interface's BQL before and after the traffic, `bql_before` /
    `bql_after`); None where there are none (local runs: veths; runs recorded before
    ccbench read them). Its problems are facts.json's, reported on `rd`."""
    if facts is None or "nics" not in facts:
        return None
    if not isinstance(facts["nics"], dict):
        rd.problem(layout.HOST_FACTS, "nics is not an object of node -> records")
        return None
    records, notes, problems = nic_records(facts["nics"])
    for p in problems:
        rd.problem(layout.HOST_FACTS, p)
    for rec in records:
        rec.update((readings or {}).get((rec["node"], rec["interface"]), {}))
    return {"records": records, "notes": notes}


def kernel_of(
    rd: RawDir, spec: RunSpec, facts: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[Reason], dict[str, str]]:
    """Every sender's kernel identity (`facts`: facts.json as read once, None where it
    is missing or damaged, which is its reader's reason) and, when the variant names the
    kernel it needs (kernel.json: {label, match}), a reason per sender that does not
    run it; each receiver's buffer limits (receiver_buffers)."""
    buffers = receiver_buffers(facts, spec)
    req = rd.json(layout.KERNEL) if rd.exists(layout.KERNEL) else None
    if req is not None and not (isinstance(req.get("label"), str)
                                and isinstance(req.get("match"), str)):  # fmt: skip
        rd.problem(layout.KERNEL, "not a {label, match} requirement")
        req = None
    try:
        return (*kernel.summary(facts, req, spec.variant, spec.kernel_label), buffers)
    except re.error as e:
        rd.problem(layout.KERNEL, f"match is not a regular expression ({e})")
        return None, [], buffers


def receiver_buffers(facts: dict[str, Any] | None, spec: RunSpec) -> dict[str, str]:
    """Each receiver's buffer limits as one line, from facts.json (`facts`, as kernel_of
    takes it: what ran is recorded there; nothing is read from the host now)."""
    recs = facts.get("receivers") if isinstance(facts, dict) else None
    recs = recs if isinstance(recs, dict) else {}
    out = {}
    for node in dict.fromkeys(f.receiver for f in spec.flows):
        rec = recs.get(node)
        text = rec.get("buffers") if isinstance(rec, dict) else None
        if not isinstance(text, str) or not text.strip():
            out[node] = "its limits not recorded"
            continue
        out[node] = "; ".join(" ".join(line.split()) for line in text.splitlines() if line.strip())
    return out
