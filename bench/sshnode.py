"""One node behind a real sshd, on this machine, for benchmarks and tests of the SSH path.

A network namespace with its own sshd (Debian's openssh-server, started with nsenter as
tests/integration/test_ssh_testbed.py does) and a management link to this machine's own
namespace: a veth pair, offloads off, the node's side shaped with `tbf` (the direction
a fetch's bytes take). ccbench's SshExecutor reaches it as it reaches an Emulab node.
Root only. Everything is removed on leaving the context, also on error: the ssh shared
connection, sshd, and the namespace (which takes the veth pair with it).
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ccbench.exec_ssh import SshExecutor, SshTarget

NODE_DEV = "mgmt0"


def sh(*argv: str) -> None:
    cp = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if cp.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` exited {cp.returncode}: {cp.stderr.strip()}")


@dataclass
class SshNode:
    name: str
    ns: str
    addr: str  # the node's management address (sshd listens there)
    ex: SshExecutor

    def shape(self, rate_mbit: float) -> None:
        """tbf on the node's egress: what it sends (a fetch) crosses at `rate_mbit`.
        Burst 1 ms of the rate (at least 10 frames), 50 ms of queue."""
        burst = max(10 * 1514, int(rate_mbit * 1e6 / 8 / 1000))
        sh("ip", "netns", "exec", self.ns, "tc", "qdisc", "replace", "dev", NODE_DEV, "root",
           "tbf", "rate", f"{rate_mbit:g}mbit", "burst", str(burst), "latency", "50ms")  # fmt: skip

    def unshape(self) -> None:
        sh("ip", "netns", "exec", self.ns, "tc", "qdisc", "del", "dev", NODE_DEV, "root")


# In sshd's own mount namespace: the login user's ~/.bashrc is this machine's, not a
# node's, so it is hidden (bash reads it for every ssh command; here pyenv's init costs
# 0.38 s each); and the node may get a /var/tmp of its own (where ccbench keeps a
# FreeBSD sender's siftr log, instruments.siftr.LOG), a directory of this machine.
NODE_MOUNTS = (
    'if [ -f "$1" ]; then mount --bind /dev/null "$1"; fi; '
    'if [ -n "$2" ]; then mount --bind "$2" /var/tmp; fi; shift 2; exec "$@"'
)


def sshd_argv(
    ns: str, addr: str, keys: Path, var_tmp: Path | None = None, pid_file: Path | None = None
) -> list[str]:
    """A throw-away sshd in namespace `ns` (foreground, no config file, keys in `keys`;
    `var_tmp`: the node's /var/tmp; `pid_file`: default keys/sshd.pid). nsenter, not
    `ip netns exec`: only the network namespace changes, so sessions keep this machine's
    /sys (podman needs its cgroup mounts)."""
    return [
        "nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--propagation", "private",
        "sh", "-c", NODE_MOUNTS, "node-mounts", str(Path.home() / ".bashrc"),
        str(var_tmp or ""), "/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null",
        "-h", str(keys / "hostkey"), "-o", f"ListenAddress={addr}",
        "-o", f"AuthorizedKeysFile={keys / 'authorized_keys'}",
        "-o", "PermitRootLogin=prohibit-password", "-o", "StrictModes=no", "-o", "UsePAM=no",
        "-o", "PasswordAuthentication=no", "-o", f"PidFile={pid_file or keys / 'sshd.pid'}",
    ]  # fmt: skip


@contextlib.contextmanager
def ssh_node(
    name: str, ns: str, net: str, workdir: Path, var_tmp: Path | None = None
) -> Iterator[SshNode]:
    """`net`: the first three octets of a /24 nobody else on this machine uses (the
    link takes .1, this machine's side, and .2, the node). `var_tmp`: a directory here
    that is the node's /var/tmp (None: it shares this machine's)."""
    if not Path("/usr/sbin/sshd").exists():
        raise RuntimeError("openssh-server is not installed (./setup.sh installs it)")
    workdir.mkdir(parents=True, exist_ok=True)
    host_dev, addr = f"{ns[-11:]}-m", f"{net}.2"
    sshd: subprocess.Popen[bytes] | None = None
    ex: SshExecutor | None = None
    control: Path | None = None
    for leftover in (("ip", "link", "delete", host_dev), ("ip", "netns", "delete", ns)):
        with contextlib.suppress(RuntimeError):  # of an interrupted earlier use
            sh(*leftover)
    try:
        for key in ("hostkey", "clientkey"):
            (workdir / key).unlink(missing_ok=True)
            (workdir / f"{key}.pub").unlink(missing_ok=True)
            sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / key))
        (workdir / "authorized_keys").write_text((workdir / "clientkey.pub").read_text())
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_dev, "type", "veth", "peer", "name", NODE_DEV, "netns", ns)
        sh("ip", "addr", "add", f"{net}.1/24", "dev", host_dev)
        sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", NODE_DEV)
        for dev, where in ((host_dev, []), (NODE_DEV, ["ip", "netns", "exec", ns])):
            sh(*where, "ethtool", "-K", dev, "gso", "off", "tso", "off", "gro", "off")
        sh("ip", "link", "set", host_dev, "up")
        sh("ip", "-n", ns, "link", "set", NODE_DEV, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        sshd = subprocess.Popen(sshd_argv(ns, addr, workdir, var_tmp), stderr=subprocess.DEVNULL)
        _wait_listening(addr, 22, sshd)
        target = SshTarget(
            addr, "root", identity=str(workdir / "clientkey"),
            options=("StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"),
        )  # fmt: skip
        # ssh's shared-connection socket: a short path (a Unix socket's is <= 107 bytes)
        control = Path(tempfile.mkdtemp(prefix="ccbsn-"))
        ex = SshExecutor(name, target, control_dir=control)
        yield SshNode(name, ns, addr, ex)
    finally:
        if ex is not None:
            ex.close()
        if control is not None:
            shutil.rmtree(control, ignore_errors=True)
        if sshd is not None:
            sshd.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                sshd.wait(timeout=10)
            if sshd.poll() is None:
                sshd.kill()
                sshd.wait()
        # The veth first: a namespace goes away when its last process has, and the
        # kernel frees its devices later still; the next node of the same name needs
        # the link name now.
        for gone in (("ip", "link", "delete", host_dev), ("ip", "netns", "delete", ns)):
            with contextlib.suppress(RuntimeError):
                sh(*gone)


def _wait_listening(addr: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode} at start")
        with contextlib.suppress(OSError), socket.create_connection((addr, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise RuntimeError(f"sshd is not listening on {addr}:{port} after 10 s")
