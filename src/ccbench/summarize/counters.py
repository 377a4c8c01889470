"""Every sender's TCP counters over the run, before and after (instruments.counters):
the causes of its retransmissions as the counters name them (summary.json
`retransmit_causes`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ccbench import layout
from ccbench.instruments.counters import TcpCounters
from ccbench.layout import RawDir
from ccbench.parse.netstat_freebsd import freebsd_retransmit_causes, parse_netstat_tcp
from ccbench.parse.nstat import (
    RetransmitCauses,
    counter_delta,
    linux_retransmit_causes,
    parse_nstat,
)

# Per OS: the snapshot's counters, and the causes their increase names.
_READERS = {
    "linux": (lambda t: parse_nstat(t).counters, linux_retransmit_causes),
    "freebsd": (lambda t: parse_netstat_tcp(t).counters, freebsd_retransmit_causes),
}


def retransmit_causes(rd: RawDir, counters: TcpCounters | None) -> dict[str, Any] | None:
    """node -> its counters' causes; None when the run read no counters. A snapshot that
    is missing or does not parse is one problem naming it."""
    if counters is None:
        return None
    out: dict[str, Any] = {}
    for node, os_name in counters.nodes.items():
        names = [layout.tcp_counters(node, w) for w in (layout.BEFORE, layout.AFTER)]
        texts = [rd.text(n, required=not rd.failed) for n in names]
        if None in texts:
            continue
        read, causes_of = _READERS[os_name]
        try:
            snaps = [read(t or "") for t in texts]
        except ValueError as e:
            rd.problem(f"{names[0]}/{names[1]}", f"not {os_name} TCP counters ({e})")
            continue
        try:
            delta = counter_delta(snaps[0], snaps[1])
        except ValueError as e:
            rd.problem(names[1], str(e))
            continue
        c: RetransmitCauses = causes_of(delta)
        out[node] = {**dataclasses.asdict(c), "causes": c.causes(), "raw": names}
    return out
