"""A run's firewall on its endpoints (a role's `firewall:`), one class per kind: how a
ruleset is checked, loaded, read back with its counters and removed. Plans and pure
parsers; an Executor runs them (ccbench.host_apply loads and removes, the host_settings
instrument reads), so every command is exactly testable without the OS at hand.

Each kind keeps what ccbench loads apart from the host's own, or puts the host's back:
- nftables (Linux): the rules are the body of ccbench's own table, `table inet ccbench`,
  loaded with `nft -f -` (one transaction) and removed with `nft delete table inet
  ccbench`: the host's other tables are never touched (no `flush ruleset`).
- pf (FreeBSD): one main ruleset per host, so the run's replaces the host's: what the host
  had (its ether, scrub, translation and filter rules as pfctl prints them, and whether pf
  was loaded and enabled) is read first and put back after, checked by reading it again.
- ipfw (FreeBSD): the rules go into set 29, ccbench's, and `ipfw delete set 29` removes
  exactly them; the host's rules in other sets stay as they are.

Commands checked against the sources (freebsd/freebsd-src; nftables 1.0.6's nft(8)):
- nft(8): `-f -` reads stdin, `-c` checks without applying, `-a` prints handles.
- pfctl(8), sbin/pfctl/pfctl.c main(): `-f -` loads stdin ("| pfctl -f-"), `-n` parses
  only (opens /dev/pf read-only if at all), `-e` fails with "pf already enabled" when it
  is (pfctl_enable), `-s Running` prints Enabled/Disabled (pfctl_parser.c print_running),
  `-s rules` prints scrub rules then filter rules (pfctl_show_rules), `-s nat` the
  translation rules; with `-v` each rule is followed by "  [ Evaluations: N  Packets: N
  Bytes: N  States: N ]" (pfctl_print_rule_counters).
- kldstat(8): `-q -m NAME` exits 0 when module NAME is loaded or compiled in.
- ipfw(8), sbin/ipfw/main.c: an absolute path as the last argument is read as a file of
  ipfw commands, one per line (ipfw_readfile; /dev/stdin is one), `-n` only checks them
  (do_cmd does nothing with co.test_only), a line's error exits naming "Line N";
  sbin/ipfw/ipfw2.c: `add [N] [set S] ...` (compile_rule), `delete set S` deletes the
  set's rules (ipfw_delete), `-S` prints "set S " after the rule number and counters
  (show_static_rule, counters "%*llu " each, pr_u64).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from ccbench.errors import CcbenchError, Refused
from ccbench.exec import Executor
from ccbench.hosts.base import Argv

LOADED = "loaded"  # a step's state after it: any ruleset the host reports (not its text)


@dataclass(frozen=True)
class FirewallStep:
    """One change a firewall needs on a host: its command (stdin: `input`), the command
    that undoes it (`undo_input`), and the state `Firewall.state(what)` reads before it
    and is to read after it (LOADED: any ruleset at all)."""

    what: str
    argv: Argv
    undo: Argv
    before: str
    after: str
    input: str | None = None
    undo_input: str | None = None
    note: str = ""  # one line the user is told (a ruleset of the host's replaced)


@dataclass(frozen=True)
class RuleCount:
    """One rule as the host printed it (its counters taken out) and what it counted;
    None where the rule keeps no counter (an nftables rule without `counter`)."""

    rule: str
    packets: int | None
    bytes: int | None


@dataclass(frozen=True)
class FirewallState:
    """A firewall as read: the run's ruleset in force or not (`why` not, as the host
    said), the rules as printed, each rule's counters."""

    loaded: bool
    why: str
    rules: str
    counters: list[RuleCount] = field(default_factory=list)


@dataclass
class FirewallReading:
    """What a firewall's read commands printed, in order, and how each exited (raw
    host-firewall-{before,after}.json holds one per endpoint)."""

    kind: str
    outputs: list[str] = field(default_factory=list)
    rcs: list[int] = field(default_factory=list)


def _first(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


class Firewall:
    """What one kind offers; subclasses fill every method."""

    kind: ClassVar[str]
    os: ClassVar[str]

    def plan(self, ex: Executor, rules: str, where: str) -> list[FirewallStep]:
        """Read the host and check the ruleset without loading it; the steps, in order.
        Refused (one line, nothing changed) when it cannot be loaded or put back."""
        raise NotImplementedError

    def state(self, ex: Executor, what: str) -> str:
        """A step's state as the host reports it now."""
        raise NotImplementedError

    def reads(self) -> list[Argv]:
        """The read-back: the ruleset with its counters (parse() reads the outputs)."""
        raise NotImplementedError

    def parse(self, outputs: list[str], rcs: list[int]) -> FirewallState:
        raise NotImplementedError

    def found(self, ex: Executor, what: str, want: str) -> str | None:
        """None when the host reports step `what` at `want`; else what it reports."""
        have = self.state(ex, what)
        ok = bool(have) if want == LOADED else have == want
        return None if ok else f"it reads {_first(have) or 'no rules'!r}"

    def read(self, ex: Executor) -> FirewallReading:
        """The read-back as run; never raises."""
        out = FirewallReading(self.kind)
        for argv in self.reads():
            r = ex.run(argv, check=False)
            out.outputs.append(r.stdout if r.ok else r.stdout + r.stderr)
            out.rcs.append(r.returncode)
        return out


# --- nftables ---------------------------------------------------------------------

NFT_TABLE = ["inet", "ccbench"]
_NFT_LIST = ["nft", "-a", "list", "table", *NFT_TABLE]
_NFT_COUNTER = re.compile(r"\bcounter packets (\d+) bytes (\d+)")
_NFT_HANDLE = re.compile(r"\s+# handle \d+$")


def nft_body_problem(body: str) -> str | None:
    """Why `body` cannot be the inside of ccbench's table: a brace that closes it (the
    rest would reach tables ccbench does not remove) or an include (a file's rules);
    None when it can. Strings and comments are skipped as nft's scanner does."""
    depth = 0
    for n, line in enumerate(body.splitlines(), 1):
        text = re.sub(r'"[^"]*"', '""', line).split("#", 1)[0]
        if re.search(r"\binclude\b", text):
            return f"line {n}: include is not taken (the rules must be in the text)"
        for ch in text:
            depth += {"{": 1, "}": -1}.get(ch, 0)
            if depth < 0:
                return f"line {n}: this '}}' would close ccbench's table inet ccbench"
    return None if depth == 0 else "its braces do not balance"


def parse_nft(text: str) -> list[RuleCount]:
    """`nft -a list table ...`: every rule (a line ending in '# handle N' inside a chain)
    as 'chain: rule', its `counter packets N bytes M` read and taken out of the text."""
    out, chain = [], None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"chain (\S+) \{", s)
        if m:
            chain = m.group(1)
        elif line.startswith("\t}"):  # a chain's (or a set's) closing brace
            chain = None
        elif chain and _NFT_HANDLE.search(line):
            c = _NFT_COUNTER.search(s)
            rule = _NFT_COUNTER.sub("counter", _NFT_HANDLE.sub("", s))
            packets, nbytes = (int(c.group(1)), int(c.group(2))) if c else (None, None)
            out.append(RuleCount(f"{chain}: {rule}", packets, nbytes))
    return out


class Nftables(Firewall):
    kind = "nftables"
    os = "linux"
    WHAT = "nftables table inet ccbench"

    @staticmethod
    def text(rules: str) -> str:
        return f"table {' '.join(NFT_TABLE)} {{\n{rules.rstrip()}\n}}\n"

    def plan(self, ex: Executor, rules: str, where: str) -> list[FirewallStep]:
        why = nft_body_problem(rules)
        if why:
            raise Refused(f"{where}: firewall nftables: the rules are the body of table inet "
                          f"ccbench: {why}")  # fmt: skip
        r = ex.run(["nft", "list", "tables"], check=False)
        if not r.ok:
            raise Refused(f"{where}: nft list tables: {_first(r.stderr) or 'failed'}")
        if f"table {' '.join(NFT_TABLE)}" in r.stdout.splitlines():
            raise Refused(f"{where}: it already has a table inet ccbench, the one ccbench "
                          "loads and deletes (left by a run killed before its put-back? "
                          "`nft delete table inet ccbench`)")  # fmt: skip
        text = self.text(rules)
        c = ex.run(["nft", "-c", "-f", "-"], input=text, check=False)
        if not c.ok:
            raise Refused(f"{where}: the nftables ruleset does not load: "
                          f"{_first(c.stderr) or _first(c.stdout)}")  # fmt: skip
        return [FirewallStep(self.WHAT, ["nft", "-f", "-"], ["nft", "delete", "table", *NFT_TABLE],
                             "", LOADED, input=text)]  # fmt: skip

    def state(self, ex: Executor, what: str) -> str:
        r = ex.run(_NFT_LIST, check=False)
        return r.stdout.strip() if r.ok else ""

    def reads(self) -> list[Argv]:
        return [_NFT_LIST]

    def parse(self, outputs: list[str], rcs: list[int]) -> FirewallState:
        if rcs[0] != 0:
            return FirewallState(False, f"no table inet ccbench ({_first(outputs[0])})", "")
        return FirewallState(True, "", outputs[0], parse_nft(outputs[0]))


# --- pf -----------------------------------------------------------------------------

_PF_COUNTERS = re.compile(r"^\s+\[ Evaluations: \d+\s+Packets: (\d+)\s+Bytes: (\d+)")
_PF_RULESET = ["pfctl", "-s", "ether"], ["pfctl", "-s", "rules"], ["pfctl", "-s", "nat"]


def pf_conf(ether: str, rules: str, nat: str) -> str:
    """What pfctl printed as one pf.conf: pf.conf(5) takes ether, normalization (scrub),
    translation and filter rules in that order, and `-s rules` prints the scrub rules
    before the filter rules."""
    lines = rules.splitlines()
    scrub = [ln for ln in lines if ln.startswith(("scrub", "no scrub"))]
    rest = [ln for ln in lines if ln not in scrub]
    text = "\n".join(ln for part in (ether.splitlines(), scrub, nat.splitlines(), rest)
                     for ln in part if ln.strip())  # fmt: skip
    return text + "\n" if text else ""


def parse_pf(text: str) -> list[RuleCount]:
    """`pfctl -v -s nat` / `-s rules`: each rule (a line at the margin; -v indents
    nothing) and the Packets/Bytes of the counter line under it."""
    out: list[RuleCount] = []
    for line in text.splitlines():
        m = _PF_COUNTERS.match(line)
        if m and out:
            out[-1] = RuleCount(out[-1].rule, int(m.group(1)), int(m.group(2)))
        elif line and not line[0].isspace() and line.strip() != "}":
            out.append(RuleCount(line.strip(), None, None))
    return out


class Pf(Firewall):
    kind = "pf"
    os = "freebsd"
    MODULE, RULESET, ENABLED = "pf module", "pf ruleset", "pf enabled"

    def plan(self, ex: Executor, rules: str, where: str) -> list[FirewallStep]:
        loaded = self.state(ex, self.MODULE) == LOADED
        had, enabled = "", False
        if loaded:
            tables = ex.run(["pfctl", "-s", "Tables"], check=False).stdout.split()
            if tables:
                raise Refused(f"{where}: pf has tables ({', '.join(tables)}): ccbench "
                              "would replace the ruleset and could not put their addresses "
                              "back")  # fmt: skip
            had = self.state(ex, self.RULESET)
            enabled = self.state(ex, self.ENABLED) == "enabled"
        c = ex.run(["pfctl", "-n", "-f", "-"], input=rules, check=False)
        if not c.ok:
            raise Refused(f"{where}: the pf ruleset does not load: "
                          f"{_first(c.stderr) or _first(c.stdout)}")  # fmt: skip
        steps = []
        if not loaded:
            steps.append(FirewallStep(self.MODULE, ["kldload", "pf"], ["kldunload", "pf"],
                                      "not loaded", LOADED))  # fmt: skip
        n = len(had.splitlines())
        note = (f"its pf ruleset ({n} rules) is replaced by the run's and loaded back after"
                if had else "")  # fmt: skip
        steps.append(FirewallStep(self.RULESET, ["pfctl", "-f", "-"], ["pfctl", "-f", "-"],
                                  had, LOADED, rules, had, note))  # fmt: skip
        if not enabled:
            steps.append(FirewallStep(self.ENABLED, ["pfctl", "-e"], ["pfctl", "-d"],
                                      "disabled", "enabled"))  # fmt: skip
        return steps

    def state(self, ex: Executor, what: str) -> str:
        if what == self.MODULE:
            ok = ex.run(["kldstat", "-q", "-m", "pf"], check=False).ok
            return LOADED if ok else "not loaded"
        if what == self.ENABLED:  # exits 1 when disabled: the word decides
            said = ex.run(["pfctl", "-s", "Running"], check=False).stdout.strip()
            return "enabled" if said == "Enabled" else "disabled"
        outs = [ex.run(a, check=False) for a in _PF_RULESET]
        return pf_conf(*(r.stdout if r.ok else "" for r in outs))

    def reads(self) -> list[Argv]:
        return [["pfctl", "-s", "Running"], ["pfctl", "-v", "-s", "nat"],
                ["pfctl", "-v", "-s", "rules"]]  # fmt: skip

    def parse(self, outputs: list[str], rcs: list[int]) -> FirewallState:
        running, nat, rules = outputs
        text = "".join(t for t, rc in ((nat, rcs[1]), (rules, rcs[2])) if rc == 0)
        counters = parse_pf(text)
        if running.strip() != "Enabled":
            return FirewallState(False, f"pf {_first(running) or 'not loaded'}", text, counters)
        if not counters:
            return FirewallState(False, "pf has no rules", text, counters)
        return FirewallState(True, "", text, counters)


# --- ipfw ---------------------------------------------------------------------------

IPFW_SET = 29  # ccbench's set (0..30 take rules; 31 holds the default rule)
_IPFW_RULE = re.compile(r"^(?:# DISABLED )?(\d{5}) +(?:(\d+) +(\d+) +)?set (\d+) (.*)$")


def ipfw_lines(rules: str, where: str) -> str:
    """The rules as ipfw commands in ccbench's set: `add [N] [set S] ...` lines only
    (set S, where given, must be ccbench's), `set 29` put in after the rule number."""
    out = []
    for n, line in enumerate(rules.splitlines(), 1):
        w = line.split("#", 1)[0].split()
        if not w:
            continue
        i = 2 if len(w) > 1 and w[1].isdigit() else 1
        if w[0] != "add" or i >= len(w):
            raise Refused(f"{where}: firewall ipfw line {n}: only `add` rules are taken "
                          f"(ccbench loads them into set {IPFW_SET} and deletes that set "
                          f"after): {line.strip()!r}")  # fmt: skip
        if w[i] == "set":
            if w[i + 1 : i + 2] != [str(IPFW_SET)]:
                raise Refused(f"{where}: firewall ipfw line {n}: ccbench's rules go in set "
                              f"{IPFW_SET}: {line.strip()!r}")  # fmt: skip
        else:
            w[i:i] = ["set", str(IPFW_SET)]
        out.append(" ".join(w))
    return "".join(f"{ln}\n" for ln in out)


def parse_ipfw(text: str, rule_set: int = IPFW_SET) -> list[RuleCount]:
    """`ipfw -S show` (or `-S list`, no counters): the rules of `rule_set` as 'NNNNN
    body', with their packet and byte counters."""
    out = []
    for line in text.splitlines():
        m = _IPFW_RULE.match(line.rstrip())
        if m and int(m.group(4)) == rule_set:
            packets, nbytes = (int(m.group(2)), int(m.group(3))) if m.group(2) else (None, None)
            out.append(RuleCount(f"{m.group(1)} {m.group(5)}", packets, nbytes))
    return out


class Ipfw(Firewall):
    kind = "ipfw"
    os = "freebsd"
    WHAT = f"ipfw set {IPFW_SET}"
    ENABLE = "net.inet.ip.fw.enable"

    def plan(self, ex: Executor, rules: str, where: str) -> list[FirewallStep]:
        r = ex.run(["sysctl", "-n", self.ENABLE], check=False)
        if not r.ok:
            raise Refused(f"{where}: ipfw is not loaded ({_first(r.stderr) or self.ENABLE}): "
                          "ccbench does not load it, since a newly loaded ipfw denies every "
                          "packet, this ssh session's too, unless the boot tunable "
                          "net.inet.ip.fw.default_to_accept is 1")  # fmt: skip
        text = ipfw_lines(rules, where)
        have = self.state(ex, self.WHAT)
        if have:
            raise Refused(f"{where}: it already has ipfw rules in set {IPFW_SET}, the set "
                          f"ccbench loads and deletes (`ipfw delete set {IPFW_SET}`): "
                          f"{_first(have)!r}")  # fmt: skip
        c = ex.run(["ipfw", "-n", "/dev/stdin"], input=text, check=False)
        if not c.ok:
            raise Refused(f"{where}: the ipfw rules do not load: "
                          f"{_first(c.stderr) or _first(c.stdout)}")  # fmt: skip
        return [FirewallStep(self.WHAT, ["ipfw", "-q", "/dev/stdin"],
                             ["ipfw", "-q", "delete", "set", str(IPFW_SET)], "", LOADED,
                             input=text)]  # fmt: skip

    def state(self, ex: Executor, what: str) -> str:
        r = ex.run(["ipfw", "-S", "list"], check=False)
        rules = parse_ipfw(r.stdout) if r.ok else []
        return "".join(f"{c.rule}\n" for c in rules)

    def reads(self) -> list[Argv]:
        return [["sysctl", "-n", self.ENABLE], ["ipfw", "-S", "show"]]

    def parse(self, outputs: list[str], rcs: list[int]) -> FirewallState:
        enable, show = outputs
        counters = parse_ipfw(show) if rcs[1] == 0 else []
        text = "".join(ln + "\n" for ln in show.splitlines() if _in_set(ln))
        if rcs[0] != 0:
            return FirewallState(False, "ipfw not loaded", text, counters)
        if enable.strip() != "1":
            return FirewallState(False, f"{self.ENABLE} = {enable.strip()}", text, counters)
        if not counters:
            return FirewallState(False, f"no rules in set {IPFW_SET}", text, counters)
        if text.startswith("# DISABLED"):  # -S lists a disabled set's rules so marked
            return FirewallState(False, f"set {IPFW_SET} disabled", text, counters)
        return FirewallState(True, "", text, counters)


def _in_set(line: str) -> bool:
    m = _IPFW_RULE.match(line.rstrip())
    return m is not None and int(m.group(4)) == IPFW_SET


REGISTRY: dict[str, Firewall] = {c.kind: c() for c in (Nftables, Pf, Ipfw)}


def for_kind(kind: str, host_os: str, where: str) -> Firewall:
    """The plans of firewall `kind` on a host of `host_os`; Refused (one line) where
    that OS has no such firewall."""
    fw = REGISTRY.get(kind)
    if fw is None:
        raise CcbenchError(f"{where}: no firewall {kind!r} (known: {', '.join(REGISTRY)})")
    if fw.os != host_os:
        have = ", ".join(k for k, f in REGISTRY.items() if f.os == host_os) or "none"
        raise Refused(f"{where}: firewall {kind} is for {fw.os} hosts; this one runs "
                      f"{host_os} (its firewalls: {have})")  # fmt: skip
    return fw
