"""One run: N concurrent iperf3 flows through a testbed, raw files to DIR/raw/.

Raw files are written to a temporary directory and renamed when complete, so a
`raw/` directory always holds a whole run. A run that fails its validity checks is
retried up to `attempts` times; earlier attempts are kept under `invalid-attempts/`.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ccbench import host_apply, instruments, jsonio, layout, needs, probes, run_senders, runmeta
from ccbench.errors import CcbenchError
from ccbench.exec import Proc
from ccbench.instruments import Instrument, Recording
from ccbench.layout import AFTER, BEFORE
from ccbench.needs import Need, Needs
from ccbench.progress import console, info
from ccbench.runmeta import RunMeta
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed, signals_deferred

CLIENT_GRACE_S = 20.0
PROBE_GRACE_S = 30.0  # flent starts Python and its runners before the first sample
IPERF3 = Needs(("iperf3",))  # on every sender and receiver


@dataclass
class RunProcs:
    servers: list[Proc] = field(default_factory=list)  # iperf3 -s -1: end with their flow
    # irtt's and netperf's servers never end by themselves: stopped with the rest
    probe_servers: list[Proc] = field(default_factory=list)
    clients: list[Proc] = field(default_factory=list)
    samplers: list[Proc] = field(default_factory=list)  # a probe stopped after the flows (ping)
    probes: list[Proc] = field(default_factory=list)  # end by themselves (irtt, flent)
    gated_probes: list[Proc] = field(default_factory=list)  # released before the flows
    instruments: list[Instrument] = field(default_factory=list)
    probe_lead_s: float = 0.0  # how long before the first flow

    def all(self) -> list[Proc]:
        own = [p for i in self.instruments for p in i.procs]
        return [*self.servers, *self.probe_servers, *self.clients, *self.samplers,
                *self.probes, *own]  # fmt: skip

    def stop_all(self) -> None:
        for p in self.all():
            p.stop(signal.SIGTERM, grace_s=2.0)


def run_once(
    tb: Testbed, spec: RunSpec, raw: Path, kernel_req: dict[str, str] | None = None,
    registry: Mapping[str, type[Instrument]] = instruments.REGISTRY,
) -> RunMeta:  # fmt: skip
    """Do the run; write every raw file into `raw` (which must exist), meta.json last
    (what happened when: the returned RunMeta). `kernel_req`: the variant's {label,
    match}, kept as raw/kernel.json (summarize.hosts checks the senders' kernels
    recorded in facts.json against it). `registry`: the instruments it may record with
    (the package's unless a caller brings its own set)."""
    t0 = time.monotonic()
    procs = RunProcs(instruments=instruments.for_run(tb, spec, registry))
    _prepare(tb, spec, raw, spec.senders, kernel_req, procs.instruments)
    changes = host_apply.apply(tb, spec, raw)
    try:
        return _record(tb, spec, raw, procs, t0)
    finally:
        with signals_deferred():
            host_apply.put_back_recorded(tb, raw, changes)


def _record(tb: Testbed, spec: RunSpec, raw: Path, procs: RunProcs, t0: float) -> RunMeta:
    """The run on a prepared testbed: servers, clients, probe and instruments, the
    traffic, the snapshots around it, meta.json."""
    _snapshot_bottleneck(tb, raw, BEFORE)
    rec = Recording(tb, spec, raw)
    # Where a run's time goes besides its traffic (bench/pipeline.py reads them).
    phases = {"prepare": round(time.monotonic() - t0, 3)}
    label = f"{spec.scenario}/{spec.variant} rep {spec.repetition}"
    probe_argv = None
    try:
        _start_servers(tb, spec, procs, raw)
        client_argv = _start_clients(tb, spec, procs, raw)
        if spec.probe_interval_s > 0:
            probe_argv = _probe_start(tb, spec, procs, raw)
        for ins in procs.instruments:
            ins.start(rec)
        during = [a for ins in procs.instruments for a in ins.during(rec)]
        phases["start"] = round(time.monotonic() - t0 - phases["prepare"], 3)
        traffic = _drive(spec, procs, label, during, rec)
        t_end = time.monotonic()
        _end_traffic(spec, procs, label, rec)
    finally:
        with signals_deferred():
            procs.stop_all()
    _snapshot_bottleneck(tb, raw, AFTER)
    phases["end"] = round(time.monotonic() - t_end, 3)
    meta = RunMeta(
        started_unix=traffic.started_unix, flow_starts=traffic.flow_starts,
        client_rc=traffic.client_rc, probe_argv=probe_argv,
        instruments={i.name: i for i in procs.instruments}, client_argv=client_argv,
        tools=tb.tools, traffic_wall_s=traffic.wall_s, finished_unix=time.time(),
        phases_s=phases,
    )  # fmt: skip
    runmeta.write(raw, meta)
    return meta


def check_sender_os(tb: Testbed, spec: RunSpec, senders: list[str]) -> None:
    """The senders run the variant's OS (a variant pinned to the wrong dumbbell or lab
    sender set would otherwise run there, as another OS's variant); a single run's
    config names no OS."""
    if spec.variant_def is None:
        return
    wrong = [f"{n} runs {os}" for n in senders if (os := tb.driver(n).os) != spec.os]
    if wrong:
        raise CcbenchError(
            f"variant {spec.variant} is for {spec.os} senders, but {', '.join(wrong)} "
            f"(testbed {tb.id}: pin the variant to a dumbbell whose senders run {spec.os})"
        )


def _prepare(
    tb: Testbed, spec: RunSpec, raw: Path, senders: list[str], kernel_req: dict[str, str] | None,
    insts: list[Instrument],
) -> None:  # fmt: skip
    """Before any process starts: every node has what the run starts there, the spec
    (and the kernel it needs) recorded, the testbed readied and its calibration
    recorded, the senders set up, the facts read."""
    check_needs(tb, spec, insts)
    jsonio.write_json(raw / layout.SPEC, spec.to_dict())
    if kernel_req:
        jsonio.write_json(raw / layout.KERNEL, kernel_req)
    tb.prepare_run()
    jsonio.write_json(raw / layout.CALIBRATION, tb.calibration())
    check_sender_os(tb, spec, senders)
    run_senders.prepare_senders(tb, spec, senders, raw)
    receivers = list(dict.fromkeys(f.receiver for f in spec.flows))
    run_senders.record_facts(tb, raw, senders, receivers)


def check_needs(tb: Testbed, spec: RunSpec, insts: list[Instrument]) -> None:
    """Every node has the programs and kernel features the run will use there (iperf3,
    the probe's, each instrument's `wants`), each node asked once; else one line naming
    each missing tool and its node, before anything of the run starts."""
    ends = dict.fromkeys([*spec.senders, *(f.receiver for f in spec.flows)])
    wanted = [Need(n, tb.ex(n), IPERF3, "the flows") for n in ends]
    if spec.probe_interval_s > 0:
        client, server = probes.tool(spec.probe_tool).needs(spec.probe_flent_test)
        snd, rcv = spec.flows[0].sender, spec.flows[0].receiver
        wanted += [Need(snd, tb.ex(snd), client, f"probe {spec.probe_tool}"),
                   Need(rcv, tb.ex(rcv), server, f"probe {spec.probe_tool}")]  # fmt: skip
    wanted += [w for i in insts for w in i.wants(tb)]
    refused = needs.refusal(wanted)
    if refused:
        raise CcbenchError(f"testbed {tb.id}: {refused}")


def _snapshot_bottleneck(tb: Testbed, raw: Path, when: str) -> None:
    """The bottleneck queue's counters, the delay element's and the drop counters,
    `when` ("before" or "after") the traffic; no queue counters where the bottleneck
    is not ccbench's (a lab's own network: summarize says what that leaves unproven)."""
    if tb.roles.bottleneck is not None:
        node, dev = tb.bottleneck
        run_senders.record(tb.ex(node), tb.driver(node).qdisc_stats(dev), raw / layout.tc(when))
    tb.snapshot_delay(raw / layout.delay(when))
    tb.snapshot_drops(raw / layout.drops(when))


def _start_servers(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> None:
    """One iperf3 server per flow on its receiver; returns when all listen."""
    roles = tb.roles
    for k, f in enumerate(spec.flows, start=1):
        node = f.receiver
        procs.servers.append(
            tb.ex(node).spawn(
                tb.driver(node).iperf3_server(layout.flow_port(roles, spec, k), spec.interval_s),
                stdout=raw / layout.server(k), stderr=raw / layout.stderr_of(layout.server(k)),
            )
        )  # fmt: skip
    for k, f in enumerate(spec.flows, start=1):
        tb.wait_listening(f.receiver, layout.flow_port(roles, spec, k))


def _start_clients(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> list[list[str]]:
    """Every client is started now but held at a gate; each is released at its start
    offset (_drive), so starts do not depend on process or ssh start-up times. Returns
    their argv lists."""
    argvs = []
    roles = tb.roles
    for k, f in enumerate(spec.flows, start=1):
        node = f.sender
        argv = tb.driver(node).iperf3_client(
            tb.address(f.receiver), layout.flow_port(roles, spec, k), f.cc, f.duration_s,
            spec.interval_s, f.streams,
        )  # fmt: skip
        argvs.append(argv)
        procs.clients.append(
            tb.ex(node).spawn(argv, stdout=raw / layout.iperf3(k),
                              stderr=raw / layout.stderr_of(layout.iperf3(k)), gated=True)
        )  # fmt: skip
    return argvs


def _end_traffic(spec: RunSpec, procs: RunProcs, label: str, rec: Recording) -> None:
    """After the flows: the instruments stopped (their last reads taken), the probe's
    data waited for, what stayed on the nodes collected, the servers given time to end."""
    for ins in procs.instruments:
        ins.stop(rec)
    for p in procs.samplers:
        p.stop(signal.SIGINT)  # ping prints its summary on SIGINT
    for p in procs.probes:  # irtt and flent end after their length; wait for their data
        try:
            p.wait(timeout=PROBE_GRACE_S)
        except subprocess.TimeoutExpired:
            raise CcbenchError(f"{label}: the {spec.probe_tool} probe did not end") from None
    for ins in procs.instruments:
        ins.collect(rec)
    for p in procs.servers:
        with contextlib.suppress(Exception):
            p.wait(timeout=3)


def _probe_start(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> list[str]:
    """Start the latency-under-load probe s1 -> r1 (through the bottleneck queue the
    flows share); it is released with the first flow, or its plan's lead_s before."""
    snd, rcv = spec.flows[0].sender, spec.flows[0].receiver
    settings = probes.ProbeSettings(tb.address(rcv), spec.probe_interval_s, spec.traffic_s,
                                    spec.probe_flent_test, testbed=tb.id)  # fmt: skip
    pl = probes.plan(spec.probe_tool, settings, tb.driver(snd).os)
    for k, argv in enumerate(pl.servers, start=1):
        out = layout.probe_server(k)
        procs.probe_servers.append(
            tb.ex(rcv).spawn(argv, stdout=raw / out, stderr=raw / layout.stderr_of(out))
        )
    for port, proto in pl.listen:
        tb.wait_listening(rcv, port, proto=proto)
    proc = tb.ex(snd).spawn(pl.client, stdout=raw / pl.out, stderr=raw / layout.PROBE_ERR,
                            gated=True)  # fmt: skip
    (procs.samplers if not pl.ends_by_itself else procs.probes).append(proc)
    procs.gated_probes.append(proc)
    procs.probe_lead_s = pl.lead_s
    return pl.client


@dataclass(frozen=True)
class Traffic:
    """What driving the flows gives meta.json (runmeta.RunMeta)."""

    started_unix: float  # the first release, wall clock
    flow_starts: dict[int, float]  # flow -> seconds after the first release, in release order
    wall_s: float  # the first release to the last client's end
    client_rc: list[int | None]


def _drive(
    spec: RunSpec, procs: RunProcs, label: str,
    during: list[tuple[float, Callable[[], None]]] | None = None,
    rec: Recording | None = None,
) -> Traffic:  # fmt: skip
    """Release each gated client at its offset; do each `during` action at its time
    (seconds after the traffic starts; one not reached before the clients end is
    skipped); show progress; wait for all to end."""
    pending = sorted(range(len(spec.flows)), key=lambda i: spec.flows[i].start_s)
    actions = sorted(during or [], key=lambda x: x[0])
    total = spec.traffic_s
    show = console.is_terminal
    if not show:
        info(f"{label}: {len(spec.flows)} flow(s), {total:g}s of traffic")
    for p in procs.gated_probes:
        p.release()
    if procs.gated_probes and procs.probe_lead_s > 0:
        time.sleep(procs.probe_lead_s)  # a probe that starts slowly (flent) is sampling
    t0 = time.monotonic()
    started_unix = time.time()
    if rec is not None:
        rec.started_unix = started_unix
    starts: dict[int, float] = {}
    deadline = t0 + total + CLIENT_GRACE_S
    last_line = 0.0
    while True:
        now = time.monotonic()
        while pending and now - t0 >= spec.flows[pending[0]].start_s:
            i = pending.pop(0)
            procs.clients[i].release()
            starts[i + 1] = round(now - t0, 4)
        while actions and now - t0 >= actions[0][0]:  # each after its flow's release
            actions.pop(0)[1]()
        if not pending and all(c.poll() is not None for c in procs.clients):
            break
        if now > deadline:
            raise CcbenchError(f"{label}: iperf3 clients still running after {total:g}s")
        if show and now - last_line >= 0.5:
            elapsed = now - t0
            console.print(f"  {label}: {elapsed:5.1f}/{total:g}s  "
                          f"ETA {max(0.0, total - elapsed):4.1f}s", end="\r")  # fmt: skip
            last_line = now
        time.sleep(0.005 if pending else 0.02)
    wall_s = round(time.monotonic() - t0, 3)
    return Traffic(started_unix, starts, wall_s, [c.wait() for c in procs.clients])
