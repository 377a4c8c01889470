"""Where a host's CPU time went: Linux /proc/stat's `cpu` lines and FreeBSD's
`sysctl -n kern.cp_time kern.cp_times`, and the shares of it between two reads.

On a VM, `steal` is time the hypervisor gave the vCPU to someone else; a run during
which it was high measured the neighbours as much as the congestion control.

Linux (proc(5)): `cpu` is all CPUs, `cpuN` each one, in USER_HZ ticks: user nice system
idle iowait irq softirq steal (guest and guest_nice follow, already inside user/nice).
FreeBSD: the kernel counts stathz ticks in CPUSTATES = 5 states, CP_USER CP_NICE CP_SYS
CP_INTR CP_IDLE (sys/sys/resource.h); kern.cp_time is the sum over CPUs, kern.cp_times
5 longs per CPU up to mp_maxid, zeros for an absent CPU (sys/kern/kern_clock.c,
sysctl_kern_cp_time / sysctl_kern_cp_times), and sbin/sysctl prints each array on one
line, space-separated. statclock() (kern_clock.c) counts a tick in an interrupt thread as
CP_INTR: FreeBSD's software interrupts (netisr) are interrupt threads, so its `intr`
holds what Linux splits into irq and softirq, and it has no steal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Field order of the `cpu` line (proc(5)); guest times are already inside user/nice.
FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
# kern.cp_time's order (CP_USER .. CP_IDLE), in FIELDS' names: intr is counted as irq.
FREEBSD_FIELDS = ("user", "nice", "system", "irq", "idle")
ALL = "cpu"  # the key of all CPUs together; each CPU is "cpu0", "cpu1", ...

Counters = dict[str, dict[str, int]]  # "cpu" / "cpuN" -> field -> ticks


def parse_cpu_lines(text: str) -> Counters:
    """Jiffies per field of every `cpu` line of /proc/stat: "cpu" (all CPUs), "cpu0", ..."""
    out: Counters = {}
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


def parse_cp_times(text: str) -> Counters:
    """`sysctl -n kern.cp_time kern.cp_times` as the same keys as parse_cpu_lines:
    "cpu" from the first line, "cpu0", "cpu1", ... from the second (FREEBSD_FIELDS)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    what = "not `sysctl -n kern.cp_time kern.cp_times` output"
    if len(lines) != 2:
        raise ValueError(f"{what}: {len(lines)} lines, 2 expected")
    try:
        total, per_cpu = ([int(v) for v in ln] for ln in lines)
    except ValueError:
        raise ValueError(f"{what}: {text.strip()[:80]!r}") from None
    n = len(FREEBSD_FIELDS)
    if len(total) != n or not per_cpu or len(per_cpu) % n or min(total + per_cpu) < 0:
        raise ValueError(f"{what}: {len(total)} and {len(per_cpu)} counters "
                         f"({n}, and {n} per CPU, expected)")  # fmt: skip
    out: Counters = {ALL: dict(zip(FREEBSD_FIELDS, total, strict=True))}
    for i in range(len(per_cpu) // n):
        out[f"cpu{i}"] = dict(zip(FREEBSD_FIELDS, per_cpu[i * n : (i + 1) * n], strict=True))
    return out


def parse_counters(text: str, os: str) -> Counters:
    """A host's counters as its OS's driver reads them (hosts.*.cpu_counters)."""
    return parse_cp_times(text) if os == "freebsd" else parse_cpu_lines(text)


def parse_cpu_line(text: str) -> dict[str, int]:
    """Jiffies per field from the first `cpu ` line of /proc/stat."""
    lines = parse_cpu_lines(text)
    if ALL not in lines:
        raise ValueError("no aggregate 'cpu' line in /proc/stat text")
    return lines[ALL]


@dataclass(frozen=True)
class Shares:
    """One CPU's (or all CPUs') time between two reads, each % of the ticks counted.
    softirq and steal are None where the OS does not count them apart (FreeBSD)."""

    user_pct: float  # user + nice
    system_pct: float
    irq_pct: float
    softirq_pct: float | None
    steal_pct: float | None
    busy_pct: float  # everything but idle, iowait and steal
    ticks: int


@dataclass(frozen=True)
class Window:
    """A host's CPU between two reads: all CPUs, the busiest one, how many counted."""

    all_cpus: Shares | None  # None: no time passed
    busiest: tuple[str, Shares] | None
    cpus: int  # CPUs whose counters moved (FreeBSD lists absent CPUs as zeros)


def shares_of(d: dict[str, int]) -> Shares | None:
    """The shares of one line's increase; None when no tick passed."""
    total = sum(d.values())
    if total <= 0:
        return None
    idle = d.get("idle", 0) + d.get("iowait", 0)
    steal = d.get("steal")
    pct = 100 / total
    return Shares(
        user_pct=(d.get("user", 0) + d.get("nice", 0)) * pct,
        system_pct=d.get("system", 0) * pct,
        irq_pct=d.get("irq", 0) * pct,
        softirq_pct=d["softirq"] * pct if "softirq" in d else None,
        steal_pct=steal * pct if steal is not None else None,
        busy_pct=(total - idle - (steal or 0)) * pct,
        ticks=total,
    )


def window(before: Counters, after: Counters) -> Window:
    """The CPU time between two reads of one host. ValueError when a counter went
    backwards or the aggregate line is missing."""
    if ALL not in before or ALL not in after:
        raise ValueError("no aggregate 'cpu' counters")
    deltas: dict[str, dict[str, int]] = {}
    for key in after.keys() & before.keys():
        d = {k: v - before[key].get(k, 0) for k, v in after[key].items()}
        back = [k for k, v in d.items() if v < 0]
        if back:
            raise ValueError(f"{key} counters went backwards ({', '.join(back)})")
        deltas[key] = d
    per_cpu = {k: s for k, d in deltas.items() if k != ALL and (s := shares_of(d)) is not None}
    top = max(per_cpu.items(), key=lambda kv: (kv[1].busy_pct, -int(kv[0][3:] or 0)),
              default=None)  # fmt: skip
    return Window(shares_of(deltas[ALL]), top, len(per_cpu))


def usage_between(before: str, after: str) -> dict[str, Any]:
    """Busy, softirq and steal shares (% of all CPU time) between two snapshots.

    Raises ValueError when a snapshot does not parse or a counter went backwards."""
    a, b = parse_cpu_line(before), parse_cpu_line(after)
    d = {k: b.get(k, 0) - a.get(k, 0) for k in FIELDS}
    back = [k for k, v in d.items() if v < 0]
    if back:
        raise ValueError(f"cpu counters went backwards ({', '.join(back)})")
    s = shares_of(d)
    if s is None:
        return {"busy_pct": None, "softirq_pct": None, "steal_pct": None,
                "jiffies": sum(d.values())}  # fmt: skip
    return {"busy_pct": s.busy_pct, "softirq_pct": s.softirq_pct, "steal_pct": s.steal_pct,
            "jiffies": s.ticks}  # fmt: skip
