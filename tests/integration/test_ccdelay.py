"""Real tests of native/ccdelay (the NFQUEUE constant-delay element).

Needs root, network namespaces, iptables, tc, ethtool, iperf3, ping and a C
toolchain with libnetfilter-queue-dev + libmnl-dev.  Builds the ccdt-* test bed
from native/ccdelay/measure.py (ccdt-s -> ccdt-d [ccdelay, tbf 1gbit] -> ccdt-r),
and always tears it down.  About 25 s of traffic.

CPU layout: the bed keeps one CPU free of receive processing for ccdelay's
releaser thread (rps_cpus = the other CPUs on every veth, ccdelay --cpu 0,LAST,
--rt-prio 10).  The releaser's verdict sendto runs the forwarding of every
released packet; when RPS also lands receive work on its CPU, 1 Gbit bbr/cubic
flows tip into a state where the element lags 20-50 ms (measured: 0.1-77 % of
packets > 5 ms late with rps_cpus = all CPUs, 0.00 % in 6 of 6 runs with the spare
CPU).  RPS to a fixed CPU set still keeps each device's packets in order.

The high-rate flow tests (500 Mbit/s by default, 1 Gbit/s in the slow target) need
the machine's CPU (2 cores carry iperf3 sender, receiver, the forwarding path and
the element): when other work already keeps the machine busier than CCDT_MAX_BG_CPU
percent (default 60) before the flow starts, they are skipped with that reason
rather than reporting an overloaded machine as an element failure. A flow that
misses the bar is measured again, up to three times, as every CPU-bound fidelity
measurement (tests/integration/conftest.py: measure_fidelity).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ccbench.summarize.delay import delay_between
from tests.integration.conftest import measure_fidelity

# quiet: the high-rate flows need the CPUs idle-priority work would take (see above)
pytestmark = [pytest.mark.netns, pytest.mark.quiet]

ROOT = Path(__file__).resolve().parents[2]
CCDIR = ROOT / "native" / "ccdelay"
BIN = CCDIR / "ccdelay"
DELAY_US = 20000  # one way; 40 ms RTT
RATE = "1gbit"
RT_PRIO = "10"
MAX_BG_CPU = float(os.environ.get("CCDT_MAX_BG_CPU", "60"))
TOOLS = ("ip", "iptables", "tc", "ethtool", "iperf3", "ping", "make", "pkg-config")


def _load_measure():
    spec = importlib.util.spec_from_file_location("ccdelay_measure", CCDIR / "measure.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ccdelay_measure"] = mod
    spec.loader.exec_module(mod)
    return mod


m = _load_measure()


@pytest.fixture(scope="module")
def ccdelay_bin() -> Path:
    if os.geteuid() != 0:
        pytest.skip("needs root (network namespaces, NFQUEUE)")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip(f"missing tools: {', '.join(missing)}")
    r = subprocess.run(["make", "-C", str(CCDIR)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in (r.stdout + r.stderr).lower(), r.stderr
    assert BIN.exists()
    return BIN


@pytest.fixture
def bed(ccdelay_bin, request):
    rate = getattr(request, "param", RATE)  # indirect parametrization: the shaper rate
    tb = m.Testbed(
        rate=rate, fifo_limit=1000, delay_us=DELAY_US, ccdelay_args=["--rt-prio", RT_PRIO]
    )
    try:
        tb.up()
        yield tb
    finally:
        tb.down()
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert "ccdt-" not in left, f"namespaces left behind: {left}"


def _one_line_error(r: subprocess.CompletedProcess) -> str:
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ccdelay: "), lines[0]
    return lines[0]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "--delay-us is required"),
        (["--delay-us", "abc"], "invalid --delay-us"),
        (["--delay-us", "-5"], "invalid --delay-us"),
        (["--delay-us"], "needs a value"),
        (["--delay-us", "100", "--queue", "70000"], "invalid --queue"),
        (["--delay-us", "100", "--bogus"], "unknown option"),
        (["--delay-us", "100", "extra"], "unexpected argument"),
        (["--delay-us", "100", "--stamp", "gps"], "invalid --stamp"),
        (["--delay-us", "100", "--stats", "/nonexistent-ccdt/x.json"], "cannot write stats"),
    ],
)
def test_bad_arguments_fail_with_one_line(ccdelay_bin, args, needle):
    r = subprocess.run([str(ccdelay_bin), *args], capture_output=True, text=True, timeout=10)
    line = _one_line_error(r)
    assert needle in line


def test_second_instance_and_non_root_cannot_bind(bed):
    bed.start_ccdelay()
    r = subprocess.run(
        ["ip", "netns", "exec", m.NS_D, str(BIN), "--queue", "0", "--delay-us", "1000"],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert "already bound" in _one_line_error(r)
    if shutil.which("setpriv"):
        r = subprocess.run(
            [
                "ip",
                "netns",
                "exec",
                m.NS_D,
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                str(BIN),
                "--queue",
                "1",
                "--delay-us",
                "1000",
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert "cannot" in _one_line_error(r)


# --------------------------------------------------------------------------- idle RTT


def test_idle_ping_rtt_is_configured_rtt(bed):
    bed.start_ccdelay()
    m.ping_rtt_ms(count=1, interval=0.2)  # resolve neighbours first
    first_write = bed.stats(refresh=False)["stats_writes"]
    expect = 2 * DELAY_US / 1000

    def idle() -> None:
        before = bed.stats()
        rtt = m.ping_rtt_ms(count=20, interval=0.05)
        after = bed.stats()
        this_try = delay_between(before, after)  # as a run's summary counts its packets
        # median: one vCPU stall of a few ms (seen on busy VMs even for a bare
        # SCHED_FIFO sleeper) must not decide the idle RTT; the delay itself is
        # checked packet by packet through the lateness stats of this try's packets
        assert abs(rtt["median"] - expect) <= 1.0, rtt
        assert rtt["min"] >= expect, rtt
        n = this_try["packets"]
        assert n >= 40, this_try  # 20 echo requests and 20 replies
        la, lb = after["lateness"], before["lateness"]
        late_ms = la["mean_ms"] * la["count"] - lb["mean_ms"] * lb["count"]
        # releases are on time (a VM's vCPU can still stall for a few ms now and then)
        assert late_ms / n < 0.5, (lb, la)
        # at most one packet of the try > 5 ms late (a single vCPU stall), as in validity
        assert this_try["late_5ms"] <= 1, this_try

    measure_fidelity(idle)  # a stalled VM measures again
    time.sleep(1.2)
    s = bed.stats(refresh=False)  # periodic write, no signal
    assert s["stats_writes"] > first_write
    s = bed.stats()
    assert s["schema"] == "ccdelay-stats/1"
    assert s["clock_source"] == "kernel", s["stamps"]
    assert s["config"]["delay_us"] == DELAY_US
    assert s["packets_received"] >= 42
    assert s["packets_received"] == s["packets_released"] + s["packets_held"]
    assert 0 < s["lateness"]["count"] <= s["packets_released"], s["lateness"]


# --------------------------------------------------------------------------- 1 Gbit flows


# 500 Mbit/s in the default suite; the 1 Gbit/s target in the slow target
# (`./test.sh -m slow`) and bench/fidelity.py: on a slower day of this VM (element CPU
# ~1.5x the README table's) 1 Gbit/s bbr tips into lagging in about half its runs,
# which a run reports as invalid; a CI gate cannot depend on the host's speed that day.
@pytest.mark.parametrize(
    ("bed", "cc"),
    [
        ("500mbit", "cubic"),
        ("500mbit", "bbr"),
        pytest.param("1gbit", "cubic", marks=pytest.mark.slow),
        pytest.param("1gbit", "bbr", marks=pytest.mark.slow),
    ],
    indirect=["bed"],
)
def test_high_rate_flow_is_delayed_faithfully(bed, cc):
    bed.start_ccdelay()
    bg = m.background_cpu_pct(1.0)
    if bg > MAX_BG_CPU:
        pytest.skip(
            f"machine busy before the flow ({bg:.0f}% CPU > {MAX_BG_CPU:.0f}%); "
            "1 Gbit fidelity needs the CPU"
        )
    measure_fidelity(lambda: _delayed_faithfully(bed, cc, bg))


def _delayed_faithfully(bed, cc: str, bg: float) -> None:
    s0 = bed.stats()
    res = m.run_iperf(cc, duration=10, ccdelay_pid=bed.ccdelay_proc.pid)
    time.sleep(0.5)  # everything still held becomes due and leaves
    s1 = bed.stats()
    summ = m.summarize(res)
    late = m.lateness_delta(s0, s1)
    keys = ("packets_received", "packets_released", "packets_held", "id_gaps",
            "kernel_queue", "receive_lag")  # fmt: skip
    report = json.dumps(
        {
            "iperf": summ,
            "lateness": late,
            "background_cpu": bg,
            "stats": {k: s1[k] for k in keys},
        }  # fmt: skip
    )
    assert late["late_share"] <= 0.01, f"late share {late['late_share']:.4f} > 0.01: {report}"
    assert summ["cc"] == cc, report
    assert late["packets"] > 100_000, report
    assert s1["packets_held"] == 0, report
    assert s1["packets_received"] == s1["packets_released"], report
    assert s1["packets_dropped_late"] == 0, report
    assert s1["id_gaps"] == 0, report
    assert s1["kernel_queue"]["queue_full_drops"] == 0, report
    assert s1["kernel_queue"]["user_drops"] == 0, report
    assert s1["clock_source"] == "kernel", report
    assert summ["mean_rtt_ms"] >= 2 * DELAY_US / 1000, report
    # it really was a high-rate flow
    assert summ["mbps"] >= 0.8 * m.parse_rate_bps(bed.rate) / 1e6, report


# --------------------------------------------------------------------------- SIGTERM


def test_sigterm_releases_held_packets_and_writes_stats(bed):
    bed.delay_us = 3_000_000  # 3 s each way: the pings are still held at SIGTERM
    m.nsx(m.NS_R, "iptables", "-A", "INPUT", "-p", "icmp", "--icmp-type", "echo-request")
    proc = bed.start_ccdelay()
    ping = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            m.NS_S,
            "ping",
            "-n",
            "-q",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "1",
            m.R_ADDR,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        time.sleep(1.0)
        held = bed.stats()
        assert held["packets_held"] == 3, held
        assert _echo_requests_at_receiver() == 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0, proc.stderr.read()
        bed.ccdelay_proc = None
        final = json.loads(bed.stats_path.read_text())
        assert final["final"] is True
        # the 3 held requests; their echo replies may come back while the exit
        # path is still draining and are then released too
        assert final["packets_released_on_exit"] >= 3, json.dumps(final)
        assert final["packets_received"] == final["packets_released"], final
        assert final["packets_held"] == 0
        time.sleep(0.2)
        assert _echo_requests_at_receiver() == 3  # accepted, not dropped
    finally:
        ping.kill()
        ping.wait()


def _echo_requests_at_receiver() -> int:
    out = m.nsx(m.NS_R, "iptables", "-nvxL", "INPUT").stdout
    for line in out.splitlines():
        if "icmptype 8" in line or "icmp type 8" in line:
            return int(line.split()[0])
    raise AssertionError(f"counter rule not found:\n{out}")
