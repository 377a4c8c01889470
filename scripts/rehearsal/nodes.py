"""The rehearsal's "Emulab": a network namespace per node wired as the manifest's links
say, each with its own sshd and mount namespace, the delay node a Linux bridge that
only delays (native/ccdelay), and every node's start-up command run as the manifest
gives it."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ccbench import delaynode
from rehearsal.common import CTL, MGMT, MGMT_GW, PATH, PREFIX, REPO, Failed, in_ns, log, run

CCDELAY = REPO / "native" / "ccdelay" / "ccdelay"


# A node's mount namespace, then its sshd: this network namespace's /sys (as `ip netns
# exec` does), /local holding the repository clone (read-only) and the logs, and the
# node's own /var/tmp and /etc/sysctl.d. The login user's ~/.bashrc is this machine's,
# not a fresh node's: hidden (bash reads it for every ssh command; a pyenv/cargo one
# here cost 0.1-0.5 s per command, ccbench runs ~200 per run). A constant script: paths
# are its arguments.
NODE_INIT = r"""set -e
node=$1 repo=$2 home=$3
shift 3
mount -t sysfs sysfs /sys
if [ -f "$home/.bashrc" ]; then mount --bind /dev/null "$home/.bashrc"; fi
mount -t tmpfs -o mode=0755 ccb-rh-local /local
mkdir /local/repository /local/logs
mount --bind "$repo" /local/repository
mount -o remount,bind,ro /local/repository
mount --bind "$node/local-logs" /local/logs
mount --bind "$node/var-tmp" /var/tmp
mount --bind "$node/etc-sysctl.d" /etc/sysctl.d
exec "$@"
"""

# sudo on the nodes: the rehearsal runs everything as root already (on Emulab the
# login user has passwordless sudo). Takes the options ccbench and profile.py use.
SUDO_SHIM = r"""#!/bin/sh
# sudo stand-in of scripts/emulab_rehearsal.py: the command runs as root already.
while [ $# -gt 0 ]; do
    case $1 in
    -n | -E | --preserve-env | --preserve-env=*) shift ;;
    --) shift; break ;;
    -*) echo "sudo (rehearsal stand-in): option $1 not supported" >&2; exit 1 ;;
    *) break ;;
    esac
done
exec "$@"
"""


class Rehearsal:
    def __init__(self, work: Path, scratch: Path, cores: int, duration: float):
        self.work = work
        self.scratch = scratch
        self.cores = cores
        self.duration = duration
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.cleanups: list[Callable[[], None]] = []
        self.procs: dict[str, subprocess.Popen[bytes]] = {}  # sshd per node, ccdelay, agent
        self.nodes: dict[str, dict[str, Any]] = {}
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', PATH)}",
            "CCBENCH_SSH_DIR": str(scratch / "ccbench-ssh"),  # known_hosts, sockets
            "CCBENCH_STATE": str(scratch / "state"),  # testbed state of this rehearsal only
            "SSH_AUTH_SOCK": str(scratch / "agent.sock"),
        }

    # --- clean-up, in reverse order of making, whatever happened --------------
    def later(self, fn: Callable[[], None]) -> None:
        self.cleanups.append(fn)

    def clean(self) -> list[str]:
        problems = []
        while self.cleanups:
            fn = self.cleanups.pop()
            try:
                fn()
            except Exception as e:  # noqa: BLE001 -- clean up the rest regardless
                problems.append(str(e))
        return problems

    def stop(self, name: str, sig: int = signal.SIGTERM) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)

    # --- step 3: the machines ---------------------------------------------------
    def ns(self, node: str) -> str:
        return PREFIX + node

    def add_ns(self, name: str) -> None:
        run("ip", "netns", "add", name)
        self.later(lambda: self.del_ns(name))
        run("ip", "-n", name, "link", "set", "lo", "up")

    def del_ns(self, name: str) -> None:
        # Processes left in the namespace are this rehearsal's (ssh sessions, tools
        # ccbench started over ssh): end them by pid, then the namespace goes.
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in pids.stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)

    def build(self, nodes: dict[str, dict[str, Any]], links: list[list[str]]) -> None:
        self.nodes = nodes
        stale = [n for n in _netns() if n.startswith(PREFIX)]
        for name in stale:  # a killed earlier rehearsal's
            log(f"removing stale namespace {name}")
            self.del_ns(name)
        owner = {i: n for n, info in nodes.items() for i in info["ifaces"]}
        self.add_ns(CTL)
        run("ip", "-n", CTL, "link", "add", "mgmt", "type", "bridge")
        run("ip", "-n", CTL, "addr", "add", f"{MGMT_GW}/{MGMT.prefixlen}", "dev", "mgmt")
        run("ip", "-n", CTL, "link", "set", "mgmt", "up")
        for node, info in nodes.items():
            ns = self.ns(node)
            self.add_ns(ns)
            # management (control) network: eth0, the default route (as on Emulab)
            run("ip", "link", "add", "eth0", "netns", ns, "type", "veth",
                "peer", "name", f"m{info['k']}", "netns", CTL)  # fmt: skip
            run("ip", "-n", CTL, "link", "set", f"m{info['k']}", "master", "mgmt", "up")
            if info["login"]:
                run("ip", "-n", ns, "addr", "add", f"{info['login']}/{MGMT.prefixlen}",
                    "dev", "eth0")  # fmt: skip
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            if info["login"]:
                run("ip", "-n", ns, "route", "add", "default", "via", MGMT_GW)
        for a, b in links:  # experiment links: a veth pair, named and addressed as the RSpec says
            ea, eb = nodes[owner[a]]["ifaces"][a], nodes[owner[b]]["ifaces"][b]
            run("ip", "link", "add", ea["dev"], "netns", self.ns(owner[a]), "address", ea["mac"],
                "type", "veth", "peer", "name", eb["dev"], "netns", self.ns(owner[b]),
                "address", eb["mac"])  # fmt: skip
            for node, end in ((owner[a], ea), (owner[b], eb)):
                if end["ip"]:
                    run("ip", "-n", self.ns(node), "addr", "add",
                        f"{end['ip']}/{end['prefix']}", "dev", end["dev"])  # fmt: skip
                run("ip", "-n", self.ns(node), "link", "set", end["dev"], "up")
        log(f"{len(nodes)} nodes wired as the manifest's {len(links)} links say")

    def delay_node(self, node: str) -> None:
        """What Emulab does for a delay node: bridge its interfaces, delay every packet
        by the pipes' latency in each direction. Linux here (dummynet on Emulab): a
        bridge whose forwarded frames go through NFQUEUE to native/ccdelay."""
        info = self.nodes[node]
        ns = self.ns(node)
        if not CCDELAY.exists():
            raise Failed(f"{CCDELAY} is not built (./setup.sh builds it)")
        run("ip", "-n", ns, "link", "add", "br0", "type", "bridge")
        for end in info["ifaces"].values():
            run("ip", "-n", ns, "link", "set", end["dev"], "master", "br0")
        run("ip", "-n", ns, "link", "set", "br0", "up")
        cp = subprocess.run(in_ns(ns, "sysctl", "-w", "net.bridge.bridge-nf-call-iptables=1"),
                            capture_output=True, text=True)  # fmt: skip
        if cp.returncode != 0:
            raise Failed(f"{node}: bridged frames cannot reach iptables (br_netfilter): "
                         f"{cp.stderr.strip()}")  # fmt: skip
        queue = str(info["k"])  # a queue number of its own per delay node
        run(*in_ns(ns, "iptables", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", queue))
        (self.work / "nodes" / node).mkdir(parents=True, exist_ok=True)
        stats = self.work / "nodes" / node / "ccdelay-stats.json"
        out = open(self.work / "logs" / f"ccdelay-{node}.log", "wb")  # noqa: SIM115
        name = f"ccdelay-{node}"
        self.procs[name] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{ns}", str(CCDELAY), "--queue", queue,
             "--delay-us", str(int(info["delay_ms"] * 1000)), "--stats", str(stats),
             "--rt-prio", "10"],
            stdout=out, stderr=out,
        )  # fmt: skip
        out.close()
        self.later(lambda: self.stop(name))
        deadline = time.monotonic() + 10
        while not stats.exists():
            if self.procs[name].poll() is not None or time.monotonic() > deadline:
                raise Failed(f"{node}: ccdelay did not start (logs/ccdelay-{node}.log)")
            time.sleep(0.1)
        log(f"{node}: bridge with {info['delay_ms']:g} ms each way (ccdelay)")

    def keys(self) -> None:
        for name in ("client", *self.nodes):
            run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"ccb-rh-{name}",
                "-f", str(self.scratch / f"key-{name}"))  # fmt: skip
        shutil.copy(self.scratch / "key-client.pub", self.scratch / "authorized_keys")
        bindir = self.scratch / "bin"
        bindir.mkdir()
        (bindir / "sudo").write_text(SUDO_SHIM)
        (bindir / "sudo").chmod(0o755)
        # the user's agent holds the key (README: "load it into an agent")
        self.procs["agent"] = subprocess.Popen(
            ["ssh-agent", "-D", "-a", self.env["SSH_AUTH_SOCK"]],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.later(lambda: self.stop("agent"))
        deadline = time.monotonic() + 10
        while not Path(self.env["SSH_AUTH_SOCK"]).exists():
            if time.monotonic() > deadline:
                raise Failed("ssh-agent did not start")
            time.sleep(0.05)
        run("ssh-add", "-q", str(self.scratch / "key-client"), env=self.env)

    def local_mountpoint(self) -> None:
        """/local must exist for each node's /local mount (a tmpfs in the node's own
        mount namespace); made here when missing and removed at the end."""
        local = Path("/local")
        if local.is_symlink() or (local.exists() and not local.is_dir()):
            raise Failed("/local exists and is not a directory")
        if not local.exists():
            local.mkdir(mode=0o755)
            self.later(lambda: local.rmdir())

    def privsep_dir(self) -> None:
        """sshd refuses to start without its privilege-separation directory /run/sshd
        ("Missing privilege separation directory"); /run is emptied at boot and only the
        system's sshd service makes it again. Made here when missing (root's, 0755, as
        sshd wants it) and removed at the end."""
        d = Path("/run/sshd")
        if d.is_dir():
            return
        if d.exists() or d.is_symlink():
            raise Failed("/run/sshd exists and is not a directory")
        d.mkdir(mode=0o755)
        d.chmod(0o755)  # whatever the umask
        self.later(lambda: d.rmdir())
        log("made /run/sshd (sshd's privilege-separation directory)")

    def sshd(self, node: str) -> None:
        info = self.nodes[node]
        d = self.work / "nodes" / node
        for sub in ("local-logs", "var-tmp", "etc-sysctl.d"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        (d / "var-tmp").chmod(0o1777)
        out = open(self.work / "logs" / f"sshd-{node}.log", "wb")  # noqa: SIM115
        self.procs[f"sshd-{node}"] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.ns(node)}", "--",
             "unshare", "--mount", "--propagation", "private", "--",
             "sh", "-c", NODE_INIT, "ccb-rh-node", str(d), str(REPO),
             pwd.getpwnam(self.user).pw_dir,
             "/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null",
             "-h", str(self.scratch / f"key-{node}"),
             "-o", f"ListenAddress={info['login']}",
             "-o", f"AuthorizedKeysFile={self.scratch / 'authorized_keys'}",
             "-o", "PermitRootLogin=prohibit-password", "-o", "StrictModes=no",
             "-o", "UsePAM=no", "-o", "PasswordAuthentication=no",
             "-o", f"SetEnv=PATH={self.scratch / 'bin'}:{PATH}",
             "-o", f"PidFile={self.scratch / f'sshd-{node}.pid'}"],
            stdout=out, stderr=out,
        )  # fmt: skip
        out.close()
        self.later(lambda: self.stop(f"sshd-{node}"))

    def wait_sshd(self) -> None:
        deadline = time.monotonic() + 15
        for node, info in self.nodes.items():
            if not info["login"]:
                continue
            while True:
                p = self.procs[f"sshd-{node}"]
                if p.poll() is not None:
                    raise Failed(f"{node}: sshd exited {p.returncode} (logs/sshd-{node}.log)")
                probe = subprocess.run(
                    in_ns(CTL, "bash", "-c", 'exec 3<>"/dev/tcp/$0/22"', info["login"]),
                    capture_output=True,
                )  # fmt: skip
                if probe.returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise Failed(f"{node}: sshd does not listen on {info['login']}:22")
                time.sleep(0.1)

    def startup(self) -> None:
        """Every node's start-up services, all at once (as the nodes boot), each in its
        node's namespaces with the command exactly as the manifest gives it."""
        env = ["env", "-i", f"PATH={self.scratch / 'bin'}:{PATH}", "HOME=/root", "LANG=C.UTF-8",
               "CCBENCH_SETUP_NO_PACKAGES=1"]  # fmt: skip
        procs = []
        for node, info in self.nodes.items():
            pid = self.procs[f"sshd-{node}"].pid
            for k, (shell, command) in enumerate(info["execute"]):
                if shell not in ("sh", "bash"):
                    raise Failed(f"{node}: execute shell {shell!r} (sh or bash expected)")
                logf = self.work / "logs" / f"startup-{node}-{k}.log"
                with open(logf, "wb") as out:
                    procs.append((node, command, logf, subprocess.Popen(
                        ["nsenter", f"--target={pid}", "--mount", "--net", "--", *env,
                         shell, "-c", command],
                        stdout=out, stderr=out,
                    )))  # fmt: skip
        for node, command, logf, p in procs:
            try:
                rc = p.wait(timeout=180)
            except subprocess.TimeoutExpired:
                p.kill()
                raise Failed(f"{node}: start-up command still running after 180 s") from None
            if rc != 0:
                raise Failed(f"{node}: start-up command exited {rc}: {command}\n"
                             f"{logf.read_text()[-800:]}")  # fmt: skip
        log(f"start-up services finished on {len(procs)} nodes")

    def ssh(self, host: str, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            in_ns(CTL, "ssh", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                  "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
                  "-o", "ConnectTimeout=10", "--", f"{self.user}@{host}", *argv),
            capture_output=True, text=True, env=self.env, timeout=60,
        )  # fmt: skip

    def check_done(self) -> None:
        """The user's step 2: every node's start-up service reports finished."""
        for node, info in self.nodes.items():
            if not info["execute"]:
                continue
            cp = self.ssh(info["login"], "cat", "/var/tmp/ccbench-setup.done")
            if cp.returncode != 0:
                raise Failed(f"{node}: no /var/tmp/ccbench-setup.done over ssh: "
                             f"{cp.stderr.strip()}")  # fmt: skip

    # --- the delay node as ccbench reads Emulab's: here not dummynet ----------
    def delay_config(self, node: str) -> dict[str, Any]:
        """dl's clock and pipes, read over ssh with sudo as ccbench.delaynode reads an
        Emulab delay node; on this Linux delay node the commands fail, and the record
        says "not dummynet: configuration not read" and why."""
        login = self.nodes[node]["login"]
        outputs = {}
        for name, argv in delaynode.READ_COMMANDS.items():
            cp = self.ssh(login, "sudo", *argv)
            outputs[name] = (cp.returncode, cp.stdout, cp.stderr)
        return delaynode.from_outputs(node, outputs).to_dict()

    # --- the delay node's own counters (there is no ipfw here) --------------
    def delay_counters(self, node: str) -> dict[str, Any]:
        cp = run("ip", "-n", self.ns(node), "-s", "-s", "-j", "link", "show")
        links = {}
        for link in json.loads(cp.stdout):
            st = link.get("stats64") or link.get("stats") or {}
            rx, tx = st.get("rx", {}), st.get("tx", {})
            links[link["ifname"]] = {
                "rx_packets": rx.get("packets", 0), "tx_packets": tx.get("packets", 0),
                "rx_dropped": rx.get("dropped", 0), "tx_dropped": tx.get("dropped", 0),
                "rx_errors": rx.get("errors", 0), "tx_errors": tx.get("errors", 0),
            }  # fmt: skip
        p = self.procs.get(f"ccdelay-{node}")
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGUSR1)  # write the stats now
            time.sleep(0.3)
        stats_file = self.work / "nodes" / node / "ccdelay-stats.json"
        stats = json.loads(stats_file.read_text())
        kq = stats.get("kernel_queue", {})
        return {
            "time_unix": time.time(),
            "links": links,
            "ccdelay": {
                "packets_received": stats.get("packets_received"),
                "packets_dropped_late": stats.get("packets_dropped_late"),
                "queue_full_drops": kq.get("queue_full_drops"),
                "user_drops": kq.get("user_drops"),
                "id_gaps": stats.get("id_gaps"),
                "late_5ms": stats.get("lateness", {}).get("over_threshold"),
                "max_held": stats.get("max_held"),
            },
        }


def _netns() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.strip()]
