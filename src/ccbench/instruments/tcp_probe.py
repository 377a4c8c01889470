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
import itertools
import math
import os
import re
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Self

from ccbench import layout
from ccbench.exec import Executor, NetnsExecutor
from ccbench.fetch import FetchFailed
from ccbench.instruments.base import (
    Cost,
    Instrument,
    Option,
    Recording,
    SeriesContext,
    is_int,
    need,
)
from ccbench.instruments.events import EventCounter, TcpEvents, lost_text
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Need, Needs
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

if TYPE_CHECKING:
    from ccbench.parse.tcp_probe import FastTrace
    from ccbench.timeseries_sink import FileRows, Sink

TRACEFS = "/sys/kernel/tracing"
EVENTS = ("tcp_probe", "tcp_cong_state_set", "tcp_retransmit_skb")
NODE_FILE = "/var/tmp/ccbench-tcp-probe.txt"
HOST = "host"  # the reader's name on a one-kernel testbed
BUFFER_KB = 16384  # per CPU: absorbs the reader's stalls at 1 Gbit/s
# One tcp_probe line as this kernel prints it: 308-313 bytes on average in each traced
# run of docs/series.md's table (the comm name's length varies), rounded up.
LINE_BYTES = 320
# ACKs a sender receives per second on a one-kernel testbed, at most, per CPU. GRO and
# LRO are off on every receiver interface (ethtool -k), yet above ~100 Mbit/s the
# receivers ACK far less often than every second segment: Linux ACKs at once only when
# the receive window moves, i.e. once the application has read (__tcp_ack_snd_check,
# net/ipv4/tcp_input.c), and with every host on this machine's two vCPUs iperf3 reads
# more per wake-up as the load grows. Measured (docs/series.md, "tcp_probe's size"):
# at most 3.6k ACKs/s in all, 1.6-3.0k/s from 125 Mbit/s up (42 segments per ACK for
# one flow at 780 Mbit/s). Assumed to grow with the CPUs (only this 2-vCPU VM was
# measured); over SSH (each sender its own machine) only delayed ACKs are assumed.
ACKS_PER_S_PER_CPU = 2000
SEQ_WINDOW_BITS = 12  # thinning keeps whole 4 KiB windows of sequence space
DRAIN_S = 2.0  # after the events are off: until the reader's file stops growing
# Marker: the trace clock at this line is the wall-clock time it names.
MARKER_SCRIPT = 'printf "ccbench_unix=%s\\n" "$(date +%s.%N)" > "$1"'
READER_SCRIPT = 'exec cat "$1" > "$2"'


FILE_GLOB = "tcp-probe-*.txt"


def trace_file(reader: str) -> str:
    """A reader's trace in raw/ (one per sender over SSH, HOST on a one-kernel testbed)."""
    return f"tcp-probe-{reader}.txt"


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


def acks_per_s(spec: RunSpec, cpus: int | None = None) -> float:
    """The ACKs a trace reader should expect per second: the bottleneck's rate in
    full-size segments, an ACK per two (delayed ACKs, RFC 5681 4.2), and on a
    one-kernel testbed of `cpus` CPUs at most ACKS_PER_S_PER_CPU per CPU."""
    delayed = spec.topology.rate_bps / 8 / spec.topology.frame_bytes / 2
    return delayed if cpus is None else min(delayed, ACKS_PER_S_PER_CPU * cpus)


def thin_bits_for(spec: RunSpec, budget_bytes: int, cpus: int | None = None) -> int:
    """How many bits of sequence space to thin by so the trace stays in budget, from
    the ACKs expected (acks_per_s) over the traffic, LINE_BYTES each."""
    est = acks_per_s(spec, cpus) * spec.traffic_s * LINE_BYTES
    return 0 if est <= budget_bytes else math.ceil(math.log2(est / budget_bytes))


@dataclass
class Reader:
    node: str  # where it reads (HOST on a one-kernel testbed)
    file: str  # raw/ file
    events: list[str] = field(default_factory=list)  # those the kernel has
    problem: str | None = None  # why it did not trace; None: traced
    fetch: dict[str, Any] | None = None  # over SSH: what the fetch moved, or {error}


@dataclass
class TcpProbe(Instrument[TcpEvents]):
    name = "tcp_probe"
    description = "tcp_probe per ACK on the Linux senders (+ cong_state, retransmits)"
    raw_files = (
        RawFile(
            trace_file,
            f"the per-ACK trace of one trace reader (a sender over SSH, `{HOST}` "
            "on a one-kernel testbed)",
        ),
    )
    cost = Cost.PER_PACKET
    oses = ("linux",)
    optional = True
    options = {
        "budget_mb": Option(256.0, "the most a run's trace may hold per reader, MB; above "
                            "it ACKs are thinned by sequence space", 0, 1e5),
    }  # fmt: skip
    in_traced_twin = True
    sender_rank = 1  # every ACK: finer than ss and siftr's samples
    # Counted as the time series reads the trace (EventCounter), not by summary_part.
    summary_key = "tcp_events"
    summary_doc = "runs with a per-ACK trace: each flow's recoveries, RTOs and retransmissions"
    summary_after = "bblog"
    node_files = (NODE_FILE,)

    instance: str = ""
    ports: list[int] = field(default_factory=list)
    thin_bits: int = 0
    readers: list[Reader] = field(default_factory=list)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        opts = cls.asked(spec)
        if opts is None:
            return None
        linux = cls.senders_on(tb, spec)
        if not linux:
            return None
        one_kernel = kind(tb.kind).caps.one_kernel
        nodes = [HOST] if one_kernel else linux
        cpus = os.cpu_count() if one_kernel else None  # whose receivers share them
        return cls(
            instance=instance(tb.id),
            ports=[layout.flow_port(tb.roles, spec, k) for k in range(1, len(spec.flows) + 1)],
            thin_bits=thin_bits_for(spec, int(opts["budget_mb"] * 2**20), cpus),
            readers=[Reader(n, trace_file(n)) for n in nodes],
        )

    def wants(self, tb: Testbed) -> list[Need]:
        """A kernel that can mount tracefs, where each reader runs (this machine for
        a one-kernel testbed's)."""
        return [Need("this machine" if r.node == HOST else r.node, self._ex_on(tb, r),
                     Needs(features=("tracefs",)), self.name) for r in self.readers]  # fmt: skip

    def _ex(self, rec: Recording, r: Reader) -> Executor:
        return self._ex_on(rec.tb, r)

    @staticmethod
    def _ex_on(tb: Testbed, r: Reader) -> Executor:
        return NetnsExecutor(None) if r.node == HOST else tb.ex(r.node)

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

    @classmethod
    def add_rows(cls, rd: RawDir, record: Self | None, ctx: SeriesContext, sink: Sink) -> None:
        trace_rows(rd, ctx, sink, record.thinning if record else None)

    @classmethod
    def series_caption(cls, summaries: Sequence[Any]) -> str:
        """Every ACK, unless the budget thinned them (then it says how), and the events
        the kernel's buffer dropped, if any (such a run is invalid since the trace's
        losses were a reason; one judged before may still be shown)."""
        evs = [e for r in summaries if (e := cls.part_of(r))]
        thin = {e.acks_thinned for e in evs}
        lost = sum(e.lost_events for e in evs)
        but = f" but {lost_text(lost)}" if lost else ""
        if thin <= {None}:
            return f"{cls.name}, every ACK{but}"
        return f"{cls.name}: {'; '.join(sorted(t for t in thin if t))}{but}"

    @classmethod
    def leftovers_argv(cls, os: str) -> list[list[str]]:
        return [["sh", "-c", TRACE_OFF]] if os == "linux" else []

    @classmethod
    def remove_local_leftovers(cls, tb_id: str) -> None:
        remove_host_instance(instance(tb_id))


# A trace instance an earlier run left removed (the sweep ended its reader first; rmdir
# turns its events off: kernel/trace/trace.c, __remove_instance). One a reader holds is
# a run in progress (a one-kernel testbed's on this machine): rmdir fails (EBUSY), left.
TRACE_OFF = (
    f'for d in {TRACEFS}/instances/ccbench-*; do [ -d "$d" ] || continue; '
    'rmdir "$d" 2>/dev/null && echo "logger tcp_probe"; done; true'
)


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


# --- reading ------------------------------------------------------------------------
# The instant a trace pairs with wall-clock time (`start` writes it to the instance's
# trace_marker right after its reader starts).
_MARKER = re.compile(r"(\d+\.\d+): tracing_mark_write: ccbench_unix=(\d+\.\d+)")
MARKER_LINES = 10000  # it is among the first lines: the traffic has not started yet


def _trace_offset(rd: RawDir, name: str) -> float | None:
    """Wall-clock time minus trace clock, from the trace's marker line."""
    from ccbench.timeseries_samplers import open_stored

    fh = open_stored(rd, name)
    if fh is None:
        return None
    with fh:
        for line in itertools.islice(fh, MARKER_LINES):
            m = _MARKER.search(line)
            if m:
                return float(m.group(2)) - float(m.group(1))
    return None


def trace_rows(rd: RawDir, ctx: SeriesContext, sink: Sink, thinning: str | None) -> None:
    """The traces' per-ACK rows (Linux senders: cwnd, ssthresh, bytes in flight, the
    peer's window, srtt) and congestion-state rows (events.CA_STATE) into `sink`, each file's
    once it read whole, and their congestion events into its statistics; a trace
    without its marker or that does not parse gives no rows and one problem naming it."""
    # pandas and pyarrow are loaded where runs are read, not where they are planned
    from ccbench.parse.tcp_probe import FastTrace
    from ccbench.timeseries_samplers import add_sender_rows, as_float, open_stored, read_whole

    t0, local_to_flow = ctx.t0, ctx.local_to_flow
    for name in rd.glob(FILE_GLOB):
        offset = _trace_offset(rd, name)
        if offset is None:
            rd.problem(name, "no ccbench_unix marker: the trace's clock cannot be placed")
            continue
        fh = open_stored(rd, name)
        if fh is None:
            continue
        rows = sink.file_rows()
        events = EventCounter(local_to_flow, None if t0 is None else offset - t0, rows)
        trace = FastTrace(fh, on_other=events.add)

        def read(
            fh: IO[str] = fh, trace: FastTrace = trace, rows: FileRows = rows,
            offset: float = offset, events: EventCounter = events,
        ) -> None:  # fmt: skip
            with fh:
                for b in trace.probe_batches():
                    add_sender_rows(rows, b, local_to_flow, t0, offset, TcpProbe.name, {
                        "cwnd_bytes": as_float(b.column("cwnd_pkts")) * ctx.mss_bytes,
                        "rtt_us": as_float(b.column("srtt_us")),
                        # NaN while infinite (no reduction yet: null in the batch)
                        "ssthresh_bytes": as_float(b.column("ssthresh_pkts")) * ctx.mss_bytes,
                        "inflight_bytes": as_float(b.column("inflight_bytes")),
                        "rwnd_bytes": as_float(b.column("snd_wnd_bytes")),
                    })  # fmt: skip
                events.flush()

        if not read_whole(rd, name, rows, f"a {TcpProbe.name} trace", read):
            continue
        sink.commit(rows)
        if t0 is not None:
            sink.stats.tcp_events = events.merged(
                sink.stats.tcp_events, TcpProbe.name, trace.lost_events, thinning
            )


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
