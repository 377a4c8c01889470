#!/usr/bin/env python3
"""Emulab rehearsal -- Linux senders, Linux delay node instead of FreeBSD dummynet.

The whole Emulab user path minus the portal, on this machine, before you book
hardware (run as root, after ./setup.sh):

    sudo .venv/bin/python scripts/emulab_rehearsal.py [--workdir DIR] [--duration S]

1. profile.py with a small parameter set (2 pairs, Ubuntu senders, 100 Mbit/s,
   40 ms RTT, 48-packet queue, host offloads off: see PROFILE_ARGS) -> the request
   RSpec (`request.xml`).
2. A manifest made from it as Emulab fills one in (`manifest.xml`): a pcNNN per
   node with one <login> per project member (yours not first), <host>,
   <emulab:vnode>, interface names (component_id ...:ethN) and MAC addresses, link
   VLAN tags. Host names are addresses on a management network made here.
3. "Emulab": one network namespace per node, wired as the manifest's links say
   (a veth pair per link, named and addressed as its interfaces), a management
   network (each node's control network and default route, with its own sshd and
   host key), the delay node `dl` a bridge that only delays, by its pipes' latency
   (native/ccdelay: this kernel has no netem), then every node's start-up command
   from its <execute> element, as is: the real emulab/*.sh with /local/repository
   bound to this checkout, and each node's /var/tmp, /etc/sysctl.d and /local/logs
   its own (a mount namespace per node). Nothing here uses ccbench's local testbed
   code: only the profile's scripts set the nodes up.
4. `ccbench testbed inventory --manifest manifest.xml --user YOU --out hosts.yaml`.
5. `snakemake --cores N all --configfile rehearsal.yaml` (a 100 Mbit/s miniature of
   config/examples/emulab-seed001.yaml with Linux senders, 1 repetition) over SSH,
   run from a control namespace on the management network -> reports/*.pdf.

Then it writes `evidence.json` and prints, per run, the bottleneck evidence: rt1's
qdisc drops (summary.json `bottleneck`) against what the delay node dropped (its
interfaces' counters and ccdelay's queue), and the loss ledger. The delay node is
logged in to like every node, so the ledger's `ipfw pipe show` there fails and is
listed under `loss_ledger.unread` (there is no dummynet here): its drops are read
by this script instead.

What it cannot cover: FreeBSD senders (no FreeBSD here), Emulab's real dummynet
delay node (ipfw pipes, its queue and counters), the portal itself (profile.py's
two portal passes are tests/unit/test_profile_portal.py), mapping onto hardware,
real NICs (veth: no TX ring, no link speed), separate kernels per node (host-wide
sysctls such as net.core.rmem_max cannot be set from a node), and package
installation at boot (the scripts run with CCBENCH_SETUP_NO_PACKAGES=1 and use this
machine's tools). `sudo` on the nodes is a stand-in that runs the command as root
(Emulab's is passwordless sudo). The login user is root (sshd here authenticates
local users).

Everything it makes (namespaces, sshd and ccdelay processes, the ssh agent, mounts,
/local when it made it, temporary files) is removed at the end, also on error or
Ctrl-C; the work directory (RSpecs, inventory, results, report, logs) is kept.
Exit status: 0 when the report was written, every run valid and run on the queue it
asked for; 1 when the report was written but not so (the reasons are printed); 2 on
failure.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from lxml import etree

REPO = Path(__file__).resolve().parents[1]
PREFIX = "ccb-rh-"  # every namespace this makes: ccb-rh-<node>, ccb-rh-ctl
CTL = PREFIX + "ctl"
MGMT = ipaddress.ip_network("198.19.254.0/24")  # management ("control") network
MGMT_GW = "198.19.254.1"  # the control namespace, each node's default route
UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
# Host offloads off: a veth has no wire, so a sender's TSO/GSO "segment" crosses to rt1
# as one skb of up to 64 KB and sits in its queue as one packet (measured with the OS
# defaults: one cubic flow through the 1-BDP, 331-packet queue had a mean RTT of 112 ms,
# where 331 frames allow at most 80; with offloads off the run is valid). On Emulab the
# sender's NIC segments in hardware and rt1 receives frames; switching TSO/GSO off on
# the senders' veths (the profile's "offloads off", applied by the start-up scripts)
# is what models that.
PROFILE_ARGS = [
    "--pairs", "2", "--senderImage", UBUNTU24, "--bandwidthMbps", "100", "--rttMs", "40",
    "--queuePackets", "48", "--hostOffloads", "off",
]  # fmt: skip
CCDELAY = REPO / "native" / "ccdelay" / "ccdelay"
EMULAB = "urn:publicid:IDN+emulab.net+"
NS = {"g": "http://www.geni.net/resources/rspec/3"}
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
DELAY_NS = "http://www.protogeni.net/resources/rspec/ext/delay/1"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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


class Failed(Exception):
    """A step failed: one line for the user."""


def log(msg: str) -> None:
    print(f"rehearsal: {msg}", flush=True)


def run(*argv: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if cp.returncode != 0:
        raise Failed(f"`{' '.join(argv)}` exited {cp.returncode}: {cp.stderr.strip()[-500:]}")
    return cp


def in_ns(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]


# --------------------------------------------------------------------------- RSpecs


def request_rspec(out: Path, scratch: Path) -> bytes:
    """profile.py's request RSpec for the rehearsal's parameters (standalone mode, as
    `python profile.py --param value ...`; not from the repository root, where
    profile.py would shadow the standard library's `profile`)."""
    cp = subprocess.run(
        [sys.executable, str(REPO / "profile.py"), *PROFILE_ARGS],
        capture_output=True, cwd=scratch, env={**os.environ, "PYTHONPATH": ""}, timeout=120,
    )  # fmt: skip
    if cp.returncode != 0:
        raise Failed(f"profile.py exited {cp.returncode}: {cp.stderr.decode()[-500:]}")
    out.write_bytes(cp.stdout)
    return cp.stdout


def mgmt_ip(k: int) -> str:
    return str(MGMT.network_address + 10 + k)


def make_manifest(request: bytes, user: str) -> bytes:
    """The request RSpec as Emulab's manifest would have it: node and interface ids,
    MACs, logins (one per project member, `user` second), host, vnode, VLAN tags."""
    root = etree.fromstring(request)
    root.set("type", "manifest")
    root.set("expires", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 86400)))
    for k, node in enumerate(root.iterfind("g:node", NS), start=1):
        pc = f"pc{500 + k}"
        cid = node.get("client_id", "")
        node.set("component_id", f"{EMULAB}node+{pc}")
        node.set("component_manager_id", f"{EMULAB}authority+cm")
        node.set("sliver_id", f"{EMULAB}sliver+{700000 + k}")
        for j, iface in enumerate(node.iterfind("g:interface", NS), start=1):
            iface.set("component_id", f"{EMULAB}interface+{pc}:eth{j}")
            iface.set("mac_address", f"02cc{k:04x}{j:04x}")  # colon-less, as Emulab's
            iface.set("sliver_id", f"{EMULAB}sliver+{710000 + 100 * k + j}")
        services = node.find("g:services", NS)
        if services is None:
            services = etree.SubElement(node, f"{{{NS['g']}}}services")
        for member in ("zoe", user, "bob"):  # every member's login, in no useful order
            etree.SubElement(services, f"{{{NS['g']}}}login", {
                "authentication": "ssh-keys", "hostname": mgmt_ip(k), "port": "22",
                "username": member,
            })  # fmt: skip
        hw = node.find("g:hardware_type", NS)
        etree.SubElement(node, f"{{{EMULAB_NS}}}vnode", {
            "name": pc, "hardware_type": hw.get("name", "") if hw is not None else "",
        })  # fmt: skip
        etree.SubElement(node, f"{{{NS['g']}}}host", {
            "name": f"{cid}.rehearsal.ccbench.emulab.net", "ipv4": mgmt_ip(k),
        })  # fmt: skip
    for n, link in enumerate(root.iterfind("g:link", NS)):
        link.set("vlantag", str(260 + n))
    return bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True))


def read_manifest(xml: bytes) -> tuple[dict[str, dict[str, Any]], list[list[str]]]:
    """Nodes {client_id: {k, pc, login, ifaces {if id: {dev, mac, ip, prefix}},
    execute [(shell, command)], delay_ms}} and links [[if id, if id]]."""
    root = etree.fromstring(xml)
    nodes: dict[str, dict[str, Any]] = {}
    for k, node in enumerate(root.iterfind("g:node", NS), start=1):
        cid = node.get("client_id", "")
        if not re.fullmatch(r"[a-z0-9]+(-d[0-9])?", cid):
            raise Failed(f"manifest: node name {cid!r} is not a rehearsal node name")
        ifaces = {}
        for iface in node.iterfind("g:interface", NS):
            dev = iface.get("component_id", "").rsplit(":", 1)[-1]
            mac = iface.get("mac_address", "")
            ip = iface.find("g:ip", NS)
            ifaces[iface.get("client_id", "")] = {
                "dev": dev,
                "mac": ":".join(mac[i : i + 2] for i in range(0, 12, 2)),
                "ip": ip.get("address") if ip is not None else None,
                "prefix": (
                    ipaddress.ip_network(f"0.0.0.0/{ip.get('netmask')}").prefixlen
                    if ip is not None else None
                ),
            }  # fmt: skip
        login = node.find("g:services/g:login", NS)
        pipes = [float(p.get("latency", "0")) for p in node.iter(f"{{{DELAY_NS}}}pipe")]
        if pipes and len(set(pipes)) != 1:
            raise Failed(f"manifest: {cid}: pipes of different latency {pipes} (not rehearsed)")
        nodes[cid] = {
            "k": k,
            "login": login.get("hostname") if login is not None else None,
            "ifaces": ifaces,
            "execute": [
                (e.get("shell", "sh"), e.get("command", ""))
                for e in node.iter(f"{{{NS['g']}}}execute")
            ],  # fmt: skip
            "delay_ms": pipes[0] if pipes else None,
        }
    links = []
    for link in root.iterfind("g:link", NS):
        ends = [r.get("client_id", "") for r in link.iterfind("g:interface_ref", NS)]
        if len(ends) != 2:
            raise Failed(f"manifest: link {link.get('client_id')} is a LAN (not rehearsed)")
        links.append(ends)
    return nodes, links


# --------------------------------------------------------------------------- "Emulab"


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
        run(*in_ns(ns, "iptables", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num", "0"))
        (self.work / "nodes" / node).mkdir(parents=True, exist_ok=True)
        stats = self.work / "nodes" / node / "ccdelay-stats.json"
        out = open(self.work / "logs" / f"ccdelay-{node}.log", "wb")  # noqa: SIM115
        self.procs["ccdelay"] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{ns}", str(CCDELAY), "--queue", "0",
             "--delay-us", str(int(info["delay_ms"] * 1000)), "--stats", str(stats),
             "--rt-prio", "10"],
            stdout=out, stderr=out,
        )  # fmt: skip
        out.close()
        self.later(lambda: self.stop("ccdelay"))
        deadline = time.monotonic() + 10
        while not stats.exists():
            if self.procs["ccdelay"].poll() is not None or time.monotonic() > deadline:
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
        p = self.procs.get("ccdelay")
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


def delay_drops(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """Packets the delay node dropped between two counter reads, by place."""
    out = {}
    for ifname, a in after["links"].items():
        b = before["links"].get(ifname, {})
        if ifname == "lo" or ifname == "eth0":  # loopback, management network
            continue
        for key in ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors"):
            n = a[key] - b.get(key, 0)
            if n:
                out[f"{ifname} {key}"] = n
    for key in ("packets_dropped_late", "queue_full_drops", "user_drops", "id_gaps"):
        n = (after["ccdelay"].get(key) or 0) - (before["ccdelay"].get(key) or 0)
        if n:
            out[f"ccdelay {key}"] = n
    return out


# --------------------------------------------------------------------------- the user's steps


def workflow_config(inventory: Path, duration: float) -> dict[str, Any]:
    """A 100 Mbit/s miniature of config/examples/emulab-seed001.yaml, Linux senders."""
    return {
        "title": "Emulab rehearsal: Linux senders, Linux delay node instead of FreeBSD dummynet",
        "question": (
            "Does the Emulab path (profile.py, its start-up scripts, the manifest's "
            "inventory, the SSH testbed) run seed 001's comparison end to end, with rt1's "
            "48-packet queue the only place packets are dropped? (A rehearsal on one "
            "machine: 100 Mbit/s, Linux CUBIC vs NewReno.)"
        ),
        "report_name": "emulab-rehearsal",
        "results_dir": "results",
        "testbed": {"kind": "ssh", "inventory": str(inventory)},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "mtu": 1500},
        "scenarios": {
            "single-flow": {
                "description": "one flow, 1-BDP queue (seed 001's single-path test)",
                "flows": 1,
                "topology": {"queue": {"kind": "pfifo", "limit_bdp": 1.0}},
            },
            "two-flows-48": {
                "description": "two flows through the 48-packet pfifo (seed 001's Emulab test)",
                "flows": 2,
                "topology": {"queue": {"kind": "pfifo", "limit_pkts": 48}},
            },
        },
        "variants": [
            {"label": "linux-cubic", "cc": "cubic", "os": "linux", "baseline": True},
            {"label": "linux-reno", "cc": "reno", "os": "linux"},
        ],
        "repetitions": 1,
        "duration_s": duration,
        "interval_s": 0.5,
        "attempts": 2,
        "seed": 1,
    }


def rt1_queue(raw: Path) -> dict[str, Any]:
    """The bottleneck queue a run asked for (raw/spec.json) and the one rt1 had when the
    run started (raw/tc-before.json: the child qdisc 10: under the shaper)."""
    out: dict[str, Any] = {"asked": None, "had": None}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        topo = json.loads((raw / "spec.json").read_text())["topology"]
        out["asked"] = f"{topo['queue_kind']} {topo.get('queue_limit_pkts')}"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, StopIteration):
        tc = json.loads((raw / "tc-before.json").read_text())
        q = next(x for x in tc if x.get("handle") == "10:")
        out["had"] = f"{q['kind']} {q['options'].get('limit')}"
    return out


def runs_evidence(results: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(results.glob("runs/*/summary.json")):
        s = json.loads(f.read_text())
        bn = s.get("bottleneck") or {}
        led = s.get("loss_ledger") or {}
        queue = rt1_queue(f.parent / "raw")
        out.append({
            "run_id": s.get("run_id"), "scenario": s.get("scenario"),
            "variant": s.get("variant"), "valid": s.get("valid"),
            "reasons": s.get("reasons", []), "started_unix": s.get("started_unix"),
            "utilization_pct": s.get("utilization_pct"),
            "cc_used": [fl.get("cc_used") for fl in s.get("flows", [])],
            "rt1_queue_asked": queue["asked"], "rt1_queue_had": queue["had"],
            "rt1_queue_drops": bn.get("drops"),
            "rt1_shaper_dropped": (bn.get("shaper") or {}).get("dropped"),
            "retransmits": led.get("retransmits"),
            "ledger_outside": led.get("outside"),
            "ledger_unread": led.get("unread"),
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", default="emulab-rehearsal",
                    help="where the RSpecs, inventory, results, report and logs go "
                         "(default: ./emulab-rehearsal; must be empty or absent)")  # fmt: skip
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    ap.add_argument("--duration", type=float, default=10, help="flow length in s (default 10)")
    ap.add_argument("--hold", action="store_true",
                    help="stop after the nodes are up and the inventory is written: "
                         "print how to reach them, wait for Ctrl-C, then clean up")  # fmt: skip
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("rehearsal: error: run as root (network namespaces, sshd per node)", file=sys.stderr)
        return 2
    work = Path(a.workdir).resolve()
    if work.exists() and any(work.iterdir()):
        print(f"rehearsal: error: {work} is not empty", file=sys.stderr)
        return 2
    (work / "logs").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="ccb-rh-"))
    rh = Rehearsal(work, scratch, a.cores, a.duration)
    rh.later(lambda: shutil.rmtree(scratch, ignore_errors=True))
    snake: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGINT too: started in the background, Python would inherit it ignored
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    t0 = time.monotonic()
    try:
        with _step("1. profile.py -> request RSpec"):
            request = request_rspec(work / "request.xml", scratch)
        with _step("2. manifest as Emulab fills it in"):
            manifest = make_manifest(request, rh.user)
            (work / "manifest.xml").write_bytes(manifest)
            nodes, links = read_manifest(manifest)
        with _step("3. nodes: namespaces, links, sshd, delay node, start-up services"):
            rh.nodes = nodes
            rh.keys()
            rh.local_mountpoint()
            rh.build(nodes, links)
            for node in nodes:
                rh.sshd(node)
            for node, info in nodes.items():
                if info["delay_ms"] is not None:
                    rh.delay_node(node)
            rh.wait_sshd()
            rh.startup()
            rh.check_done()
        with _step("4. ccbench testbed inventory"):
            run(*in_ns(CTL, "ccbench", "testbed", "inventory", "--manifest",
                       str(work / "manifest.xml"), "--user", rh.user,
                       "--out", str(work / "hosts.yaml")), env=rh.env)  # fmt: skip
        if a.hold:
            log(f"holding: nodes are namespaces {PREFIX}<node>; ssh from {CTL} with "
                f"SSH_AUTH_SOCK={rh.env['SSH_AUTH_SOCK']}; inventory {work / 'hosts.yaml'}. "
                "Ctrl-C ends.")  # fmt: skip
            while True:
                time.sleep(3600)
        with _step("5. snakemake all over SSH"):
            cfg = work / "rehearsal.yaml"
            cfg.write_text(yaml.safe_dump(workflow_config(work / "hosts.yaml", a.duration),
                                          sort_keys=False))  # fmt: skip
            delay = [n for n, i in nodes.items() if i["delay_ms"] is not None]
            before = {n: rh.delay_counters(n) for n in delay}
            with open(work / "logs" / "snakemake.log", "wb") as out:
                snake.append(subprocess.Popen(
                    in_ns(CTL, "snakemake", "--snakefile", str(REPO / "Snakefile"),
                          "--directory", str(work), "--workflow-profile",
                          str(REPO / "profiles" / "default"), "--cores", str(a.cores), "all",
                          "--configfile", str(cfg)),
                    stdout=out, stderr=out, env=rh.env,
                ))  # fmt: skip
                rc = snake[0].wait(timeout=1800)
            after = {n: rh.delay_counters(n) for n in delay}
            if rc != 0:
                tail = (work / "logs" / "snakemake.log").read_text()[-1500:]
                raise Failed(f"snakemake exited {rc} (logs/snakemake.log):\n{tail}")
        return report(work, rh, before, after, time.monotonic() - t0)
    except Failed as e:
        print(f"rehearsal: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rehearsal: interrupted; cleaning up", file=sys.stderr)
        return 2
    finally:
        for p in snake:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # snakemake brings its testbeds down
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
        _close_masters(scratch / "ccbench-ssh")
        problems = rh.clean()
        for s, h in old.items():
            signal.signal(s, h)
        for pr in problems:
            print(f"rehearsal: clean-up: {pr}", file=sys.stderr)


@contextlib.contextmanager
def _step(what: str) -> Iterator[None]:
    t = time.monotonic()
    log(what)
    yield
    log(f"   ({time.monotonic() - t:.1f} s)")


def _close_masters(sshdir: Path) -> None:
    """End ccbench's shared ssh connections (ControlPersist) by their sockets."""
    if not sshdir.is_dir():
        return
    for sock in sshdir.glob("ccb-ssh-*"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "ccb-rh"],
                       capture_output=True, timeout=15)  # fmt: skip


def report(work: Path, rh: Rehearsal, before: dict[str, Any], after: dict[str, Any],
           took: float) -> int:  # fmt: skip
    pdfs = sorted((work / "reports").glob("*.pdf"))
    runs = runs_evidence(work / "results")
    dl = {n: {"dropped": delay_drops(before[n], after[n]), "before": before[n],
              "after": after[n]} for n in after}  # fmt: skip
    nics = {}
    for f in sorted((work / "nodes").glob("*/var-tmp/ccbench/nic-*.json")):
        nics[f"{f.parents[2].name} {f.stem[4:]}"] = json.loads(f.read_text())
    evidence = {
        "name": "rehearsal -- Linux senders, Linux delay node instead of FreeBSD dummynet",
        "report": [str(p) for p in pdfs],
        "runs": runs,
        "delay_node": dl,
        "nic_records": nics,
        "seconds": round(took, 1),
    }
    (work / "evidence.json").write_text(json.dumps(evidence, indent=1))
    log(f"report: {', '.join(map(str, pdfs)) or 'NONE'}")
    log("bottleneck evidence (rt1 qdisc drops vs delay-node drops):")
    for r in runs:
        log(f"  {r['scenario']:>13} {r['variant']:<12} valid={r['valid']!s:<5} "
            f"util={r['utilization_pct'] or 0:5.1f}% rt1 queue drops={r['rt1_queue_drops']} "
            f"shaper drops={r['rt1_shaper_dropped']} retx={r['retransmits']} "
            f"outside={r['ledger_outside']} unread={r['ledger_unread']}")  # fmt: skip
        if r["rt1_queue_had"] != r["rt1_queue_asked"]:
            log(f"      rt1's queue was {r['rt1_queue_had']} packets, the run asked for "
                f"{r['rt1_queue_asked']}: another bottleneck configuration's testbed_up "
                "had rebuilt it (the dumbbell is shared)")  # fmt: skip
        for reason in r["reasons"]:
            log(f"      invalid: {reason}")
    for n, d in dl.items():
        log(f"  delay node {n} (whole workflow): dropped {d['dropped'] or 0}; ccdelay "
            f"received {d['after']['ccdelay']['packets_received']} packets, "
            f"{d['after']['ccdelay']['late_5ms']} > 5 ms late")  # fmt: skip
    log(f"evidence: {work / 'evidence.json'} ({took:.0f} s)")
    if not pdfs:
        return 2
    ok = all(r["valid"] and r["rt1_queue_had"] == r["rt1_queue_asked"] for r in runs)
    return 0 if runs and ok else 1


if __name__ == "__main__":
    sys.exit(main())
