"""Hosts inventory for the SSH testbed: roles (s*, rt1, dl, rt2, r*) -> SSH targets.

Made from an Emulab/CloudLab manifest RSpec (`ccbench testbed inventory --manifest`)
or written by hand for any SSH-reachable dumbbell. Format (YAML):

    ssh: {user: alice, identity: ~/.ssh/id_ed25519, sudo: true, options: []}
    dumbbells:
      1:
        s1:  {host: pc401.emulab.net, port: 22, os: freebsd, address: 10.1.1.11}
        rt1: {host: pc402.emulab.net, address: 10.1.2.1}   # bottleneck side address
        rt2: {host: pc403.emulab.net, address: 10.1.2.2}
        r1:  {host: pc404.emulab.net, address: 10.1.3.11}

`address` is the node's experiment-network address (for rt1: the one on the
bottleneck link, which is how its interface is found).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from lxml import etree

from ccbench.errors import CcbenchError
from ccbench.exec_ssh import SshTarget

ROLE = re.compile(r"^(s\d+|r\d+|rt1|rt2|dl)(?:-d(\d+))?$")


@dataclass(frozen=True)
class Node:
    name: str
    target: SshTarget
    os: str = "linux"
    address: str | None = None


@dataclass(frozen=True)
class Inventory:
    dumbbells: dict[int, dict[str, Node]]
    sudo: bool = False
    source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def dumbbell(self, n: int) -> dict[str, Node]:
        if n not in self.dumbbells:
            raise CcbenchError(f"{self.source}: no dumbbell {n} (have {sorted(self.dumbbells)})")
        return self.dumbbells[n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ssh": {"sudo": self.sudo},
            "dumbbells": {
                d: {
                    n.name: {
                        "host": n.target.host,
                        "port": n.target.port,
                        **({"user": n.target.user} if n.target.user else {}),
                        "os": n.os,
                        **({"address": n.address} if n.address else {}),
                    }
                    for n in nodes.values()
                }
                for d, nodes in sorted(self.dumbbells.items())
            },
        }


def load(path: str | Path) -> Inventory:
    p = Path(path)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such inventory (make one: ccbench testbed inventory)")
    data = yaml.safe_load(p.read_text()) or {}
    ssh = data.get("ssh") or {}
    dbs: dict[int, dict[str, Node]] = {}
    for d, nodes in (data.get("dumbbells") or {}).items():
        dbs[int(d)] = {}
        for name, n in (nodes or {}).items():
            if not ROLE.match(name) or "-d" in name:
                raise CcbenchError(f"{p}: dumbbell {d}: '{name}' is not a role (s1, rt1, r1 ...)")
            if "host" not in n:
                raise CcbenchError(f"{p}: dumbbell {d}: {name}: no host")
            target = SshTarget(
                host=str(n["host"]),
                user=n.get("user", ssh.get("user")),
                port=int(n.get("port", ssh.get("port", 22))),
                identity=n.get("identity", ssh.get("identity")),
                options=tuple(ssh.get("options", [])),
            )
            dbs[int(d)][name] = Node(name, target, n.get("os", "linux"), n.get("address"))
    if not dbs:
        raise CcbenchError(f"{p}: no dumbbells in the inventory")
    return Inventory(dbs, bool(ssh.get("sudo", False)), str(p))


def from_manifest(xml: bytes, source: str = "manifest") -> Inventory:
    """Roles, SSH logins and experiment addresses from a GENI v3 manifest RSpec."""
    try:
        root = etree.fromstring(xml)
    except etree.XMLSyntaxError as e:
        raise CcbenchError(f"{source}: not XML ({e})") from e
    dbs: dict[int, dict[str, Node]] = {}
    seen = []
    for node in root.iter("{*}node"):
        cid = node.get("client_id", "")
        seen.append(cid)
        m = ROLE.match(cid)
        if not m:
            continue
        role, d = m.group(1), int(m.group(2) or 1)
        login = next(iter(node.iter("{*}login")), None)
        if login is None:
            raise CcbenchError(f"{source}: node {cid} has no <login> (is this a manifest?)")
        image = " ".join(i.get("name", "") for i in node.iter("{*}disk_image"))
        addrs = {
            (iface.get("client_id") or ""): ip.get("address")
            for iface in node.iter("{*}interface")
            for ip in iface.iter("{*}ip")
        }
        address = _pick_address(role, addrs)
        target = SshTarget(
            host=login.get("hostname", ""),
            user=login.get("username"),
            port=int(login.get("port", "22")),
        )
        # The OS: the start-up script profile.py chose for it says it best (a custom
        # image's name need not); else the image name.
        commands = " ".join(e.get("command", "") for e in node.iter("{*}execute"))
        freebsd = "setup-freebsd-sender.sh" in commands or (
            "setup-linux-host.sh" not in commands and "FBSD" in image.upper()
        )
        dbs.setdefault(d, {})[role] = Node(role, target, "freebsd" if freebsd else "linux", address)
    if not dbs:
        raise CcbenchError(
            f"{source}: no dumbbell roles among its nodes ({', '.join(seen) or 'none'}); "
            "expected s1.., rt1, rt2, r1.. as profile.py names them"
        )
    for d, nodes in dbs.items():
        missing = [r for r in ("s1", "rt1", "rt2", "r1") if r not in nodes]
        if missing:
            raise CcbenchError(f"{source}: dumbbell {d} lacks {', '.join(missing)}")
    return Inventory(dbs, sudo=True, source=source)


def _pick_address(role: str, addrs: dict[str, str | None]) -> str | None:
    # Routers have two experiment interfaces; the bottleneck one is on the core link.
    if role in ("rt1", "rt2"):
        for cid, a in addrs.items():
            if cid.endswith(":core") and a:
                return a
    vals = [a for a in addrs.values() if a]
    return vals[0] if vals else None


def pairs(nodes: dict[str, Node]) -> int:
    n = 0
    while f"s{n + 1}" in nodes and f"r{n + 1}" in nodes:
        n += 1
    return n
