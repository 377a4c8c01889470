"""An endpoint's host settings as argv plans and readers, one class per OS: ccbench's
baseline, the data interface found by its address, sysctls and offloads read, set and
put back. Plans only (an Executor runs them: ccbench.host_apply), so every command is
exactly testable without the OS at hand.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from ccbench.errors import CcbenchError
from ccbench.exec import Executor
from ccbench.host_settings import RoleSettings
from ccbench.hosts.base import SOCKBUF_MAX, Argv

IFNAME = re.compile(r"[A-Za-z0-9_.@-]{1,15}")  # IFNAMSIZ 16 on both OSes


@dataclass(frozen=True)
class InterfaceState:
    """One interface as its OS reports it: MTU, and each offload ccbench knows by its own
    name as 'on' or 'off', '[fixed]' where the OS says it cannot be changed."""

    name: str
    mtu: int | None
    offloads: dict[str, str] = field(default_factory=dict)

    def is_on(self, offload: str) -> bool | None:
        v = self.offloads.get(offload)
        return None if v is None else v.startswith("on")

    def fixed(self, offload: str) -> bool:
        return self.offloads.get(offload, "").endswith("[fixed]")


def _dev(dev: str) -> str:
    if not IFNAME.fullmatch(dev):
        raise CcbenchError(f"bad interface name {dev!r}")
    return dev


class OsSettings:
    """What one OS offers; subclasses fill every method."""

    os: ClassVar[str]
    # ccbench's offload names this OS can switch, and the word that switches each
    switches: ClassVar[dict[str, str]]

    def baseline(self, *, netns_local: bool) -> RoleSettings:
        """ccbench's own tuning of an endpoint (what `tune` sets at `up`): the seeds'."""
        raise NotImplementedError

    def tune(self, *, netns_local: bool) -> list[Argv]:
        return [self.sysctl_write(k, v) for k, v in self.baseline(netns_local=netns_local).sysctl]

    def addresses(self) -> Argv:
        """Every interface with its addresses (read by `interface_of`)."""
        raise NotImplementedError

    def interface_of(self, text: str, addr: str) -> str | None:
        raise NotImplementedError

    def sysctl_read(self, name: str) -> Argv:
        return ["sysctl", "-n", name]

    def sysctl_write(self, name: str, value: str) -> Argv:
        raise NotImplementedError

    def interface_read(self, dev: str) -> list[Argv]:
        raise NotImplementedError

    def interface_state(self, dev: str, outputs: list[str]) -> InterfaceState:
        """The outputs of `interface_read(dev)`, in order; ValueError if they do not read."""
        raise NotImplementedError

    def offloads_set(self, dev: str, offloads: Mapping[str, bool]) -> list[Argv]:
        raise NotImplementedError

    def unsupported(self, offloads: Mapping[str, bool]) -> list[str]:
        return [k for k in offloads if k not in self.switches]


def same_value(asked: str, found: str) -> bool:
    """sysctl values compared as their words (Linux prints tcp_rmem tab-separated)."""
    return asked.split() == found.split()


class LinuxSettings(OsSettings):
    os = "linux"
    # ethtool -K feature words (ethtool.c off_flag_def: tso gso gro lro rx tx)
    switches = {"tso": "tso", "gso": "gso", "gro": "gro", "lro": "lro", "rxcsum": "rx",
                "txcsum": "tx"}  # fmt: skip
    # `ethtool -k` summary lines (single features say "[fixed]" themselves)
    LINES = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
             "generic-receive-offload": "gro", "large-receive-offload": "lro",
             "rx-checksumming": "rxcsum", "tx-checksumming": "txcsum"}  # fmt: skip
    # The group features' own parts: fixed when every part is
    PARTS = {"tso": ("tx-tcp-segmentation",), "txcsum": ("tx-checksum-ipv4",
             "tx-checksum-ip-generic", "tx-checksum-ipv6")}  # fmt: skip

    def baseline(self, *, netns_local: bool) -> RoleSettings:
        sysctl = {
            "net.ipv4.tcp_rmem": f"4096 131072 {SOCKBUF_MAX}",
            "net.ipv4.tcp_wmem": f"4096 16384 {SOCKBUF_MAX}",
            "net.ipv4.tcp_no_metrics_save": "1",
        }
        if not netns_local:
            # Host-wide knobs: read-only inside a namespace, so only on real hosts.
            sysctl |= {"net.core.rmem_max": str(SOCKBUF_MAX), "net.core.wmem_max": str(SOCKBUF_MAX)}
        offloads = {"tso": False, "gso": False, "gro": False}
        return RoleSettings(tuple(sysctl.items()), tuple(sorted(offloads.items())))

    def addresses(self) -> Argv:
        return ["ip", "-j", "addr", "show"]

    def interface_of(self, text: str, addr: str) -> str | None:
        try:
            links = json.loads(text)
        except ValueError:
            return None
        for link in links if isinstance(links, list) else []:
            for a in link.get("addr_info", []) if isinstance(link, dict) else []:
                if isinstance(a, dict) and a.get("local") == addr:
                    return str(link.get("ifname"))
        return None

    def sysctl_write(self, name: str, value: str) -> Argv:
        return ["sysctl", "-w", f"{name}={value}"]

    def interface_read(self, dev: str) -> list[Argv]:
        return [["ip", "-j", "link", "show", "dev", _dev(dev)], ["ethtool", "-k", dev]]

    def interface_state(self, dev: str, outputs: list[str]) -> InterfaceState:
        link, features = outputs
        try:
            mtu = json.loads(link)[0]["mtu"]
        except (ValueError, LookupError, TypeError):
            raise ValueError(f"{dev}: ip -j link show: no MTU") from None
        offloads = self.offloads_of(features)
        if not offloads:
            raise ValueError(f"{dev}: ethtool -k: no offload lines")
        return InterfaceState(dev, int(mtu), offloads)

    def offloads_of(self, features: str) -> dict[str, str]:
        """`ethtool -k` -> {tso, gso, ...: the state as printed, 'on' or 'off'}, with
        ' [fixed]' added where every part of a group feature is fixed (a summary line
        does not say it: a macvlan's tso reads 'on [fixed]')."""
        values: dict[str, str] = {}
        for line in features.splitlines():
            k, _, v = line.strip().partition(":")
            values[k] = v.strip()
        offloads = {}
        for line, name in self.LINES.items():
            if line not in values:
                continue
            v = values[line]
            parts = [values[p] for p in self.PARTS.get(name, ()) if p in values]
            if parts and all(p.endswith("[fixed]") for p in parts) and "[fixed]" not in v:
                v += " [fixed]"
            offloads[name] = v
        return offloads

    def offloads_set(self, dev: str, offloads: Mapping[str, bool]) -> list[Argv]:
        words = [w for k, on in offloads.items() for w in (self.switches[k], "on" if on else "off")]
        return [["ethtool", "-K", _dev(dev), *words]] if words else []


class FreeBSDSettings(OsSettings):
    os = "freebsd"
    # ifconfig(8) words (sbin/ifconfig/ifconfig.c DEF_CMD "tso" IFCAP_TSO = TSO4|TSO6,
    # "lro", "rxcsum", "txcsum"); FreeBSD has no GSO or GRO switch (its software LRO is
    # tcp_lro, switched by `lro`).
    switches = {"tso": "tso", "lro": "lro", "rxcsum": "rxcsum", "txcsum": "txcsum"}
    # The IFCAP bit names `ifconfig -m` prints in options=/capabilities= (IFCAPBITS)
    BITS = {"tso": "TSO4", "lro": "LRO", "rxcsum": "RXCSUM", "txcsum": "TXCSUM"}

    def baseline(self, *, netns_local: bool) -> RoleSettings:
        # The seeds' /etc/sysctl.conf (seed 000/001), in its order: maxsockbuf before the
        # per-buffer maxima that may not exceed it.
        sysctl = {"net.inet.tcp.hostcache.enable": "0", "kern.ipc.maxsockbuf": str(SOCKBUF_MAX),
                  "net.inet.tcp.sendbuf_max": str(SOCKBUF_MAX),
                  "net.inet.tcp.recvbuf_max": str(SOCKBUF_MAX)}  # fmt: skip
        offloads = {"tso": False, "lro": False, "rxcsum": False, "txcsum": False}
        return RoleSettings(tuple(sysctl.items()), tuple(sorted(offloads.items())))

    def addresses(self) -> Argv:
        return ["ifconfig", "-a"]

    def interface_of(self, text: str, addr: str) -> str | None:
        current = None
        for line in text.splitlines():
            if line and not line[0].isspace():
                current = line.split(":", 1)[0]
            elif line.split()[:2] == ["inet", addr]:
                return current
        return None

    def sysctl_write(self, name: str, value: str) -> Argv:
        return ["sysctl", f"{name}={value}"]

    def interface_read(self, dev: str) -> list[Argv]:
        return [["ifconfig", "-m", _dev(dev)]]

    def interface_state(self, dev: str, outputs: list[str]) -> InterfaceState:
        """`ifconfig -m DEV`: `mtu N` on the first line, options=HEX<BITS> (enabled) and
        capabilities=HEX<BITS> (what the driver can switch): sbin/ifconfig/ifconfig.c
        status() printb("options", ...) and, with -m, printb("capabilities", ...)."""
        text = outputs[0]
        m = re.search(r"\bmtu (\d+)", text)
        if m is None:
            raise ValueError(f"{dev}: ifconfig -m: no mtu")
        enabled, capable = _bits(text, "options"), _bits(text, "capabilities")
        offloads = {}
        for name, bit in self.BITS.items():
            v = "on" if bit in enabled else "off"
            offloads[name] = v if bit in capable else f"{v} [fixed]"
        return InterfaceState(dev, int(m.group(1)), offloads)

    def offloads_set(self, dev: str, offloads: Mapping[str, bool]) -> list[Argv]:
        words = [("" if on else "-") + self.switches[k] for k, on in offloads.items()]
        return [["ifconfig", _dev(dev), *words]] if words else []


def _bits(text: str, key: str) -> set[str]:
    m = re.search(rf"\b{key}=[0-9a-fA-F]+<([^>]*)>", text)
    return set(m.group(1).split(",")) if m else set()


REGISTRY: dict[str, OsSettings] = {c.os: c() for c in (LinuxSettings, FreeBSDSettings)}


def for_os(os_name: str) -> OsSettings:
    try:
        return REGISTRY[os_name]
    except KeyError:
        raise CcbenchError(f"host settings: no plans for OS {os_name!r}") from None


@dataclass
class EndpointReading:
    """What one endpoint reported, as read (raw/host-settings.json holds one per node):
    its data interface (the one holding its data address: never the one ssh runs over),
    that interface's read commands' outputs, and each sysctl's value (None: refused)."""

    role: str
    os: str
    address: str
    interface: str | None = None
    link: list[str] = field(default_factory=list)
    sysctl: dict[str, str | None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def state(self) -> InterfaceState | None:
        """The interface as parsed; None (and an error) where it did not read."""
        if self.interface is None:
            return None
        try:
            return for_os(self.os).interface_state(self.interface, self.link)
        except ValueError as e:
            self.errors.append(str(e))
            return None


def read_endpoint(
    ex: Executor, plans: OsSettings, role: str, addr: str, sysctls: Iterable[str]
) -> EndpointReading:
    """Read an endpoint's data interface and the named sysctls; nothing raises."""
    out = EndpointReading(role, plans.os, addr)
    res = ex.run(plans.addresses(), check=False)
    dev = plans.interface_of(res.stdout, addr) if res.ok else None
    if dev is None:
        out.errors.append(f"no interface holds the data address {addr}")
    else:
        out.interface = dev
        for argv in plans.interface_read(dev):
            r = ex.run(argv, check=False)
            out.link.append(r.stdout if r.ok else "")
            if not r.ok:
                out.errors.append(f"{' '.join(argv)}: {_first(r.stderr)}")
    for name in sysctls:
        r = ex.run(plans.sysctl_read(name), check=False)
        out.sysctl[name] = r.stdout.strip() if r.ok and r.stdout.strip() else None
        if out.sysctl[name] is None:
            out.errors.append(f"sysctl {name}: {_first(r.stderr) or 'no value'}")
    return out


def _first(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
