#!/usr/bin/env python3
"""Measure ccdelay's fidelity on a three-namespace dumbbell (needs root).

    sudo python3 native/ccdelay/measure.py                # 100M/500M/1G x cubic/reno/bbr
    sudo python3 native/ccdelay/measure.py --rates 1gbit --ccs bbr --duration 20 \
        --rt-prio 0 --ccdelay-arg=--single-thread          # compare variants

Testbed (all names start with ``ccdt-``; torn down on exit, even on failure):

    ccdt-s (198.18.250.1) --veth-- ccdt-b (.2 | .5, ip_forward, tbf toward ccdt-d)
    --veth-- ccdt-d (.6 | .9, ip_forward, ccdelay) --veth-- ccdt-r (198.18.250.10)

As in ccbench's dumbbell (rt1 -> dl), the shaper sits on a router of its own, not in
the delay namespace: a backlogged tbf arms a timer per packet, and in ccdt-d that
work would run inside ccdelay's verdict calls and be charged to the element.
Every forwarded packet passes an ``iptables -j NFQUEUE`` rule in ccdt-d, so each
direction gets the configured one-way delay.  Offloads are off on every veth end.
CPU layout (--rps): "spare" (default) keeps the last CPU free of receive
processing for ccdelay's releaser thread (rps_cpus = the other CPUs, ccdelay
--cpu 0,LAST); "all" sets rps_cpus to every CPU and leaves ccdelay unpinned.

For each case the script prints throughput, iperf3's mean RTT, the share of
packets ccdelay released more than 5 ms late, the maximum lateness, ccdelay's own
CPU use (one core = 100 %), the whole machine's, the CPU other work used just
before the case (bgCPU) and the hypervisor's steal time during it.

The module is also imported by tests/integration/test_ccdelay.py (Testbed,
run_iperf, ping_rtt_ms).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CCDELAY = HERE / "ccdelay"

NS_S, NS_B, NS_D, NS_R = "ccdt-s", "ccdt-b", "ccdt-d", "ccdt-r"
NAMESPACES = (NS_S, NS_B, NS_D, NS_R)
S_ADDR, B_ADDR_S, B_ADDR_D, D_ADDR_B, D_ADDR_R, R_ADDR = (
    "198.18.250.1",
    "198.18.250.2",
    "198.18.250.5",
    "198.18.250.6",
    "198.18.250.9",
    "198.18.250.10",
)
# the veth links: (namespace, device, address) of both ends
LINKS = (
    ((NS_S, "ccdt-s0", S_ADDR), (NS_B, "ccdt-b0", B_ADDR_S)),
    ((NS_B, "ccdt-b1", B_ADDR_D), (NS_D, "ccdt-d0", D_ADDR_B)),
    ((NS_D, "ccdt-d1", D_ADDR_R), (NS_R, "ccdt-r0", R_ADDR)),
)
VETHS = tuple((ns, dev) for link in LINKS for ns, dev, _ in link)
BOTTLENECK = (NS_B, "ccdt-b1")  # the router's egress toward the delay node
IPERF_PORT = 5399


def sh(*args: str, check: bool = True, timeout: float = 30, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        list(args), check=check, timeout=timeout, capture_output=True, text=True, **kw
    )


def nsx(ns: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return sh("ip", "netns", "exec", ns, *args, **kw)


def parse_rate_bps(rate: str) -> int:
    r = rate.strip().lower().removesuffix("bit").removesuffix("bps")
    mult = {"k": 10**3, "m": 10**6, "g": 10**9}
    if r and r[-1] in mult:
        return int(float(r[:-1]) * mult[r[-1]])
    return int(r)


def cpu_mask_all() -> str:
    n = os.cpu_count() or 1
    return format((1 << n) - 1, "x")


def cpu_layout(rps: str) -> tuple[str, list[str]]:
    """rps_cpus mask for every veth and the ccdelay --cpu arguments.

    "all":   RPS spreads receive processing over every CPU; ccdelay not pinned.
    "spare": the last CPU is kept free of receive processing and given to
             ccdelay's releaser alone (--cpu 0,LAST); RPS uses the others.
             Receive processing for a device still happens on one CPU set, so
             packets are not reordered.
    """
    n = os.cpu_count() or 1
    if rps == "all" or n < 2:
        return cpu_mask_all(), []
    if rps == "spare":
        return format((1 << (n - 1)) - 1, "x"), ["--cpu", f"0,{n - 1}"]
    raise ValueError(f"rps must be 'all' or 'spare', not {rps!r}")


def ns_pids(ns: str) -> list[int]:
    p = sh("ip", "netns", "pids", ns, check=False)
    return [int(x) for x in p.stdout.split()] if p.returncode == 0 else []


def teardown() -> None:
    """Remove everything named ccdt-*: processes in the namespaces, then the namespaces."""
    existing = sh("ip", "netns", "list", check=False).stdout
    for ns in NAMESPACES:
        if ns not in existing.split():
            continue
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = ns_pids(ns)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 2
            while pids and time.monotonic() < deadline and ns_pids(ns):
                time.sleep(0.05)
        sh("ip", "netns", "del", ns, check=False)


@dataclass
class Testbed:
    rate: str = "1gbit"
    fifo_limit: int = 1000
    delay_us: int = 20000
    ccdelay_args: list[str] = field(default_factory=list)
    rps: str = "spare"
    workdir: Path | None = None
    ccdelay_proc: subprocess.Popen | None = None
    stats_path: Path | None = None
    _tmp: tempfile.TemporaryDirectory | None = None

    # -- build ---------------------------------------------------------------
    def up(self) -> Testbed:
        teardown()
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="ccdt-")
            self.workdir = Path(self._tmp.name)
        for ns in NAMESPACES:
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        for (ns_a, dev_a, addr_a), (ns_b, dev_b, addr_b) in LINKS:
            sh("ip", "link", "add", dev_a, "netns", ns_a, "type", "veth",
               "peer", "name", dev_b, "netns", ns_b)  # fmt: skip
            sh("ip", "-n", ns_a, "addr", "add", f"{addr_a}/30", "dev", dev_a)
            sh("ip", "-n", ns_b, "addr", "add", f"{addr_b}/30", "dev", dev_b)
        mask, _ = cpu_layout(self.rps)
        for ns, dev in VETHS:
            sh("ip", "-n", ns, "link", "set", dev, "up")
            nsx(ns, "ethtool", "-K", dev, "gso", "off", "tso", "off", "gro", "off")
            nsx(ns, "tee", f"/sys/class/net/{dev}/queues/rx-0/rps_cpus", input=mask)
        sh("ip", "-n", NS_S, "route", "add", "default", "via", B_ADDR_S)
        sh("ip", "-n", NS_B, "route", "add", R_ADDR, "via", D_ADDR_B)
        sh("ip", "-n", NS_D, "route", "add", S_ADDR, "via", B_ADDR_D)
        sh("ip", "-n", NS_R, "route", "add", "default", "via", D_ADDR_R)
        for ns in (NS_B, NS_D):
            nsx(ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        # per-namespace TCP buffers big enough for 1 Gbit x (40 ms + queue)
        for ns in (NS_S, NS_R):
            nsx(ns, "sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 33554432")
            nsx(ns, "sysctl", "-qw", "net.ipv4.tcp_wmem=4096 131072 33554432")
            nsx(ns, "sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1")
        nsx(NS_D, "iptables", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "0")
        self.set_rate(self.rate)
        return self

    def set_rate(self, rate: str) -> None:
        self.rate = rate
        ns, dev = BOTTLENECK
        nsx(ns, "tc", "qdisc", "del", "dev", dev, "root", check=False)
        bps = parse_rate_bps(rate)
        burst = max(bps // 8 // 1000, 15140)  # ~1 ms of rate, >= 10 full frames
        nsx(
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "handle",
            "1:",
            "tbf",
            "rate",
            rate,
            "burst",
            str(burst),
            "latency",
            "100ms",
        )
        nsx(
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            dev,
            "parent",
            "1:1",
            "handle",
            "10:",
            "pfifo",
            "limit",
            str(self.fifo_limit),
        )

    def start_ccdelay(self, *extra: str) -> subprocess.Popen:
        assert self.workdir is not None
        self.stats_path = self.workdir / "ccdelay-stats.json"
        self.stats_path.unlink(missing_ok=True)
        cmd = [
            "ip",
            "netns",
            "exec",
            NS_D,
            str(CCDELAY),
            "--queue",
            "0",
            "--delay-us",
            str(self.delay_us),
            "--stats",
            str(self.stats_path),
            *cpu_layout(self.rps)[1],
            *self.ccdelay_args,
            *extra,
        ]
        self.ccdelay_proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        proc = self.ccdelay_proc
        deadline = time.monotonic() + 5
        while not self.stats_path.exists():
            if proc.poll() is not None:
                err = proc.stderr.read().strip() if proc.stderr else ""
                raise RuntimeError(f"ccdelay exited: {err}")
            if time.monotonic() > deadline:
                raise RuntimeError("ccdelay wrote no stats within 5 s")
            time.sleep(0.02)
        return self.ccdelay_proc

    def stop_ccdelay(self, timeout: float = 5) -> int | None:
        p = self.ccdelay_proc
        if p is None:
            return None
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.ccdelay_proc = None
        return p.returncode

    def stats(self, refresh: bool = True) -> dict:
        """Current stats; with refresh, SIGUSR1 first and wait for the rewrite."""
        assert self.stats_path is not None
        p = self.ccdelay_proc
        if refresh and p is not None and p.poll() is None:
            before = json.loads(self.stats_path.read_text())["stats_writes"]
            p.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                cur = json.loads(self.stats_path.read_text())
                if cur["stats_writes"] > before:
                    return cur
                time.sleep(0.01)
        return json.loads(self.stats_path.read_text())

    def down(self) -> None:
        try:
            self.stop_ccdelay()
        finally:
            teardown()
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def __enter__(self) -> Testbed:
        try:
            return self.up()
        except BaseException:
            self.down()
            raise

    def __exit__(self, *exc) -> None:
        self.down()


def ping_rtt_ms(count: int = 10, interval: float = 0.1) -> dict:
    """Ping ccdt-r from ccdt-s: min/avg/median/max RTT in ms and the samples."""
    p = nsx(
        NS_S,
        "ping",
        "-n",
        "-c",
        str(count),
        "-i",
        str(interval),
        R_ADDR,
        timeout=count * interval + 10,
    )
    samples = [
        float(tok.split("=")[1])
        for ln in p.stdout.splitlines()
        for tok in ln.split()
        if tok.startswith("time=")
    ]
    if not samples:
        raise RuntimeError(f"ping got no replies:\n{p.stdout}{p.stderr}")
    srt = sorted(samples)
    mid = len(srt) // 2
    median = srt[mid] if len(srt) % 2 else (srt[mid - 1] + srt[mid]) / 2
    return {
        "min": srt[0],
        "avg": sum(srt) / len(srt),
        "median": median,
        "max": srt[-1],
        "samples": samples,
    }


def proc_cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_times() -> list[int]:
    """Aggregate /proc/stat cpu line: user nice system idle iowait irq softirq steal ..."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:]]


def machine_busy() -> tuple[int, int]:
    vals = cpu_times()
    idle = vals[3] + vals[4]
    return sum(vals) - idle, sum(vals)


def background_cpu_pct(seconds: float = 1.0) -> float:
    """Whole-machine CPU use while no test traffic runs (other work on the box)."""
    b0, a0 = machine_busy()
    time.sleep(seconds)
    b1, a1 = machine_busy()
    return 100.0 * (b1 - b0) / max(a1 - a0, 1)


def run_iperf(
    cc: str, duration: float = 10, port: int = IPERF_PORT, ccdelay_pid: int | None = None
) -> dict:
    """One iperf3 flow ccdt-s -> ccdt-r.  Returns the parsed JSON plus CPU figures."""
    server = subprocess.Popen(
        ["ip", "netns", "exec", NS_R, "iperf3", "-s", "-1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 5
        while f":{port}" not in nsx(NS_R, "ss", "-ltnH").stdout:
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("iperf3 server did not start")
            time.sleep(0.02)
        hz = os.sysconf("SC_CLK_TCK")
        t0 = time.monotonic()
        c0 = proc_cpu_ticks(ccdelay_pid) if ccdelay_pid else 0
        b0, a0 = machine_busy()
        v0 = cpu_times()
        p = nsx(
            NS_S,
            "iperf3",
            "-c",
            R_ADDR,
            "-p",
            str(port),
            "-C",
            cc,
            "-t",
            str(duration),
            "-J",
            check=False,
            timeout=duration + 30,
        )
        t1 = time.monotonic()
        c1 = proc_cpu_ticks(ccdelay_pid) if ccdelay_pid else 0
        b1, a1 = machine_busy()
        v1 = cpu_times()
        try:
            res = json.loads(p.stdout)
        except json.JSONDecodeError as e:
            raise RuntimeError(f"iperf3 gave no JSON: {p.stderr.strip()}") from e
        if "error" in res:
            raise RuntimeError(f"iperf3: {res['error']}")
        res["_cpu"] = {
            "ccdelay_pct": 100.0 * (c1 - c0) / hz / (t1 - t0),
            "machine_pct": 100.0 * (b1 - b0) / max(a1 - a0, 1),
            # time the hypervisor ran something else on our vCPUs
            "steal_pct": 100.0 * (v1[7] - v0[7]) / max(a1 - a0, 1),
        }
        return res
    finally:
        try:
            server.wait(5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def summarize(res: dict) -> dict:
    end = res["end"]
    snd = end["streams"][0]["sender"]
    return {
        "cc": end.get("sender_tcp_congestion"),
        "mbps": end["sum_received"]["bits_per_second"] / 1e6,
        "mean_rtt_ms": snd.get("mean_rtt", 0) / 1000,
        "max_rtt_ms": snd.get("max_rtt", 0) / 1000,
        "retrans": end["sum_sent"].get("retransmits", 0),
        "ccdelay_cpu_pct": res["_cpu"]["ccdelay_pct"],
        "machine_cpu_pct": res["_cpu"]["machine_pct"],
        "steal_pct": res["_cpu"]["steal_pct"],
    }


def lateness_delta(a: dict, b: dict) -> dict:
    """Lateness over the interval between two stats snapshots a -> b."""
    la, lb = a["lateness"], b["lateness"]
    n = lb["count"] - la["count"]
    over = lb["over_threshold"] - la["over_threshold"]
    return {
        "packets": n,
        "late_share": over / n if n else 0.0,
        "late_over_5ms": over,
        "buckets": [y - x for x, y in zip(la["bucket_counts"], lb["bucket_counts"], strict=True)],
        "overdue_rx": (
            b["receive_lag"]["overdue_on_receipt"] - a["receive_lag"]["overdue_on_receipt"]
        )
        / n
        if n
        else 0.0,
        "dropped_late": b["packets_dropped_late"] - a["packets_dropped_late"],
        "drops": (b["kernel_queue"]["queue_full_drops"] - a["kernel_queue"]["queue_full_drops"])
        + (b["kernel_queue"]["user_drops"] - a["kernel_queue"]["user_drops"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rates", default="100mbit,500mbit,1gbit")
    ap.add_argument("--ccs", default="cubic,reno,bbr")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--delay-us", type=int, default=20000, help="one-way delay (default 20000)")
    ap.add_argument("--fifo-limit", type=int, default=1000, help="bottleneck pfifo packets")
    ap.add_argument(
        "--ccdelay-arg",
        action="append",
        default=[],
        help="extra ccdelay argument (repeatable), e.g. --ccdelay-arg=--single-thread",
    )
    ap.add_argument(
        "--rps",
        choices=("spare", "all"),
        default="spare",
        help="spare (default): one CPU only for ccdelay's releaser, receive "
        "processing (rps_cpus) on the others; all: rps_cpus = every CPU, "
        "ccdelay unpinned",
    )
    ap.add_argument(
        "--rt-prio",
        type=int,
        default=10,
        help="ccdelay --rt-prio (default 10; 0 = normal scheduling)",
    )
    ap.add_argument("--json", help="also write all results to this file")
    ap.add_argument(
        "--wait-quiet",
        type=float,
        default=0,
        metavar="PCT",
        help="before each case wait (up to 10 min) until other work uses < PCT%% CPU",
    )
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("measure.py: needs root (network namespaces)", file=sys.stderr)
        return 2
    if not CCDELAY.exists():
        print(f"measure.py: build first: make -C {HERE}", file=sys.stderr)
        return 2
    for tool in ("iperf3", "ethtool", "iptables", "tc", "ping"):
        if not shutil.which(tool):
            print(f"measure.py: {tool} not found", file=sys.stderr)
            return 2

    rows = []
    cargs = list(args.ccdelay_arg)
    if args.rt_prio > 0:
        cargs += ["--rt-prio", str(args.rt_prio)]
    bed = Testbed(
        fifo_limit=args.fifo_limit, delay_us=args.delay_us, ccdelay_args=cargs, rps=args.rps
    )
    with bed:
        bed.start_ccdelay()
        ping_rtt_ms(1, 0.2)  # neighbour resolution
        idle = ping_rtt_ms(20, 0.05)
        print(
            f"cpu layout: rps={args.rps} rps_cpus={cpu_layout(args.rps)[0]} "
            f"ccdelay {' '.join(cpu_layout(args.rps)[1] + cargs)}"
        )
        print(
            f"idle ping RTT through ccdelay: median {idle['median']:.3f} ms, "
            f"avg {idle['avg']:.3f} (min {idle['min']:.3f}, max {idle['max']:.3f}); "
            f"configured {2 * args.delay_us / 1000:.3f} ms",
            flush=True,
        )
        hdr = (
            f"{'rate':>8} {'cc':>6} {'Mbit/s':>8} {'util%':>6} {'meanRTT':>8} {'maxRTT':>8} "
            f"{'retr':>6} {'>5ms%':>7} {'maxlate':>8} {'ccdCPU%':>8} {'allCPU%':>8} "
            f"{'drops':>6} {'lateRx%':>7} {'bgCPU%':>6} {'steal%':>6} {'valve%':>6}"
        )
        print(hdr)
        for rate in args.rates.split(","):
            bed.set_rate(rate)
            for cc in args.ccs.split(","):
                bg = background_cpu_pct(1.0)
                deadline = time.monotonic() + 600
                while args.wait_quiet and bg >= args.wait_quiet and time.monotonic() < deadline:
                    bg = background_cpu_pct(2.0)
                # a fresh ccdelay per case, so max lateness is per case
                bed.stop_ccdelay()
                pid = bed.start_ccdelay().pid
                s0 = bed.stats()
                res = run_iperf(cc, args.duration, ccdelay_pid=pid)
                time.sleep(0.1)
                s1 = bed.stats()
                row = {
                    "rate": rate,
                    **summarize(res),
                    **lateness_delta(s0, s1),
                    "max_late_ms": s1["lateness"]["max_ms"],
                    "clock_source": s1["clock_source"],
                }
                row["bg_cpu_pct"] = bg
                row["dropped_late_pct"] = (
                    100 * row["dropped_late"] / max(row["packets"] + row["dropped_late"], 1)
                )
                row["util_pct"] = 100 * row["mbps"] / (parse_rate_bps(rate) / 1e6)
                rows.append(row)
                print(
                    f"{rate:>8} {row['cc']:>6} {row['mbps']:8.1f} {row['util_pct']:6.1f} "
                    f"{row['mean_rtt_ms']:8.2f} {row['max_rtt_ms']:8.2f} {row['retrans']:6d} "
                    f"{100 * row['late_share']:7.3f} {row['max_late_ms']:8.2f} "
                    f"{row['ccdelay_cpu_pct']:8.1f} {row['machine_cpu_pct']:8.1f} "
                    f"{row['drops']:6d} {100 * row['overdue_rx']:7.3f} {bg:6.1f} "
                    f"{row['steal_pct']:6.1f} {row['dropped_late_pct']:6.2f}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps({"idle_ping": idle, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
