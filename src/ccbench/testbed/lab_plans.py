"""A lab of your own hosts: what ccbench changes on them, as argv plans, each change
with the plan that puts it back (ccbench.testbed.lab runs them over SSH).

The emulation sits on the receivers, as the seeds had it: delay by netem on the
receiver's interface (egress: the ACK path), by netem on an ifb its ingress is
redirected to (the data path), or by ccbench's own element (ccdelay) fed by NFQUEUE in
the receiver's OUTPUT; loss by iptables `statistic` or nftables `numgen` on INPUT, for
the flows' server ports only (`covered_ports`). Each change carries the argv that put
it back and those that check it is back (lab_checks.Change). Each variation is a class
registered by its name (`DELAY_PLANS`, `LOSS_TOOLS`). Nothing here runs a command: every
value from a config or inventory is one argv element, never part of a shell string.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from ccbench import layout, leftovers
from ccbench.errors import CcbenchError, registered
from ccbench.hosts.base import Argv
from ccbench.hosts.linux import LinuxHost
from ccbench.roles import NoDelay, ReceiverCcdelay, ReceiverNetem, ReceiverNetemIngress
from ccbench.spec import Topology
from ccbench.testbed.lab_checks import absent, no_ingress, root_default

COMMENT = "ccbench"  # on every iptables rule ccbench adds to a lab host (the sweep finds them)
NFT_TABLE = "ccbench"  # the nftables table ccbench owns on a lab host
IFB_DEV = "ccb-ifb0"  # the ifb the ingress delay redirects to
NFQUEUE_NUM = "5201"  # ccdelay's queue at a receiver (a number other tools rarely take)
# On the hosts: ccdelay's pid, log and statistics while a testbed is up (`down` removes
# them, and the directories when nothing else is in them).
STATE_DIR = f"{leftovers.ROOT_DIR}/lab"


def covered_ports(pinned: Iterable[int] = ()) -> tuple[int, int]:
    """The server ports the loss rule and the delay element cover, as one range: every
    flow's (layout.flow_port: BASE_PORT + k, or the port a sender pins, which
    lab_inventory keeps within BASE_PORT .. BASE_PORT + MAX_FLOWS)."""
    ports = [layout.BASE_PORT + 1, layout.BASE_PORT + layout.MAX_FLOWS, *pinned]
    return min(ports), max(ports)


def argvs(*argvs: Argv) -> tuple[tuple[str, ...], ...]:
    return tuple(tuple(a) for a in argvs)


# --- delay at the receiver (a root it takes must be a default one: lab_checks) --------
@dataclass(frozen=True)
class DelayPlan:
    """How one element is put on a receiver's interface `dev` and taken off again."""

    element: ClassVar[str]
    # A root qdisc on `dev` (netem on egress) or an ingress qdisc (ifb redirect).
    takes_root: ClassVar[bool] = False
    takes_ingress: ClassVar[bool] = False
    runs_a_process: ClassVar[bool] = False  # a program on the receiver, not a qdisc
    programs: ClassVar[tuple[str, ...]] = ()  # what its plans run (checked before `up`)

    @classmethod
    def make(cls, binary: str, tb_id: str, ports: tuple[int, int]) -> DelayPlan:
        """The element for a testbed (`binary`, `tb_id`, `ports`: what ccdelay needs)."""
        return cls()

    def needs(self) -> tuple[str, ...]:
        """The programs the receiver must have."""
        return self.programs

    def apply(self, dev: str, delay_ms: float) -> list[Argv]:
        return []

    def undo(self, dev: str) -> list[Argv]:
        return []

    def check(self, dev: str) -> list[Argv]:
        """What exits 0 once `undo` has put `dev` back."""
        return []


def _netem(dev: str, delay_ms: float) -> Argv:
    # limit: netem's default 1000 packets would be a second, hidden bottleneck queue at
    # 1 Gbit/s x 40 ms (5 MB, ~3400 frames): as in hosts.linux.netem_delay.
    return ["tc", "qdisc", "replace", "dev", dev, "root", "netem", "delay", f"{delay_ms:g}ms",
            "limit", "1000000"]  # fmt: skip


@dataclass(frozen=True)
class NetemEgress(DelayPlan):
    element = ReceiverNetem.name
    takes_root = True
    programs = ("tc",)

    def apply(self, dev: str, delay_ms: float) -> list[Argv]:
        return [_netem(dev, delay_ms)]

    def undo(self, dev: str) -> list[Argv]:
        return [["tc", "qdisc", "del", "dev", dev, "root"]]

    def check(self, dev: str) -> list[Argv]:
        return [root_default(dev)]


@dataclass(frozen=True)
class NetemIfb(DelayPlan):
    """Ingress has no qdisc that delays: redirect it to an ifb and delay on the ifb's
    egress (tc-mirred(8), the ifb example of the Linux Foundation's netem page)."""

    element = ReceiverNetemIngress.name
    takes_ingress = True
    programs = ("tc", "ip", "modprobe")

    def apply(self, dev: str, delay_ms: float) -> list[Argv]:
        return [
            ["ip", "link", "add", IFB_DEV, "type", "ifb"],
            ["ip", "link", "set", IFB_DEV, "up"],
            _netem(IFB_DEV, delay_ms),
            ["tc", "qdisc", "add", "dev", dev, "handle", "ffff:", "ingress"],
            ["tc", "filter", "add", "dev", dev, "parent", "ffff:", "protocol", "all",
             "matchall", "action", "mirred", "egress", "redirect", "dev", IFB_DEV],
        ]  # fmt: skip

    def undo(self, dev: str) -> list[Argv]:
        return [["tc", "qdisc", "del", "dev", dev, "ingress"], ["ip", "link", "del", IFB_DEV]]

    def check(self, dev: str) -> list[Argv]:
        return [no_ingress(dev), absent(["ip", "link", "show", IFB_DEV])]

    # The ifb module, when the host had not loaded it (it creates ifb0/ifb1 by default:
    # numifbs=0 makes none but ccbench's own).
    loaded_argv: ClassVar[Argv] = ["test", "-d", "/sys/module/ifb"]
    load_argv: ClassVar[Argv] = ["modprobe", "ifb", "numifbs=0"]
    unload_argv: ClassVar[Argv] = ["modprobe", "-r", "ifb"]


# ccdelay started detached from the SSH session that starts it (it outlives it: it is the
# testbed's, not a run's, so the run's leftover sweep does not end it), its pid written.
# $1 the pid file, $2 the log, the rest its argv: values are positional, never pasted.
CCDELAY_START = 'p=$1 l=$2; shift 2; nohup "$@" >"$l" 2>&1 </dev/null & echo $! >"$p"; echo $!'
# Ends the pid only if it still is a running ccdelay (a pid may be reused after a
# reboot; an ended one may stay a zombie a while under an init that reaps late), waits
# up to 2 s for it to go (SIGKILL then), and removes its files ($2...).
_CCDELAY_IS = (
    'is() { [ "$(cat /proc/$p/comm 2>/dev/null)" = ccdelay ] && '
    "! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; }; "
)
CCDELAY_STOP = (
    "p=$1; shift; " + _CCDELAY_IS + 'if is; then kill "$p"; i=0; '
    'while is && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; is && kill -KILL "$p"; fi; '
    'rm -f "$@"; true'
)
# Exits 0 once the pid is no running ccdelay and none of its files ($2...) is there.
CCDELAY_GONE = (
    "p=$1; shift; "
    + _CCDELAY_IS
    + 'is && exit 1; for f in "$@"; do [ -e "$f" ] && exit 1; done; true'
)
# Fresh statistics: ccdelay writes them on SIGUSR1 (native/ccdelay/README.md, Signals).
CCDELAY_STATS = (
    'rm -f "$2"; kill -USR1 "$1" || exit 1; i=0; '
    'while [ ! -s "$2" ] && [ $i -lt 300 ]; do sleep 0.01; i=$((i+1)); done; cat "$2"'
)
# Waits until the element has bound its queue (its first statistics file).
CCDELAY_READY = (
    'i=0; while [ ! -s "$1" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; test -s "$1"'
)


@dataclass(frozen=True)
class CcdelayAtReceiver(DelayPlan):
    """ACKs (from the flows' server ports) and echo replies leave the receiver through
    NFQUEUE to ccdelay, which holds each for the whole delay asked: the ACK path carries
    it, as netem on the receiver's egress does; ccbench's own SSH is not delayed."""

    runs_a_process = True
    programs = ("iptables",)

    element = ReceiverCcdelay.name
    binary: str = "ccdelay"
    tb_id: str = "ccb"
    ports: tuple[int, int] = covered_ports()  # its ACKs' source ports (covered_ports)

    @classmethod
    def make(cls, binary: str, tb_id: str, ports: tuple[int, int]) -> DelayPlan:
        return cls(binary, tb_id, ports)

    def needs(self) -> tuple[str, ...]:
        return (*self.programs, self.binary)

    def files(self) -> tuple[str, str, str]:
        """(pid file, log, statistics) on the receiver."""
        base = f"{STATE_DIR}/{self.tb_id}-ccdelay"
        return f"{base}.pid", f"{base}.log", f"{base}-stats.json"

    def start(self, delay_ms: float) -> list[Argv]:
        pid, log, stats = self.files()
        return [
            ["mkdir", "-p", STATE_DIR],
            ["rm", "-f", stats],
            ["sh", "-c", CCDELAY_START, "ccbench-ccdelay", pid, log, self.binary, "--queue",
             NFQUEUE_NUM, "--delay-us", str(round(delay_ms * 1000)), "--stats", stats,
             "--rt-prio", "10"],
        ]  # fmt: skip

    def ready(self) -> Argv:
        return ["sh", "-c", CCDELAY_READY, "ccbench-ccdelay", self.files()[2]]

    def rules(self) -> list[Argv]:
        lo, hi = self.ports
        q = ["-m", "comment", "--comment", COMMENT, "-j", "NFQUEUE", "--queue-num", NFQUEUE_NUM]
        return [
            ["iptables", "-w", "-A", "OUTPUT", "-p", "tcp", "--sport", f"{lo}:{hi}", *q],
            ["iptables", "-w", "-A", "OUTPUT", "-p", "icmp", "--icmp-type", "echo-reply", *q],
        ]

    def stop(self, pid: int) -> list[Argv]:
        """Ended, its files removed, and ccbench's directories if nothing else is there."""
        return [["sh", "-c", CCDELAY_STOP, "ccbench-ccdelay", str(pid), *self.files()],
                leftovers.rmdirs_argv(STATE_DIR, leftovers.ROOT_DIR)]  # fmt: skip

    def gone(self, pid: int) -> Argv:
        return ["sh", "-c", CCDELAY_GONE, "ccbench-ccdelay", str(pid), *self.files()]

    def stats(self, pid: int) -> Argv:
        return ["sh", "-c", CCDELAY_STATS, "ccbench-ccdelay", str(pid), self.files()[2]]


# Counters that add up across receivers (native/ccdelay/README.md, Statistics); the
# summary reads these (summarize.delay).
_SUMMED = (("packets_received",), ("packets_released",), ("packets_dropped_late",),
           ("id_gaps",), ("kernel_queue", "queue_full_drops"), ("lateness", "count"),
           ("lateness", "over_threshold"), ("cpu", "user_s"), ("cpu", "system_s"))  # fmt: skip


def merged_stats(per_receiver: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Several receivers' ccdelay statistics as one element's, for the run's checks:
    counters summed, the worst lateness, the mean weighted by packets; each receiver's
    own statistics kept whole under `receivers` (the raw numbers the sums come from).
    ValueError when they are not all ccdelay statistics with the same lateness buckets."""
    if not all(isinstance(s, dict) for s in per_receiver.values()):
        raise ValueError("not ccdelay statistics (a JSON object each)")
    lat = [s.get("lateness") or {} for s in per_receiver.values()]
    if len({json.dumps(x.get("bucket_edges_ms")) for x in lat}) > 1:
        raise ValueError("the receivers' ccdelay lateness buckets differ")
    out = json.loads(json.dumps(next(iter(per_receiver.values()))))
    for path in _SUMMED:
        values = [_at(s, path) for s in per_receiver.values()]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers:
            into = out
            for key in path[:-1]:
                into = into.setdefault(key, {})
            into[path[-1]] = sum(numbers)
    la = out.setdefault("lateness", {})
    counts = [x.get("bucket_counts") or [] for x in lat]
    la["bucket_counts"] = [sum(c) for c in zip(*counts, strict=True)]
    maxes = [x["max_ms"] for x in lat if isinstance(x.get("max_ms"), int | float)]
    la["max_ms"] = max(maxes) if maxes else None
    n = la.get("count") or 0
    la["mean_ms"] = (sum((x.get("mean_ms") or 0) * (x.get("count") or 0) for x in lat) / n
                     if n else None)  # fmt: skip
    la["over_threshold_share"] = (la.get("over_threshold") or 0) / n if n else None
    out["receivers"] = per_receiver
    return out


def _at(d: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        d = d.get(key) if isinstance(d, dict) else None
    return d


@dataclass(frozen=True)
class NoDelayPlan(DelayPlan):
    element = NoDelay.name


DELAY_PLANS: dict[str, type[DelayPlan]] = {
    c.element: c for c in (NetemEgress, NetemIfb, CcdelayAtReceiver, NoDelayPlan)
}


def delay_plan(element: str) -> type[DelayPlan]:
    return registered(DELAY_PLANS, element, "emulation.delay", "element")


# --- loss at the receiver -------------------------------------------------------------
def delete_rule(argv: Argv) -> Argv:
    """An iptables rule's removal: the same rule with -D for -A."""
    return ["-D" if a == "-A" else a for a in argv]


def rule_present(argv: Argv) -> Argv:
    """Exits 0 while the rule is there: the same rule with -C (iptables(8), --check)."""
    return ["-C" if a == "-A" else a for a in argv]


class LossTool:
    """Drops incoming TCP to the flows' server ports at a receiver (seed 001:
    `iptables -A INPUT -p tcp --dport 5201 -m statistic --mode nth --every 100
    --packet 0 -j DROP`); never ccbench's own SSH."""

    name: ClassVar[str]
    # The ledger's key for this tool's counters in a drop snapshot (ccbench.ledger).
    counters_key: ClassVar[str]
    programs: ClassVar[tuple[str, ...]]  # what its plans run (checked before `up`)

    def add(self, topo: Topology, ports: tuple[int, int] | None = None) -> list[Argv]:
        """The rules for `topo`'s loss on server ports `ports` (default covered_ports())."""
        raise NotImplementedError

    def undo(self, added: list[Argv]) -> list[Argv]:
        raise NotImplementedError

    def check(self, added: list[Argv]) -> list[Argv]:
        """What exits 0 once `undo(added)` has removed them."""
        raise NotImplementedError

    def counters(self) -> Argv:
        raise NotImplementedError


class IptablesLoss(LossTool):
    name = "iptables"
    counters_key = "iptables"  # hosts.linux.drop_counters reads it already
    programs = ("iptables", "iptables-save")

    def add(self, topo: Topology, ports: tuple[int, int] | None = None) -> list[Argv]:
        out = []
        for argv in LinuxHost().loss(topo, "INPUT", ports or covered_ports()):
            j = argv.index("-j")
            out.append([*argv[:j], "-m", "comment", "--comment", COMMENT, *argv[j:]])
        return out

    def undo(self, added: list[Argv]) -> list[Argv]:
        return [delete_rule(a) for a in added]

    def check(self, added: list[Argv]) -> list[Argv]:
        return [absent(rule_present(a)) for a in added]

    def counters(self) -> Argv:
        return ["iptables-save", "-c"]


class NftablesLoss(LossTool):
    """nftables has no `statistic` match; `numgen inc mod N == 0` is its nth (every Nth
    packet, a counter per rule) and `numgen random mod M < k` its random
    (nft(8), NUMGEN EXPRESSION). The rules live in ccbench's own table."""

    name = "nftables"
    counters_key = "nft"
    programs = ("nft",)
    RANDOM_SCALE = 1_000_000

    def add(self, topo: Topology, ports: tuple[int, int] | None = None) -> list[Argv]:
        if not topo.has_loss:
            return []
        lo, hi = ports or covered_ports()
        if topo.loss_mode == "nth":
            every = max(2, round(1 / topo.loss_rate))
            match = ["numgen", "inc", "mod", str(every), "==", "0"]
        else:
            n = round(topo.loss_rate * self.RANDOM_SCALE)
            match = ["numgen", "random", "mod", str(self.RANDOM_SCALE), "<", str(n)]
        return [
            ["nft", "add", "table", "inet", NFT_TABLE],
            ["nft", "add", "chain", "inet", NFT_TABLE, "input", "{", "type", "filter", "hook",
             "input", "priority", "0", ";", "policy", "accept", ";", "}"],
            ["nft", "add", "rule", "inet", NFT_TABLE, "input", "tcp", "dport", f"{lo}-{hi}",
             *match, "counter", "drop"],
        ]  # fmt: skip

    def undo(self, added: list[Argv]) -> list[Argv]:
        return [["nft", "delete", "table", "inet", NFT_TABLE]] if added else []

    def check(self, added: list[Argv]) -> list[Argv]:
        return [absent(["nft", "list", "table", "inet", NFT_TABLE])] if added else []

    def counters(self) -> Argv:
        return ["nft", "-j", "list", "table", "inet", NFT_TABLE]


LOSS_TOOLS: dict[str, type[LossTool]] = {c.name: c for c in (IptablesLoss, NftablesLoss)}


def loss_tool(name: str) -> LossTool:
    return registered(LOSS_TOOLS, name, "emulation.loss", "tool")()


# --- sysctls: read before, written back by `down` --------------------------------------
def sysctl_key(argv: Argv) -> str:
    """The key a `sysctl [-w] key=value` plan sets (Linux and FreeBSD forms)."""
    kv = argv[-1]
    if argv[0] != "sysctl" or "=" not in kv:
        raise CcbenchError(f"not a sysctl assignment: {' '.join(argv)}")
    return kv.split("=", 1)[0]


def sysctl_read(argv: Argv) -> Argv:
    return ["sysctl", "-n", sysctl_key(argv)]


def sysctl_restore(argv: Argv, old: str) -> Argv:
    """The same assignment with the value read before (whitespace as one space:
    tcp_rmem reads back tab-separated)."""
    return [*argv[:-1], f"{sysctl_key(argv)}={' '.join(old.split())}"]


# --- what a crashed earlier testbed left, found without its state ----------------------
# Its iptables rules (by their comment) and its ccdelay (by the pid files); an ifb and
# an nftables table of ccbench's own name. Each line is iptables-save's own, quoted for
# the shell by iptables-save (iptables/iptables-save.c): read back as it wrote it.
SWEEP = (
    "iptables-save -t filter 2>/dev/null | grep -e '--comment \"\\?" + COMMENT + "\"\\? ' | "
    "sed 's/^-A /-D /' | while read -r r; do eval \"iptables -w -t filter $r\" && "
    'echo "rule: $r"; done; '
    f'for p in {STATE_DIR}/*-ccdelay.pid; do [ -f "$p" ] || continue; pid=$(cat "$p"); '
    '[ "$(cat /proc/$pid/comm 2>/dev/null)" = ccdelay ] && kill "$pid" && echo "ccdelay: $pid"; '
    'rm -f "$p" "${p%.pid}.log" "${p%.pid}-stats.json"; done; '
    f"ip link del {IFB_DEV} 2>/dev/null && echo 'ifb: {IFB_DEV}'; "
    f"nft delete table inet {NFT_TABLE} 2>/dev/null && echo 'nftables: table {NFT_TABLE}'; true"
)


def sweep_argv() -> Argv:
    """Removes what an earlier lab testbed left on a Linux host; prints one line per
    thing removed (nothing when there was none)."""
    return ["sh", "-c", SWEEP]
