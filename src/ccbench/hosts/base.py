"""What every OS driver offers. Drivers only *plan*: they return argv lists, and an
Executor runs them, so the plans are exactly testable without the OS at hand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

Argv = list[str]

# Prints each start-up-script NIC record (emulab/lib-linux.sh record_nic) on a line of
# its own; the same on Linux and FreeBSD nodes (a constant: no config value reaches it).
NIC_RECORDS_SCRIPT = (
    'for f in /var/tmp/ccbench/nic-*.json; do [ -f "$f" ] && cat "$f" && echo; done; true'
)


@dataclass(frozen=True)
class Step:
    """One command of a plan; `allow_fail` marks a step whose failure is expected on
    some kernels and must not abort the plan."""

    argv: Argv
    allow_fail: bool = False


# The seeds' socket-buffer tuning (seed 001): 10 MB maxima, no cached metrics.
SOCKBUF_MAX = 10485760


def iperf3_client_argv(
    dst: str, port: int, cc_args: list[str], duration_s: float, interval_s: float, streams: int
) -> Argv:
    """The seeds' client: -l 1M, JSON, interval reports; `cc_args` is the OS's -C part."""
    argv = ["iperf3", "-c", dst, "-p", str(port), *cc_args, "-l", "1M"]
    argv += ["-t", f"{duration_s:g}", "-i", f"{interval_s:g}", "-J"]
    if streams > 1:
        argv += ["-P", str(streams)]
    return argv


def iperf3_server_argv(port: int, interval_s: float | None) -> Argv:
    """A server for exactly one test (-1: it exits by itself when the flow ends). With
    `interval_s`, JSON with the receiver's own intervals: bytes read from the socket per
    interval, what crossed the path (the client's intervals count bytes written into
    its socket: esnet/iperf src/iperf_api.c, iperf_stats_callback counts each side's
    own bytes)."""
    argv = ["iperf3", "-s", "-1", "-p", str(port)]
    if interval_s is not None:
        argv += ["-i", f"{interval_s:g}", "-J"]
    return argv


class NodeDriver(Protocol):
    """What ccbench reads on any node of a dumbbell, the delay node included."""

    os: str

    def drop_counters(self) -> dict[str, Argv]:
        """name -> command: the drop counters the loss ledger reads (ccbench.ledger)."""
        ...


class HostDriver(NodeDriver, Protocol):
    """An endpoint or router OS: every plan a run needs of it."""

    def tune(self, *, netns_local: bool = False) -> list[Argv]:
        """Seed sysctls for a TCP endpoint."""
        ...

    def check_variant(self, cc: str, stack: str) -> None:
        """CcbenchError (one line) if this OS cannot run a variant {cc, stack}."""
        ...

    def facts(self) -> dict[str, Argv]:
        """name -> command whose stdout is recorded as provenance."""
        ...

    def receive_buffer_facts(self) -> Argv:
        """One command printing what bounds a receiver's advertised window (its socket
        buffer limits and autotuning), `name = value` or `name: value` per line: facts.json
        `receivers`, what a receive-window-limited flow's reason names."""
        ...

    def kernel_identity(self) -> dict[str, Argv]:
        """name -> command: what names the running kernel (ccbench.kernel.identity
        joins their outputs into one line; facts() records them too)."""
        ...

    def iperf3_server(self, port: int, interval_s: float | None = None) -> Argv: ...

    def iperf3_udp_client(
        self, dst: str, port: int, payload_bytes: int, rate_bps: float, seconds: float
    ) -> Argv:
        """UDP at `rate_bps` for `seconds` (the calibration's rate probe), JSON out."""
        ...

    def listening(self, port: int, proto: str = "tcp") -> Argv:
        """Prints something exactly when a server listens on `port` (tcp or udp)."""
        ...

    def cpu_counters(self) -> Argv:
        """The CPU time counters (ccbench.parse.procstat reads them)."""
        ...

    def idle_ping(self, dst: str) -> Argv:
        """The calibration's idle-RTT series: 50 pings, fast, numeric."""
        ...

    def probe_ping(self, dst: str, interval_s: float) -> Argv:
        """The ping probe: until stopped (SIGINT prints the summary), one line a reply."""
        ...

    def iperf3_client(
        self,
        dst: str,
        port: int,
        cc: str,
        duration_s: float,
        interval_s: float,
        streams: int = 1,
    ) -> Argv: ...

    def nic_records(self) -> Argv:
        """Prints the start-up script's NIC records, one JSON object per line."""
        ...

    def qdisc_stats(self, dev: str) -> Argv:
        """`tc -s -j qdisc show dev DEV` (routers; raises on an OS that is never one)."""
        ...

    def qdisc_sampler(self, dev: str, interval_s: float) -> Argv:
        """Samples DEV's qdiscs until stopped (routers; raises on an OS that is never one)."""
        ...

    def variant_plan(self, cc: str, stack: str = "default") -> list[Step]:
        """Host-wide steps that make a variant {cc, stack} the default (FreeBSD)."""
        ...

    def verify_stack(self, stack: str = "default") -> Argv | None:
        """Command whose output stack_problems() judges; None: nothing to verify."""
        ...

    def stack_problems(self, functions_available: str, stack: str) -> list[str]: ...

    def ss_sampler(self, interval_s: float) -> Argv | None:
        """`TS <unix s>` blocks of `ss -tinH` every interval until stopped (ccbench.parse.ss
        reads them); None where the OS has no ss (FreeBSD: siftr)."""
        ...

    def siftr2_probe_plan(self) -> list[Step]:
        """Steps deciding the kernel logger (siftr2 if one succeeds, else siftr)."""
        ...

    def siftr_start(
        self, logfile: str, port: int, logger: str = "siftr", ppl: int = 1
    ) -> list[Argv]: ...

    def siftr_stop(self, logger: str = "siftr") -> list[Argv]: ...

    def sockstat_tcp(self) -> Argv | None:
        """Every TCP socket with its CC and stack (FreeBSD); None where iperf3 says it."""
        ...
