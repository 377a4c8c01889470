"""Byte queue limits (BQL) of a NIC's transmit queues, as `grep -H .` prints their sysfs
files (hosts.linux tx_queue_state during a run; emulab/lib-linux.sh bql_of at set-up)."""

from __future__ import annotations

import re

# One line of `grep -H . /sys/class/net/IF/queues/tx-N/byte_queue_limits/FILE`: sysfs's
# plain integers (net/core/net-sysfs.c bql_show_limit, bql_show_inflight).
_BQL_LINE = re.compile(
    r"/sys/class/net/(?P<dev>[^/]+)/queues/tx-(?P<queue>\d+)/byte_queue_limits/"
    r"(?P<key>[a-z_]+):(?P<value>\d+)"
)


def parse_bql(text: str) -> dict[str, list[dict[str, int]]]:
    """`grep -H .` of transmit queues' byte_queue_limits files -> interface -> one entry
    per queue by number ({"queue": 0, "limit": 30280, "limit_max": ..., "inflight": 0}:
    the files read, in bytes). ValueError on a line of another form."""
    per: dict[str, dict[int, dict[str, int]]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        m = _BQL_LINE.fullmatch(line.strip())
        if m is None:
            raise ValueError(f"not a byte_queue_limits line: {line[:100]!r}")
        q = int(m["queue"])
        entry = per.setdefault(m["dev"], {}).setdefault(q, {"queue": q})
        entry[m["key"]] = int(m["value"])
    return {dev: [qs[q] for q in sorted(qs)] for dev, qs in per.items()}
