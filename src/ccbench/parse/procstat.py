"""/proc/stat's `cpu` lines: where a Linux host's CPU time went.

On a VM, `steal` is time the hypervisor gave the vCPU to someone else; a run during
which it was high measured the neighbours as much as the congestion control.
"""

from __future__ import annotations

from typing import Any

# Field order of the `cpu` line (proc(5)); guest times are already inside user/nice.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def parse_cpu_lines(text: str) -> dict[str, dict[str, int]]:
    """Jiffies per field of every `cpu` line of /proc/stat: "cpu" (all CPUs), "cpu0", ..."""
    out: dict[str, dict[str, int]] = {}
    for line in text.splitlines():
        parts = line.split()
        if not parts or not parts[0].startswith("cpu"):
            continue
        try:
            vals = {k: int(v) for k, v in zip(FIELDS, parts[1:], strict=False)}
        except ValueError:
            raise ValueError(f"bad /proc/stat cpu line: {line[:80]!r}") from None
        if len(vals) < 4 or min(vals.values()) < 0:
            raise ValueError(f"bad /proc/stat cpu line: {line[:80]!r}")
        out.setdefault(parts[0], vals)
    return out


def parse_cpu_line(text: str) -> dict[str, int]:
    """Jiffies per field from the first `cpu ` line of /proc/stat."""
    lines = parse_cpu_lines(text)
    if "cpu" not in lines:
        raise ValueError("no aggregate 'cpu' line in /proc/stat text")
    return lines["cpu"]


def usage_between(before: str, after: str) -> dict[str, Any]:
    """Busy, softirq and steal shares (% of all CPU time) between two snapshots.

    Raises ValueError when a snapshot does not parse or a counter went backwards."""
    a, b = parse_cpu_line(before), parse_cpu_line(after)
    d = {k: b.get(k, 0) - a.get(k, 0) for k in FIELDS}
    back = [k for k, v in d.items() if v < 0]
    if back:
        raise ValueError(f"cpu counters went backwards ({', '.join(back)})")
    total = sum(d.values())
    if total <= 0:
        return {"busy_pct": None, "softirq_pct": None, "steal_pct": None, "jiffies": total}
    idle = d["idle"] + d["iowait"]
    return {
        "busy_pct": 100 * (total - idle - d["steal"]) / total,
        "softirq_pct": 100 * d["softirq"] / total,
        "steal_pct": 100 * d["steal"] / total,
        "jiffies": total,
    }
