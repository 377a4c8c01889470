"""What a run asks of its endpoint hosts besides the congestion control: sysctls and
offloads per role (senders, receivers) and, for a variant, the path MTU.

Data only. ccbench's own tuning is the baseline every run starts from
(`hosts.settings`, per OS); a config's top-level `host:` changes it for every variant
and a variant's `host:` for its runs. A run's spec holds what was asked beyond the
baseline (so runs asked before host settings existed keep their ids); the OS drivers
plan how to set, read back and put back (ccbench.hosts.settings).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccbench.errors import CcbenchError

ROLES = ("senders", "receivers")
# Offloads by ccbench's names; each OS maps them to its own (hosts.settings).
OFFLOADS = ("tso", "gso", "gro", "lro", "rxcsum", "txcsum")
# sysctl(8) names on Linux (net.ipv4.tcp_rmem) and FreeBSD (kern.ipc.maxsockbuf): dotted
# words. Checked here because a name becomes an argv element and a raw record key.
SYSCTL_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z0-9_-]+)+")
# A value is one line of printable text (Linux tcp_rmem's three numbers included).
SYSCTL_VALUE = re.compile(r"[A-Za-z0-9_.:, \t/+-]{1,200}")
# Firewalls a ruleset may be written for (hosts.firewall plans each).
FIREWALLS = ("nftables", "pf", "ipfw")
RULES_MAX = 20000  # characters of a ruleset


@dataclass(frozen=True)
class Firewall:
    """A ruleset loaded on a role's hosts while the run runs: its firewall and its text
    (handed to the tool on stdin, never through a shell)."""

    kind: str
    rules: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "rules": self.rules}

    @classmethod
    def from_dict(cls, d: Any, where: str) -> Firewall:
        if not isinstance(d, Mapping) or set(d) != {"kind", "rules"}:
            raise CcbenchError(f"{where}: needs exactly kind and rules")
        if d["kind"] not in FIREWALLS:
            raise CcbenchError(f"{where}.kind: {d['kind']!r} is not one of {', '.join(FIREWALLS)}")
        rules = d["rules"]
        if not isinstance(rules, str) or not rules.strip() or len(rules) > RULES_MAX:
            raise CcbenchError(f"{where}.rules: a ruleset of 1..{RULES_MAX} characters")
        return cls(d["kind"], rules)


def _on(v: Any, where: str) -> bool:
    """YAML reads on/off as booleans; the strings are accepted too."""
    if isinstance(v, bool):
        return v
    if v in ("on", "off"):
        return v == "on"
    raise CcbenchError(f"{where}: {v!r} is not on or off")


@dataclass(frozen=True)
class RoleSettings:
    """One role's settings: sysctl name -> value, offload -> on; each sorted by name."""

    sysctl: tuple[tuple[str, str], ...] = ()
    offloads: tuple[tuple[str, bool], ...] = ()
    # FreeBSD boot tunables (/boot/loader.conf): they need a reboot, so runs wait for them
    loader: tuple[tuple[str, str], ...] = ()
    firewall: Firewall | None = None

    @property
    def empty(self) -> bool:
        return not self.sysctl and not self.offloads and not self.loader and self.firewall is None

    def over(self, base: RoleSettings) -> RoleSettings:
        """`base` with these settings in place of its own."""
        return RoleSettings(
            tuple(sorted((dict(base.sysctl) | dict(self.sysctl)).items())),
            tuple(sorted((dict(base.offloads) | dict(self.offloads)).items())),
            tuple(sorted((dict(base.loader) | dict(self.loader)).items())),
            self.firewall if self.firewall is not None else base.firewall,
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.sysctl:
            d["sysctl"] = dict(self.sysctl)
        if self.offloads:
            d["offloads"] = {k: "on" if v else "off" for k, v in self.offloads}
        if self.loader:
            d["loader"] = dict(self.loader)
        if self.firewall is not None:
            d["firewall"] = self.firewall.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str) -> RoleSettings:
        unknown = set(d) - {"sysctl", "offloads", "loader", "firewall"}
        if unknown:
            raise CcbenchError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        sysctl = _named_values(d.get("sysctl") or {}, f"{where}.sysctl")
        loader = _named_values(d.get("loader") or {}, f"{where}.loader")
        offloads = {}
        for name, value in (d.get("offloads") or {}).items():
            if name not in OFFLOADS:
                known = ", ".join(OFFLOADS)
                raise CcbenchError(f"{where}.offloads: {name!r} is not one of {known}")
            offloads[name] = _on(value, f"{where}.offloads.{name}")
        fw = d.get("firewall")
        firewall = Firewall.from_dict(fw, f"{where}.firewall") if fw is not None else None
        return cls(tuple(sorted(sysctl.items())), tuple(sorted(offloads.items())),
                   tuple(sorted(loader.items())), firewall)  # fmt: skip


def _named_values(d: Mapping[str, Any], where: str) -> dict[str, str]:
    """sysctl or loader tunable name -> value, each checked (they become argv elements and
    lines of a file)."""
    out = {}
    for name, value in d.items():
        text = str(value) if not isinstance(value, bool) else str(int(value))
        if not SYSCTL_NAME.fullmatch(name):
            raise CcbenchError(f"{where}: {name!r} is not a sysctl name")
        if not SYSCTL_VALUE.fullmatch(text):
            raise CcbenchError(f"{where}.{name}: {text!r} is not a sysctl value")
        out[name] = " ".join(text.split())
    return out


@dataclass(frozen=True)
class HostSettings:
    """What a run asks of its endpoints beyond ccbench's baseline; `mtu`: a variant's path
    MTU (None: the topology's)."""

    senders: RoleSettings = field(default_factory=RoleSettings)
    receivers: RoleSettings = field(default_factory=RoleSettings)
    mtu: int | None = None

    @property
    def empty(self) -> bool:
        return self.senders.empty and self.receivers.empty and self.mtu is None

    def role(self, name: str) -> RoleSettings:
        return self.senders if name == "senders" else self.receivers

    def over(self, base: HostSettings) -> HostSettings:
        """`base` (the config's top level) with these (a variant's) in place of its own."""
        return HostSettings(self.senders.over(base.senders), self.receivers.over(base.receivers),
                            self.mtu if self.mtu is not None else base.mtu)  # fmt: skip

    def without_mtu(self) -> HostSettings:
        return HostSettings(self.senders, self.receivers)

    def to_dict(self) -> dict[str, Any]:
        """As a spec and matrix.json hold it: only what is set ({} when nothing is)."""
        d: dict[str, Any] = {r: s for r in ROLES if (s := self.role(r).to_dict())}
        if self.mtu is not None:
            d["mtu"] = self.mtu
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: str = "host") -> HostSettings:
        """A config's or a spec's `host` mapping; one line naming what is wrong."""
        d = d or {}
        unknown = set(d) - {*ROLES, "mtu"}
        if unknown:
            raise CcbenchError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        mtu = d.get("mtu")
        if mtu is not None and not (isinstance(mtu, int) and 576 <= mtu <= 9000):
            raise CcbenchError(f"{where}.mtu: {mtu!r} is not an MTU in 576..9000")
        senders, receivers = (RoleSettings.from_dict(d.get(r) or {}, f"{where}.{r}") for r in ROLES)
        return cls(senders, receivers, mtu)

    def describe(self) -> str:
        """One line for `ccbench matrix` and the report: what differs from the baseline."""
        parts = []
        for r in ROLES:
            s = self.role(r)
            items = [f"{k}={v}" for k, v in s.sysctl]
            items += [f"{k} {'on' if v else 'off'}" for k, v in s.offloads]
            items += [f"loader {k}={v}" for k, v in s.loader]
            items += [f"{s.firewall.kind} ruleset"] if s.firewall else []
            if items:
                parts.append(f"{r}: {', '.join(items)}")
        if self.mtu is not None:
            parts.append(f"MTU {self.mtu}")
        return "; ".join(parts) or "ccbench's baseline"
