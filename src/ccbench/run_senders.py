"""What a run does on its senders and hosts before the flows: provenance (facts.json,
the senders' kernels, NIC records) and FreeBSD senders' variant set-up. What records
during the run is ccbench.instruments'."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ccbench import jsonio, kernel, layout
from ccbench.exec import Executor, NetnsExecutor
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind


def record(ex: Executor, argv: list[str], dest: Path) -> None:
    res = ex.run(argv, check=False)
    dest.write_text(res.stdout if res.ok else res.stdout + res.stderr)


def record_facts(
    tb: Testbed, raw: Path, senders: list[str], receivers: list[str] | None = None
) -> None:
    """Provenance: the controller, every sender's kernel, sysctls and tools, and every
    receiver's receive-buffer limits (what bounds the window it advertises)."""
    facts: dict[str, Any] = {"host": {}, "senders": {}, "receivers": {}}
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
    for node in receivers or []:
        drv = tb.driver(node)
        res = tb.ex(node).run(drv.receive_buffer_facts(), check=False)
        facts["receivers"][node] = {"os": drv.os, "buffers": (res.stdout or res.stderr).strip()}
    facts["python"] = sys.version.split()[0]
    nics = _nic_records(tb)
    if nics is not None:
        facts["nics"] = nics
    jsonio.write_json(raw / layout.HOST_FACTS, facts)
    if tb.roles.bottleneck is not None:  # a lab's own network has none of ccbench's
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
        cc = next(f.cc for f in spec.flows if f.sender == node)
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
