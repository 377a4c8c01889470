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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench import jsonio, layout, probes, run_senders
from ccbench.errors import CcbenchError
from ccbench.exec import Proc
from ccbench.progress import console, info
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed, signals_deferred

CLIENT_GRACE_S = 20.0
PROBE_GRACE_S = 30.0  # flent starts Python and its runners before the first sample


@dataclass
class RunProcs:
    servers: list[Proc] = field(default_factory=list)
    clients: list[Proc] = field(default_factory=list)
    samplers: list[Proc] = field(default_factory=list)  # stopped after the flows
    probes: list[Proc] = field(default_factory=list)  # end by themselves (irtt, flent)
    gated_probes: list[Proc] = field(default_factory=list)  # released before the flows
    snapshots: list[Proc] = field(default_factory=list)  # one-shot reads while flows run
    probe_lead_s: float = 0.0  # how long before the first flow

    def all(self) -> list[Proc]:
        return [*self.servers, *self.clients, *self.samplers, *self.probes, *self.snapshots]

    def stop_all(self) -> None:
        for p in self.all():
            p.stop(signal.SIGTERM, grace_s=2.0)


def run_once(
    tb: Testbed, spec: RunSpec, raw: Path, kernel_req: dict[str, str] | None = None
) -> dict[str, Any]:
    """Do the run; write every raw file into `raw` (which must exist). `kernel_req`:
    the variant's {label, match}, kept as raw/kernel.json (summarize.hosts checks the
    senders' kernels recorded in facts.json against it)."""
    t0 = time.monotonic()
    senders = spec.senders
    _prepare(tb, spec, raw, senders, kernel_req)
    _snapshot_bottleneck(tb, raw, "before")
    procs = RunProcs()
    meta: dict[str, Any] = {"flows": [], "started_unix": None, "testbed": tb.id,
                            "kind": tb.kind, "tools": tb.tools}  # fmt: skip
    # Where a run's time goes besides its traffic (bench/pipeline.py reads them).
    phases = meta["phases_s"] = {"prepare": round(time.monotonic() - t0, 3)}
    label = f"{spec.scenario}/{spec.variant} rep {spec.repetition}"
    try:
        _start_servers(tb, spec, procs, raw)
        _start_samplers(tb, spec, senders, procs, raw, meta)
        _start_clients(tb, spec, procs, raw, meta)
        siftr_nodes = run_senders.siftr_start(tb, spec, senders)
        if siftr_nodes:
            meta["siftr"] = siftr_nodes  # node -> logger, ppl, port filter, resolution
        during = run_senders.sockstat_plan(tb, spec, procs, raw, meta)
        if spec.probe_interval_s > 0:
            meta["probe_argv"] = _probe_start(tb, spec, procs, raw)
        # The router's CPU over the traffic (locally: the whole machine), so a run that
        # shared its CPU with a hypervisor's other guests (steal) says so.
        _record_cpu(tb, raw, layout.BEFORE)
        phases["start"] = round(time.monotonic() - t0 - phases["prepare"], 3)
        _drive(spec, procs, meta, label, during)
        t_end = time.monotonic()
        _end_traffic(tb, spec, procs, raw, label, siftr_nodes)
    finally:
        with signals_deferred():
            procs.stop_all()
    _snapshot_bottleneck(tb, raw, "after")
    phases["end"] = round(time.monotonic() - t_end, 3)
    meta["finished_unix"] = time.time()
    jsonio.write_json(raw / layout.META, meta)
    return meta


def _prepare(
    tb: Testbed, spec: RunSpec, raw: Path, senders: list[str], kernel_req: dict[str, str] | None
) -> None:
    """Before any process starts: the spec (and the kernel it needs) recorded, the
    testbed readied and its calibration recorded, the senders set up, the facts read."""
    jsonio.write_json(raw / layout.SPEC, spec.to_dict())
    if kernel_req:
        jsonio.write_json(raw / layout.KERNEL, kernel_req)
    tb.prepare_run()
    jsonio.write_json(raw / layout.CALIBRATION, tb.calibration())
    run_senders.prepare_senders(tb, spec, senders, raw)
    run_senders.record_facts(tb, raw, senders)


def _record_cpu(tb: Testbed, raw: Path, when: str) -> None:
    """The bottleneck router's CPU counters (locally: the whole machine's)."""
    node = tb.bottleneck[0]
    run_senders.record(tb.ex(node), tb.driver(node).cpu_counters(), raw / layout.cpu(when))


def _snapshot_bottleneck(tb: Testbed, raw: Path, when: str) -> None:
    """The bottleneck queue's counters, the delay element's and the drop counters,
    `when` ("before" or "after") the traffic."""
    node, dev = tb.bottleneck
    run_senders.record(tb.ex(node), tb.driver(node).qdisc_stats(dev), raw / layout.tc(when))
    tb.snapshot_delay(raw / layout.delay(when))
    tb.snapshot_drops(raw / layout.drops(when))


def _start_servers(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> None:
    """One iperf3 server per flow on its receiver; returns when all listen."""
    for k, f in enumerate(spec.flows, start=1):
        node = f"r{f.pair}"
        procs.servers.append(
            tb.ex(node).spawn(
                tb.driver(node).iperf3_server(layout.BASE_PORT + k),
                stdout=raw / layout.server(k), stderr=raw / layout.stderr_of(layout.server(k)),
            )
        )  # fmt: skip
    for k, f in enumerate(spec.flows, start=1):
        tb.wait_listening(f"r{f.pair}", layout.BASE_PORT + k)


def _start_samplers(
    tb: Testbed, spec: RunSpec, senders: list[str], procs: RunProcs, raw: Path,
    meta: dict[str, Any],
) -> None:  # fmt: skip
    """The senders' ss samplers and the bottleneck queue's sampler (each if its interval
    is not 0); they run until the flows end."""
    if spec.ss_interval_s > 0:
        for node in senders:
            argv = tb.driver(node).ss_sampler(spec.ss_interval_s)
            if argv:
                procs.samplers.append(
                    tb.ex(node).spawn(argv, stdout=raw / layout.ss(node),
                                      stderr=raw / layout.stderr_of(layout.ss(node)))
                )  # fmt: skip
    if spec.qdisc_interval_s > 0:
        bn_node, bn_dev = tb.bottleneck
        # The bottleneck queue over time; stopped with the samplers, so it spans
        # the traffic from before its first packet (ccbench.parse.qdisc).
        qargv = tb.driver(bn_node).qdisc_sampler(bn_dev, spec.qdisc_interval_s)
        meta["qdisc_sampler"] = {"node": bn_node, "dev": bn_dev, "argv": qargv[3:],
                                 "interval_s": spec.qdisc_interval_s}  # fmt: skip
        procs.samplers.append(
            tb.ex(bn_node).spawn(qargv, stdout=raw / layout.qdisc(bn_node),
                                 stderr=raw / layout.stderr_of(layout.qdisc(bn_node)))
        )  # fmt: skip
        # Over ssh the sampler starts ~0.3 s later: wait for its first sample, so
        # the queue is seen from the first packet (summary queue.first_s says).
        _wait_nonempty(raw / layout.qdisc(bn_node), QDISC_FIRST_SAMPLE_S)


def _start_clients(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, meta: dict[str, Any]
) -> None:
    """Every client is started now but held at a gate; each is released at its start
    offset (_drive), so starts do not depend on process or ssh start-up times."""
    argvs = []
    for k, f in enumerate(spec.flows, start=1):
        node = f"s{f.pair}"
        argv = tb.driver(node).iperf3_client(
            tb.address(f"r{f.pair}"), layout.BASE_PORT + k, f.cc, f.duration_s,
            spec.interval_s, f.streams,
        )  # fmt: skip
        argvs.append(argv)
        procs.clients.append(
            tb.ex(node).spawn(argv, stdout=raw / layout.iperf3(k),
                              stderr=raw / layout.stderr_of(layout.iperf3(k)), gated=True)
        )  # fmt: skip
    meta["client_argv"] = argvs


def _end_traffic(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, label: str,
    siftr_nodes: dict[str, dict[str, Any]],
) -> None:  # fmt: skip
    """After the flows: the last snapshots taken, the router's CPU read, the samplers
    stopped, the probes' data and siftr logs collected, the servers given time to end."""
    for p in procs.snapshots:
        try:
            p.wait(timeout=run_senders.SOCKSTAT_GRACE_S)
        except subprocess.TimeoutExpired:
            p.stop(signal.SIGTERM, grace_s=1.0)
    _record_cpu(tb, raw, layout.AFTER)
    for p in procs.samplers:
        p.stop(signal.SIGINT)  # ping prints its summary on SIGINT
    for p in procs.probes:  # irtt and flent end after their length; wait for their data
        try:
            p.wait(timeout=PROBE_GRACE_S)
        except subprocess.TimeoutExpired:
            raise CcbenchError(f"{label}: the {spec.probe_tool} probe did not end") from None
    run_senders.siftr_collect(tb, siftr_nodes, raw)
    for p in procs.servers:
        with contextlib.suppress(Exception):
            p.wait(timeout=3)


QDISC_FIRST_SAMPLE_S = 5.0


def _wait_nonempty(path: Path, timeout_s: float) -> None:
    """Until `path` has content or `timeout_s` passed (a sampler that never writes is
    the summary's problem, not a reason to stop the run here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 0:
                return
        time.sleep(0.01)


def _probe_start(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> list[str]:
    """Start the latency-under-load probe s1 -> r1 (through the bottleneck queue the
    flows share); it is released with the first flow, or its plan's lead_s before."""
    first = spec.flows[0].pair
    snd, rcv = f"s{first}", f"r{first}"
    settings = probes.ProbeSettings(tb.address(rcv), spec.probe_interval_s, spec.traffic_s,
                                    spec.probe_flent_test)  # fmt: skip
    pl = probes.plan(spec.probe_tool, settings, tb.driver(snd).os)
    for k, argv in enumerate(pl.servers, start=1):
        out = layout.probe_server(k)
        procs.servers.append(
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


def _drive(
    spec: RunSpec, procs: RunProcs, meta: dict[str, Any], label: str,
    during: list[tuple[float, Callable[[], None]]] | None = None,
) -> None:  # fmt: skip
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
    meta["started_unix"] = time.time()
    deadline = t0 + total + CLIENT_GRACE_S
    last_line = 0.0
    while True:
        now = time.monotonic()
        while pending and now - t0 >= spec.flows[pending[0]].start_s:
            i = pending.pop(0)
            procs.clients[i].release()
            meta["flows"].append({"flow": i + 1, "started_s": round(now - t0, 4)})
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
    meta["traffic_wall_s"] = round(time.monotonic() - t0, 3)
    meta["client_rc"] = [c.wait() for c in procs.clients]
