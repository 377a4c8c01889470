"""Integration: the SSH testbed path for real.

A local dumbbell is built in namespaces; each node namespace also gets a management
interface on a bridge in a control namespace and runs its own real sshd (Debian's
openssh-server). ccbench then runs in the control namespace with `testbed.kind: ssh`
and a hosts inventory, reaching every node only over SSH -- as on Emulab.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, ccbench
from tests.integration.conftest import (
    PROBE_STARTED_LATE,
    assert_judged,
    kill_mid_traffic,
    measure_fidelity,
    namespaces,
    plant_instrument_files,
    spawn_sshd,
    write_config,
)
from tests.raw_meta import read_meta

pytestmark = pytest.mark.netns

TB = "itssh"
CTL = f"ccb-{TB}-ctl"
NODES = {"s1": 11, "s2": 12, "rt1": 1, "rt2": 2, "r1": 21, "r2": 22}
DATA = {"s1": "198.18.1.2", "s2": "198.18.1.6", "rt1": "198.18.2.1", "rt2": "198.18.3.2",
        "r1": "198.18.4.2", "r2": "198.18.4.6"}  # fmt: skip


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


@pytest.fixture(scope="module")
def ssh_dumbbell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("openssh-server is not installed (./setup.sh installs it)")
    d = tmp_path_factory.mktemp("ssh")
    # This module's ccbench gets an ssh directory (its shared connections) and a
    # temporary directory (spawn()'s stderr files) of its own: the leftover checks
    # below then see only what it left, not the ssh masters of a test beside it
    # (test_ssh_fetch's, on the other worker, matched a global pgrep once in CI).
    # (The ssh directory is short: a control socket's path must fit a sockaddr_un.)
    (d / "tmp").mkdir()
    ssh_dir = Path(tempfile.mkdtemp(prefix="ccbt-ssh-"))
    mp = pytest.MonkeyPatch()
    mp.setenv("CCBENCH_SSH_DIR", str(ssh_dir))
    mp.setenv("TMPDIR", str(d / "tmp"))
    cfg = write_config(d / "tb.yaml", TB, queue={"limit_bdp": 1})
    ccbench("testbed", "down", "--id", TB)
    ccbench("testbed", "up", "--config", str(cfg))
    sshds: list[subprocess.Popen[bytes]] = []
    try:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "hostkey"))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "clientkey"))
        shutil.copy(d / "clientkey.pub", d / "authorized_keys")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        sh("ip", "netns", "add", CTL)
        sh("ip", "-n", CTL, "link", "add", "mgmt", "type", "bridge")
        sh("ip", "-n", CTL, "addr", "add", "198.19.255.254/24", "dev", "mgmt")
        sh("ip", "-n", CTL, "link", "set", "mgmt", "up")
        sh("ip", "-n", CTL, "link", "set", "lo", "up")
        for node, host in NODES.items():
            ns = f"ccb-{TB}-{node}"
            sh("ip", "link", "add", "mgmt0", "netns", ns, "type", "veth", "peer", "name",
               f"m-{node}", "netns", CTL)  # fmt: skip
            sh("ip", "-n", CTL, "link", "set", f"m-{node}", "master", "mgmt", "up")
            sh("ip", "-n", ns, "addr", "add", f"198.19.255.{host}/24", "dev", "mgmt0")
            sh("ip", "-n", ns, "link", "set", "mgmt0", "up")
            sshds.append(spawn_sshd(ns, f"198.19.255.{host}", d, node))
        inv = {
            "ssh": {
                "user": "root",
                "identity": str(d / "clientkey"),
                "options": ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"],
            },
            "dumbbells": {
                1: {n: {"host": f"198.19.255.{h}", "address": DATA[n]} for n, h in NODES.items()}
            },
        }
        (d / "hosts.yaml").write_text(yaml.safe_dump(inv))
        time.sleep(0.5)
        yield d
    finally:
        # down over SSH while the nodes still answer (it also ends ssh's shared
        # connections), then the sshds, then the namespaces
        try:
            down = ctl_ccbench("testbed", "down", "--id", "itsshr")
            for p in sshds:
                p.terminate()
                p.wait(timeout=10)
            ccbench("testbed", "down", "--id", TB)  # also removes the ctl namespace
        finally:
            mp.undo()
        assert down.returncode == 0, down.stderr
        assert namespaces(f"ccb-{TB}-") == []
        masters = subprocess.run(["pgrep", "-f", f"ssh.*{ssh_dir}/ccb-ssh-"], capture_output=True)
        shutil.rmtree(ssh_dir)
        assert masters.stdout == b"", "ssh ControlMaster processes left behind"
        left = sorted(map(str, (d / "tmp").glob("ccb-ssh-*")))
        assert not left, f"temporary files left behind: {left}"


def ctl_ccbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", CTL, sys.executable, "-m", "ccbench.cli", *args],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip


def test_run_over_ssh_matches_the_local_checks(ssh_dumbbell: Path) -> None:
    d = ssh_dumbbell
    cfg = {
        "testbed": {"kind": "ssh", "id": "itsshr", "inventory": str(d / "hosts.yaml")},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_bdp": 1}},
        "run": {"duration_s": 5, "interval_s": 0.5,
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "reno", "pair": 2, "start_s": 1}]},
    }  # fmt: skip
    (d / "run.yaml").write_text(yaml.safe_dump(cfg))

    def valid_run() -> None:  # a run the VM stalled is measured again (one run a try)
        cp = ctl_ccbench("run", "--config", str(d / "run.yaml"), "--out", str(d / "out"),
                         "--attempts", "1")  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        got = json.loads((d / "out" / "summary.json").read_text())
        assert got["valid"], got["reasons"]

    measure_fidelity(valid_run)
    s = json.loads((d / "out" / "summary.json").read_text())
    assert [f["cc_used"] for f in s["flows"]] == ["cubic", "reno"]
    # Two short flows with a late start: the path works end to end, not a fidelity bar
    # (tests/integration/test_local_testbed.py checks utilization on one flow).
    assert 50 <= s["utilization_pct"] <= 96
    assert all(f["throughput_bps"] > 5e6 for f in s["flows"])
    cal = json.loads((d / "out" / "raw" / "calibration.json").read_text())
    assert cal["kind"] == "ssh"
    # judged as calibration judges it (its p10: a stalled vCPU lifts the median, not it)
    idle = cal["idle_rtt"]["pair1"]
    assert abs(idle["judged_ms"] - 40) <= 1 and idle["median_ms"] >= idle["judged_ms"], idle
    # Flow 2 was released 1 s after flow 1 (gated start, not ssh start-up time).
    starts = read_meta(d / "out" / "raw").flow_starts
    assert 0.95 <= starts[2] - starts[1] <= 1.1
    assert (d / "out" / "raw" / "ss-s1.txt").read_text().startswith("TS ")


def _tools_on_hosts() -> list[str]:
    """Processes in the senders' and receivers' namespaces other than their sshd."""
    out = []
    for node in ("s1", "s2", "r1", "r2"):
        pids = subprocess.run(["ip", "netns", "pids", f"ccb-{TB}-{node}"],
                              capture_output=True, text=True).stdout.split()  # fmt: skip
        for pid in pids:
            with contextlib.suppress(OSError):
                comm = Path(f"/proc/{pid}/comm").read_text().strip()
                if comm != "sshd":
                    out.append(f"{node}:{comm}")
    return sorted(out)


@pytest.mark.shares_cpu
def test_a_run_whose_control_machine_died_is_cleaned_up_by_the_next(ssh_dumbbell: Path) -> None:
    """The control machine dies mid-run (its ccbench's process group SIGKILLed: the ssh
    clients die, the remote iperf3s and samplers run on, its instruments' files stay);
    the next run over the same nodes ends them first, says so, and runs (valid, or
    invalid only because the VM stalled: the sweep is the subject here); no process is
    left on the hosts, and after `down` no file either."""
    d = ssh_dumbbell
    cfg = {
        "testbed": {"kind": "ssh", "id": "itsshr", "inventory": str(d / "hosts.yaml")},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_bdp": 1}},
        "run": {"duration_s": 30, "interval_s": 0.5,
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "cubic", "pair": 2}]},
    }  # fmt: skip
    (d / "long.yaml").write_text(yaml.safe_dump(cfg))

    def sending() -> bool:  # its clients and servers
        return sum(t.endswith(":iperf3") for t in _tools_on_hosts()) >= 4

    kill_mid_traffic(CTL, d / "long.yaml", d / "killed", sending)
    left = plant_instrument_files()
    time.sleep(1)
    orphans = _tools_on_hosts()
    assert any(t.endswith(":iperf3") for t in orphans), orphans  # what the sweep is for

    cfg["run"]["duration_s"] = 3
    (d / "short.yaml").write_text(yaml.safe_dump(cfg))
    cp = ctl_ccbench("run", "--config", str(d / "short.yaml"), "--out", str(d / "after"))
    assert cp.returncode == 0, cp.stderr
    said = [ln for ln in cp.stderr.splitlines() if "left behind by an earlier run" in ln]
    assert said and all("iperf3" in ln or "ss" in ln or "ping" in ln for ln in said), said
    assert_judged(json.loads((d / "after" / "summary.json").read_text()))
    assert _tools_on_hosts() == []
    down = ctl_ccbench("testbed", "down", "--id", "itsshr")  # the killed run's `up` stays
    assert down.returncode == 0, down.stderr
    assert [f for f in left if f.exists()] == []


@pytest.mark.shares_cpu
def test_unreachable_host_is_one_clear_line(ssh_dumbbell: Path) -> None:
    d = ssh_dumbbell
    inv = yaml.safe_load((d / "hosts.yaml").read_text())
    inv["dumbbells"][1]["r2"]["host"] = "198.19.255.99"  # nobody there
    # the inventory's own options come first, so they win: 2 s, not ccbench's 10, to wait
    inv["ssh"]["options"].append("ConnectTimeout=2")
    (d / "bad-hosts.yaml").write_text(yaml.safe_dump(inv))
    cfg = {"testbed": {"kind": "ssh", "id": "itsshr", "inventory": str(d / "bad-hosts.yaml")},
           "run": {"duration_s": 2, "flows": [{"cc": "cubic"}]}}  # fmt: skip
    (d / "bad.yaml").write_text(yaml.safe_dump(cfg))
    cp = ctl_ccbench("run", "--config", str(d / "bad.yaml"), "--out", str(d / "bad-out"))
    assert cp.returncode == 2
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "r2 (root@198.19.255.99) unreachable over ssh" in lines[0]
    assert "timed out" in lines[0], lines


@pytest.mark.shares_cpu
@pytest.mark.usefixtures("image")
def test_tools_in_the_container_over_ssh(ssh_dumbbell: Path) -> None:
    """`testbed.tools: container` on the SSH path (as on Emulab with the profile's
    tooling container): iperf3, ss and flent's tcp_1up (netperf with demo mode, only
    in the image) run in the linux-node image with the node's network, started over
    SSH; nothing of the run's containers is left on any node afterwards."""
    d = ssh_dumbbell
    cfg = {
        "testbed": {"kind": "ssh", "id": "itsshr", "tools": "container",
                    "inventory": str(d / "hosts.yaml")},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_bdp": 1}},
        "run": {"duration_s": 4, "interval_s": 0.5, "attempts": 1, "probe_tool": "flent",
                "probe_flent_test": "tcp_1up",
                "flows": [{"cc": "cubic", "pair": 1}, {"cc": "bbr", "pair": 2}]},
    }  # fmt: skip
    (d / "ctr.yaml").write_text(yaml.safe_dump(cfg))
    cp = ctl_ccbench("run", "--config", str(d / "ctr.yaml"), "--out", str(d / "ctr-out"))
    assert cp.returncode == 0, cp.stderr
    s = json.loads((d / "ctr-out" / "summary.json").read_text())
    assert_judged(s, PROBE_STARTED_LATE)  # the subject is where the tools run, not fidelity
    assert [f["cc_used"] for f in s["flows"]] == ["cubic", "bbr"]
    assert s["probe"]["tool"] == "flent tcp_1up" and s["probe"]["samples"] > 0
    assert [x["runner"] for x in s["probe"]["series"]] == ["PingRunner", "NetperfDemoRunner"]
    assert (d / "ctr-out" / "raw" / "ss-s1.txt").read_text().startswith("TS ")
    left = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "ccb-itsshr-" not in left
