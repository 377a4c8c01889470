"""Integration: a lab of your own hosts (testbed.kind: lab), rehearsed on namespaces.

Three "hosts" s1, s2, r1 (network namespaces) are joined by a Linux bridge, the switch
(its own namespace); each also has a management interface on a bridge in a control
namespace and runs its own real sshd there, its default route. ccbench runs in the
control namespace with `testbed.kind: lab` and a lab inventory, reaching the hosts only
over SSH: two senders share one receiver, which adds 40 ms by ccdelay (this kernel has
no netem; the netem plans are tested in tests/unit/test_lab_plans.py) and drops 1 % by
iptables `statistic --mode nth` (a second case: nftables `numgen`). No router: the
bottleneck is the switch, which ccbench does not control, and the summary says what
that leaves unproven.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import ledger
from ccbench.native import ccdelay_path
from tests.conftest import REPO
from tests.integration.conftest import spawn_sshd

pytestmark = pytest.mark.netns

PREFIX = "ccblab-"  # the test's own namespaces (not ccbench's: it never made them)
CTL, SWITCH = f"{PREFIX}ctl", f"{PREFIX}sw"
HOSTS = {"s1": 11, "s2": 12, "r1": 21}  # management address 198.19.254.N
DATA = {"s1": "198.18.10.1", "s2": "198.18.10.2", "r1": "198.18.10.10"}
TB = "itlabr"
SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_no_metrics_save",
           "net.core.rmem_max", "net.core.wmem_max")  # fmt: skip


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def ns(host: str) -> str:
    return PREFIX + host


def in_ns(host: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns(host), *argv], capture_output=True,
                          text=True).stdout  # fmt: skip


def host_state() -> dict[str, Any]:
    """What ccbench may change on each host: iptables rules (without counters), qdiscs,
    links, sysctls, and the processes besides sshd."""
    out: dict[str, Any] = {}
    for h in HOSTS:
        # Rules only: a table iptables once used stays instantiated (empty, ACCEPT).
        rules = [ln for ln in in_ns(h, "iptables-save").splitlines() if ln.startswith("-A ")]
        procs = []
        for pid in sh("ip", "netns", "pids", ns(h)).split():
            with contextlib.suppress(OSError):
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm != "sshd":
                    procs.append(comm)
        out[h] = {
            "iptables": rules,
            "nft": nft_tables(h),
            "qdiscs": in_ns(h, "tc", "qdisc", "show"),
            "links": sorted(
                ln.split(":")[1].strip() for ln in in_ns(h, "ip", "-o", "link", "show").splitlines()
            ),  # fmt: skip
            "sysctls": {k: " ".join(in_ns(h, "sysctl", "-n", k).split()) for k in SYSCTLS},
            "processes": sorted(procs),
        }
    return out


# The tables iptables (nf_tables backend) makes and keeps once used: its rules are
# compared as iptables rules above.
IPTABLES_TABLES = {f"table {fam} {t}" for fam in ("ip", "ip6")
                   for t in ("filter", "nat", "mangle", "raw", "security")}  # fmt: skip


def nft_tables(host: str) -> list[str]:
    """The nftables tables on `host` other than iptables' own (empty without nft)."""
    tables = in_ns(host, "nft", "list", "tables").splitlines()
    return sorted(t.strip() for t in tables if t.strip() and t.strip() not in IPTABLES_TABLES)


def ctl_ccbench(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", CTL, sys.executable, "-m", "ccbench.cli", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout,
    )  # fmt: skip


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("openssh-server is not installed (./setup.sh installs it)")
    d = tmp_path_factory.mktemp("lab")
    for n in [*HOSTS, "sw", "ctl"]:
        subprocess.run(["ip", "netns", "delete", PREFIX + n], capture_output=True)
    sshds: list[subprocess.Popen[bytes]] = []
    try:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "clientkey"))
        shutil.copy(d / "clientkey.pub", d / "authorized_keys")
        Path("/run/sshd").mkdir(exist_ok=True)
        for n in [CTL, SWITCH, *map(ns, HOSTS)]:
            sh("ip", "netns", "add", n)
            sh("ip", "-n", n, "link", "set", "lo", "up")
        for n, br, addr in ((CTL, "mgmt", "198.19.254.254/24"), (SWITCH, "switch", None)):
            sh("ip", "-n", n, "link", "add", br, "type", "bridge")
            if addr:
                sh("ip", "-n", n, "addr", "add", addr, "dev", br)
            sh("ip", "-n", n, "link", "set", br, "up")
        for h, m in HOSTS.items():
            # the data path: a port of the switch; offloads off, so the loss rule and the
            # counters see the frames TCP sent, as on a NIC (no GRO super-packets)
            sh("ip", "link", "add", "eth0", "netns", ns(h), "type", "veth", "peer", "name",
               f"p-{h}", "netns", SWITCH)  # fmt: skip
            sh("ip", "-n", SWITCH, "link", "set", f"p-{h}", "master", "switch", "up")
            sh("ip", "-n", ns(h), "addr", "add", f"{DATA[h]}/24", "dev", "eth0")
            sh("ip", "-n", ns(h), "link", "set", "eth0", "up")
            for where, dev in ((ns(h), "eth0"), (SWITCH, f"p-{h}")):
                sh("ip", "netns", "exec", where, "ethtool", "-K", dev, "tso", "off", "gso",
                   "off", "gro", "off")  # fmt: skip
            # management: its own bridge, the default route (the ledger leaves it out)
            sh("ip", "link", "add", "mgmt0", "netns", ns(h), "type", "veth", "peer", "name",
               f"m-{h}", "netns", CTL)  # fmt: skip
            sh("ip", "-n", CTL, "link", "set", f"m-{h}", "master", "mgmt", "up")
            sh("ip", "-n", ns(h), "addr", "add", f"198.19.254.{m}/24", "dev", "mgmt0")
            sh("ip", "-n", ns(h), "link", "set", "mgmt0", "up")
            sh("ip", "-n", ns(h), "route", "add", "default", "via", "198.19.254.254")
            sshds.append(spawn_sshd(ns(h), f"198.19.254.{m}", d, h))
        inv = {
            "ssh": {"user": "root", "identity": str(d / "clientkey"),
                    "options": ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"]},
            "senders": {h: {"host": f"198.19.254.{HOSTS[h]}", "os": "linux",
                            "address": DATA[h], "receiver": "r1"} for h in ("s1", "s2")},
            "receivers": {"r1": {"host": f"198.19.254.{HOSTS['r1']}", "address": DATA["r1"]}},
            "emulation": {"delay": "ccdelay", "loss": "iptables", "ccdelay": str(ccdelay_path())},
        }  # fmt: skip
        (d / "lab.yaml").write_text(yaml.safe_dump(inv))
        inv["emulation"]["loss"] = "nftables"
        (d / "lab-nft.yaml").write_text(yaml.safe_dump(inv))
        time.sleep(0.5)
        yield d
    finally:
        ctl_ccbench("testbed", "down", "--id", TB)
        for p in sshds:
            p.terminate()
            p.wait(timeout=10)
        for n in [*HOSTS, "sw", "ctl"]:
            subprocess.run(["ip", "netns", "delete", PREFIX + n], capture_output=True)
        left = [ln for ln in sh("ip", "netns", "list").splitlines() if ln.startswith(PREFIX)]
        assert left == [], left


def config(
    d: Path, name: str, duration_s: float, repetitions: int = 1, inventory: str = "lab.yaml"
) -> Path:
    cfg = {
        "testbed": {"kind": "lab", "id": TB, "inventory": str(d / inventory)},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40,
                     "loss": {"mode": "nth", "rate": 0.01}},
        "run": {"duration_s": duration_s, "interval_s": 0.5, "attempts": 2,
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "reno", "pair": 2}]},
    }  # fmt: skip
    path = d / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def check_run(s: dict[str, Any], cal: dict[str, Any]) -> None:
    """A valid run: RTT = the path's idle RTT + 40 ms, the receiver's drops are the
    retransmissions, and what could not be proven is named."""
    assert s["valid"], s["reasons"]
    assert cal["kind"] == "lab" and cal["delay_method"] == "ccdelay"
    for pair in ("pair1", "pair2"):
        path = cal["path_rtt"][pair]["judged_ms"]
        assert path < 5, cal["path_rtt"]
        assert abs(cal["idle_rtt"][pair]["judged_ms"] - (path + 40)) <= 1.0, cal["idle_rtt"]
    for f in s["flows"]:
        assert f["rtt_min_us"] / 1000 >= 40 - 1.0, f
    led = s["loss_ledger"]
    assert led["loss_rules_pkts"] > 0 and led["outside"] == {}, led
    lost = led["retransmits"] - (led["spurious_retransmits"] or 0)
    slack = max(ledger.RETX_SLACK_PKTS, ledger.RETX_SLACK_SHARE * led["loss_rules_pkts"])
    assert abs(lost - led["loss_rules_pkts"]) <= slack, led
    where = s["bottleneck"]["not_controlled"]
    assert where == "the network between s1, s2 and r1; its buffer is not known"
    assert s["not_checkable"] and all(where in ln for ln in s["not_checkable"])


def run_and_check(d: Path, cfg: Path, out: Path) -> None:
    cp = ctl_ccbench("run", "--config", str(cfg), "--out", str(out))
    assert cp.returncode == 0, cp.stderr
    s = json.loads((out / "summary.json").read_text())
    cal = json.loads((out / "raw" / "calibration.json").read_text())
    check_run(s, cal)


def up(cfg: Path) -> None:
    cp = ctl_ccbench("testbed", "up", "--config", str(cfg))
    assert cp.returncode == 0, cp.stderr


def down_and_compare(before: dict[str, Any]) -> None:
    cp = ctl_ccbench("testbed", "down", "--id", TB)
    assert cp.returncode == 0, cp.stderr
    assert host_state() == before


def test_lab_rehearsal_short(lab: Path) -> None:
    before = host_state()
    cfg = config(lab, "short.yaml", 6)
    up(cfg)
    during = host_state()
    assert any("NFQUEUE" in r for r in during["r1"]["iptables"]), during["r1"]["iptables"]
    assert any("statistic" in r for r in during["r1"]["iptables"]), during["r1"]["iptables"]
    assert "ccdelay" in during["r1"]["processes"]
    run_and_check(lab, cfg, lab / "short")
    down_and_compare(before)


def test_lab_rehearsal_nftables(lab: Path) -> None:
    """The same with nftables' `numgen inc mod 100` as the loss (emulation.loss:
    nftables): ccbench's own table, its drop counter in the ledger, gone after `down`."""
    if shutil.which("nft") is None:
        pytest.skip("nft is not installed (./setup.sh installs nftables)")
    before = host_state()
    cfg = config(lab, "nft.yaml", 6, inventory="lab-nft.yaml")
    up(cfg)
    during = host_state()
    assert during["r1"]["nft"] == ["table inet ccbench"], during["r1"]["nft"]
    rules = in_ns("r1", "nft", "list", "table", "inet", "ccbench")
    assert "numgen inc mod 100" in rules and "drop" in rules, rules
    assert not any("statistic" in r for r in during["r1"]["iptables"])
    run_and_check(lab, cfg, lab / "nft")
    down_and_compare(before)
    assert host_state()["r1"]["nft"] == []


@pytest.mark.slow
def test_lab_rehearsal_full(lab: Path) -> None:
    """Longer runs on one `up`; a run whose control side was killed mid-traffic is
    cleaned up by the next; `down` leaves the hosts as found."""
    before = host_state()
    cfg = config(lab, "full.yaml", 30)
    up(cfg)
    run_and_check(lab, cfg, lab / "full1")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", CTL, sys.executable, "-m", "ccbench.cli", "run", "--config",
         str(cfg), "--out", str(lab / "killed")],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "iperf3" not in host_state()["s2"]["processes"]:
            assert proc.poll() is None and time.monotonic() < deadline, "no traffic started"
            time.sleep(0.5)
        time.sleep(2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    run_and_check(lab, cfg, lab / "full2")
    down_and_compare(before)
