"""One run: N concurrent iperf3 flows through a testbed, raw files to DIR/raw/.

Raw files are written to a temporary directory and renamed when complete, so a
`raw/` directory always holds a whole run. A run that fails its validity checks is
retried up to `attempts` times; earlier attempts are kept under `invalid-attempts/`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench import kernel, probe, safe
from ccbench.errors import CcbenchError
from ccbench.exec import Executor, NetnsExecutor, Proc
from ccbench.progress import console, info
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed, signals_deferred

BASE_PORT = 5201
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


def _record(ex: Executor, argv: list[str], dest: Path) -> None:
    res = ex.run(argv, check=False)
    dest.write_text(res.stdout if res.ok else res.stdout + res.stderr)


def _facts(tb: Testbed, raw: Path, senders: list[str]) -> None:
    """Provenance: the controller, and every sender's kernel, sysctls and tools."""
    facts: dict[str, Any] = {"host": {}, "senders": {}}
    host = NetnsExecutor(None)
    for name, argv in {
        "uname": ["uname", "-a"],
        "cpus": ["nproc"],
        "iperf3": ["iperf3", "--version"],
        "tc": ["tc", "-V"],
        "ss": ["ss", "-V"],
        "loadavg": ["cat", "/proc/loadavg"],
    }.items():
        facts["host"][name] = host.run(argv, check=False).stdout.strip()
    # Locally every sender shares one kernel: s1 speaks for all (saves ~0.1 s per run).
    for node in _identity_nodes(tb, senders):
        drv = tb.driver(node)
        facts["senders"][node] = {
            "os": drv.os,
            **{n: tb.ex(node).run(a, check=False).stdout.strip() for n, a in drv.facts().items()},
        }
    facts["python"] = sys.version.split()[0]
    nics = _nic_records(tb)
    if nics is not None:
        facts["nics"] = nics
    (raw / "facts.json").write_text(json.dumps(facts, indent=2))
    node, _dev = tb.bottleneck
    _record(tb.ex(node), ["tc", "qdisc", "show"], raw / "qdisc-config.txt")


def _identity_nodes(tb: Testbed, senders: list[str]) -> list[str]:
    """The senders whose kernel is read: locally s1 speaks for all (one kernel)."""
    return senders if tb.kind != "local" else senders[:1]


def kernel_identities(tb: Testbed, spec: RunSpec) -> dict[str, str]:
    """node -> the kernel identity each sender of the run reports now (ccbench.kernel)."""
    senders = sorted({f"s{f.pair}" for f in spec.flows})
    out = {}
    for node in _identity_nodes(tb, senders):
        drv = tb.driver(node)
        res = {n: tb.ex(node).run(a, check=False).stdout for n, a in drv.kernel_identity().items()}
        out[node] = kernel.identity(drv.os, res)
    return out


def _nic_records(tb: Testbed) -> dict[str, str] | None:
    """SSH testbeds: every node's NIC records as its start-up script wrote them (one
    JSON object per line; summary.py parses them). None locally: namespaces have veths,
    not NICs, and no records."""
    if tb.kind == "local":
        return None
    out: dict[str, str] = {}
    for node, os_name in sorted(tb.node_os().items()):
        if os_name not in ("linux", "freebsd"):
            continue  # the delay node: a dummynet bridge ccbench does not log in to
        res = tb.ex(node).run(tb.driver(node).nic_records(), check=False)
        out[node] = res.stdout if res.ok else res.stdout + res.stderr
    return out


def _prepare_senders(tb: Testbed, spec: RunSpec, senders: list[str], raw: Path) -> None:
    """FreeBSD senders: load the CC module and make the variant's TCP stack the host
    default (it applies to new connections), then read back which stack is default.
    Linux needs nothing: iperf3 -C sets the CC per socket, and Linux has one stack."""
    variant = spec.extra.get("variant") or {}
    record: dict[str, Any] = {}
    for node in senders:
        drv = tb.driver(node)
        cc = next(f.cc for f in spec.flows if f"s{f.pair}" == node)
        stack = variant.get("stack", "default")
        verify = drv.verify_stack(stack)
        if verify is None:
            continue  # nothing host-wide to set (Linux)
        done = []
        for step in drv.variant_plan(cc, stack):
            res = tb.ex(node).run(step.argv, check=not step.allow_fail)
            done.append({"argv": step.argv, "rc": res.returncode})
        avail = tb.ex(node).run(verify).stdout
        problems = drv.stack_problems(avail, stack)
        record[node] = {"stack": stack, "cc": cc, "steps": done,
                        "functions_available": avail, "problems": problems}  # fmt: skip
    if record:
        (raw / "sender-setup.json").write_text(json.dumps(record, indent=2))


SIFTR_LOG = "/var/tmp/ccbench-siftr.log"
SIFTR_PPL = 4  # log every 4th packet: 1 Gbit/s at ppl 1 is tens of millions of lines


def _siftr_logger(tb: Testbed, node: str) -> str:
    """siftr2 where the kernel has it (its sysctl tree exists or its module loads),
    else siftr(4)."""
    for step in tb.driver(node).siftr2_probe_plan():
        if tb.ex(node).run(step.argv, check=not step.allow_fail).ok:
            return "siftr2"
    return "siftr"


def _siftr_start(tb: Testbed, senders: list[str]) -> dict[str, str]:
    """FreeBSD senders log cwnd/srtt with siftr2 or siftr(4) (their `ss`); returns
    node -> the logger started there."""
    started = {}
    for node in senders:
        drv = tb.driver(node)
        if drv.os != "freebsd":
            continue  # Linux senders: the testbed samples ss
        logger = _siftr_logger(tb, node)
        tb.ex(node).run(["rm", "-f", SIFTR_LOG])
        for argv in drv.siftr_start(SIFTR_LOG, 0, logger=logger, ppl=SIFTR_PPL):
            tb.ex(node).run(argv)
        started[node] = logger
    return started


def _siftr_collect(tb: Testbed, nodes: dict[str, str], raw: Path) -> None:
    for node, logger in nodes.items():
        for argv in tb.driver(node).siftr_stop(logger):
            tb.ex(node).run(argv, check=False)
        tb.ex(node).get(SIFTR_LOG, raw / f"siftr-{node}.log")
        tb.ex(node).run(["rm", "-f", SIFTR_LOG], check=False)


def run_once(
    tb: Testbed, spec: RunSpec, raw: Path, kernel_req: dict[str, str] | None = None
) -> dict[str, Any]:
    """Do the run; write every raw file into `raw` (which must exist). `kernel_req`:
    the variant's {label, match}, kept as raw/kernel.json (summary.py checks the
    senders' kernels recorded in facts.json against it)."""
    senders = sorted({f"s{f.pair}" for f in spec.flows})
    _prepare(tb, spec, raw, senders, kernel_req)
    _snapshot_bottleneck(tb, raw, "before")
    procs = RunProcs()
    meta: dict[str, Any] = {"flows": [], "started_unix": None, "testbed": tb.id,
                            "kind": tb.kind, "tools": tb.tools}  # fmt: skip
    label = f"{spec.scenario}/{spec.variant} rep {spec.repetition}"
    try:
        _start_servers(tb, spec, procs, raw)
        _start_samplers(tb, spec, senders, procs, raw, meta)
        _start_clients(tb, spec, procs, raw, meta)
        siftr_nodes = _siftr_start(tb, senders)
        if siftr_nodes:
            meta["siftr"] = siftr_nodes  # node -> siftr or siftr2
        during = _sockstat_plan(tb, spec, procs, raw, meta)
        if spec.probe_interval_s > 0:
            meta["probe_argv"] = _probe_start(tb, spec, procs, raw)
        # The router's CPU over the traffic (locally: the whole machine), so a run that
        # shared its CPU with a hypervisor's other guests (steal) says so.
        _record(tb.ex(tb.bottleneck[0]), ["cat", "/proc/stat"], raw / "cpu-before.txt")
        _drive(spec, procs, meta, label, during)
        _end_traffic(tb, spec, procs, raw, label, siftr_nodes)
    finally:
        with signals_deferred():
            procs.stop_all()
    _snapshot_bottleneck(tb, raw, "after")
    meta["finished_unix"] = time.time()
    (raw / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def _prepare(
    tb: Testbed, spec: RunSpec, raw: Path, senders: list[str], kernel_req: dict[str, str] | None
) -> None:
    """Before any process starts: the spec (and the kernel it needs) recorded, the
    testbed readied and its calibration recorded, the senders set up, the facts read."""
    (raw / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    if kernel_req:
        (raw / "kernel.json").write_text(json.dumps(kernel_req, indent=2))
    tb.prepare_run()
    (raw / "calibration.json").write_text(json.dumps(tb.calibration(), indent=2))
    _prepare_senders(tb, spec, senders, raw)
    _facts(tb, raw, senders)


def _snapshot_bottleneck(tb: Testbed, raw: Path, when: str) -> None:
    """The bottleneck queue's counters, the delay element's and the drop counters,
    `when` ("before" or "after") the traffic."""
    node, dev = tb.bottleneck
    _record(tb.ex(node), tb.driver(node).qdisc_stats(dev), raw / f"tc-{when}.json")
    tb.snapshot_delay(raw / f"delay-{when}.json")
    tb.snapshot_drops(raw / f"drops-{when}.json")


def _start_servers(tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path) -> None:
    """One iperf3 server per flow on its receiver; returns when all listen."""
    for k, f in enumerate(spec.flows, start=1):
        node = f"r{f.pair}"
        procs.servers.append(
            tb.ex(node).spawn(
                tb.driver(node).iperf3_server(BASE_PORT + k),
                stdout=raw / f"server-{k}.txt", stderr=raw / f"server-{k}.err",
            )
        )  # fmt: skip
    for k, f in enumerate(spec.flows, start=1):
        tb.wait_listening(f"r{f.pair}", BASE_PORT + k)


def _start_samplers(
    tb: Testbed, spec: RunSpec, senders: list[str], procs: RunProcs, raw: Path,
    meta: dict[str, Any],
) -> None:  # fmt: skip
    """The senders' ss samplers and the bottleneck queue's sampler (each if its interval
    is not 0); they run until the flows end."""
    if spec.ss_interval_s > 0:
        for node in senders:
            argv = tb.sampler_argv(node, spec.ss_interval_s)
            if argv:
                procs.samplers.append(
                    tb.ex(node).spawn(argv, stdout=raw / f"ss-{node}.txt",
                                      stderr=raw / f"ss-{node}.err")
                )  # fmt: skip
    if spec.qdisc_interval_s > 0:
        bn_node, bn_dev = tb.bottleneck
        # The bottleneck queue over time; stopped with the samplers, so it spans
        # the traffic from before its first packet (ccbench.parse.qdisc).
        qargv = tb.driver(bn_node).qdisc_sampler(bn_dev, spec.qdisc_interval_s)
        meta["qdisc_sampler"] = {"node": bn_node, "dev": bn_dev, "argv": qargv[3:],
                                 "interval_s": spec.qdisc_interval_s}  # fmt: skip
        procs.samplers.append(
            tb.ex(bn_node).spawn(qargv, stdout=raw / f"qdisc-{bn_node}.txt",
                                 stderr=raw / f"qdisc-{bn_node}.err")
        )  # fmt: skip
        # Over ssh the sampler starts ~0.3 s later: wait for its first sample, so
        # the queue is seen from the first packet (summary queue.first_s says).
        _wait_nonempty(raw / f"qdisc-{bn_node}.txt", QDISC_FIRST_SAMPLE_S)


def _start_clients(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, meta: dict[str, Any]
) -> None:
    """Every client is started now but held at a gate; each is released at its start
    offset (_drive), so starts do not depend on process or ssh start-up times."""
    argvs = []
    for k, f in enumerate(spec.flows, start=1):
        node = f"s{f.pair}"
        argv = tb.driver(node).iperf3_client(
            tb.address(f"r{f.pair}"), BASE_PORT + k, f.cc, f.duration_s,
            spec.interval_s, f.streams,
        )  # fmt: skip
        argvs.append(argv)
        procs.clients.append(
            tb.ex(node).spawn(argv, stdout=raw / f"iperf3-{k}.json",
                              stderr=raw / f"iperf3-{k}.err", gated=True)
        )  # fmt: skip
    meta["client_argv"] = argvs


def _end_traffic(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, label: str,
    siftr_nodes: dict[str, str],
) -> None:  # fmt: skip
    """After the flows: the last snapshots taken, the router's CPU read, the samplers
    stopped, the probes' data and siftr logs collected, the servers given time to end."""
    for p in procs.snapshots:
        try:
            p.wait(timeout=SOCKSTAT_GRACE_S)
        except subprocess.TimeoutExpired:
            p.stop(signal.SIGTERM, grace_s=1.0)
    _record(tb.ex(tb.bottleneck[0]), ["cat", "/proc/stat"], raw / "cpu-after.txt")
    for p in procs.samplers:
        p.stop(signal.SIGINT)  # ping prints its summary on SIGINT
    for p in procs.probes:  # irtt and flent end after their length; wait for their data
        try:
            p.wait(timeout=PROBE_GRACE_S)
        except subprocess.TimeoutExpired:
            raise CcbenchError(f"{label}: the {spec.probe_tool} probe did not end") from None
    _siftr_collect(tb, siftr_nodes, raw)
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
    try:
        pl = probe.plan(spec.probe_tool, tb.address(rcv), spec.probe_interval_s,
                        spec.traffic_s, spec.probe_flent_test,
                        tb.driver(snd).os)  # fmt: skip
    except ValueError as e:
        raise CcbenchError(str(e)) from None
    for k, argv in enumerate(pl.servers, start=1):
        procs.servers.append(
            tb.ex(rcv).spawn(argv, stdout=raw / f"probe-server-{k}.txt",
                             stderr=raw / f"probe-server-{k}.err")
        )  # fmt: skip
    if pl.servers:
        tb.wait_listening(rcv, probe.IRTT_PORT, proto="udp")
    if probe.needs_netperf(spec.probe_tool, spec.probe_flent_test):
        tb.wait_listening(rcv, probe.NETSERVER_PORT)
    proc = tb.ex(snd).spawn(pl.client, stdout=raw / pl.out, stderr=raw / "probe.err", gated=True)
    (procs.samplers if not pl.ends_by_itself else procs.probes).append(proc)
    procs.gated_probes.append(proc)
    procs.probe_lead_s = pl.lead_s
    return pl.client


SOCKSTAT_AFTER_S = 5.0  # sample a flow this long after its start (at most half its length)
SOCKSTAT_GRACE_S = 15.0


def _sockstat_plan(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, meta: dict[str, Any]
) -> list[tuple[float, Callable[[], None]]]:
    """FreeBSD senders: one `sockstat -46 -CS -P tcp` per flow while it runs, so each
    connection's CC module and TCP stack are read from the kernel (summary.py checks
    them). Returns (seconds after the traffic starts, action) for _drive; meta.json's
    `sockstat` lists each flow's sample (its `at_s` is set when it is taken)."""
    plan: list[tuple[float, Callable[[], None]]] = []
    entries: list[dict[str, Any]] = []
    for k, f in enumerate(spec.flows, start=1):
        node = f"s{f.pair}"
        argv = tb.driver(node).sockstat_tcp()
        if argv is None:
            continue
        entry = {"flow": k, "node": node, "peer": f"{tb.address(f'r{f.pair}')}:{BASE_PORT + k}",
                 "file": f"sockstat-{k}.txt", "at_s": None}  # fmt: skip
        entries.append(entry)
        take = functools.partial(_take_sockstat, tb, node, argv, entry, procs, raw, meta)
        plan.append((f.start_s + min(SOCKSTAT_AFTER_S, f.duration_s / 2), take))
    if entries:
        meta["sockstat"] = entries
    return sorted(plan, key=lambda x: x[0])


def _take_sockstat(
    tb: Testbed, node: str, argv: list[str], entry: dict[str, Any], procs: RunProcs,
    raw: Path, meta: dict[str, Any],
) -> None:  # fmt: skip
    entry["at_s"] = round(time.time() - (meta.get("started_unix") or time.time()), 3)
    procs.snapshots.append(
        tb.ex(node).spawn(argv, stdout=raw / entry["file"],
                          stderr=raw / f"sockstat-{entry['flow']}.err")
    )  # fmt: skip


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


def execute(
    tb: Testbed, spec: RunSpec, out: Path, attempts: int = 1, write_summary: bool = True,
    kernel_req: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Run, retrying invalid results; writes out/attempts.json (and out/summary.json)."""
    from ccbench.summary import judge, write_json

    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    tried: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        tmp = out / f".raw.tmp-{os.getpid()}"
        safe.remove_tree(tmp, out)
        tmp.mkdir()
        try:
            run_once(tb, spec, tmp, kernel_req)
        except CcbenchError as e:
            # The attempt failed (a tool hung, a host vanished): keep what it wrote and
            # why, so it is reported as an invalid run and retried, not lost.
            (tmp / "error.txt").write_text(f"{e}\n")
            if not (tmp / "spec.json").exists():
                (tmp / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
        except BaseException:
            with signals_deferred():
                safe.remove_tree(tmp, out)
            raise
        raw = out / "raw"
        if raw.exists() and not (raw / "spec.json").exists():
            # Only a previous run's raw/ is replaced, never a folder of something else.
            raise CcbenchError(f"{raw} exists and is not a ccbench run's raw data: "
                               "choose another --out")  # fmt: skip
        safe.remove_tree(raw, out)
        tmp.rename(raw)
        # The full verdict (time series and RTT excess included), as `parse` will
        # write it: a run that stalled on the host is retried, not found out later.
        summary = judge(raw)[0]
        summary["attempt"] = attempt
        tried.append({"attempt": attempt, "valid": summary["valid"],
                      "reasons": summary["reasons"]})  # fmt: skip
        if summary["valid"] or attempt == attempts:
            break
        info(f"attempt {attempt} invalid ({'; '.join(summary['reasons'])}); retrying")
        keep = out / "invalid-attempts" / str(attempt)
        keep.parent.mkdir(exist_ok=True)
        safe.remove_tree(keep, out)
        raw.rename(keep)
    if write_summary:
        write_json(out / "summary.json", summary)
    write_json(out / "attempts.json", {"run_id": spec.run_id, "attempts": tried})
    return summary


def record_skip(spec: RunSpec, out: Path, reason: str) -> None:
    """A run that cannot happen here (e.g. missing AQM): raw/ says why, nothing is faked."""
    from ccbench.summary import write_json

    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    write_json(raw / "skipped.json", {"reason": reason})
    write_json(out / "attempts.json", {"run_id": spec.run_id, "skipped": reason, "attempts": []})


def record_wait(spec: RunSpec, out: Path, req: dict[str, str], seen: dict[str, str]) -> str:
    """A run whose variant needs a kernel no sender runs now: recorded as waiting for
    it (a run not run, not a failure); the workflow checks it again on every
    invocation (rules/common.smk), so it runs after a reboot into that kernel."""
    from ccbench.summary import write_json

    reason = kernel.waiting_reason(req["label"])
    waiting = {**req, "senders": seen, "checked_unix": time.time()}
    raw = out / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    write_json(raw / "skipped.json", {"reason": reason, "waiting": waiting})
    write_json(out / "attempts.json", {"run_id": spec.run_id, "skipped": reason,
                                       "waiting": waiting, "attempts": []})  # fmt: skip
    return reason
