"""FreeBSD host driver: command plans for a FreeBSD sender (Emulab bare metal).

Everything here is a pure function returning argv lists; nothing runs. FreeBSD differs
from Linux in two ways that shape this module (mod_cc(4), tcp_functions(9), tcp_bbr(4)):

* The congestion control is a mod_cc(4) module (`cc_<name>.ko`, chosen host-wide with
  `net.inet.tcp.cc.algorithm`), and the TCP *stack* is a second, independent host-wide
  choice (`net.inet.tcp.functions_default` = freebsd | rack | bbr). Both apply to new
  connections only, so they are set before iperf3 starts.
* BBR is not a mod_cc module on FreeBSD: it is the tcp_bbr(4) stack, which computes its
  own cwnd and pacing. So `cc: bbr` means "stack bbr", and a variant asking for another
  CC on the bbr stack is refused (its results would be labelled with a CC that never ran).
  `resolve_variant()` holds that rule; `variant_plan()` is the one call a runner needs.

Some steps may fail harmlessly (loading `tcphpts`: kernels built with `options TCPHPTS`
have no module file for it). Such plans are returned as `Step`s with `allow_fail=True`; run
them with `executor.run(step.argv, check=not step.allow_fail)`.
"""

from __future__ import annotations

import re
from typing import TypedDict

from ccbench.errors import CcbenchError
from ccbench.hosts.base import (
    NIC_RECORDS_SCRIPT,
    Argv,
    Step,
    iperf3_client_argv,
    iperf3_server_argv,
)
from ccbench.hosts.settings import FreeBSDSettings
from ccbench.hosts.siftr_plan import PPL_MAX

# mod_cc(4) algorithms shipped with FreeBSD 13/14 (module cc_<name>); seed 004 used all.
FREEBSD_CCS = ("newreno", "cubic", "htcp", "vegas", "cdg", "chd", "hd", "dctcp")
# Always compiled into the kernel: there may be no cc_newreno.ko to load.
BUILTIN_CCS = frozenset({"newreno"})
# Names people bring from Linux configs.
CC_ALIASES = {"reno": "newreno"}

# TCP stacks (tcp_functions): the base stack is called "freebsd".
FREEBSD_STACKS = ("freebsd", "rack", "bbr")
STACK_ALIASES = {"default": "freebsd"}
STACK_MODULES = {"rack": "tcp_rack", "bbr": "tcp_bbr"}
# The stack whose congestion control is built in (tcp_bbr(4)); cc "bbr" selects it.
BBR = "bbr"

LOGGERS = ("siftr", "siftr2")

_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,15}$")


def cc_module_name(cc: str) -> str:
    """The mod_cc name for `cc` ("reno" -> "newreno"); CcbenchError if FreeBSD has none."""
    name = CC_ALIASES.get(cc, cc)
    if name == BBR:
        raise CcbenchError(
            "on FreeBSD 'bbr' is a TCP stack (tcp_bbr), not a mod_cc algorithm: "
            "select it with stack 'bbr' (FreeBSDHost.variant_plan does this for cc 'bbr')"
        )
    if name == "rack":
        raise CcbenchError("'rack' is a FreeBSD TCP stack, not a CC: use stack 'rack' with a cc")
    if name not in FREEBSD_CCS:
        raise CcbenchError(
            f"unknown FreeBSD congestion control '{cc}' (known: {', '.join(FREEBSD_CCS)}, "
            "or bbr as a stack)"
        )
    return name


def stack_name(stack: str) -> str:
    """The tcp_functions name for `stack` ("default" -> "freebsd")."""
    name = STACK_ALIASES.get(stack, stack)
    if name not in FREEBSD_STACKS:
        raise CcbenchError(
            f"unknown FreeBSD TCP stack '{stack}' (known: default, {', '.join(FREEBSD_STACKS)})"
        )
    return name


def resolve_variant(cc: str, stack: str = "default") -> tuple[str | None, str]:
    """(mod_cc name or None, stack name) that a FreeBSD variant {cc, stack} really runs.

    cc "bbr" selects the bbr stack (with stack "default" or "bbr"); its CC is the stack's
    own, so the mod_cc name is None. Any other cc on the bbr stack, or cc "bbr" on an
    explicitly named other stack, is a CcbenchError: the label would not match the run.
    """
    if CC_ALIASES.get(cc, cc) == BBR:
        if stack not in ("default", BBR):
            raise CcbenchError(
                f"cc 'bbr' on FreeBSD is the tcp_bbr stack; it cannot run on stack '{stack}'"
            )
        return None, BBR
    name = stack_name(stack)
    if name == BBR:
        raise CcbenchError(
            f"the FreeBSD bbr stack does its own congestion control and ignores mod_cc: "
            f"a variant on stack 'bbr' must say cc 'bbr', not '{cc}'"
        )
    return cc_module_name(cc), name


class FreeBSDHost:
    os = "freebsd"

    # --- endpoints -----------------------------------------------------------
    def tune(self, *, netns_local: bool = False) -> list[Argv]:
        """ccbench's baseline sysctls (ccbench.hosts.settings: the seeds' sysctl.conf).
        `netns_local` has no meaning here (FreeBSD senders are real hosts)."""
        return FreeBSDSettings().tune(netns_local=netns_local)

    def set_cc_plan(self, cc: str) -> list[Step]:
        name = cc_module_name(cc)
        steps: list[Step] = []
        if name not in BUILTIN_CCS:
            # -n: succeed when the module is already loaded or compiled in (EEXIST).
            steps.append(Step(["kldload", "-n", f"cc_{name}"]))
        steps.append(Step(["sysctl", f"net.inet.tcp.cc.algorithm={name}"]))
        return steps

    def set_stack_plan(self, stack: str) -> list[Step]:
        name = stack_name(stack)
        steps: list[Step] = []
        module = STACK_MODULES.get(name)
        if module:
            # rack and bbr need the high-precision timer system. Older kernels ship it
            # as tcphpts.ko; others have it built in (then there may be no file to load,
            # and kldload fails): allowed to fail, the stack load below is the real test.
            steps.append(Step(["kldload", "-n", "tcphpts"], allow_fail=True))
            steps.append(Step(["kldload", "-n", module]))
        steps.append(Step(["sysctl", f"net.inet.tcp.functions_default={name}"]))
        return steps

    def check_variant(self, cc: str, stack: str) -> None:
        """A variant {cc, stack} this OS can run; CcbenchError naming what it lacks."""
        resolve_variant(cc, stack)

    def variant_plan(self, cc: str, stack: str = "default") -> list[Step]:
        """Everything that makes a variant {cc, stack} the host default: stack first,
        then the mod_cc algorithm (none for the bbr stack)."""
        cc_name, stack_n = resolve_variant(cc, stack)
        steps = self.set_stack_plan(stack_n)
        if cc_name is not None:
            steps += self.set_cc_plan(cc_name)
        return steps

    def verify_stack(self, stack: str = "default") -> Argv:
        """Command whose stdout parse_functions_available() reads (check_stack() judges)."""
        stack_name(stack)
        return ["sysctl", "-n", "net.inet.tcp.functions_available"]

    def kernel_identity(self) -> dict[str, Argv]:
        # kern.build_id exists from FreeBSD 13 on; an older kernel prints nothing here.
        return {"kernel": ["sysctl", "-n", "kern.version", "kern.ident"],
                "build_id": ["sysctl", "-n", "kern.build_id"]}  # fmt: skip

    def receive_buffer_facts(self) -> Argv:
        return ["sysctl", "kern.ipc.maxsockbuf", "net.inet.tcp.recvspace",
                "net.inet.tcp.recvbuf_max", "net.inet.tcp.recvbuf_auto"]  # fmt: skip

    def facts(self) -> dict[str, Argv]:
        def sysctl(oid: str) -> Argv:
            return ["sysctl", "-n", oid]

        return {
            "uname": ["uname", "-a"],
            # The seeds tell patched kernels apart by this (e.g. "...-dirty").
            "uname_v": ["uname", "-v"],
            **self.kernel_identity(),
            "cc_available": sysctl("net.inet.tcp.cc.available"),
            "cc_default": sysctl("net.inet.tcp.cc.algorithm"),
            "functions_available": sysctl("net.inet.tcp.functions_available"),
            "functions_default": sysctl("net.inet.tcp.functions_default"),
            "kern_hz": sysctl("kern.hz"),
            "kldstat": ["kldstat"],
            "iperf3": ["iperf3", "--version"],
            "hostcache_enable": sysctl("net.inet.tcp.hostcache.enable"),
            "maxsockbuf": sysctl("kern.ipc.maxsockbuf"),
            "sendbuf_max": sysctl("net.inet.tcp.sendbuf_max"),
            "recvbuf_max": sysctl("net.inet.tcp.recvbuf_max"),
        }

    def iperf3_udp_client(
        self, dst: str, port: int, payload_bytes: int, rate_bps: float, seconds: float
    ) -> Argv:
        return ["iperf3", "-c", dst, "-p", str(port), "-u", "-l", str(payload_bytes),
                "-b", f"{int(rate_bps)}", "-t", f"{seconds:g}", "-J"]  # fmt: skip

    def listening(self, port: int, proto: str = "tcp") -> Argv:
        # sockstat -l: listening sockets; -P proto -p port narrows to the one asked
        return ["sockstat", "-46", "-l", "-q", "-P", proto, "-p", str(port)]

    def cpu_counters(self) -> Argv:
        # Two lines of stathz ticks, CP_USER, CP_NICE, CP_SYS, CP_INTR, CP_IDLE each
        # (sys/sys/resource.h): all CPUs, then every CPU in a row (sys/kern/kern_clock.c
        # sysctl_kern_cp_time, sysctl_kern_cp_times; sbin/sysctl prints a long array
        # space-separated). ccbench.parse.procstat.parse_cp_times reads them.
        return ["sysctl", "-n", "kern.cp_time", "kern.cp_times"]

    def idle_ping(self, dst: str) -> Argv:
        return ["ping", "-n", "-c", "50", "-i", "0.02", "-W", "2000", dst]

    def probe_ping(self, dst: str, interval_s: float) -> Argv:
        # FreeBSD's -D sets Don't Fragment (no timestamps here): harmless at MTU size
        return ["ping", "-n", "-D", "-i", f"{interval_s:g}", dst]

    def drop_counters(self) -> dict[str, Argv]:
        return {}  # FreeBSD senders: their losses show as retransmits (ledger rule 2)

    def iperf3_server(self, port: int, interval_s: float | None = None) -> Argv:
        return iperf3_server_argv(_port(port), interval_s)

    def iperf3_client(
        self,
        dst: str,
        port: int,
        cc: str,
        duration_s: float,
        interval_s: float,
        streams: int = 1,
    ) -> Argv:
        """Like Linux. -C names a mod_cc algorithm (FreeBSD iperf3 sets TCP_CONGESTION);
        for cc "bbr" there is none to name: the host-wide bbr stack is the CC. iperf3 has
        no per-socket stack option, the stack is whatever variant_plan() made default."""
        cc_args = [] if CC_ALIASES.get(cc, cc) == BBR else ["-C", cc_module_name(cc)]
        return iperf3_client_argv(dst, _port(port), cc_args, duration_s, interval_s, streams)

    # --- loggers -------------------------------------------------------------
    def siftr_start(
        self, logfile: str, port: int, logger: str = "siftr", ppl: int = 1
    ) -> list[Argv]:
        """Load and enable siftr(4) (or out-of-tree siftr2) for flows on `port`.
        The logfile is set before enabling: the module opens it at enable time.
        Choose `port` and `ppl` with ccbench.hosts.siftr_plan.choose_ppl (one port
        covers one flow; the module has no other filter)."""
        mod = _logger(logger)
        if not logfile.startswith("/") or any(c.isspace() for c in logfile):
            raise CcbenchError(f"{mod} logfile must be an absolute path without spaces")
        if not 1 <= ppl <= PPL_MAX:  # the module's per-flow counter is 16 bits
            raise CcbenchError(f"{mod} ppl (packets per log line) must be 1..{PPL_MAX}")
        base = f"net.inet.{mod}"
        return [
            ["kldload", "-n", mod],
            ["sysctl", f"{base}.logfile={logfile}"],
            ["sysctl", f"{base}.ppl={ppl}"],
            # 0 = every port; else packets whose source or destination port is `port`
            ["sysctl", f"{base}.port_filter={_port(port) if port else 0}"],
            ["sysctl", f"{base}.enabled=1"],
        ]

    def siftr_stop(self, logger: str = "siftr") -> list[Argv]:
        # Disabling writes the footer (flow list; siftr2: each flow's stack and CC).
        return [["sysctl", f"net.inet.{_logger(logger)}.enabled=0"]]

    def ss_sampler(self, interval_s: float) -> Argv | None:
        return None  # no ss: siftr logs cwnd and srtt (siftr_start)

    def siftr2_probe_plan(self) -> list[Step]:
        """Steps that decide the logger, tried in order: the first that succeeds means
        siftr2 (its sysctl tree exists, or its module loads); none succeeds: siftr.
        Both may fail, by design."""
        return [
            Step(["sysctl", "-N", "net.inet.siftr2"], allow_fail=True),
            Step(["kldload", "-n", "siftr2"], allow_fail=True),
        ]

    def stack_problems(self, functions_available: str, stack: str) -> list[str]:
        """What is wrong with the host-wide default stack after variant_plan()."""
        return check_stack(parse_functions_available(functions_available), stack)

    def qdisc_stats(self, dev: str) -> Argv:
        raise CcbenchError("a FreeBSD node is never the bottleneck router (routers run Linux)")

    def qdisc_sampler(self, dev: str, interval_s: float) -> Argv:
        return self.qdisc_stats(dev)

    # --- per-flow truth --------------------------------------------------------
    def sockstat_tcp(self) -> Argv:
        """Every TCP socket with its CC module (-C) and TCP stack (-S); read by
        ccbench.parse.sockstat. Sampled while the flows run (usr.bin/sockstat/main.c)."""
        return ["sockstat", "-46", "-CS", "-P", "tcp"]

    # --- provenance ----------------------------------------------------------------
    def nic_records(self) -> Argv:
        """The NIC records the start-up script wrote (one JSON object per interface,
        /var/tmp/ccbench/nic-<interface>.json), one per line; nothing if none."""
        return ["sh", "-c", NIC_RECORDS_SCRIPT]

    # --- interfaces ----------------------------------------------------------
    def offloads_off(self, ifname: str) -> list[Step]:
        """TSO/LRO/checksum offload off (ifconfig(8) -tso -lro: a TSO segment of 64 KB
        would sit in a small queue as one packet).
        `-tso` clears TSO4 and TSO6; the IPv6 checksum flags exist only on some NICs,
        so that step may fail."""
        if not _IFNAME.fullmatch(ifname):
            raise CcbenchError(f"bad interface name '{ifname}'")
        return [
            Step(["ifconfig", ifname, "-tso", "-lro", "-txcsum", "-rxcsum"]),
            Step(["ifconfig", ifname, "-txcsum6", "-rxcsum6"], allow_fail=True),
        ]

    def offloads_show(self, ifname: str) -> Argv:
        return ["ifconfig", ifname]


# --- parsing what the verify commands print ---------------------------------
class StackInfo(TypedDict):
    default: bool  # marked '*' in column D
    alias: str | None  # first registered name ("-" rows add none)
    aliases: list[str]  # every registered name
    pcb_count: int  # connections using the stack


def parse_functions_available(text: str) -> dict[str, StackInfo]:
    """`sysctl [-n] net.inet.tcp.functions_available` -> stack -> StackInfo.

    The table (tcp_subr.c) is "Stack  D Alias  PCB count" with '*' in column D for the
    default stack. Seed 002 shows the registered name in Alias ("freebsd * freebsd 3");
    tcp_subr.c may also print "-" there, and a stack registered under several names
    gets one row per name, so rows are merged per stack.
    """
    out: dict[str, StackInfo] = {}
    in_table = False
    for line in text.splitlines():
        words = line.split()
        if not words:
            continue
        if words[0] == "Stack" and "Alias" in words:
            in_table = True
            continue
        if not in_table:
            continue  # "net.inet.tcp.functions_available:" and blank lines
        is_default = len(words) == 4 and words[1] == "*"
        if len(words) != (4 if is_default else 3) or not words[-1].isdigit():
            raise ValueError(f"unexpected functions_available row: {line!r}")
        name, alias, count = words[0], words[-2], int(words[-1])
        entry = out.setdefault(
            name, StackInfo(default=False, alias=None, aliases=[], pcb_count=count)
        )
        entry["default"] = entry["default"] or is_default
        if alias != "-" and alias not in entry["aliases"]:
            entry["aliases"].append(alias)
            entry["alias"] = entry["alias"] or alias
    if not in_table:
        raise ValueError("no 'Stack D Alias PCB count' table in functions_available output")
    return out


def check_stack(parsed: dict[str, StackInfo], stack: str) -> list[str]:
    """Problems with `stack` being the default, judged from parse_functions_available()."""
    name = stack_name(stack)
    by_name = {a: s for s, e in parsed.items() for a in [s, *e["aliases"]]}
    problems: list[str] = []
    actual = by_name.get(name)
    if actual is None:
        problems.append(
            f"TCP stack '{name}' is not loaded (functions_available: {', '.join(parsed)})"
        )
    defaults = [s for s, e in parsed.items() if e["default"]]
    if len(defaults) != 1:
        problems.append(f"functions_available marks {len(defaults)} default stacks")
    elif actual is not None and defaults[0] != actual:
        problems.append(f"default TCP stack is '{defaults[0]}', not '{name}'")
    return problems


def _logger(logger: str) -> str:
    if logger not in LOGGERS:
        raise CcbenchError(f"unknown FreeBSD logger '{logger}' (known: {', '.join(LOGGERS)})")
    return logger


def _port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise CcbenchError(f"TCP port {port} is not in 1..65535")
    return port
