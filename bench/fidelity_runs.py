"""One measured run of bench/fidelity.py: ccbench's own run (attempts.execute, every
validity rule in force) on a testbed that is up, plus where the machine's CPU went and
how much of it other people's work took.

- CPU per packet through the bottleneck, by kind, over the run's traffic (the run's own
  raw/cpu-before.txt and cpu-after.txt, /proc/stat read just before the first flow
  and just after the last): user space (iperf3, the delay element's own code, the
  samplers), the kernel on behalf of processes (sendmsg, the element's netlink
  verdicts), irq + softirq (forwarding hops, qdiscs, veth receive, timers); per CPU
  busy share; the hypervisor's steal.
- Foreign load ("other %"): user time the machine spent, over the whole run, beyond
  this bench and every process it started (Accounting), as a share of all CPUs. Other
  sessions share this VM; a run above CLEAN_OTHER_PCT is marked, and the CPU tables
  average clean runs only.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ccbench.attempts import execute
from ccbench.errors import CcbenchError
from ccbench.parse import procstat
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.testbed import local
from ccbench.testbed.kinds import TestbedConfig

USER_HZ = os.sysconf("SC_CLK_TCK")
CLEAN_OTHER_PCT = 5.0


def cpu_split(before: str, after: str, pkts: int) -> dict[str, float]:
    """Where the machine's CPU went between two /proc/stat texts: busy share (%), µs
    per packet through the bottleneck by kind, steal (%), and each CPU's busy share."""
    b, a = procstat.parse_cpu_lines(before), procstat.parse_cpu_lines(after)
    d = {k: a["cpu"][k] - b["cpu"][k] for k in procstat.FIELDS}
    total = sum(d.values()) or math.nan
    busy = total - d["idle"] - d["iowait"]
    per_pkt = 1e6 / USER_HZ / pkts if pkts else math.nan
    out = {
        "cpu": 100 * busy / total,
        "us_per_pkt": busy * per_pkt,
        "usr_us": (d["user"] + d["nice"]) * per_pkt,
        "sys_us": d["system"] * per_pkt,
        "sirq_us": (d["irq"] + d["softirq"]) * per_pkt,
        "steal": 100 * d["steal"] / total,
    }
    for name in sorted(k for k in a if k != "cpu" and k in b):
        dc = {k: a[name][k] - b[name][k] for k in procstat.FIELDS}
        tot = sum(dc.values()) or math.nan
        out[f"{name}_busy"] = 100 * (tot - dc["idle"] - dc["iowait"]) / tot
    return out


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class Accounting:
    """User time of this bench and everything it starts, exited processes included: a
    cgroup-v1 cpuacct group (accounting only: the controller is mounted alone here, so
    the group changes no scheduling) holding this process, which its children inherit.
    Removed on close, this process moved back first. Without cpuacct: this process, its
    reaped children and the testbeds' delay elements (a process re-parented to init
    would then count as foreign)."""

    def __init__(self) -> None:
        self.group: Path | None = CPUACCT / f"ccbench-fidelity-{os.getpid()}"
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.close()
            self.group = None

    def user_ticks(self, pids: list[int]) -> float:
        if self.group is not None:
            for line in (self.group / "cpuacct.stat").read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == "user":
                    return float(v)
        t = os.times()
        return (t.user + t.children_user) * USER_HZ + sum(_utime_ticks(p) for p in pids)

    def close(self) -> None:
        if self.group is None:
            return
        with contextlib.suppress(OSError):
            (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        with contextlib.suppress(OSError):
            self.group.rmdir()  # empty by now: every testbed process has ended
        self.group = None


def _utime_ticks(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return float(fields[11])  # utime (field 14; fields[0] is field 3)


def timer_interrupts() -> int:
    """Local timer interrupts (/proc/interrupts LOC) so far, all CPUs: on this VM each
    is an exit to the hypervisor, and a backlogged tbf arms one per packet."""
    for line in Path("/proc/interrupts").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] == "LOC:":
            return sum(int(x) for x in parts[1:] if x.isdigit())
    return 0


def machine_user_ticks() -> float:
    c = procstat.parse_cpu_line(Path("/proc/stat").read_text())
    return c["user"] + c["nice"]


@dataclass(frozen=True)
class Setup:
    """A testbed layout with a delay direction: one column of the bench's tables."""

    layout: str
    direction: str

    @property
    def name(self) -> str:
        return f"{self.layout}/{self.direction}"

    def config(self, tb_id: str) -> TestbedConfig:
        return TestbedConfig(id=tb_id, layout=self.layout, delay_direction=self.direction)


def setups(layouts: list[str], directions: list[str]) -> tuple[list[Setup], list[str]]:
    """Every layout x direction a testbed offers; (setups, notes on those left out)."""
    from ccbench import topology

    out, notes = [], []
    for lay in layouts:
        for d in directions:
            if d in topology.layout(lay).delay_directions:
                out.append(Setup(lay, d))
            else:
                notes.append(f"{lay}/{d} not measured: {topology.layout(lay).directions_why}")
    return out, notes


@contextlib.contextmanager
def testbeds_up(
    todo: list[Setup], topo: Topology
) -> Iterator[list[local.LocalTestbed | Exception]]:
    """One testbed per setup, side by side (ids fb0, fb1, ...), all removed at the end;
    a setup whose testbed could not be built is its exception instead."""
    beds: list[local.LocalTestbed | Exception] = []
    ids = [f"fb{k}" for k in range(len(todo))]
    try:
        for tb_id, s in zip(ids, todo, strict=True):
            local.down(tb_id)
            tb = local.LocalTestbed(s.config(tb_id), topo)
            try:
                tb.up()
                beds.append(tb)
            except Exception as e:  # e.g. calibration failed every try: the others go on
                beds.append(e)
        yield beds
    finally:
        for tb_id in ids:
            local.down(tb_id)


def _element_pids(beds: list[local.LocalTestbed | Exception]) -> list[int]:
    pids = []
    for tb in beds:
        if isinstance(tb, local.LocalTestbed):
            pid = (tb.read_state() or {}).get("ccdelay_pid")
            if isinstance(pid, int):
                pids.append(pid)
    return pids


def measure(
    tb: local.LocalTestbed, beds: list[local.LocalTestbed | Exception], ccs: list[str],
    duration: float, out: Path, rep: int, acct: Accounting,
) -> dict[str, Any]:  # fmt: skip
    """One run on `tb` (up); its numbers, validity and CPU. `beds`: every testbed up
    now (their elements' CPU is this bench's, not foreign)."""
    topo = tb.topo
    flows = tuple(Flow(pair=i + 1, cc=cc, duration_s=duration) for i, cc in enumerate(ccs))
    spec = RunSpec(topology=topo, flows=flows, interval_s=1.0, ss_interval_s=0.1,
                   scenario="bench", variant="+".join(ccs), repetition=rep)  # fmt: skip
    pids = _element_pids(beds)
    t0, m0, o0, i0 = time.time(), machine_user_ticks(), acct.user_ticks(pids), timer_interrupts()
    s = execute(tb, spec, out, attempts=1)
    wall, m1, o1 = time.time() - t0, machine_user_ticks(), acct.user_ticks(pids)
    timers = timer_interrupts() - i0
    rtts = [f.srtt_mean_us for f in s.flows if f.srtt_mean_us]
    d = s.delay_element
    queue = s.bottleneck.queue if s.bottleneck else None
    shaper = s.bottleneck.shaper if s.bottleneck else None
    pkts = (queue.sent_pkts if queue else 0) or 0
    raw = out / "raw"
    try:
        cpu = cpu_split((raw / "cpu-before.txt").read_text(), (raw / "cpu-after.txt").read_text(),
                        pkts)  # fmt: skip
    except (OSError, KeyError):
        cpu = {k: math.nan for k in ("cpu", "us_per_pkt", "usr_us", "sys_us", "sirq_us", "steal")}
    ledger = s.loss_ledger
    return {
        **cpu,
        "time": t0,
        "other_pct": 100
        * max(0.0, (m1 - m0) - (o1 - o0))
        / USER_HZ
        / (wall * (os.cpu_count() or 1)),
        "util": s.utilization_pct,
        "jain": s.jain,
        "rtt": sum(rtts) / len(rtts) / 1000 if rtts else math.nan,
        "late": (d.late_share or 0.0) * 100 if d and d.late_share is not None else math.nan,
        "elem_cpu": d.cpu_s / duration * 100 if d and d.cpu_s is not None else math.nan,
        "outside": ledger.outside_pkts if ledger else None,
        "bn_pkts": pkts,
        "bn_drops": s.bottleneck.drops if s.bottleneck else None,
        # the shaper's overlimits (a dequeue that found too few tokens: tbf then arms
        # its watchdog) and timer interrupts over the whole run (set-up included)
        "overlimits_per_pkt": (shaper.overlimits / pkts if shaper and pkts else math.nan),
        "timers_per_pkt": timers / pkts if pkts else math.nan,
        # what the element held per data packet: with delay reverse, the ACKs (stretch
        # ACKs: fewer than one per two segments)
        "held_per_pkt": d.packets / pkts if d and pkts else math.nan,
        "valid": s.valid,
        "reasons": [r.text for r in s.reasons],
        "method": (s.calibration.delay_method if s.calibration else None),
        "run_dir": str(out),
    }


def failed(reason: str) -> dict[str, Any]:
    """The row of a case that could not be measured: no numbers, the reason."""
    nan = math.nan
    return {"util": nan, "jain": nan, "rtt": nan, "late": nan, "elem_cpu": nan, "cpu": nan,
            "us_per_pkt": nan, "usr_us": nan, "sys_us": nan, "sirq_us": nan, "steal": nan,
            "other_pct": nan, "outside": None, "valid": False, "time": time.time(),
            "reasons": [f"not measured: {reason}"], "method": None}  # fmt: skip


def why(e: Exception) -> str:
    return str(e) if isinstance(e, CcbenchError) else f"{type(e).__name__}: {e}"
