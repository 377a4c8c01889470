"""Integration: a lab of your own hosts (testbed.kind: lab), rehearsed on namespaces.

Four "hosts" s1, s2, r1, rt1 (network namespaces) are joined by a Linux bridge, the
switch (its own namespace); each also has a management interface on a bridge in a
control namespace and runs its own real sshd there, its default route. ccbench runs in
the control namespace with `testbed.kind: lab` and a lab inventory, reaching the hosts
only over SSH: two senders share one receiver (s2 pins its server port, 5210), which
adds 40 ms by ccdelay (this kernel has no netem; the netem plans are tested in
tests/unit/test_lab_plans.py) and drops 1 % by iptables `statistic --mode nth` (a second
case: nftables `numgen`). No router in the runs: the bottleneck is the switch, which
ccbench does not control, and the summary says what that leaves unproven; rt1 is the
router of the inventories an `up` must refuse having changed nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.sshnode import sshd_argv
from ccbench import ledger
from ccbench.native import ccdelay_path
from ccbench.probes import flent
from ccbench.testbed import base
from tests.conftest import REPO
from tests.integration.conftest import (
    kill_mid_traffic,
    measure_fidelity,
    plant_instrument_files,
)
from tests.lab_recording import reads_only

pytestmark = pytest.mark.netns

PREFIX = "ccblab-"  # the test's own namespaces (not ccbench's: it never made them)
CTL, SWITCH = f"{PREFIX}ctl", f"{PREFIX}sw"
HOSTS = {"s1": 11, "s2": 12, "r1": 21, "rt1": 31}  # management address 198.19.254.N
DATA = {"s1": "198.18.10.1", "s2": "198.18.10.2", "r1": "198.18.10.10", "rt1": "198.18.10.254"}
TB = "itlabr"
PORTS = [5202, 5210]  # flow 1 on 5201 + 1; flow 2 on the port s2 pins
# `sudo -n` as sudo runs a command without a pty (sudo src/exec_nopty.c, exec_nopty):
# fork, exec in the child with no setpgid (it stays in sudo's process group), relay the
# signals sudo relays, wait, end as the command ended (its code, or its signal raised on
# itself). The hosts' sessions find it first on their PATH (sshd SetEnv); everything
# runs as root already, so it asks for nothing. Perl: a few ms a command (base Debian).
SUDO_NOPTY = r"""#!/usr/bin/perl
use strict;
use warnings;
use POSIX ();
while (@ARGV && $ARGV[0] =~ /^-/) {
    my $o = shift @ARGV;
    last if $o eq '--';
    die "sudo (stand-in): option $o not supported\n" unless $o eq '-n';
}
die "usage: sudo -n command ...\n" unless @ARGV;
my $pid = fork() // die "sudo: unable to fork: $!\n";
if ($pid == 0) {
    { no warnings 'exec'; exec { $ARGV[0] } @ARGV; }
    print STDERR "sudo: $ARGV[0]: command not found\n";
    POSIX::_exit(1);
}
my @relayed = qw(TERM INT HUP QUIT USR1 USR2 ALRM PIPE CONT);
$SIG{$_} = sub { kill $_[0], $pid } for @relayed;
waitpid($pid, 0);
my $st = $?;
if (my $sig = $st & 127) {
    $SIG{$_} = 'DEFAULT' for @relayed;
    kill $sig, $$;
    exit 128 + $sig;
}
exit $st >> 8;
"""
SESSION_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What a run's host settings may switch on the data interface (`ethtool -k` lines).
OFFLOADS = ("tcp-segmentation-offload", "generic-segmentation-offload",
            "generic-receive-offload")  # fmt: skip
SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_no_metrics_save",
           "net.core.rmem_max", "net.core.wmem_max")  # fmt: skip


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def ns(host: str) -> str:
    return PREFIX + host


def in_ns(host: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns(host), *argv], capture_output=True,
                          text=True).stdout  # fmt: skip


def spawn_sshd(netns: str, listen: str, d: Path, name: str) -> subprocess.Popen[bytes]:
    """As tests/integration/conftest.spawn_sshd, its sessions' PATH beginning with d/bin,
    where the `sudo -n` stand-in is (SUDO_NOPTY: used by the inventories with sudo)."""
    argv = [*sshd_argv(netns, listen, d, pid_file=d / f"{name}.pid"),
            "-o", f"SetEnv=PATH={d / 'bin'}:{SESSION_PATH}"]  # fmt: skip
    return subprocess.Popen(argv, stderr=subprocess.DEVNULL)


def host_state() -> dict[str, Any]:
    """What ccbench may change on each host: iptables rules (without counters), qdiscs,
    links, sysctls, the data interface's offloads, the processes besides sshd, and
    ccbench's files (the hosts share this machine's /var/tmp)."""
    out: dict[str, Any] = {}
    files = sorted(str(p) for top in Path("/var/tmp").glob("ccbench*")
                   for p in [top, *(top.rglob("*") if top.is_dir() else [])])  # fmt: skip
    for h in HOSTS:
        # Rules only: a table iptables once used stays instantiated (empty, ACCEPT).
        rules = [ln for ln in in_ns(h, "iptables-save").splitlines() if ln.startswith("-A ")]
        procs = []
        for pid in sh("ip", "netns", "pids", ns(h)).split():
            with contextlib.suppress(OSError):
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm != "sshd":
                    procs.append(comm)
        ethtool = in_ns(h, "ethtool", "-k", "eth0")
        out[h] = {
            "iptables": rules,
            "nft": nft_tables(h),
            "qdiscs": in_ns(h, "tc", "qdisc", "show"),
            "links": sorted(
                ln.split(":")[1].strip() for ln in in_ns(h, "ip", "-o", "link", "show").splitlines()
            ),  # fmt: skip
            "sysctls": {k: " ".join(in_ns(h, "sysctl", "-n", k).split()) for k in SYSCTLS},
            "offloads": [ln for ln in ethtool.splitlines() if ln.split(":")[0] in OFFLOADS],
            "processes": sorted(procs),
            "files": files,
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
        (d / "bin").mkdir()
        (d / "bin" / "sudo").write_text(SUDO_NOPTY)
        (d / "bin" / "sudo").chmod(0o755)
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
        inv["senders"]["s2"]["server_port"] = PORTS[1]
        (d / "lab.yaml").write_text(yaml.safe_dump(inv))
        # rt1 as the router: at an address no host has, or with a qdisc of its own (planted)
        rt1 = {"host": f"198.19.254.{HOSTS['rt1']}"}
        for name, addr in (("lab-badrouter.yaml", "198.18.10.99"),
                           ("lab-router.yaml", DATA["rt1"])):  # fmt: skip
            (d / name).write_text(yaml.safe_dump({**inv, "router": {**rt1, "address": addr}}))
        # as Emulab logs in: `sudo -n` before every command, no pty (SUDO_NOPTY)
        (d / "lab-sudo.yaml").write_text(
            yaml.safe_dump({**inv, "ssh": {**inv["ssh"], "sudo": True}})
        )
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


@pytest.fixture(autouse=True)
def lab_down_after(lab: Path) -> Iterator[None]:
    """A test that failed with its testbed up leaves it to no other test: `down` here."""
    yield
    if (base.STATE_ROOT / TB).exists():
        ctl_ccbench("testbed", "down", "--id", TB)


def config(
    d: Path, name: str, duration_s: float, repetitions: int = 1, inventory: str = "lab.yaml",
    tb_id: str = TB, **run: Any,
) -> Path:  # fmt: skip
    cfg = {
        "testbed": {"kind": "lab", "id": tb_id, "inventory": str(d / inventory)},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40,
                     "loss": {"mode": "nth", "rate": 0.01}},
        "run": {"duration_s": duration_s, "interval_s": 0.5, "attempts": 2,
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "reno", "pair": 2}], **run},
    }  # fmt: skip
    path = d / name
    path.write_text(yaml.safe_dump(cfg))
    return path


def check_run(s: dict[str, Any], cal: dict[str, Any]) -> None:
    """A valid run: RTT = the path's idle RTT + 40 ms, the receiver's drops are the
    retransmissions, and what could not be proven is named."""
    assert s["valid"], s["reasons"]
    # the pinned port served flow 2 (iperf3's own JSON), and the loss rule and the delay
    # element covered it: its drops are in the ledger, its RTT has the 40 ms (below)
    assert [f["server_port"] for f in s["flows"]] == PORTS
    assert cal["kind"] == "lab" and cal["delay_method"] == "ccdelay"
    for pair in ("pair1", "pair2"):
        path = cal["path_rtt"][pair]["judged_ms"]
        assert path < 5, cal["path_rtt"]
        assert abs(cal["idle_rtt"][pair]["judged_ms"] - (path + 40)) <= 1.0, cal["idle_rtt"]
    for f in s["flows"]:
        assert f["min_rtt_us"] / 1000 >= 40 - 1.0, f
    led = s["loss_ledger"]
    assert led["loss_rules_pkts"] > 0 and led["outside"] == {}, led
    lost = led["retransmits"] - (led["spurious_retransmits"] or 0)
    slack = max(ledger.RETX_SLACK_PKTS, ledger.RETX_SLACK_SHARE * led["loss_rules_pkts"])
    assert abs(lost - led["loss_rules_pkts"]) <= slack, led
    where = s["bottleneck"]["not_controlled"]
    assert where == "the network between s1, s2 and r1; its buffer is not known"
    assert s["not_checkable"] and all(where in ln for ln in s["not_checkable"])


def run_and_check(d: Path, cfg: Path, out: Path) -> None:
    """One run, checked; a run the VM stalled (its delay element late, its RTT samples
    over the path's bound) is measured again, as the fidelity tests do (one run a try,
    as conftest.run_measured)."""
    tries = itertools.count(1)

    def measure() -> None:
        o = out / f"try{next(tries)}"
        cp = ctl_ccbench("run", "--config", str(cfg), "--out", str(o), "--attempts", "1")
        assert cp.returncode == 0, cp.stderr
        s = json.loads((o / "summary.json").read_text())
        cal = json.loads((o / "raw" / "calibration.json").read_text())
        check_run(s, cal)
        asked = yaml.safe_load(cfg.read_text())["run"].get("host", {})
        for node, found in s["host_settings"].items():
            for name, value in asked.get(found["role"], {}).get("sysctl", {}).items():
                assert found["sysctl"][name].split() == value.split(), (node, name)
            for name, on in asked.get(found["role"], {}).get("offloads", {}).items():
                assert found["offloads"][name] == on, (node, name)

    measure_fidelity(measure)


def up(cfg: Path) -> None:
    cp = ctl_ccbench("testbed", "up", "--config", str(cfg))
    assert cp.returncode == 0, cp.stderr


def down_and_compare(before: dict[str, Any], removed: list[Path] | None = None) -> float:
    """`down` alone; every host as before `up` (`removed`: files a killed run left, which
    it names and removes); returns how long `down` took."""
    t0 = time.monotonic()
    cp = ctl_ccbench("testbed", "down", "--id", TB)
    took = time.monotonic() - t0
    assert cp.returncode == 0, cp.stderr
    assert "put back as found (checked:" in cp.stdout, cp.stdout
    assert all(str(f) in cp.stdout and not f.exists() for f in removed or []), cp.stdout
    assert_as(before)
    return took


def assert_as(before: dict[str, Any]) -> None:
    """Every host as `before`; what differs is named (now, then)."""
    now = host_state()
    differs = {h: {k: (now[h][k], v) for k, v in was.items() if now[h][k] != v}
               for h, was in before.items()}  # fmt: skip
    assert not any(differs.values()), differs


def killed_run(cfg: Path, out: Path, under_sudo: bool = False) -> list[Path]:
    """A run whose control side is SIGKILLed (its whole process group) while its
    flows and its flent probe run: its iperf3 clients and servers stay on the hosts, and
    flent (under its wrapper shell, with fping and irtt under it) with its data
    directory; and its instruments' files (planted). `under_sudo`: each tool's parent is
    the `sudo -n` stand-in. Returns the files."""

    def sending() -> bool:
        now = host_state()
        return "iperf3" in now["s2"]["processes"] and "flent" in now["s1"]["processes"]

    kill_mid_traffic(CTL, cfg, out, sending)
    left = host_state()
    assert all("iperf3" in left[h]["processes"] for h in ("s1", "s2", "r1")), left
    assert "flent" in left["s1"]["processes"], left["s1"]
    assert ("sudo" in left["s1"]["processes"]) == under_sudo, left["s1"]
    assert flent.node_dir(TB) in left["s1"]["files"], left["s1"]["files"]
    return [*plant_instrument_files(), Path(flent.node_dir(TB))]


def test_lab_rehearsal_short(lab: Path) -> None:
    """Every command under `sudo -n` without a pty, as on Emulab (SUDO_NOPTY: the tools
    are children of sudo, in its process group): a valid run on the pinned port; then
    a run SIGKILLed mid-traffic (with the same host settings), and `down` alone: its
    settings put back, no process or file of it on any host
    (flent, fping and irtt included: each spawned tool leads its own group,
    ccbench.leftovers), every host as before `up`, about as fast as a `down` after a
    clean run (it was 16 s against 4 s when the killed run's flows were left sending)."""
    before = host_state()
    # Seed 001's 5 MB buffers and the senders' GSO: set for the run, read back into its
    # record, put back after it (down then checks every host as before `up`)
    host = {"senders": {"sysctl": {"net.ipv4.tcp_wmem": "4096 16384 5242880"},
                        "offloads": {"gso": "on"}},
            "receivers": {"sysctl": {"net.ipv4.tcp_rmem": "4096 131072 5242880"}}}  # fmt: skip
    # 3 s: the run's checks (RTT, the loss ledger, the settings read back) are not
    # steady-state numbers; 1 % nth loss still drops tens of packets
    cfg = config(lab, "short.yaml", 3, inventory="lab-sudo.yaml", host=host)
    up(cfg)
    during = host_state()
    assert any("NFQUEUE" in r for r in during["r1"]["iptables"]), during["r1"]["iptables"]
    assert any("statistic" in r for r in during["r1"]["iptables"]), during["r1"]["iptables"]
    assert "ccdelay" in during["r1"]["processes"]
    run_and_check(lab, cfg, lab / "short")
    # the killed run asks the same settings: SIGKILL leaves them on, `down` puts them back
    left = killed_run(config(lab, "killed.yaml", 30, inventory="lab-sudo.yaml",
                             probe_tool="flent", host=host), lab / "killed",
                      under_sudo=True)  # fmt: skip
    assert "generic-segmentation-offload: on" in host_state()["s1"]["offloads"]
    took = down_and_compare(before, left)
    assert took < 8, f"down after a killed run took {took:.1f} s"


def test_a_refused_up_touches_no_host(lab: Path) -> None:
    """An `up` that must refuse (rt1 at an address no host has; rt1's egress with a
    qdisc of the user's own) refuses in one line having run only commands that read,
    as recorded, and every host is as it was."""
    cfgs = [config(lab, f"refused-{n}.yaml", 6, inventory=f"lab-{n}.yaml", tb_id="itlabx")
            for n in ("badrouter", "router")]  # fmt: skip
    in_ns("rt1", "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "pfifo", "limit",
          "100")  # fmt: skip
    try:
        before = host_state()
        cp = subprocess.run(["ip", "netns", "exec", CTL, sys.executable, "-m",
                             "tests.lab_recording", *map(str, cfgs)],
                            capture_output=True, text=True, cwd=REPO, timeout=120)  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        got = [json.loads(ln) for ln in cp.stdout.splitlines()]
        assert_as(before)
    finally:
        in_ns("rt1", "tc", "qdisc", "del", "dev", "eth0", "root")
    says = ["rt1: no interface has the experiment address 198.18.10.99",
            "rt1: eth0 has a root qdisc (pfifo 1:) ccbench did not put there"]  # fmt: skip
    for g, said in zip(got, says, strict=True):
        assert g["refused"] is not None and said in g["refused"], g["refused"]
        assert "\n" not in g["refused"]
        hosts = {h for h, _ in g["ran"]}
        assert hosts == set(HOSTS), hosts  # each host asked, and only read
        assert [a for _, a in g["ran"] if not reads_only(a)] == []
    assert not (base.STATE_ROOT / "itlabx").exists()  # no state: nothing to put back


def test_lab_rehearsal_nftables(lab: Path) -> None:
    """The same with nftables' `numgen inc mod 100` as the loss (emulation.loss:
    nftables): ccbench's own table, its drop counter in the ledger, gone after `down`."""
    if shutil.which("nft") is None:
        pytest.skip("nft is not installed (./setup.sh installs nftables)")
    before = host_state()
    cfg = config(lab, "nft.yaml", 3, inventory="lab-nft.yaml")
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
    left = killed_run(config(lab, "full-killed.yaml", 30, probe_tool="flent"), lab / "killed")
    run_and_check(lab, cfg, lab / "full2")
    down_and_compare(before, left)
