"""The rehearsal's RSpecs: profile.py's request, and the manifest Emulab would make of it."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from lxml import etree

from rehearsal.common import MGMT, REPO, Failed

EMULAB = "urn:publicid:IDN+emulab.net+"
NS = {"g": "http://www.geni.net/resources/rspec/3"}
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
DELAY_NS = "http://www.protogeni.net/resources/rspec/ext/delay/1"


def request_rspec(out: Path, scratch: Path, profile_args: list[str]) -> bytes:
    """profile.py's request RSpec for the rehearsal's parameters (standalone mode, as
    `python profile.py --param value ...`; not from the repository root, where
    profile.py would shadow the standard library's `profile`)."""
    cp = subprocess.run(
        [sys.executable, str(REPO / "profile.py"), *profile_args],
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
