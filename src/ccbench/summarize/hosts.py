"""What the run recorded about its hosts: NIC records (SSH testbeds), FreeBSD senders'
sockstat samples, the senders' kernels (summary.json `nics`, `sockstat`, `kernel`)."""

from __future__ import annotations

import json
import re
from typing import Any

from ccbench import jsonio, kernel, validity
from ccbench.jsonio import is_number
from ccbench.layout import RawDir
from ccbench.parse.sockstat import connections_to, parse_sockstat, split_addr
from ccbench.spec import RunSpec

# NIC record keys (emulab/lib-linux.sh record_nic) that name an offload -> short name.
NIC_OFFLOADS = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                "generic-receive-offload": "gro", "large-receive-offload": "lro"}  # fmt: skip


def nic_records(nics: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """facts.json `nics` (node -> the records its start-up script wrote, one JSON object
    per line) -> (records, notes, problems). Each record keeps its keys plus `node`
    and `offloads` ({tso: "off", ...}); a note says where a TX ring asked for and the
    one the driver set differ ("rt1 eth5: TX ring 48 asked, 64 set: igb raised it:
    below its minimum")."""
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
    return records, notes, problems


def nics_of(rd: RawDir) -> dict[str, Any] | None:
    """The NIC records of an SSH testbed's nodes from facts.json; None where there are
    none (local runs: veths; runs recorded before ccbench read them)."""
    if not rd.exists("facts.json"):
        return None
    facts = rd.json("facts.json")
    if facts is None or "nics" not in facts:
        return None
    if not isinstance(facts["nics"], dict):
        rd.problem("facts.json", "nics is not an object of node -> records")
        return None
    records, notes, problems = nic_records(facts["nics"])
    for p in problems:
        rd.problem("facts.json", p)
    return {"records": records, "notes": notes}


def sockstat_of(rd: RawDir, spec: RunSpec, meta: dict[str, Any]) -> dict[str, Any] | None:
    """FreeBSD senders: each flow's connections as `sockstat -46 -CS -P tcp` listed them
    while the flow ran (meta.json `sockstat`, raw/sockstat-<k>.txt) -> {flows, reasons}:
    a connection on another TCP stack or CC than the variant asked makes the run invalid
    (validity.check_sockstat). None when no sample was planned (Linux senders)."""
    entries = meta.get("sockstat")
    if entries is None:
        return None
    stack = spec.stack
    out: dict[str, Any] = {"flows": [], "reasons": []}
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        rd.problem("meta.json", "sockstat is not a list of samples")
        return out
    for e in entries:
        k, node, peer, name = e.get("flow"), e.get("node"), e.get("peer"), e.get("file")
        if not (isinstance(k, int) and 1 <= k <= len(spec.flows) and isinstance(node, str)
                and isinstance(peer, str) and isinstance(name, str)):  # fmt: skip
            rd.problem("meta.json", f"sockstat sample {e!r} is not a flow's sample")
            continue
        if e.get("at_s") is None:
            out["reasons"].append(f"flow {k}: no sockstat sample was taken while it ran")
            continue
        text = rd.text(name, required=True)
        if text is None:
            continue
        try:
            conns = connections_to(parse_sockstat(text), *_addr_port(peer))
        except ValueError as err:
            rd.problem(name, str(err))
            continue
        out["flows"].append({
            "flow": k, "node": node, "peer": peer, "at_s": e.get("at_s"), "raw": name,
            "connections": [{"local": c.local, "stack": c.stack, "cc": c.cc} for c in conns],
        })  # fmt: skip
        out["reasons"] += validity.check_sockstat(k, node, peer, conns, spec.flows[k - 1].cc,
                                                  stack)  # fmt: skip
    return out


def _addr_port(peer: str) -> tuple[str, int]:
    host, port = split_addr(peer)
    if not port.isdigit():
        raise ValueError(f"sockstat sample peer {peer!r} has no port")
    return host, int(port)


def kernel_of(rd: RawDir, spec: RunSpec) -> tuple[dict[str, Any] | None, list[str]]:
    """Every sender's kernel identity (facts.json) and, when the variant names the
    kernel it needs (kernel.json: {label, match}), a reason per sender that does not
    run it. A damaged facts.json is _nics' reason, not repeated here."""
    req = rd.json("kernel.json") if rd.exists("kernel.json") else None
    if req is not None and not (isinstance(req.get("label"), str)
                                and isinstance(req.get("match"), str)):  # fmt: skip
        rd.problem("kernel.json", "not a {label, match} requirement")
        req = None
    try:
        facts = json.loads((rd.path / "facts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        facts = None
    try:
        return kernel.summary(facts, req, spec.variant, spec.kernel_label)
    except re.error as e:
        rd.problem("kernel.json", f"match is not a regular expression ({e})")
        return None, []
