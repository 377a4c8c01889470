"""Linux senders, every ACK: the `tcp:tcp_probe` tracepoint (snd_cwnd, ssthresh, srtt,
snd_nxt/snd_una: what siftr gives on FreeBSD), with congestion-state changes
(`tcp:tcp_cong_state_set`: recovery, loss = an RTO) and retransmissions
(`tcp:tcp_retransmit_skb`), in a trace instance of ccbench's own filtered to the run's
server ports (include/trace/events/tcp.h; kernel/trace/trace_events_filter.c).

One kernel (the local testbed's namespaces share it): one reader on the host serves
every sender; tracefs is not visible inside `ip netns exec`, which mounts a /sys of its
own. Over SSH one reader per sender writes to the node's disk, fetched after the run.
A `ccbench_unix=<time>` line written to the instance's trace_marker pairs the trace's
clock with wall-clock time. Above the size budget, ACKs are thinned by sequence space
(the report states it); state changes and retransmissions are never thinned.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from ccbench import layout
from ccbench.exec import Executor, NetnsExecutor
from ccbench.fetch import FetchFailed
from ccbench.instruments.base import Cost, Instrument, Recording, is_int, need
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("tcp_probe", "tcp_cong_state_set", "tcp_retransmit_skb")
NODE_FILE = "/var/tmp/ccbench-tcp-probe.txt"
HOST = "host"  # the reader's name on a one-kernel testbed
BUFFER_KB = 16384  # per CPU: absorbs the reader's stalls at 1 Gbit/s
LINE_BYTES = 300  # one tcp_probe line as this kernel prints it (tests/captures/tracefs)
SEQ_WINDOW_BITS = 12  # thinning keeps whole 4 KiB windows of sequence space
DRAIN_S = 2.0  # after the events are off: until the reader's file stops growing
# Marker: the trace clock at this line is the wall-clock time it names.
MARKER_SCRIPT = 'printf "ccbench_unix=%s\\n" "$(date +%s.%N)" > "$1"'
READER_SCRIPT = 'exec cat "$1" > "$2"'


def instance(tb_id: str) -> str:
    return f"{TRACEFS}/instances/ccbench-{tb_id}"


def port_filter(ports: list[int], thin_bits: int = 0) -> str:
    """A sender's side of the run's connections: their destination is a server port.
    `thin_bits` b > 0 keeps an ACK only when snd_una's b bits above the 4 KiB window
    are zero: 1 in 2^b of the sequence space (tcp_probe only)."""
    lo, hi = min(ports), max(ports)
    expr = f"dport >= {lo} && dport <= {hi}"
    if thin_bits > 0:
        mask = ((1 << thin_bits) - 1) << SEQ_WINDOW_BITS
        expr = f"({expr}) && !(snd_una & {mask:#x})"
    return expr


def thin_bits_for(spec: RunSpec, budget_bytes: int) -> int:
    """How many bits of sequence space to thin by so the trace stays in budget: the
    bottleneck's rate in full-size segments, an ACK per two (delayed ACKs)."""
    acks = spec.topology.rate_bps / 8 / spec.topology.frame_bytes / 2 * spec.traffic_s
    est = acks * LINE_BYTES
    return 0 if est <= budget_bytes else math.ceil(math.log2(est / budget_bytes))


@dataclass
class Reader:
    node: str  # where it reads (HOST on a one-kernel testbed)
    file: str  # raw/ file
    events: list[str] = field(default_factory=list)  # those the kernel has
    problem: str | None = None  # why it did not trace; None: traced
    fetch: dict[str, Any] | None = None  # over SSH: what the fetch moved, or {error}


@dataclass
class TcpProbe(Instrument):
    name = "tcp_probe"
    description = "tcp_probe per ACK on the Linux senders (+ cong_state, retransmits)"
    cost = Cost.PER_PACKET
    oses = ("linux",)

    instance: str = ""
    ports: list[int] = field(default_factory=list)
    thin_bits: int = 0
    readers: list[Reader] = field(default_factory=list)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if not spec.tcp_probe:
            return None
        linux = [n for n in spec.senders if tb.driver(n).os == "linux"]
        if not linux:
            return None
        nodes = [HOST] if kind(tb.kind).caps.one_kernel else linux
        return cls(
            instance=instance(tb.id),
            ports=[layout.BASE_PORT + k for k in range(1, len(spec.flows) + 1)],
            thin_bits=thin_bits_for(spec, int(spec.tcp_probe_budget_mb * 2**20)),
            readers=[Reader(n, layout.tcp_probe(n)) for n in nodes],
        )

    def _ex(self, rec: Recording, r: Reader) -> Executor:
        return NetnsExecutor(None) if r.node == HOST else rec.tb.ex(r.node)

    def start(self, rec: Recording) -> None:
        for r in self.readers:
            ex = self._ex(rec, r)
            if r.node == HOST:
                remove_host_instance(self.instance)  # a crashed run's, if any
            else:  # over SSH a crashed run's reader was ended by the sweep (leftovers)
                for argv in remove_plan(self.instance):
                    ex.run(argv, check=False)
            if r.node == HOST:
                mount_tracefs()
            have = ex.run(["ls", f"{TRACEFS}/events/tcp"], check=False)
            r.events = [e for e in EVENTS if e in have.stdout.split()]
            if not have.ok or "tcp_probe" not in r.events:
                r.problem = f"no tcp_probe tracepoint in {TRACEFS} ({have.stderr.strip()[:80]})"
                continue
            ex.run(["mkdir", self.instance])
            ex.write_file(f"{self.instance}/buffer_size_kb", f"{BUFFER_KB}\n")
            # One clock for every CPU's events and the marker (the default, `local`,
            # is per CPU).
            ex.write_file(f"{self.instance}/trace_clock", "mono\n")
            for ev in r.events:
                thin = self.thin_bits if ev == "tcp_probe" else 0
                ex.write_file(f"{self.instance}/events/tcp/{ev}/filter",
                              port_filter(self.ports, thin) + "\n")  # fmt: skip
                ex.write_file(f"{self.instance}/events/tcp/{ev}/enable", "1\n")
            pipe = f"{self.instance}/trace_pipe"
            if r.node == HOST:
                proc = ex.spawn(["cat", pipe], stdout=rec.raw / r.file,
                                stderr=rec.raw / layout.stderr_of(r.file))  # fmt: skip
            else:
                proc = ex.spawn(["sh", "-c", READER_SCRIPT, "ccbench-trace", pipe, NODE_FILE],
                                stderr=rec.raw / layout.stderr_of(r.file))  # fmt: skip
            self.procs.append(proc)
            ex.run(["sh", "-c", MARKER_SCRIPT, "ccbench-mark", f"{self.instance}/trace_marker"])

    def stop(self, rec: Recording) -> None:
        """Events off, the reader drained (its file stops growing), the instance gone."""
        traced = [r for r in self.readers if r.problem is None]
        for r in traced:
            ex = self._ex(rec, r)
            for ev in r.events:
                ex.run(["sh", "-c", 'echo 0 > "$1"', "ccbench-off",
                        f"{self.instance}/events/tcp/{ev}/enable"], check=False)  # fmt: skip
        for r in traced:
            if r.node == HOST:
                _wait_still(rec.raw / r.file)
            else:
                time.sleep(0.2)  # the remote reader drains what the buffer holds
        for p in self.procs:
            p.stop(signal.SIGTERM, grace_s=1.0)
        for r in traced:
            ex = self._ex(rec, r)
            for argv in remove_plan(self.instance):
                ex.run(argv, check=False)

    def collect(self, rec: Recording) -> None:
        for r in self.readers:
            if r.problem is not None or r.node == HOST:
                continue
            ex = rec.tb.ex(r.node)
            try:
                got = ex.get(NODE_FILE, rec.raw / r.file)
            except FetchFailed as e:
                r.fetch = {"error": str(e)}
                continue
            r.fetch = {"node_bytes": got.node_bytes, "fetched_bytes": got.fetched_bytes,
                       "seconds": round(got.seconds, 3)}  # fmt: skip
            ex.run(["rm", "-f", NODE_FILE], check=False)

    def record_json(self) -> dict[str, Any]:
        return {"instance": self.instance, "ports": self.ports, "thin_bits": self.thin_bits,
                "readers": [vars(r) for r in self.readers]}  # fmt: skip

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("readers"), list)
             and isinstance(d.get("ports"), list) and all(is_int(p) for p in d["ports"])
             and is_int(d.get("thin_bits")), "not a tcp_probe record")  # fmt: skip
        readers = []
        for r in d["readers"]:
            need(isinstance(r, dict) and isinstance(r.get("node"), str)
                 and isinstance(r.get("file"), str), f"tcp_probe reader {r!r}")  # fmt: skip
            readers.append(Reader(r["node"], r["file"], list(r.get("events") or []),
                                  r.get("problem"), r.get("fetch")))  # fmt: skip
        return cls(instance=str(d.get("instance", "")), ports=list(d["ports"]),
                   thin_bits=d["thin_bits"], readers=readers)  # fmt: skip

    @property
    def thinning(self) -> str | None:
        """What the report says of the thinning; None: every ACK."""
        if not self.thin_bits:
            return None
        kib = 2**SEQ_WINDOW_BITS // 1024
        return (f"ACKs thinned to 1 in {2**self.thin_bits} by sequence space (whole "
                f"{kib} KiB windows) to stay within the size budget")  # fmt: skip


def remove_plan(inst: str) -> list[list[str]]:
    """A trace instance removed (tracefs refuses rmdir while a reader holds it open: the
    reader is stopped first). Also the clean-up of a crashed run's instance."""
    return [["sh", "-c", 'for f in "$1"/events/tcp/*/enable; do echo 0 > "$f"; done',
             "ccbench-off", inst], ["rmdir", inst]]  # fmt: skip


def mount_tracefs() -> None:
    """This machine's tracefs mounted where it belongs. Not every system mounts it at
    boot; it stays mounted (as systemd mounts it on most distributions), holding
    nothing of ccbench's."""
    if not Path(f"{TRACEFS}/events").is_dir():
        NetnsExecutor(None).run(["mount", "-t", "tracefs", "nodev", TRACEFS], check=False)


def remove_host_instance(inst: str) -> bool:
    """This machine's trace instance `inst` gone, with any reader a crashed run left
    (a `cat` of its trace_pipe holds it open; it runs outside every namespace, so no
    namespace clean-up ends it). True when there was one."""
    pipe = f"{inst}/trace_pipe"
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline[:2] == [b"cat", pipe.encode()]:
            with contextlib.suppress(OSError):
                os.kill(int(proc.name), signal.SIGKILL)
    if not Path(inst).is_dir():
        return False
    host = NetnsExecutor(None)
    deadline = time.monotonic() + 2.0
    while True:
        for argv in remove_plan(inst):
            host.run(argv, check=False)
        if not Path(inst).is_dir() or time.monotonic() > deadline:
            return True
        time.sleep(0.05)  # a killed reader lets go of the pipe once it has exited


def _wait_still(path: Any) -> None:
    """Until the reader's file stops growing (it drained the buffer), at most DRAIN_S."""
    deadline = time.monotonic() + DRAIN_S
    last = -1
    while time.monotonic() < deadline:
        size = -2
        with contextlib.suppress(OSError):
            size = path.stat().st_size
        if size == last:
            return
        last = size
        time.sleep(0.1)
