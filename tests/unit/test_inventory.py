"""Hosts inventory: from real Emulab/CloudLab manifests (tests/captures/rspec) and from the
request RSpec profile.py prints plus the <login> elements a manifest adds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from ccbench import inventory, leftovers
from ccbench.errors import CcbenchError
from ccbench.exec_ssh import SshExecutor, SshTarget

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "captures" / "rspec"


def test_real_one_node_manifests_are_refused_clearly() -> None:
    # Real manifests of a single node called "node-0"/"node": not a dumbbell.
    for name in ("emulab-d430-1node-manifest.xml", "cloudlab-utah-m510-1node-manifest.xml"):
        path = FIXTURES / name
        with pytest.raises(CcbenchError, match="no dumbbell roles among its nodes"):
            inventory.from_manifest(path.read_bytes(), name)


FBSD142 = "urn:publicid:IDN+emulab.net+image+emulab-ops//FBSD142-64-STD"
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"


def _manifest_from_profile(tmp_path: Path, *args: str) -> bytes:
    """profile.py's request RSpec + a <login> per node, as Emulab's manifest has
    (login element copied in form from the real fixture manifests)."""
    cp = subprocess.run(
        [sys.executable, str(REPO / "profile.py"), "--pairs", "2", "--senderImage", FBSD142,
         *args],
        capture_output=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""},
    )  # fmt: skip
    if cp.returncode != 0:
        pytest.skip(f"geni-lib not usable here: {cp.stderr.decode()[-200:]}")
    root = etree.fromstring(cp.stdout)
    for i, node in enumerate(root.iter("{*}node")):
        services = node.find("{*}services")
        if services is None:
            services = etree.SubElement(node, "services")
        # One login per project member, the user's own not first (as on emulab.net).
        for member in ("zoe", "alice", "bob"):
            login = etree.SubElement(services, "login")
            login.attrib.update(
                {
                    "authentication": "ssh-keys",
                    "port": "22",
                    "hostname": f"pc{400 + i}.emulab.net",
                    "username": member,
                }
            )
    return bytes(etree.tostring(root))


def test_profile_manifest_maps_roles_addresses_and_os(tmp_path: Path) -> None:
    inv = inventory.from_manifest(_manifest_from_profile(tmp_path), user="alice")
    db = inv.dumbbell(1)
    assert {"s1", "s2", "rt1", "rt2", "r1", "r2"} <= set(db)
    assert db["s1"].address == "10.1.1.2" and db["s1"].os == "freebsd"
    assert db["r2"].address == "10.1.3.6" and db["r2"].os == "linux"
    assert db["rt1"].address == "10.1.2.1"  # the bottleneck-side address
    assert db["rt1"].target.user == "alice" and db["rt1"].target.host.endswith(".emulab.net")
    assert inventory.pairs(db) == 2
    assert inv.sudo


def test_os_per_dumbbell_and_of_a_custom_image(tmp_path: Path) -> None:
    """The sender OS comes from the start-up script the profile chose, so a custom
    FreeBSD image whose name does not say so, and mixed dumbbells, map right."""
    patched = "urn:publicid:IDN+emulab.net+image+p//patched"
    custom = _manifest_from_profile(
        tmp_path, "--senderImageCustom", patched, "--senderOs", "freebsd"
    )
    inv = inventory.from_manifest(custom)
    assert inv.dumbbell(1)["s1"].os == "freebsd" and inv.dumbbell(1)["r1"].os == "linux"
    mixed = inventory.from_manifest(
        _manifest_from_profile(
            tmp_path, "--dumbbells", "2", "--senderImages", f"{FBSD142},{UBUNTU24}"
        )  # fmt: skip
    )
    assert mixed.dumbbell(1)["s2"].os == "freebsd" and mixed.dumbbell(2)["s2"].os == "linux"


def test_inventory_yaml_round_trip(tmp_path: Path) -> None:
    inv = inventory.from_manifest(_manifest_from_profile(tmp_path))
    import yaml

    p = tmp_path / "hosts.yaml"
    p.write_text(yaml.safe_dump(inv.to_dict()))
    again = inventory.load(p)
    assert again.dumbbell(1)["s2"] == inv.dumbbell(1)["s2"]


def test_ssh_argv_quotes_every_element() -> None:
    ex = SshExecutor("s1", SshTarget("pc1.emulab.net", "alice", 2222))
    argv = ex.command(["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 10485760", "$(reboot)"])
    assert argv[:3] == ["ssh", "-p", "2222"]
    assert "ControlMaster=auto" in argv and "BatchMode=yes" in argv
    # `--` before the destination: nothing after it can be read as an ssh option.
    assert argv[-3:] == [
        "--",
        "alice@pc1.emulab.net",
        "sysctl -w 'net.ipv4.tcp_rmem=4096 131072 10485760' '$(reboot)'",
    ]


def test_container_tools_over_ssh_command_plan(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`tools: container` on the SSH testbed (command plan; the real thing runs in
    tests/integration/test_ssh_testbed.py): the pid and gate wrappers, then podman with
    the host's network, then the tool; sudo in front on Emulab."""
    import shlex

    from ccbench.testbed.remote import ContainerSsh

    monkeypatch.setattr("os.getpid", lambda: 4242)
    image = "localhost/ccbench-linux-node:latest"
    target = SshTarget("pc1.emulab.net", "alice")
    ex = ContainerSsh("s1", target, sudo=True, image=image, name_prefix="ccb-t1-s1-")
    seen: list[list[str]] = []
    monkeypatch.setattr("ccbench.exec_ssh.LocalProc",
                        lambda argv, *a, **k: seen.append(argv))  # fmt: skip
    ex.spawn(["iperf3", "-c", "10.1.3.11", "-C", "bbr"], stderr=tmp_path / "e", gated=True)
    remote = shlex.split(seen[0][-1])
    assert remote[:2] == ["sudo", "-n"]
    # recorded on the node for a later sweep (ccbench.leftovers), then gated
    w = 2 + len(leftovers.wrapper())
    assert remote[2:w] == leftovers.wrapper() and remote[w - 1] == "/var/tmp/ccbench/procs"
    assert remote[w : w + 4] == ["sh", "-c", 'read _go; exec "$@"', "ccbench-gate"]
    name = remote[remote.index("--name") + 1]
    assert name.startswith("ccb-t1-s1-4242-")
    assert remote[w + 4 :] == [
        "podman", "run", "--rm", "--pull=never", "--init", "--network", "host", "--privileged",
        "--dns", "127.0.0.1", "--name", name, "localhost/ccbench-linux-node:latest",
        "iperf3", "-c", "10.1.3.11", "-C", "bbr"]  # fmt: skip
    # set-up commands are not wrapped: sysctl, tc and ip use the host's tools
    assert shlex.split(ex.command(["sysctl", "-n", "x"])[-1]) == ["sudo", "-n", "sysctl", "-n", "x"]
