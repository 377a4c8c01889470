"""What a run does on its senders and hosts besides the flows: provenance (facts.json,
the senders' kernels, NIC records), FreeBSD senders' variant set-up, their kernel
loggers (siftr/siftr2: FreeBSD's `ss`) and their per-connection sockstat samples."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccbench import jsonio, kernel, layout
from ccbench.exec import Executor, NetnsExecutor
from ccbench.fetch import FetchFailed
from ccbench.hosts import siftr_plan
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

if TYPE_CHECKING:
    from ccbench.run import RunProcs


def record(ex: Executor, argv: list[str], dest: Path) -> None:
    res = ex.run(argv, check=False)
    dest.write_text(res.stdout if res.ok else res.stdout + res.stderr)


def record_facts(tb: Testbed, raw: Path, senders: list[str]) -> None:
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
    jsonio.write_json(raw / layout.FACTS, facts)
    node, _dev = tb.bottleneck
    record(tb.ex(node), ["tc", "qdisc", "show"], raw / layout.QDISC_CONFIG)


def _identity_nodes(tb: Testbed, senders: list[str]) -> list[str]:
    """The senders whose kernel is read: locally s1 speaks for all (one kernel)."""
    return senders[:1] if kind(tb.kind).caps.one_kernel else senders


def kernel_identities(tb: Testbed, spec: RunSpec) -> dict[str, str]:
    """node -> the kernel identity each sender of the run reports now (ccbench.kernel)."""
    out = {}
    for node in _identity_nodes(tb, spec.senders):
        drv = tb.driver(node)
        res = {n: tb.ex(node).run(a, check=False).stdout for n, a in drv.kernel_identity().items()}
        out[node] = kernel.identity(drv.os, res)
    return out


def _nic_records(tb: Testbed) -> dict[str, str] | None:
    """SSH testbeds: every node's NIC records as its start-up script wrote them (one
    JSON object per line; summarize.hosts parses them). None locally: namespaces have veths,
    not NICs, and no records."""
    if not kind(tb.kind).caps.nic_records:
        return None
    out: dict[str, str] = {}
    for node, os_name in sorted(tb.node_os().items()):
        if os_name not in ("linux", "freebsd"):
            continue  # the delay node: a dummynet bridge ccbench does not log in to
        res = tb.ex(node).run(tb.driver(node).nic_records(), check=False)
        out[node] = res.stdout if res.ok else res.stdout + res.stderr
    return out


def prepare_senders(tb: Testbed, spec: RunSpec, senders: list[str], raw: Path) -> None:
    """FreeBSD senders: load the CC module and make the variant's TCP stack the host
    default (it applies to new connections), then read back which stack is default.
    Linux needs nothing: iperf3 -C sets the CC per socket, and Linux has one stack."""
    record: dict[str, Any] = {}
    stack = spec.stack
    for node in senders:
        drv = tb.driver(node)
        cc = next(f.cc for f in spec.flows if f"s{f.pair}" == node)
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
        jsonio.write_json(raw / layout.SENDER_SETUP, record)


SIFTR_LOG = "/var/tmp/ccbench-siftr.log"


def _siftr_logger(tb: Testbed, node: str) -> str:
    """siftr2 where the kernel has it (its sysctl tree exists or its module loads),
    else siftr(4)."""
    for step in tb.driver(node).siftr2_probe_plan():
        if tb.ex(node).run(step.argv, check=not step.allow_fail).ok:
            return "siftr2"
    return "siftr"


def siftr_start(tb: Testbed, spec: RunSpec, senders: list[str]) -> dict[str, dict[str, Any]]:
    """FreeBSD senders log cwnd/srtt with siftr2 or siftr(4) (their `ss`), filtered to
    the flows' port where one port covers them and every Nth packet so the log stays
    within spec.siftr_budget_mb (hosts.siftr_plan); returns node -> what was started
    (logger, ppl, port filter, the estimated size and the resolution that gives)."""
    started = {}
    for node in senders:
        drv = tb.driver(node)
        if drv.os != "freebsd":
            continue  # Linux senders: the testbed samples ss
        logger = _siftr_logger(tb, node)
        mine = [(k, f) for k, f in enumerate(spec.flows, start=1) if f"s{f.pair}" == node]
        plan = siftr_plan.choose_ppl(
            [(f.start_s, f.duration_s) for _, f in mine],
            [layout.BASE_PORT + k for k, _ in mine],
            spec.topology.rate_bps, logger=logger,
            budget_bytes=int(spec.siftr_budget_mb * 2**20),
            frame_bytes=spec.topology.frame_bytes,
        )  # fmt: skip
        tb.ex(node).run(["rm", "-f", SIFTR_LOG])
        for argv in drv.siftr_start(SIFTR_LOG, plan.port_filter, logger=logger, ppl=plan.ppl):
            tb.ex(node).run(argv)
        started[node] = {"logger": logger, "ppl": plan.ppl, "port_filter": plan.port_filter,
                         "log_bytes_est": plan.log_bytes, "within_budget": plan.within_budget,
                         "resolution": plan.resolution(len(spec.flows))}  # fmt: skip
    return started


def siftr_collect(tb: Testbed, nodes: dict[str, dict[str, Any]], raw: Path) -> None:
    """Stop each node's siftr and fetch its log (streamed, checked; large logs arrive
    gzip-compressed). `nodes[node]["fetch"]` records what crossed the link or, when the
    fetch failed, its one-line error: the verdict makes that run invalid, and the log
    stays on the node for a look by hand."""
    for node, started in nodes.items():
        for argv in tb.driver(node).siftr_stop(started["logger"]):
            tb.ex(node).run(argv, check=False)
        try:
            got = tb.ex(node).get(SIFTR_LOG, raw / layout.siftr(node))
        except FetchFailed as e:
            started["fetch"] = {"error": str(e)}
            continue
        started["fetch"] = {
            "node_bytes": got.node_bytes,
            "fetched_bytes": got.fetched_bytes,
            "compressed": got.compressed,
            "seconds": round(got.seconds, 3),
        }
        tb.ex(node).run(["rm", "-f", SIFTR_LOG], check=False)


SOCKSTAT_AFTER_S = 5.0  # sample a flow this long after its start (at most half its length)


SOCKSTAT_GRACE_S = 15.0


def sockstat_plan(
    tb: Testbed, spec: RunSpec, procs: RunProcs, raw: Path, meta: dict[str, Any]
) -> list[tuple[float, Callable[[], None]]]:
    """FreeBSD senders: one `sockstat -46 -CS -P tcp` per flow while it runs, so each
    connection's CC module and TCP stack are read from the kernel (summarize.hosts checks
    them). Returns (seconds after the traffic starts, action) for _drive; meta.json's
    `sockstat` lists each flow's sample (its `at_s` is set when it is taken)."""
    plan: list[tuple[float, Callable[[], None]]] = []
    entries: list[dict[str, Any]] = []
    for k, f in enumerate(spec.flows, start=1):
        node = f"s{f.pair}"
        argv = tb.driver(node).sockstat_tcp()
        if argv is None:
            continue
        peer = f"{tb.address(f'r{f.pair}')}:{layout.BASE_PORT + k}"
        entry = {"flow": k, "node": node, "peer": peer, "file": layout.sockstat(k),
                 "at_s": None}  # fmt: skip
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
                          stderr=raw / layout.stderr_of(entry["file"]))
    )  # fmt: skip
