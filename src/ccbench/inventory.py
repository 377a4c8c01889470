"""Hosts inventory for the SSH testbed: roles (s*, rt1, dl, rt2, r*) -> SSH targets.

Made from an Emulab/CloudLab manifest RSpec (`ccbench testbed inventory --manifest`)
or written by hand for any SSH-reachable dumbbell. Format (YAML):

    ssh: {user: alice, identity: ~/.ssh/id_ed25519, sudo: true, options: []}
    dumbbells:
      1:
        s1:  {host: pc401.emulab.net, port: 22, os: freebsd, address: 10.1.1.2}
        rt1: {host: pc402.emulab.net, address: 10.1.2.1}   # bottleneck side address
        rt2: {host: pc403.emulab.net, address: 10.1.2.2}
        r1:  {host: pc404.emulab.net, address: 10.1.3.2}

`address` is the node's experiment-network address (for rt1: the one on the
bottleneck link, which is how its interface is found).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from ccbench import roles, safe
from ccbench.errors import CcbenchError
from ccbench.exec_ssh import SshTarget
from ccbench.roles import BOTTLENECK_ROUTER, DELAY_NODE, FAR_ROUTER, DummynetNode

# A role's name, with its dumbbell's suffix as profile.py names the nodes of dumbbell
# d > 1 (rt1-d2); a hand-written inventory lists roles per dumbbell, without it.
ROLE = re.compile(rf"^({roles.NODE_PATTERN})(?:-d(\d+))?$")
# What an Emulab dumbbell cannot lack (a delay node it may: link-shaping mode).
REQUIRED = (roles.sender(1), BOTTLENECK_ROUTER, FAR_ROUTER, roles.receiver(1))


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
    user: str | None = None  # the ssh login for every node (ssh config decides if None)
    extra: dict[str, Any] = field(default_factory=dict)

    def dumbbell(self, n: int) -> dict[str, Node]:
        if n not in self.dumbbells:
            raise CcbenchError(f"{self.source}: no dumbbell {n} (have {sorted(self.dumbbells)})")
        return self.dumbbells[n]

    def to_dict(self) -> dict[str, Any]:
        return {
            "ssh": {"sudo": self.sudo, **({"user": self.user} if self.user else {})},
            "dumbbells": {
                d: {
                    n.name: {
                        "host": n.target.host,
                        "port": n.target.port,
                        **(
                            {"user": n.target.user}
                            if n.target.user and n.target.user != self.user
                            else {}
                        ),
                        "os": n.os,
                        **({"address": n.address} if n.address else {}),
                    }
                    for n in nodes.values()
                }
                for d, nodes in sorted(self.dumbbells.items())
            },
        }


# dummynet: the delay node (its delay element's name), never logged in to.
DUMMYNET = DummynetNode.name
OSES = ("linux", "freebsd", DUMMYNET)
_SSH_KEYS = {"user", "identity", "sudo", "port", "options"}
_NODE_KEYS = {"host", "port", "user", "identity", "os", "address"}


def _mapping(value: Any, where: str) -> dict[Any, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CcbenchError(f"{where}: not a mapping")
    return value


def _port(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise CcbenchError(f"{where}: port {value!r} is not a number in 1..65535")
    return value


def _node(where: str, name: Any, n: Any, ssh: dict[str, Any], default_port: int) -> Node:
    """One role's entry of a hand-written inventory, checked."""
    if not isinstance(name, str) or not ROLE.fullmatch(name) or "-d" in name:
        raise CcbenchError(f"{where}: '{name}' is not a role (s1, rt1, r1 ...)")
    where = f"{where}: {name}"
    n = _mapping(n, where)
    if set(n) - _NODE_KEYS:
        raise CcbenchError(f"{where}: unknown keys {', '.join(sorted(set(n) - _NODE_KEYS))}")
    if "host" not in n:
        raise CcbenchError(f"{where}: no host")
    os_name = n.get("os", DUMMYNET if name == DELAY_NODE else "linux")
    if os_name not in OSES or (os_name == DUMMYNET) != (name == DELAY_NODE):
        raise CcbenchError(f"{where}: os '{os_name}' (senders and receivers: linux or "
                           "freebsd; dl: dummynet)")  # fmt: skip
    return ssh_node(where, name, n, ssh, default_port, os_name)


def ssh_node(
    where: str, name: str, n: dict[str, Any], ssh: dict[str, Any], default_port: int, os_name: str
) -> Node:
    """A host entry's SSH target and experiment address, checked (also a lab's)."""
    address = n.get("address")
    try:
        if address is not None:
            ipaddress.ip_address(address)
        target = SshTarget(
            host=n["host"],
            user=n.get("user", ssh.get("user")),
            port=_port(n.get("port", default_port), where),
            identity=n.get("identity", ssh.get("identity")),
            options=tuple(ssh.get("options", [])),
        )
    except ValueError:
        raise CcbenchError(f"{where}: address {address!r} is not an IP address") from None
    except CcbenchError as e:
        raise CcbenchError(f"{where}: {e}") from None
    return Node(name, target, os_name, address)


def ssh_section(p: Path, data: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """An inventory's `ssh` section checked, and its default port (also a lab's)."""
    ssh = _mapping(data.get("ssh"), f"{p}: ssh")
    if set(ssh) - _SSH_KEYS:
        raise CcbenchError(f"{p}: ssh: unknown keys {', '.join(sorted(set(ssh) - _SSH_KEYS))}")
    options = ssh.get("options", [])
    if not isinstance(options, list):
        raise CcbenchError(f"{p}: ssh.options: a list of 'Keyword=value' strings")
    if not isinstance(ssh.get("sudo", False), bool):
        raise CcbenchError(f"{p}: ssh.sudo: true or false")
    return ssh, _port(ssh.get("port", 22), f"{p}: ssh")


def load(path: str | Path) -> Inventory:
    """Read and check a whole hosts inventory before any ssh starts: strict YAML, known
    keys, roles, ports, os, host and user names, no node listed twice."""
    from ccbench.config import load_yaml

    p = Path(path)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such inventory (make one: ccbench testbed inventory)")
    data = load_yaml(p)
    unknown = set(data) - {"ssh", "dumbbells"}
    if unknown:
        raise CcbenchError(f"{p}: unknown keys {', '.join(map(str, sorted(unknown, key=str)))}")
    ssh, default_port = ssh_section(p, data)
    dbs: dict[int, dict[str, Node]] = {}
    for d, nodes in _mapping(data.get("dumbbells"), f"{p}: dumbbells").items():
        if isinstance(d, bool) or str(d) not in ("1", "2", "3", "4"):
            raise CcbenchError(f"{p}: dumbbells: '{d}' is not a dumbbell number (1-4)")
        if int(d) in dbs:
            raise CcbenchError(f"{p}: dumbbells: {d} is listed twice")
        dbs[int(d)] = {}
        seen: dict[tuple[str, int], str] = {}
        for name, n in _mapping(nodes, f"{p}: dumbbell {d}").items():
            node = _node(f"{p}: dumbbell {d}", name, n, ssh, default_port)
            key = (node.target.host, node.target.port)
            if key in seen:
                raise CcbenchError(f"{p}: dumbbell {d}: {name}: same host and port as "
                                   f"{seen[key]} ({key[0]}:{key[1]})")  # fmt: skip
            seen[key] = name
            dbs[int(d)][name] = node
    if not dbs:
        raise CcbenchError(f"{p}: no dumbbells in the inventory")
    return Inventory(dbs, bool(ssh.get("sudo", False)), str(p))


# A manifest is data from the network: no entities resolved, no DTD or network access.
_XML = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)


def _ssh_endpoint(node: Any, user: str | None) -> tuple[str, int] | None:
    """(hostname, port) to reach a node: from the <login> of `user` if the manifest lists
    one, else any <login> (every member's has the same host and port), else <host name>.
    The login's username is never taken: it may be another project member's."""
    logins = list(node.iter("{*}login"))
    mine = [g for g in logins if user is not None and g.get("username") == user]
    for g in mine or logins:
        if g.get("hostname"):
            port = g.get("port") or "22"  # text: _port refuses what is not digits
            number = int(port) if re.fullmatch(r"[0-9]{1,5}", port) else port
            return g.get("hostname"), _port(number, f"manifest: node {node.get('client_id')}")
    host = next((h.get("name") for h in node.iter("{*}host") if h.get("name")), None)
    return (host, 22) if host else None


def from_manifest(xml: bytes, source: str = "manifest", user: str | None = None) -> Inventory:
    """Roles, SSH endpoints and experiment addresses from a GENI v3 manifest RSpec.

    `user` is the login name to use (yours); without it ssh's own config decides. The
    delay node (dl) is recorded as what it is, a dummynet bridge: nothing is run there."""
    if user is not None:
        safe.ssh_user(user, "--user")
    try:
        root = etree.fromstring(xml, _XML)
    except etree.XMLSyntaxError as e:
        raise CcbenchError(f"{source}: not XML ({e})") from e
    dbs: dict[int, dict[str, Node]] = {}
    seen = []
    for node in root.iter("{*}node"):
        cid = node.get("client_id", "")
        seen.append(cid)
        m = ROLE.fullmatch(cid)
        if not m:
            continue
        role, d = m.group(1), int(m.group(2) or 1)
        endpoint = _ssh_endpoint(node, user)
        if endpoint is None:
            if role == DELAY_NODE:
                continue  # not logged in to anyway
            raise CcbenchError(f"{source}: node {cid} has neither <login> nor <host> (is this "
                               "the manifest, not the request?)")  # fmt: skip
        image = " ".join(i.get("name", "") for i in node.iter("{*}disk_image"))
        addrs = {
            (iface.get("client_id") or ""): ip.get("address")
            for iface in node.iter("{*}interface")
            for ip in iface.iter("{*}ip")
        }
        address = _pick_address(role, addrs)
        try:
            target = SshTarget(host=endpoint[0], user=user, port=endpoint[1])
        except CcbenchError as e:
            raise CcbenchError(f"{source}: node {cid}: {e}") from None
        # The OS: the start-up script profile.py chose for it says it best (a custom
        # image's name need not); else the image name.
        commands = " ".join(e.get("command", "") for e in node.iter("{*}execute"))
        freebsd = "setup-freebsd-sender.sh" in commands or (
            "setup-linux-host.sh" not in commands and "FBSD" in image.upper()
        )
        os_name = DUMMYNET if role == DELAY_NODE else ("freebsd" if freebsd else "linux")
        dbs.setdefault(d, {})[role] = Node(role, target, os_name, address)
    if not dbs:
        raise CcbenchError(
            f"{source}: no dumbbell roles among its nodes ({', '.join(seen) or 'none'}); "
            "expected s1.., rt1, rt2, r1.. as profile.py names them"
        )
    for d, nodes in dbs.items():
        missing = [r for r in REQUIRED if r not in nodes]
        if missing:
            raise CcbenchError(f"{source}: dumbbell {d} lacks {', '.join(missing)}")
    return Inventory(dbs, sudo=True, source=source, user=user)


def _pick_address(role: str, addrs: dict[str, str | None]) -> str | None:
    # Routers have two experiment interfaces; the bottleneck one is on the core link.
    if role in (BOTTLENECK_ROUTER, FAR_ROUTER):
        for cid, a in addrs.items():
            if cid.endswith(":core") and a:
                return a
    vals = [a for a in addrs.values() if a]
    return vals[0] if vals else None


def pairs_in(path: str, dumbbell: int) -> int:
    """The pairs dumbbell `dumbbell` of inventory `path` holds (testbed.kinds)."""
    return pairs(load(path).dumbbell(dumbbell))


def pairs(nodes: dict[str, Node]) -> int:
    n = 0
    while roles.sender(n + 1) in nodes and roles.receiver(n + 1) in nodes:
        n += 1
    return n
