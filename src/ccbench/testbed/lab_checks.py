"""What a lab's hosts are checked for, as argv plans and readers: before `up` changes
anything (a root or ingress qdisc someone configured, a program missing: ccbench.testbed.lab
refuses then, having changed nothing), and after `down` (each `Change`'s `check`: exits 0
once it is put back). Nothing here runs a command; every value is one argv element.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ccbench.hosts.base import Argv


@dataclass(frozen=True)
class Change:
    """One thing ccbench changed on a host (`what`, for people), how it is put back
    (`undo`: argv lists run in order; each may find its change already gone) and how
    that is checked (`check`: argv lists that each exit 0 once it is back, run by
    `down` before it says "as found"). The plans that make them: testbed.lab_plans."""

    node: str
    what: str
    undo: tuple[tuple[str, ...], ...]
    check: tuple[tuple[str, ...], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "what": self.what, "undo": [list(a) for a in self.undo],
                "check": [list(a) for a in self.check]}  # fmt: skip

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Change:
        return Change(str(d["node"]), str(d["what"]), _argvs_of(d["undo"]),
                      _argvs_of(d.get("check") or []))  # fmt: skip


def _argvs_of(v: Any) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(map(str, a)) for a in v)


# --- before `up`: an interface's root qdisc must be the kernel's default --------------
QDISC_SHOW = ("tc", "-j", "qdisc", "show", "dev")


def foreign_root(qdisc_json: str, dev: str) -> str | None:
    """A root qdisc someone configured on `dev` (not the kernel's default, which has
    handle 0: and is what deleting a root qdisc brings back), as "kind handle"; None when
    the root is a default one. ccbench replaces only defaults, so `down` restores exactly
    what it found."""
    try:
        qdiscs = json.loads(qdisc_json or "[]")
    except ValueError:
        return f"unreadable ({qdisc_json.strip()[:60]!r})"
    for q in qdiscs if isinstance(qdiscs, list) else []:
        if isinstance(q, dict) and q.get("root") and q.get("handle") not in ("0:", None):
            return f"{q.get('kind')} {q.get('handle')}"
    return None


def ingress_present(qdisc_json: str) -> bool:
    try:
        qdiscs = json.loads(qdisc_json or "[]")
    except ValueError:
        return True  # unreadable: do not touch it
    return any(isinstance(q, dict) and q.get("kind") in ("ingress", "clsact") for q in qdiscs)


# --- checks that a change is put back: each exits 0 when it is ----------------------
# `$@` fails: a rule, a link, a table that must be gone (iptables -C, ip link show, ...).
_ABSENT = '! "$@" >/dev/null 2>&1'
# sysctl $1 reads $2 again (whitespace as one space, as sysctl_restore writes it).
_SYSCTL_IS = 'set -f; [ "$(echo $(sysctl -n "$1" 2>/dev/null))" = "$2" ]'
# $1's root qdisc is a kernel default again (handle 0:, what deleting a root brings back).
_ROOT_DEFAULT = 'tc qdisc show dev "$1" root | grep -q "^qdisc [^ ]* 0: "'
_NO_INGRESS = '[ -z "$(tc qdisc show dev "$1" ingress 2>/dev/null)" ]'


def absent(argv: Argv) -> Argv:
    return ["sh", "-c", _ABSENT, "ccbench-absent", *argv]


def sysctl_is(key: str, value: str) -> Argv:
    return ["sh", "-c", _SYSCTL_IS, "ccbench-sysctl", key, " ".join(value.split())]


def root_default(dev: str) -> Argv:
    return ["sh", "-c", _ROOT_DEFAULT, "ccbench-qdisc", dev]


def no_ingress(dev: str) -> Argv:
    return ["sh", "-c", _NO_INGRESS, "ccbench-qdisc", dev]


# Exits 0 when every program named is there (a check before `up` changes anything).
_HAS = 'for p in "$@"; do command -v "$p" >/dev/null 2>&1 || { echo "$p"; exit 1; }; done'


def has_programs(*programs: str) -> Argv:
    """Prints the first one missing, and fails, if any is."""
    return ["sh", "-c", _HAS, "ccbench-has", *programs]


def removed_by(changes: Iterable[Change]) -> set[tuple[str, str, str]]:
    """(node, dev, "root" or "ingress") for each qdisc these changes' undo deletes: a
    qdisc ccbench put there, which the `up` that puts them back first may replace."""
    out = set()
    for c in changes:
        for a in c.undo:
            if a[:3] == ("tc", "qdisc", "del") and len(a) == 6 and a[3] == "dev":
                out.add((c.node, a[4], a[5]))
    return out
