"""Every executor's run_where_tools_run runs a command where its spawn() starts the run's
tools: the node itself (a namespace, the host, an SSH host), or with `tools: container`
the linux-node image; run() stays on the node's own tools. The host's case runs for
real; the others' command lines are checked as they would go to subprocess."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Any

import pytest

from ccbench import exec_ssh, needs
from ccbench.exec import NETNS_TAG, CommandFailed, NetnsExecutor
from ccbench.exec_ssh import SshExecutor, SshTarget
from ccbench.needs import Needs
from ccbench.testbed.local import ContainerNetnsExecutor
from ccbench.testbed.remote import ContainerSsh, SudoSsh

IMAGE = "localhost/ccbench-linux-node:latest"
PODMAN_RUN = ["podman", "run", "--rm", "--pull=never", "--init"]


class Captured:
    """Stands in for exec.run_captured: records each command line and its arguments,
    answers with `stdout` and exit `rc`."""

    def __init__(self, stdout: str = "", rc: int = 0) -> None:
        self.stdout, self.rc = stdout, rc
        self.seen: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, full: list[str], name: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        self.seen.append((list(full), kw))
        return subprocess.CompletedProcess(full, self.rc, self.stdout, "")


def test_on_the_host_it_is_run_itself() -> None:
    ex = NetnsExecutor(None)
    res = ex.run_where_tools_run(["sh", "-c", 'echo "$0"', "here"])
    assert res.ok and res.stdout == "here\n"
    assert res.argv == ("sh", "-c", 'echo "$0"', "here")
    assert ex.run_where_tools_run(["false"], check=False).returncode == 1
    with pytest.raises(CommandFailed, match="host: `false` failed"):
        ex.run_where_tools_run(["false"])


def test_in_a_namespace_it_runs_there_tagged(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured()
    monkeypatch.setattr("ccbench.exec.run_captured", cap)
    NetnsExecutor("ccb-t1-s1").run_where_tools_run(["iperf3", "-v"], timeout=5.0)
    (full, kw), = cap.seen  # fmt: skip
    assert full == ["ip", "netns", "exec", "ccb-t1-s1", "iperf3", "-v"]
    assert kw["timeout"] == 5.0 and kw["input"] is None
    assert kw["env"][NETNS_TAG] == "ccb-t1-s1"


def test_a_container_namespace_runs_it_in_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """LocalTestbed's `tools: container`: the image joined to the namespace, as spawn()
    starts the tools (no -i: nothing is gated); run() still uses the host's tools."""
    cap = Captured()
    monkeypatch.setattr("ccbench.exec.run_captured", cap)
    ex = ContainerNetnsExecutor("ccb-t1-s1", IMAGE)
    ex.run_where_tools_run(["iperf3", "-v"])
    ex.run(["tc", "qdisc", "show"])
    (tools, _), (setup, _) = cap.seen
    name = tools[tools.index("--name") + 1]
    assert name.startswith(f"ccb-t1-s1-{os.getpid()}-")
    assert tools == [*PODMAN_RUN, "--network", "ns:/run/netns/ccb-t1-s1", "--privileged",
                     "--dns", "127.0.0.1", "--name", name, IMAGE, "iperf3", "-v"]  # fmt: skip
    assert setup == ["ip", "netns", "exec", "ccb-t1-s1", "tc", "qdisc", "show"]


def remote(cap: Captured) -> list[list[str]]:
    """The remote command lines ssh was given (the last argument of each)."""
    return [shlex.split(full[-1]) for full, _ in cap.seen]


def test_over_ssh_it_runs_on_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    cap = Captured()
    monkeypatch.setattr(exec_ssh, "run_captured", cap)
    target = SshTarget("pc1.emulab.net", "alice")
    SshExecutor("s1", target).run_where_tools_run(["iperf3", "-v"])
    SudoSsh("s1", target, sudo=True).run_where_tools_run(["iperf3", "-v"])
    assert remote(cap) == [["iperf3", "-v"], ["sudo", "-n", "iperf3", "-v"]]


def test_a_container_over_ssh_runs_it_in_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SSH testbed's `tools: container`: the image with the host's network, under
    sudo on Emulab; run() still uses the host's tools; a failure is the image's."""
    cap = Captured(rc=3)
    monkeypatch.setattr(exec_ssh, "run_captured", cap)
    ex = ContainerSsh("s1", SshTarget("pc1.emulab.net", "alice"), sudo=True, image=IMAGE,
                      name_prefix="ccb-t1-s1-")  # fmt: skip
    assert ex.run_where_tools_run(["iperf3", "-v"], check=False).returncode == 3
    with pytest.raises(CommandFailed, match="s1: `podman run"):
        ex.run_where_tools_run(["iperf3", "-v"])
    ex.run(["tc", "qdisc", "show"], check=False)
    tools, _, setup = remote(cap)
    name = tools[tools.index("--name") + 1]
    assert name.startswith(f"ccb-t1-s1-{os.getpid()}-")
    assert tools == ["sudo", "-n", *PODMAN_RUN, "--network", "host", "--privileged",
                     "--dns", "127.0.0.1", "--name", name, IMAGE, "iperf3", "-v"]  # fmt: skip
    assert setup == ["sudo", "-n", "tc", "qdisc", "show"]


def test_the_tool_check_asks_the_image(monkeypatch: pytest.MonkeyPatch) -> None:
    """needs.lacking asks where the tools run, with time for a container to start."""
    cap = Captured(stdout="irtt\n")
    monkeypatch.setattr("ccbench.exec.run_captured", cap)
    ex = ContainerNetnsExecutor("ccb-t1-s1", IMAGE)
    assert needs.lacking(ex, Needs(("iperf3", "irtt"))) == ["irtt"]
    (full, kw), = cap.seen  # fmt: skip
    assert full[: len(PODMAN_RUN)] == PODMAN_RUN
    assert full[full.index(IMAGE) + 1 :] == needs.check_argv(Needs(("iperf3", "irtt")))
    assert kw["timeout"] == 120.0
