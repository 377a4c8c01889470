"""The Linux-node tooling image, built by containers/build.sh, runs real flows between
two network namespaces.

Needs root and podman; the first run builds the image (about 1.5 minutes: debootstrap,
then apt-get and pip inside the build), later runs reuse it (about 1 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ccbench.container import container_argv

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]

REPO = Path(__file__).resolve().parents[2]
SERVER_ADDR = "198.18.252.1"
CLIENT_ADDR = "198.18.252.2"
PREFIX_LEN = 30


def _run(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise AssertionError(
            f"{cmd} exited {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        )
    return result


def _quiet(cmd: list[str]) -> None:
    """Best-effort clean-up command: errors (already gone) are ignored."""
    subprocess.run(cmd, capture_output=True, timeout=60, check=False)


@dataclass
class NetnsPair:
    server: str
    client: str
    containers: list[str] = field(default_factory=list)

    def container_name(self, role: str) -> str:
        """A container name that the fixture removes at teardown, whatever happens."""
        name = f"ccct-{os.getpid()}-{role}"
        self.containers.append(name)
        return name


@pytest.fixture
def netns_pair(image: str) -> Iterator[NetnsPair]:
    """Two namespaces joined by a veth pair, SERVER_ADDR/30 <-> CLIENT_ADDR/30."""
    pid = os.getpid()
    pair = NetnsPair(server=f"ccct-{pid}-srv", client=f"ccct-{pid}-cli")
    try:
        for ns in (pair.server, pair.client):
            _quiet(["ip", "netns", "del", ns])
            _run(["ip", "netns", "add", ns])
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        _run(
            ["ip", "-n", pair.server, "link", "add", "veth-srv", "type", "veth",
             "peer", "name", "veth-cli", "netns", pair.client]
        )  # fmt: skip
        for ns, dev, addr in (
            (pair.server, "veth-srv", SERVER_ADDR),
            (pair.client, "veth-cli", CLIENT_ADDR),
        ):
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/{PREFIX_LEN}", "dev", dev])
            _run(["ip", "-n", ns, "link", "set", dev, "up"])
        yield pair
    finally:
        for name in pair.containers:
            _quiet(["podman", "rm", "--force", "--time", "0", name])
        for ns in (pair.server, pair.client):
            _quiet(["ip", "netns", "del", ns])


def _wait_listening(netns: str, port: int, server: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            out, err = server.communicate()
            raise AssertionError(f"server exited early ({server.returncode}):\n{out}\n{err}")
        ss = _run(["ip", "netns", "exec", netns, "ss", "-Hltn", f"sport = :{port}"])
        if ss.stdout.strip():
            return
        time.sleep(0.2)
    raise AssertionError(f"nothing listened on port {port} in {netns} within {timeout} s")


def _stop(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def test_iperf3_cubic_flow_between_namespaces(image: str, netns_pair: NetnsPair) -> None:
    server_cmd = container_argv(
        netns_pair.server,
        image,
        ["iperf3", "--server", "--one-off", "--bind", SERVER_ADDR],
        name=netns_pair.container_name("iperf3-srv"),
    )
    server = subprocess.Popen(server_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(netns_pair.server, 5201, server, timeout=60)
        client_cmd = container_argv(
            netns_pair.client,
            image,
            ["iperf3", "-J", "-C", "cubic", "-t", "3", "-c", SERVER_ADDR],
            name=netns_pair.container_name("iperf3-cli"),
        )
        client = _run(client_cmd, timeout=90)
    finally:
        _stop(server, timeout=30)

    report = json.loads(client.stdout)
    assert "error" not in report, report["error"]
    end = report["end"]
    assert end["sum_sent"]["bytes"] > 0
    assert end["sum_received"]["bytes"] > 0
    assert end["sender_tcp_congestion"] == "cubic"
    assert report["start"]["connected"][0]["remote_host"] == SERVER_ADDR


def test_flent_netperf_test_between_namespaces(image: str, netns_pair: NetnsPair) -> None:
    """flent's tcp_1up (netperf in demo mode plus ping) runs from one namespace to the other."""
    server_name = netns_pair.container_name("netserver")
    server = subprocess.Popen(
        container_argv(netns_pair.server, image, ["netserver", "-D", "-4"], name=server_name),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_listening(netns_pair.server, 12865, server, timeout=60)
        # flent writes its data file into the container; print it (gzipped JSON) instead.
        script = (
            'cd /tmp && flent tcp_1up --length 3 --host "$1" --data-dir /tmp >&2 '
            "&& zcat /tmp/*.flent.gz"
        )
        flent = _run(
            container_argv(
                netns_pair.client,
                image,
                ["sh", "-c", script, "flent", SERVER_ADDR],
                name=netns_pair.container_name("flent"),
            ),
            timeout=120,
        )
    finally:
        _quiet(["podman", "rm", "--force", "--time", "0", server_name])
        _stop(server, timeout=30)

    data = json.loads(flent.stdout)
    assert data["metadata"]["NAME"] == "tcp_1up"
    upload = [v for v in data["results"]["TCP upload"] if v is not None]
    assert upload, flent.stderr
    assert max(upload) > 0
    assert any(v is not None for v in data["results"]["Ping (ms) ICMP"])


def test_versions_lists_the_tools(image: str, netns_pair: NetnsPair) -> None:
    out = _run(
        container_argv(
            netns_pair.server, image, ["versions"], name=netns_pair.container_name("versions")
        ),
        timeout=60,
    ).stdout
    tools = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    for tool in ("iperf3", "iperf2", "irtt", "fping", "flent", "netperf", "iproute2", "tcpdump"):
        assert tool in tools, out
        assert tools[tool] != "MISSING", out
    assert tools["iperf3"].startswith("iperf 3.")
    assert tools["flent"].startswith("Flent v")
    # Debian's non-free netperf (Ubuntu's multiverse one on Emulab) is built with
    # --enable-demo, which flent's netperf tests need (containers/linux-node/README.md).
    assert tools["netperf"].startswith("Netperf version 2."), out
    assert tools["netperf"].endswith("(demo mode: yes)"), out
