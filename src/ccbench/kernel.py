"""The kernel a sender runs: its identity, a short name for tables, and the check of a
variant's `kernel: {label, match}` against it.

A sender's identity is one line built from what its driver's `kernel_identity()` plan
printed (hosts/linux.py, hosts/freebsd.py):
- Linux: `uname -r -v`, then "build-id <hex>" from the GNU build-id note of
  /sys/kernel/notes (read as hex by `od`), where the kernel exposes it;
- FreeBSD: `sysctl -n kern.version kern.ident` (whitespace folded to single spaces),
  then "build-id <hex>" from `sysctl -n kern.build_id` where the kernel has it.
A variant's `match` is a Python regular expression searched (re.search) in that line.
"""

from __future__ import annotations

import re
from typing import Any

from ccbench.reasons import Code, Reason

WAITING_PREFIX = "waiting for kernel"
NT_GNU_BUILD_ID = 3
_UNAME_TAIL = {"GNU/Linux", "x86_64", "aarch64", "i686", "armv7l", "riscv64", "unknown"}


def build_id_from_notes(od_hex: str) -> str | None:
    """The GNU build id in /sys/kernel/notes as `od -An -v -tx1` printed it (ELF notes:
    namesz, descsz, type as 32-bit little-endian words, then name and desc, each padded
    to 4 bytes); None if there is none or the dump is not such a list."""
    try:
        data = bytes(int(b, 16) for b in od_hex.split())
    except ValueError:
        return None
    i = 0
    while i + 12 <= len(data):
        namesz, descsz, ntype = (int.from_bytes(data[i + k : i + k + 4], "little")
                                 for k in (0, 4, 8))  # fmt: skip
        name_end = i + 12 + namesz
        desc = name_end + (-namesz % 4)
        if desc + descsz > len(data):
            return None
        if ntype == NT_GNU_BUILD_ID and data[i + 12 : name_end].rstrip(b"\0") == b"GNU":
            return data[desc : desc + descsz].hex() or None
        i = desc + descsz + (-descsz % 4)
    return None


def _fold(text: str) -> str:
    return " ".join(text.split())


def identity(os_name: str, out: dict[str, str]) -> str:
    """One line naming a sender's kernel, from its kernel_identity() plan's outputs
    (name -> stdout). Empty when nothing was read."""
    base = _fold(out.get("kernel", ""))
    if os_name == "linux":
        bid = build_id_from_notes(out.get("build_id", ""))
    else:
        raw = _fold(out.get("build_id", ""))
        bid = raw if re.fullmatch(r"[0-9a-fA-F]{16,}", raw) else None
    return f"{base} build-id {bid}" if base and bid else base


def short(ident: str) -> str:
    """A few words of an identity for tables: Linux "6.1.0-18-amd64 #1"; FreeBSD
    "14.2-RELEASE" (stock GENERIC) or "14.2-RELEASE #1 D49540" (a build number, and the
    kernel config's name when it is not GENERIC)."""
    words = ident.split()
    if not words:
        return ""
    if words[0] == "FreeBSD" and len(words) > 1:
        out = [words[1]]
        if len(words) > 2 and re.fullmatch(r"#\d+", words[2]):
            out.append(words[2])
        ident_name = words[-1] if "build-id" not in words else words[words.index("build-id") - 1]
        if ident_name != "GENERIC" and ident_name not in out:
            out.append(ident_name)
        return " ".join(out)
    out = [words[0]]
    if len(words) > 1 and re.fullmatch(r"#\d+", words[1]):
        out.append(words[1])
    return " ".join(out)


def from_uname_a(uname_a: str) -> str:
    """Runs made before kernel identities were read: the release and version that
    `uname -a` printed ("Linux host 6.1.0 #1 SMP ... x86_64 GNU/Linux")."""
    words = uname_a.split()
    if len(words) < 3:
        return _fold(uname_a)
    if words[0] == "FreeBSD":
        return _fold(" ".join(words[:1] + words[2:]))
    rest = words[2:]
    while rest and rest[-1] in _UNAME_TAIL:  # machine, processor, platform, OS
        rest = rest[:-1]
    return " ".join(rest)


def matches(pattern: str, ident: str) -> bool:
    return re.search(pattern, ident) is not None


def requirement(variant: dict[str, Any]) -> dict[str, str] | None:
    """{label, match} of a variant that names the kernel it needs, else None."""
    k = variant.get("kernel")
    if isinstance(k, dict) and k.get("match"):
        return {"label": str(k.get("label", "")), "match": str(k["match"])}
    if variant.get("kernel_match"):
        return {"label": str(variant.get("kernel", "")), "match": str(variant["kernel_match"])}
    return None


def waiting_reason(label: str) -> str:
    return f"{WAITING_PREFIX} '{label}'"


def mismatch_reason(node: str, ident: str, variant: str, pattern: str) -> str:
    return f"{node} runs kernel '{ident}', variant '{variant}' needs /{pattern}/"


def check(req: dict[str, str] | None, variant: str, senders: dict[str, str]) -> list[Reason]:
    """Validity reasons: every sender whose identity does not match the variant's
    regex (nothing to check without a requirement)."""
    if not req:
        return []
    return [
        Reason.of(
            Code.KERNEL_MISMATCH,
            mismatch_reason(node, ident, variant, req["match"]),
            node=node,
            kernel=ident,
            match=req["match"],
        )  # fmt: skip
        for node, ident in sorted(senders.items())
        if not matches(req["match"], ident)
    ]


def of_facts(facts: Any) -> dict[str, str]:
    """node -> kernel identity of the senders recorded in a run's facts.json (runs made
    before identities were read: from `uname -a`)."""
    out: dict[str, str] = {}
    senders = facts.get("senders") if isinstance(facts, dict) else None
    if not isinstance(senders, dict):
        return out
    for node, f in senders.items():
        if not isinstance(f, dict):
            continue
        if isinstance(f.get("kernel"), str) and f["kernel"].strip():
            outputs = {k: f[k] for k in ("kernel", "build_id") if isinstance(f.get(k), str)}
            out[node] = identity(str(f.get("os", "linux")), outputs)
        elif isinstance(f.get("uname"), str) and f["uname"].strip():
            out[node] = from_uname_a(f["uname"])
    return out


def summary(
    facts: Any, req: dict[str, str] | None, variant: str, label: str
) -> tuple[dict[str, Any] | None, list[Reason]]:
    """summary.json's `kernel` (the variant's label and regex, each sender's identity
    and short name) and the validity reasons of senders that do not match; (None, [])
    when facts.json recorded no sender."""
    seen = of_facts(facts)
    if not seen:
        return None, []
    doc = {
        "label": req["label"] if req else label,
        "match": req["match"] if req else None,
        "senders": {n: {"identity": i, "short": short(i)} for n, i in sorted(seen.items())},
    }
    return doc, check(req, variant, seen)
