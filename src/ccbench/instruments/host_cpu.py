"""Every sender's and receiver's CPU right before and right after the traffic, and what
the flows cost in CPU: summary.json `host_cpu`. Each figure names its source:

- `proc_stat` / `kern_cp_time`: the host's own counters (Linux /proc/stat, FreeBSD
  `sysctl -n kern.cp_time kern.cp_times`; ccbench.parse.procstat): all its CPU time,
  softirq and every other process included. Per host: user, system, irq, softirq,
  steal and busy shares, of all its CPUs and of the busiest one.
- `iperf3_process`: each flow's iperf3 client (the sender) and server (the receiver)
  process's own CPU as iperf3 reports it (end.cpu_utilization_percent: getrusage,
  esnet/iperf src/iperf_util.c cpu_util).

Service demand is netperf's CPU-efficiency figure: CPU µs per KB (1024 bytes) moved
(HewlettPackard/netperf src/netlib.c, calc_service_demand: utilization × 10000 / KB per
second × the number of CPUs, i.e. the CPU time spent over the KB). Here per role: the
CPU time its hosts spent (counters: busy share × CPUs × the traffic window; processes:
each one's share of one CPU × the seconds iperf3 measured) over the KB the receivers'
iperf3 servers counted (server-K.json's end.sum_received.bytes; the client carries the
same count back, read where there is no server JSON).

One kernel (the local testbed): every namespace reads the same machine-wide /proc/stat,
so it is read once per snapshot and each host's figures are the machine's (`machine`),
routers and the delay element included. The roles' service demand then comes from the
iperf3 processes, which leaves out the kernel's work outside them (softirq run by
ksoftirqd or while another task ran: the receive path, the routers' forwarding), and
may count some of that work done in their context (a tick-accounted kernel charges an
interrupt's tick to the task it interrupted).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Self

from ccbench import layout
from ccbench.instruments.base import BeforeAfter, Recording, SummaryPart, need, read_pair
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.parse.iperf3 import Iperf3Result, read_report
from ccbench.parse.procstat import Window, parse_counters, window
from ccbench.part import Part, d
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

SENDER, RECEIVER = "sender", "receiver"
MACHINE = "machine"  # a one-kernel testbed's one read (its raw file's name)
COUNTERS = {"linux": "proc_stat", "freebsd": "kern_cp_time"}  # the counters' source by OS
PROCESS = "iperf3_process"
KB = 1024  # netperf's unit_divisor for a stream test (calc_service_demand)
SCOPES = {
    "hosts": "each host's own counters",
    MACHINE: (
        "one kernel: every host's counters are the machine's (routers and delay element "
        "included); the service demand is the iperf3 processes' own CPU, which leaves out "
        "softirq work done outside them"
    ),
    "not read": "a run from before host_cpu: iperf3's process figures only",
}


def file(node: str, when: str) -> str:
    """The counters of `node` (or MACHINE) read `when` (layout.BEFORE or AFTER)."""
    return f"host-cpu-{node}-{when}.txt"


class CpuShares(Part):
    """CPU time between the reads before and after the traffic, % of the ticks counted."""

    user_pct: float = d("user and nice")
    system_pct: float = d("system (kernel on behalf of processes)")
    irq_pct: float = d("interrupts (FreeBSD: interrupt threads, netisr's among them)")
    softirq_pct: float | None = d("Linux softirq (FreeBSD: null, inside irq_pct)")
    steal_pct: float | None = d("a hypervisor gave the vCPU to other guests (FreeBSD: null)")
    busy_pct: float = d("everything but idle, iowait and steal")
    ticks: int = d("ticks counted (Linux USER_HZ, FreeBSD stathz)")


class BusiestCpu(CpuShares):
    cpu: str = d("which CPU (cpu0, cpu1, ...): the one with the largest busy_pct")


class EndpointCpu(Part):
    role: str = d("sender or receiver")
    os: str | None = d("its OS (null: not recorded)")
    source: str | None = d("proc_stat or kern_cp_time: the counters read (null: none)")
    machine: bool = d("the figures are the whole machine's (one kernel), not this host's")
    cpus: int | None = d("CPUs whose counters moved")
    all_cpus: CpuShares | None = d("all CPUs together")
    busiest_cpu: BusiestCpu | None = d("the busiest CPU")


class ProcessCpu(Part):
    """One iperf3 process over its test, % of ONE CPU (above 100: several threads)."""

    total_pct: float = d("user + system (iperf3's host_total / remote_total)")
    user_pct: float | None = d("user")
    system_pct: float | None = d("system")


class FlowCpu(Part):
    flow: int = d("flow number")
    sender: str = d("its sender node")
    receiver: str = d("its receiver node")
    elapsed_s: float | None = d("the seconds iperf3's CPU figures cover (end.sum_sent.seconds)")
    bytes_delivered: int | None = d("bytes its iperf3 server counted")
    sender_process: ProcessCpu | None = d("the client's CPU (end.cpu_utilization_percent.host_*)")
    receiver_process: ProcessCpu | None = d(
        "the server's CPU (the client's end.cpu_utilization_percent.remote_*)")  # fmt: skip


class Demand(Part):
    source: str = d("proc_stat, kern_cp_time (host counters) or iperf3_process")
    cpu_s: float = d(
        "CPU seconds spent: host counters, busy share × CPUs × the window summed over the "
        "role's hosts; processes, each one's % of one CPU × the seconds iperf3 measured "
        "summed over the flows")  # fmt: skip
    cpu_pct: float | None = d("cpu_s over the role's CPUs × the traffic window, %")
    sd_us_per_kb: float | None = d("service demand: cpu_s in µs per KB (1024 B) delivered")


class RoleCpu(Part):
    hosts: list[str] = d("the role's nodes")
    cpus: int | None = d("their CPUs (one kernel: the machine's)")
    window_s: float = d("the traffic window, s")
    kb_delivered: float | None = d("KB (1024 B) the receivers' servers counted, all flows")
    source: str | None = d(
        "which figure cpu_pct and sd_us_per_kb are: the host counters where each host is "
        "its own, else iperf3_process (null: neither)")  # fmt: skip
    cpu_pct: float | None = d("CPU busy, % of the role's CPUs over the window")
    sd_us_per_kb: float | None = d("service demand, CPU µs per KB delivered")
    busiest_cpu_pct: float | None = d("busiest single CPU of the role's hosts, busy % "
                                      "(host counters; null with one kernel)")  # fmt: skip
    counters: Demand | None = d("from the host counters (null with one kernel, or where a "
                                "host of the role was not read)")  # fmt: skip
    process: Demand | None = d("from the iperf3 processes' own CPU (getrusage): the kernel's "
                               "work outside them (softirq in ksoftirqd or in another "
                               "task's time) is not in it")  # fmt: skip


class HostCpuPart(Part):
    scope: str = d("hosts, machine (one kernel) or not read")
    note: str = d("what the scope means for these figures")
    hosts: dict[str, EndpointCpu] = d("every sender and receiver")
    flows: list[FlowCpu] = d("each flow's iperf3 processes")
    sender: RoleCpu = d("the senders together")
    receiver: RoleCpu = d("the receivers together")


@dataclass
class HostCpu(BeforeAfter[HostCpuPart]):
    name = "host_cpu"
    description = "every sender's and receiver's CPU counters before and after"
    raw_files = (
        RawFile(
            file,
            f"sender or receiver NODE's CPU counters (NODE `{MACHINE}`: one kernel's single read)",
        ),
    )
    oses = ()  # every endpoint's, whatever its OS
    summary_key = "host_cpu"
    summary_doc = (
        "every sender's and receiver's CPU over the traffic (host counters, named by "
        "source), each flow's iperf3 process CPU, and per role the CPU % and the service "
        "demand (CPU µs per KB delivered, netperf's definition)"
    )

    nodes: dict[str, str] = field(default_factory=dict)  # node -> role
    node_os: dict[str, str] = field(default_factory=dict)
    machine: bool = False  # one kernel: the counters read once, the machine's
    counters: bool = True  # False: a run from before it (iperf3's figures only)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = endpoints(spec)
        return cls(nodes=nodes, node_os={n: tb.driver(n).os for n in nodes},
                   machine=kind(tb.kind).caps.one_kernel)  # fmt: skip

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        if self.machine:  # any namespace reads the one /proc/stat
            node = next(iter(self.nodes))
            return [(node, rec.tb.driver(node).cpu_counters(), file(MACHINE, when))]
        return [(n, rec.tb.driver(n).cpu_counters(), file(n, when)) for n in self.nodes]

    @classmethod
    def from_record(cls, r: Any) -> Self:
        need(isinstance(r, dict) and isinstance(r.get("nodes"), dict)
             and all(v in (SENDER, RECEIVER) for v in r["nodes"].values())
             and isinstance(r.get("node_os"), dict) and isinstance(r.get("machine"), bool)
             and isinstance(r.get("counters", True), bool),
             "not {nodes: {node: sender|receiver}, node_os, machine}")  # fmt: skip
        return cls(nodes=dict(r["nodes"]), node_os=dict(r["node_os"]), machine=r["machine"],
                   counters=r.get("counters", True))  # fmt: skip

    @classmethod
    def without_record(cls, rd: RawDir, spec: RunSpec) -> Self | None:
        return cls(nodes=endpoints(spec), counters=False)

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        hosts = self._hosts(rd)
        flows = flow_cpu(rd, spec)
        scope = "not read" if not self.counters else MACHINE if self.machine else "hosts"
        roles = {r: role_cpu(r, hosts, flows, spec.window_s, scope) for r in (SENDER, RECEIVER)}
        part = HostCpuPart(scope=scope, note=SCOPES[scope], hosts=hosts, flows=flows,
                           sender=roles[SENDER], receiver=roles[RECEIVER])  # fmt: skip
        return SummaryPart(part.model_dump(mode="json"))

    def _hosts(self, rd: RawDir) -> dict[str, EndpointCpu]:
        """Each endpoint's counters over the traffic (one kernel: the machine's)."""
        reads = [] if not self.counters else [MACHINE] if self.machine else list(self.nodes)
        got = {n: _window(rd, n, "linux" if n == MACHINE else self.node_os.get(n, "linux"))
               for n in reads}  # fmt: skip
        where = {n: MACHINE if self.machine else n for n in self.nodes}
        return {n: _endpoint(role, self.node_os.get(n), got.get(where[n]), self.machine)
                for n, role in self.nodes.items()}  # fmt: skip


def _endpoint(role: str, os: str | None, w: Window | None, machine: bool) -> EndpointCpu:
    busiest = w.busiest if w else None
    return EndpointCpu(
        role=role, os=os, source=COUNTERS.get(os or "") if w else None, machine=machine,
        cpus=w.cpus if w else None,
        all_cpus=CpuShares(**asdict(w.all_cpus)) if w and w.all_cpus else None,
        busiest_cpu=BusiestCpu(cpu=busiest[0], **asdict(busiest[1])) if busiest else None,
    )  # fmt: skip


def endpoints(spec: RunSpec) -> dict[str, str]:
    """node -> role of the run's senders, then its receivers."""
    return {n: SENDER for n in spec.senders} | {f.receiver: RECEIVER for f in spec.flows}


def _window(rd: RawDir, name: str, os: str) -> Window | None:
    names = [file(name, BEFORE), file(name, AFTER)]
    texts = read_pair(rd, *names)
    if texts is None:
        return None
    try:
        return window(parse_counters(texts[0], os), parse_counters(texts[1], os))
    except ValueError as e:
        rd.problem(f"{names[0]}/{names[1]}", str(e))
        return None


class _Quiet:
    """A run's raw files read without adding problems: ccbench.summarize.flows already
    names an iperf3 file that does not read."""

    def __init__(self, rd: RawDir) -> None:
        self.rd = rd
        self.problems: list[Reason] = []

    def exists(self, name: str) -> bool:
        return self.rd.exists(name)

    def _quiet(self, read: Any, name: str) -> Any:
        n = len(self.rd.problems)
        got = read(name)
        self.problems += self.rd.problems[n:]
        del self.rd.problems[n:]
        return got

    def text(self, name: str) -> str | None:
        got: str | None = self._quiet(self.rd.text, name)
        return got

    def json(self, name: str) -> Any:
        return self._quiet(self.rd.json, name)

    def problem(self, name: str, what: str, code: Code = Code.FILE_DAMAGED) -> None:
        self.problems.append(layout.file_problem(name, what, code))


def _process(res: Iperf3Result | None, remote: bool) -> ProcessCpu | None:
    cpu = res.cpu if res else None
    if cpu is None:
        return None
    total, user, system = ((cpu.remote_total, cpu.remote_user, cpu.remote_system) if remote
                           else (cpu.host_total, cpu.host_user, cpu.host_system))  # fmt: skip
    return ProcessCpu(total_pct=total, user_pct=user, system_pct=system) if total else None


def flow_cpu(rd: RawDir, spec: RunSpec) -> list[FlowCpu]:
    """Each flow's iperf3 processes' CPU and the bytes its server counted."""
    q = _Quiet(rd)
    out = []
    for k, f in enumerate(spec.flows, start=1):
        client, _ = read_report(q, layout.iperf3(k))
        server, _ = read_report(q, layout.server(k))
        ok = [r for r in (server, client) if r is not None and not r.error]
        got = [r.bytes_received for r in ok if r.bytes_received is not None]
        out.append(FlowCpu(
            flow=k, sender=f.sender, receiver=f.receiver,
            elapsed_s=client.duration_s if client else None,
            bytes_delivered=got[0] if got else None,
            sender_process=_process(client, remote=False),
            # the server's own figure where its client has none (it died first)
            receiver_process=_process(client, remote=True) or _process(server, remote=False),
        ))  # fmt: skip
    return out


def service_demand_us_per_kb(cpu_s: float, kb: float | None) -> float | None:
    """netperf's service demand: CPU µs per KB (calc_service_demand: utilization × 10000 /
    (KB/s) × CPUs, which is utilization × elapsed × CPUs in µs over the KB)."""
    return cpu_s * 1e6 / kb if kb else None


def _demand(source: str, cpu_s: float, cpus: int | None, window_s: float,
            kb: float | None) -> Demand:  # fmt: skip
    pct = 100 * cpu_s / (cpus * window_s) if cpus and window_s > 0 else None
    return Demand(source=source, cpu_s=cpu_s, cpu_pct=pct,
                  sd_us_per_kb=service_demand_us_per_kb(cpu_s, kb))  # fmt: skip


def role_cpu(role: str, hosts: dict[str, EndpointCpu], flows: list[FlowCpu], window_s: float,
             scope: str) -> RoleCpu:  # fmt: skip
    """One role's CPU and service demand from its hosts' counters and its processes."""
    mine = {n: h for n, h in hosts.items() if h.role == role}
    got = [r.bytes_delivered for r in flows]
    kb = sum(b for b in got if b is not None) / KB if got and None not in got else None
    read = [h for h in mine.values() if h.all_cpus is not None and h.cpus]
    whole = bool(mine) and len(read) == len(mine)
    cpus = (read[0].cpus if scope == MACHINE and read else
            sum(h.cpus or 0 for h in read) if whole else None)  # fmt: skip
    counters = None
    if whole and scope == "hosts":
        cpu_s = sum((h.all_cpus.busy_pct if h.all_cpus else 0) / 100 * (h.cpus or 0) * window_s
                    for h in read)  # fmt: skip
        source = "+".join(sorted({h.source or "" for h in read}))
        counters = _demand(source, cpu_s, cpus, window_s, kb)
    procs = [f.sender_process if role == SENDER else f.receiver_process for f in flows]
    process = None
    if flows and all(p is not None for p in procs) and all(f.elapsed_s for f in flows):
        cpu_s = sum(p.total_pct / 100 * (f.elapsed_s or 0)
                    for p, f in zip(procs, flows, strict=True) if p is not None)  # fmt: skip
        process = _demand(PROCESS, cpu_s, cpus, window_s, kb)
    chosen = counters or process
    busiest = [h.busiest_cpu.busy_pct for h in read if h.busiest_cpu]
    return RoleCpu(
        hosts=sorted(mine), cpus=cpus, window_s=window_s, kb_delivered=kb,
        source=chosen.source if chosen else None,
        cpu_pct=chosen.cpu_pct if chosen else None,
        sd_us_per_kb=chosen.sd_us_per_kb if chosen else None,
        busiest_cpu_pct=max(busiest) if busiest and scope == "hosts" else None,
        counters=counters, process=process,
    )  # fmt: skip


def of(rec: Any) -> HostCpuPart | None:
    """A run record's `host_cpu`."""
    got = HostCpu.part_of(rec)
    return got if isinstance(got, HostCpuPart) else None
