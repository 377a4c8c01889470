"""Linux host driver: command plans for endpoints, routers and the bottleneck."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ccbench import layout
from ccbench.errors import CcbenchError
from ccbench.hosts.base import (
    NIC_RECORDS_SCRIPT,
    Argv,
    Step,
    iperf3_client_argv,
    iperf3_server_argv,
)
from ccbench.hosts.settings import LinuxSettings
from ccbench.spec import Topology

OFFLOADS = ("tso", "gso", "gro")

# ccbench.parse.qdisc reads what this prints. $1: interval in microseconds, $2: device.
# tc exits at its first failed command (device gone): the loop then ends too.
# LC_ALL=C: bash writes $EPOCHREALTIME with the locale's decimal point (a `,` under a
# de_DE LC_NUMERIC that ssh forwards), which ${EPOCHREALTIME/./} would not remove.
QDISC_LOOP = r"""set -u
export LC_ALL=C
exec {nap}<> <(:)
coproc TC { exec tc -s -j -batch -; }
trap 'kill "$TC_PID" 2>/dev/null; exit 0' INT TERM HUP
step=$1 next=${EPOCHREALTIME/./}
while :; do
  now=${EPOCHREALTIME/./}
  printf 'TS %s\n' "${now:0:-6}.${now: -6}"
  printf 'qdisc show dev %s\n' "$2" >&"${TC[1]}" || exit 0
  IFS= read -r line <&"${TC[0]}" || exit 0
  printf '%s\n' "$line"
  next=$((next + step)) now=${EPOCHREALTIME/./}
  if ((next <= now)); then next=$now; continue; fi
  d=$((next - now))
  printf -v s '%d.%06d' $((d / 1000000)) $((d % 1000000))
  read -t "$s" -u "$nap" _ || :
done
"""


# ccbench.parse.ss reads what this prints: `TS <unix s>`, `ss -tinH` of the established
# sockets, and `TE <unix s>` once ss returned (it read the sockets between the two; under
# load ss may start tens of ms after TS, so the samples are stamped TE). Every $1
# microseconds against a deadline (a late sample is taken at once and the schedule
# restarts from it: no burst). Bash builtins time it; only ss itself starts per sample.
# The interval is a positional argument of a constant script. LC_ALL=C: as QDISC_LOOP.
SS_LOOP = r"""set -u
export LC_ALL=C
exec {nap}<> <(:)
trap 'exit 0' INT TERM HUP
step=$1 next=${EPOCHREALTIME/./}
while :; do
  now=${EPOCHREALTIME/./}
  printf 'TS %s\n' "${now:0:-6}.${now: -6}"
  ss -tinH state established
  now=${EPOCHREALTIME/./}
  printf 'TE %s\n' "${now:0:-6}.${now: -6}"
  next=$((next + step))
  if ((next <= now)); then next=$now; continue; fi
  d=$((next - now))
  printf -v s '%d.%06d' $((d / 1000000)) $((d % 1000000))
  read -t "$s" -u "$nap" _ || :
done
"""


# Prints every transmit queue's byte queue limits of device $1, one `grep -H` line per
# file ("/sys/class/net/eth5/queues/tx-0/byte_queue_limits/limit:30280"), the form
# emulab/lib-linux.sh bql_of records at set-up (ccbench.summarize.hosts.parse_bql reads
# both); nothing where the driver has no BQL. The device is a positional argument.
BQL_SCRIPT = (
    'q=/sys/class/net/$1/queues; grep -H . "$q"/tx-*/byte_queue_limits/limit '
    '"$q"/tx-*/byte_queue_limits/limit_max "$q"/tx-*/byte_queue_limits/inflight '
    "2>/dev/null; true"
)


class LinuxHost:
    os = "linux"

    # --- endpoints -----------------------------------------------------------
    def tune(self, *, netns_local: bool = False) -> list[Argv]:
        """ccbench's baseline sysctls of an endpoint (ccbench.hosts.settings)."""
        return LinuxSettings().tune(netns_local=netns_local)

    def check_variant(self, cc: str, stack: str) -> None:
        """A variant {cc, stack} Linux can run: one TCP stack, iperf3 -C sets the CC."""
        if stack != "default":
            raise CcbenchError(f"stack '{stack}' is a FreeBSD setting; a Linux variant has one "
                               "TCP stack (leave stack out)")  # fmt: skip

    def kernel_identity(self) -> dict[str, Argv]:
        # The build id is a GNU note in /sys/kernel/notes (binary: read as hex); a kernel
        # without it leaves this empty, and the identity is `uname -r -v` alone.
        return {"kernel": ["uname", "-r", "-v"],
                "build_id": ["od", "-An", "-v", "-tx1", "/sys/kernel/notes"]}  # fmt: skip

    def facts(self) -> dict[str, Argv]:
        return {
            "uname": ["uname", "-a"],
            **self.kernel_identity(),
            "cc_available": ["sysctl", "-n", "net.ipv4.tcp_available_congestion_control"],
            "cc_default": ["sysctl", "-n", "net.ipv4.tcp_congestion_control"],
            "tcp_rmem": ["sysctl", "-n", "net.ipv4.tcp_rmem"],
            "tcp_wmem": ["sysctl", "-n", "net.ipv4.tcp_wmem"],
            "tcp_no_metrics_save": ["sysctl", "-n", "net.ipv4.tcp_no_metrics_save"],
            "tcp_recovery": ["sysctl", "-n", "net.ipv4.tcp_recovery"],
            "iperf3": ["iperf3", "--version"],
        }

    def receive_buffer_facts(self) -> Argv:
        # tcp_rmem is per namespace; rmem_max host-wide (net/core/sysctl_net_core.c)
        return ["sysctl", "net.ipv4.tcp_rmem", "net.core.rmem_max",
                "net.ipv4.tcp_moderate_rcvbuf", "net.ipv4.tcp_window_scaling",
                "net.ipv4.tcp_adv_win_scale"]  # fmt: skip

    def nic_records(self) -> Argv:
        """The NIC records emulab/lib-linux.sh record_nic wrote (driver, link speed, TX
        ring asked vs set, offloads: /var/tmp/ccbench/nic-<interface>.json), one JSON
        object per line; nothing where there are none (a constant script)."""
        return ["sh", "-c", NIC_RECORDS_SCRIPT]

    def tx_queue_state(self, dev: str) -> Argv:
        """`dev`'s transmit queues' BQL state now (limit, limit_max, inflight in bytes):
        read on the bottleneck before and after the traffic, since BQL's limit grows
        with it from 0 (lib/dynamic_queue_limits.c dql_completed, dql_reset)."""
        return ["sh", "-c", BQL_SCRIPT, "ccbench-bql", dev]

    # --- what FreeBSD senders need and Linux does not (HostDriver) ----------------
    def variant_plan(self, cc: str, stack: str = "default") -> list[Step]:
        return []  # iperf3 -C sets the CC per socket; Linux has one TCP stack

    def verify_stack(self, stack: str = "default") -> Argv | None:
        return None

    def stack_problems(self, functions_available: str, stack: str) -> list[str]:
        return []

    def ss_sampler(self, interval_s: float) -> Argv | None:
        """Samples the established TCP sockets every `interval_s` until stopped."""
        return ["bash", "-c", SS_LOOP, "ccbench-ss", str(max(1, round(interval_s * 1e6)))]

    def siftr2_probe_plan(self) -> list[Step]:
        return []

    def siftr_start(
        self, logfile: str, port: int, logger: str = "siftr", ppl: int = 1
    ) -> list[Argv]:
        return []  # no kernel logger: the run samples `ss` (ss_sampler)

    def siftr_stop(self, logger: str = "siftr") -> list[Argv]:
        return []

    def sockstat_tcp(self) -> Argv | None:
        return None  # iperf3's JSON names the CC used; one TCP stack

    def iperf3_udp_client(
        self, dst: str, port: int, payload_bytes: int, rate_bps: float, seconds: float
    ) -> Argv:
        return ["iperf3", "-c", dst, "-p", str(port), "-u", "-l", str(payload_bytes),
                "-b", f"{int(rate_bps)}", "-t", f"{seconds:g}", "-J"]  # fmt: skip

    def listening(self, port: int, proto: str = "tcp") -> Argv:
        return ["ss", f"-Hl{proto[0]}n", f"sport = :{port}"]

    def cpu_counters(self) -> Argv:
        return ["cat", "/proc/stat"]

    def idle_ping(self, dst: str) -> Argv:
        return ["ping", "-n", "-c", "50", "-i", "0.01", "-W", "2", dst]

    def probe_ping(self, dst: str, interval_s: float) -> Argv:
        # -D: a timestamp per reply
        return ["ping", "-n", "-D", "-i", f"{interval_s:g}", dst]

    def drop_counters(self) -> dict[str, Argv]:
        return {
            "links": ["ip", "-s", "-s", "-j", "link", "show"],  # -s -s: missed too
            "iptables": ["iptables-save", "-c"],
            "softnet": ["cat", "/proc/net/softnet_stat"],
            # Which kernel: softnet_stat is the kernel's, the same in all its namespaces.
            "boot_id": ["cat", "/proc/sys/kernel/random/boot_id"],
            "default_route": ["ip", "-j", "route", "show", "default"],
        }

    def iperf3_server(self, port: int, interval_s: float | None = None) -> Argv:
        return iperf3_server_argv(port, interval_s)

    def iperf3_client(
        self,
        dst: str,
        port: int,
        cc: str,
        duration_s: float,
        interval_s: float,
        streams: int = 1,
    ) -> Argv:
        # -C sets the CC per socket (root may use any built one).
        return iperf3_client_argv(dst, port, ["-C", cc], duration_s, interval_s, streams)

    # --- routers and links ---------------------------------------------------
    def forwarding(self) -> list[Argv]:
        return [["sysctl", "-w", "net.ipv4.ip_forward=1"]]

    def offloads_off(self, dev: str) -> Argv:
        return ["ethtool", "-K", dev, *[x for o in OFFLOADS for x in (o, "off")]]

    def offloads_show(self, dev: str) -> Argv:
        return ["ethtool", "-k", dev]

    def bottleneck(self, dev: str, topo: Topology, shaper: str = "tbf") -> list[Argv]:
        """Rate shaper with the configured child queue on `dev`'s egress."""
        rate = f"{int(topo.rate_bps)}bit"
        # Burst: ~1 ms at line rate but never under 10 full frames (tc-tbf(8): a burst too
        # small for the timer resolution caps the rate).
        burst = max(int(topo.rate_bps / 8 / 1000), 10 * topo.frame_bytes)
        plan: list[Argv] = [["tc", "qdisc", "del", "dev", dev, "root"]]
        if shaper == "tbf":
            plan.append(
                ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "tbf",
                 "rate", rate, "burst", str(burst), "latency", "1s"]
            )  # fmt: skip
            parent = "1:1"
        elif shaper == "htb":
            plan += [
                ["tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
                ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                 "rate", rate, "ceil", rate, "burst", str(burst), "cburst", str(burst)],
            ]  # fmt: skip
            parent = "1:1"
        else:
            raise CcbenchError(f"unknown shaper '{shaper}'")
        plan.append(["tc", "qdisc", "add", "dev", dev, "parent", parent, "handle", "10:",
                     *self.queue_args(topo)])  # fmt: skip
        return plan

    def queue_args(self, topo: Topology) -> Argv:
        n = topo.queue_limit_pkts
        frame = topo.frame_bytes
        return topo.queue.tc_args(n, frame, topo.rate_bps)

    def qdisc_stats(self, dev: str) -> Argv:
        return ["tc", "-s", "-j", "qdisc", "show", "dev", dev]

    def qdisc_sampler(self, dev: str, interval_s: float) -> Argv:
        """Sample `dev`'s qdiscs every `interval_s` until stopped: one long-lived
        `tc -s -j -batch -` (a bash coproc) is asked `qdisc show dev DEV` per sample, so
        no process starts per sample (bash builtins only: $EPOCHREALTIME, printf, and
        `read -t` on a pipe that never delivers as the sleep). Prints `TS <unix s>`
        (taken just before the request) then tc's one-line JSON answer; the period is
        kept against a deadline, a late sample is taken at once and the schedule
        restarts from it (no burst). The interval (whole microseconds) and the device
        are positional arguments of a constant script, never pasted into it."""
        return ["bash", "-c", QDISC_LOOP, "ccbench-qdisc", str(max(1, round(interval_s * 1e6))),
                dev]  # fmt: skip

    def netem_delay(self, dev: str, one_way_ms: float) -> list[Argv]:
        return [
            ["tc", "qdisc", "del", "dev", dev, "root"],
            ["tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", f"{one_way_ms:g}ms",
             "limit", "1000000"],
        ]  # fmt: skip

    def loss(
        self, topo: Topology, chain: str = "INPUT", ports: tuple[int, int] | None = None
    ) -> list[Argv]:
        """Drop incoming TCP at a receiver with iptables `statistic`, like seed 001, on
        the flows' server ports only (seed 001: `--dport 5201`; `ports`: first and last,
        default layout's BASE_PORT + 1 .. BASE_PORT + MAX_FLOWS): TCP on the control
        network, ccbench's own SSH among it, is never dropped."""
        if topo.loss_mode == "none" or topo.loss_rate <= 0:
            return []
        lo, hi = ports or (layout.BASE_PORT + 1, layout.BASE_PORT + layout.MAX_FLOWS)
        ports_arg = f"{lo}:{hi}"
        base = ["iptables", "-w", "-A", chain, "-p", "tcp", "--dport", ports_arg, "-m",
                "statistic"]  # fmt: skip
        if topo.loss_mode == "nth":
            every = max(2, round(1 / topo.loss_rate))
            return [[*base, "--mode", "nth", "--every", str(every), "--packet", "0", "-j", "DROP"]]
        return [[*base, "--mode", "random", "--probability", f"{topo.loss_rate:.6f}",
                 "-j", "DROP"]]  # fmt: skip

    def nfqueue_forwarded(self, queue: int, in_dev: str | None = None) -> Argv:
        """Every forwarded packet to the delay element, or only those that came in on
        `in_dev` (one direction)."""
        only = ["-i", in_dev] if in_dev else []
        return ["iptables", "-w", "-A", "FORWARD", *only, "-j", "NFQUEUE", "--queue-num",
                str(queue)]  # fmt: skip


def check_kernel_ccs(uses: Iterable[tuple[str, str]]) -> None:
    """Every (where, cc) of a local testbed names a CC this kernel has or can load (a
    check of this machine, made before anything is built)."""
    have: set[str] | None = None
    for where, cc in uses:
        have = loadable_ccs() if have is None else have
        if cc not in have:
            raise CcbenchError(
                f"{where}: this kernel has no TCP congestion control '{cc}' and cannot "
                f"load it (it has: {', '.join(sorted(have))})"
            )


def loadable_ccs(proc: Path = Path("/proc/sys/net/ipv4"), modules: Path | None = None) -> set[str]:
    """CCs this kernel has now or can load: the available list plus tcp_<cc> modules."""
    have = set((proc / "tcp_available_congestion_control").read_text().split())
    if modules is None:
        modules = Path("/lib/modules") / os.uname().release / "kernel" / "net" / "ipv4"
    if modules.is_dir():
        for m in modules.glob("tcp_*.ko*"):
            have.add(m.name.split(".", 1)[0].removeprefix("tcp_"))
    return have
