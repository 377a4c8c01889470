"""What a node must have before a run starts anything: programs on its PATH and kernel
features, as the instruments and probe tools declare them (their `needs`). The run asks
each node once, with one argv (`check_argv`), and refuses in one line naming every tool
and the node that lacks it (`refusal`), before any process of the run starts.

A run that found out only when a tool's first read failed would have spent its traffic
(flent's runners likewise find their binaries before a test: flent/runners.py,
find_binary)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ccbench.errors import CcbenchError
from ccbench.exec import Executor


@dataclass(frozen=True)
class Needs:
    """Programs a node runs (found by `command -v`) and kernel features (FEATURES)."""

    programs: tuple[str, ...] = ()
    features: tuple[str, ...] = ()

    def __or__(self, other: Needs) -> Needs:
        return Needs(tuple(dict.fromkeys((*self.programs, *other.programs))),
                     tuple(dict.fromkeys((*self.features, *other.features))))  # fmt: skip


NOTHING = Needs()
# Kernel features by name, each a test in sh that succeeds when the node has it.
FEATURES = {
    # the kernel can mount it (tcp_probe mounts it when it is not)
    "tracefs": "grep -qw tracefs /proc/filesystems",
    # FreeBSD: the logger instruments.siftr will start, in its order (hosts.freebsd
    # siftr2_probe_plan, then siftr_start's kldload): siftr2's tree, else siftr(4) in the
    # kernel (kldstat -q -m: modfind, sbin/kldstat/kldstat.c) or loaded now (kldload -n),
    # before any traffic rather than after the servers and clients started
    "siftr": (
        "sysctl -N net.inet.siftr2 >/dev/null 2>&1 || kldload -n siftr2 2>/dev/null || "
        "kldstat -q -m siftr || kldload -n siftr 2>/dev/null"
    ),
    # FreeBSD: BBLog's kernel side, `options TCP_BLACKBOX` (the net.inet.tcp.bb tree of
    # sys/netinet/tcp_log_buf.c, whose log_auto_all instruments.bblog sets)
    "tcp_blackbox": "sysctl -N net.inet.tcp.bb.log_auto_all >/dev/null 2>&1",
    # $EPOCHREALTIME (bash 5.0), which the Linux sampler loops time themselves with
    # (hosts.linux SS_LOOP, QDISC_LOOP); older bash leaves it unset
    "bash5": "bash -c '[ \"${BASH_VERSINFO[0]}\" -ge 5 ]' 2>/dev/null",
}
FEATURE = "feature:"  # how a feature is told from a program in the check's arguments
# Prints each argument the node lacks, one a line; names come in as arguments, the
# tests are this module's constants.
CHECK_SH = (
    'for t; do case "$t" in '
    + "".join(f'{FEATURE}{name}) {test} || echo "$t";; ' for name, test in FEATURES.items())
    + f'{FEATURE}*) echo "$t";; '
    + '*) command -v "$t" >/dev/null 2>&1 || echo "$t";; '
    + "esac; done"
)


@dataclass(frozen=True)
class Need:
    """`node` (asked through `ex`) needs `needs` for `user` (an instrument's name,
    "probe fping", "the flows")."""

    node: str
    ex: Executor
    needs: Needs
    user: str


def check_argv(needs: Needs) -> list[str]:
    """The one command that asks a node for everything in `needs`."""
    unknown = [f for f in needs.features if f not in FEATURES]
    if unknown:
        raise CcbenchError(f"no test for kernel feature {', '.join(unknown)}")
    return ["sh", "-c", CHECK_SH, "ccbench-needs", *needs.programs,
            *(FEATURE + f for f in needs.features)]  # fmt: skip


def lacking(ex: Executor, needs: Needs) -> list[str]:
    """What of `needs` the node behind `ex` lacks (features by their names)."""
    if not needs.programs and not needs.features:
        return []
    # Asked where the run will start its tools (with `tools: container`, the image);
    # 120 s: that may start a container first.
    res = ex.run_where_tools_run(check_argv(needs), check=False, timeout=120.0)
    if not res.ok:
        raise CcbenchError(f"{ex.name}: could not check for {', '.join(needs.programs)} "
                           f"({(res.stderr or res.stdout).strip()[:120]})")  # fmt: skip
    asked = {*needs.programs, *needs.features}
    return [t for line in res.stdout.split() if (t := line.removeprefix(FEATURE)) in asked]


def refusal(wanted: Iterable[Need]) -> str | None:
    """Ask each node once for all it needs; the one line that refuses the run (each
    node, what it lacks and who needs it), None when every node has everything."""
    per_node: dict[str, list[Need]] = {}
    for w in wanted:
        per_node.setdefault(w.node, []).append(w)
    out = []
    for node, ws in per_node.items():
        need = NOTHING
        for w in ws:
            need |= w.needs
        for t in lacking(ws[0].ex, need):
            users = dict.fromkeys(w.user for w in ws
                                  if t in (*w.needs.programs, *w.needs.features))  # fmt: skip
            out.append(f"{node} has no {t} (needed by {', '.join(users)})")
    return "; ".join(out) + "; nothing was started" if out else None
