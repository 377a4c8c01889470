"""A firewall ruleset per variant on the endpoints (ccbench.hosts.firewall): the exact
plans of nftables, pf and ipfw, the parsers on nft's real output (captured here) and on
pfctl/ipfw output written from their print code (tests/captures/README.md), the
apply/put-back order through host_apply against stand-in hosts, and the read-back's
verdict. nftables also runs for real in tests/integration/test_host_axis.py.

The stand-ins answer as the tools do where it matters to ccbench (sources in
hosts/firewall.py): pfctl -e fails when pf is enabled (pfctl_enable), -s Running exits 1
when disabled, pfctl needs /dev/pf except with -n; kldstat -q -m exits 0 only for a
loaded module; ipfw reads commands from an absolute path and `delete set N` deletes the
set's rules; nft -c checks without loading. Their error wording, where not captured, is
their own and only passed through."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import pytest

from ccbench import host_apply
from ccbench.errors import Refused
from ccbench.exec import Result
from ccbench.host_settings import HostSettings
from ccbench.hosts import firewall
from ccbench.hosts.firewall import (
    LOADED,
    FirewallReading,
    RuleCount,
    ipfw_lines,
    nft_body_problem,
    parse_ipfw,
    parse_nft,
    parse_pf,
    pf_conf,
)
from ccbench.instruments.host_settings import judge_firewall
from ccbench.reasons import Code
from ccbench.testbed import base
from tests.unit.test_host_settings import Bed, StandIn, _spec, cap

BODY = cap("nftables-body.nft")
TABLE = f"table inet ccbench {{\n{BODY.rstrip()}\n}}\n"


# --- stand-in hosts ------------------------------------------------------------------


@dataclass
class NftHost(StandIn):
    """A Linux endpoint with nft: ccbench's table as loaded (listed as the capture
    taken after loading it), a table of the host's own, a load the kernel may refuse."""

    table: str | None = None
    load_error: str = ""

    def run(self, argv: list[str], check: bool = True, input: str | None = None,
            **_: object) -> Result:  # fmt: skip
        if argv[0] != "nft":
            return super().run(argv, check)
        self.ran.append(argv)
        out, rc, err = "", 0, ""
        if argv[1:] == ["list", "tables"]:
            out = "table ip hostfilter\n" + ("table inet ccbench\n" if self.table else "")
        elif argv[1:] == ["-c", "-f", "-"]:
            if "countr " in (input or ""):
                rc, err = 1, cap("nft-c-syntax-error.txt")
        elif argv[1:] == ["-f", "-"]:
            if self.load_error:
                rc, err = 1, self.load_error
            else:
                self.table = input
        elif argv[1:] == ["-a", "list", "table", "inet", "ccbench"]:
            if self.table:
                out = cap("nft-a-list-table-ccbench-before.txt")
            else:
                rc, err = 1, cap("nft-a-list-table-absent.txt")
        elif argv[1:] == ["delete", "table", "inet", "ccbench"]:
            rc, err = (0, "") if self.table else (1, "Error: Could not process rule")
            self.table = None
        else:
            raise AssertionError(f"unexpected {argv}")
        return Result(tuple(argv), rc, out, err)


def _counted(lines: str) -> str:
    return "".join(f"{r}\n  [ Evaluations: 0         Packets: 0         Bytes: 0           "
                   "States: 0     ]\n" for r in lines.splitlines())  # fmt: skip


@dataclass
class PfHost:
    """A FreeBSD endpoint's pf: the module, pf on or off, its rules as pfctl prints them
    (kept as loaded: the stand-in does not normalize), its tables."""

    module: bool = False
    enabled: bool = False
    rules: str = ""
    nat: str = ""
    tables: list[str] = field(default_factory=list)
    ran: list[list[str]] = field(default_factory=list)
    stdin: list[str | None] = field(default_factory=list)

    def run(self, argv: list[str], check: bool = True, input: str | None = None,
            **_: object) -> Result:  # fmt: skip
        self.ran.append(argv)
        self.stdin.append(input)
        out, rc, err = "", 0, ""
        if argv == ["kldstat", "-q", "-m", "pf"]:
            rc = 0 if self.module else 1
        elif argv == ["kldload", "pf"]:
            self.module = True
        elif argv == ["kldunload", "pf"]:
            self.module, self.enabled, self.rules, self.nat = False, False, "", ""
        elif argv == ["ifconfig", "-a"]:
            pass
        elif argv[0] == "pfctl" and "-n" in argv:
            rc, err = (1, "stdin:1: syntax error") if "pas " in (input or "") else (0, "")
        elif argv[0] == "pfctl" and not self.module:
            rc, err = 1, "pfctl: /dev/pf: No such file or directory"
        elif argv == ["pfctl", "-f", "-"]:
            lines = (input or "").splitlines()
            self.nat = "".join(ln + "\n" for ln in lines if ln.startswith(("nat", "rdr")))
            self.rules = "".join(ln + "\n" for ln in lines if ln and ln + "\n" not in self.nat)
        elif argv == ["pfctl", "-e"]:
            rc, err = (1, "pfctl: pf already enabled") if self.enabled else (0, "pf enabled")
            self.enabled = True
        elif argv == ["pfctl", "-d"]:
            self.enabled = False
        elif argv == ["pfctl", "-s", "Running"]:
            out, rc = ("Enabled\n", 0) if self.enabled else ("Disabled\n", 1)
        elif argv[:2] == ["pfctl", "-v"]:
            out = _counted(self.rules if argv[-1] == "rules" else self.nat)
        elif argv[:2] == ["pfctl", "-s"]:
            out = {"rules": self.rules, "nat": self.nat, "ether": "",
                   "Tables": "".join(f"{t}\n" for t in self.tables)}[argv[2]]  # fmt: skip
        else:
            raise AssertionError(f"unexpected {argv}")
        return Result(tuple(argv), rc, out, err)


@dataclass
class IpfwHost:
    """A FreeBSD endpoint with ipfw loaded: rules as (number, set, body), `add` lines
    read from /dev/stdin, `delete set N`."""

    loaded: bool = True
    rules: list[tuple[int, int, str]] = field(
        default_factory=lambda: [
            (100, 0, "allow ip from any to any via lo0"),
            (65535, 31, "allow ip from any to any"),
        ]
    )
    ran: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], check: bool = True, input: str | None = None,
            **_: object) -> Result:  # fmt: skip
        self.ran.append(argv)
        out, rc, err = "", 0, ""
        if argv == ["sysctl", "-n", "net.inet.ip.fw.enable"]:
            out, rc, err = ("1\n", 0, "") if self.loaded else (
                "", 1, "sysctl: unknown oid 'net.inet.ip.fw.enable'")  # fmt: skip
        elif argv[:2] == ["ipfw", "-S"]:
            counters = "0 0 " if argv[2] == "show" else ""
            out = "".join(f"{n:05d} {counters}set {s} {body}\n" for n, s, body in self.rules)
        elif argv[-1] == "/dev/stdin":
            for k, line in enumerate((input or "").splitlines(), 1):
                if "alow" in line:
                    return Result(tuple(argv), 65, "", f"Line {k}: invalid action alow")
                if "-n" not in argv:
                    w = line.split()
                    self.rules.insert(-1, (int(w[1]), int(w[3]), " ".join(w[4:])))
        elif argv[1:] == ["-q", "delete", "set", "29"]:
            self.rules = [r for r in self.rules if r[1] != 29]
        elif argv != ["ifconfig", "-a"]:  # read_endpoint's look for the data interface
            raise AssertionError(f"unexpected {argv}")
        return Result(tuple(argv), rc, out, err)


WHERE = "testbed t1: r1 (receivers)"


# --- the plans ----------------------------------------------------------------------


def test_nftables_loads_its_own_table_and_deletes_only_it() -> None:
    host = NftHost({})
    steps = firewall.REGISTRY["nftables"].plan(host, BODY, WHERE)  # type: ignore[arg-type]
    assert host.ran == [["nft", "list", "tables"], ["nft", "-c", "-f", "-"]]
    assert [(s.what, s.argv, s.undo, s.before, s.after, s.input) for s in steps] == [
        ("nftables table inet ccbench", ["nft", "-f", "-"],
         ["nft", "delete", "table", "inet", "ccbench"], "", LOADED, TABLE)]  # fmt: skip
    assert host.table is None  # only checked


@pytest.mark.parametrize(
    ("body", "host", "says"),
    [
        (BODY.replace("counter comment", "countr comment"), NftHost({}),
         "the nftables ruleset does not load: /dev/stdin:8:24-30: Error: syntax error, "
         "unexpected comment"),
        (BODY, NftHost({}, table="table inet ccbench {}"),
         "it already has a table inet ccbench, the one ccbench loads and deletes"),
        ("chain c { }\n}\ntable ip other {", NftHost({}),
         "the rules are the body of table inet ccbench: line 2: this '}' would close"),
        ('include "/etc/nftables.conf"', NftHost({}), "line 1: include is not taken"),
    ],
)  # fmt: skip
def test_nftables_refusals_are_one_line_and_load_nothing(body: str, host: NftHost,
                                                        says: str) -> None:  # fmt: skip
    before = host.table
    with pytest.raises(Refused) as e:
        firewall.REGISTRY["nftables"].plan(host, body, WHERE)  # type: ignore[arg-type]
    assert str(e.value).startswith(WHERE) and says in str(e.value)
    assert "\n" not in str(e.value) and host.table == before
    assert ["nft", "-f", "-"] not in host.ran


def test_nft_body_check_skips_strings_and_comments() -> None:
    assert nft_body_problem(BODY) is None
    assert nft_body_problem('chain c { counter comment "a } b" # } here\n}') is None
    assert nft_body_problem("chain c {") == "its braces do not balance"


def test_pf_not_loaded_is_loaded_filled_and_enabled_each_undone() -> None:
    host = PfHost()
    rules = "pass all\n"
    steps = firewall.REGISTRY["pf"].plan(host, rules, WHERE)  # type: ignore[arg-type]
    assert host.ran == [["kldstat", "-q", "-m", "pf"], ["pfctl", "-n", "-f", "-"]]
    assert [(s.what, s.argv, s.undo, s.before, s.after, s.input, s.undo_input) for s in steps] == [
        ("pf module", ["kldload", "pf"], ["kldunload", "pf"], "not loaded", LOADED, None, None),
        ("pf ruleset", ["pfctl", "-f", "-"], ["pfctl", "-f", "-"], "", LOADED, rules, ""),
        ("pf enabled", ["pfctl", "-e"], ["pfctl", "-d"], "disabled", "enabled", None, None),
    ]  # fmt: skip
    assert not any(s.note for s in steps)


def test_pf_replaces_a_hosts_ruleset_says_so_and_keeps_it_to_load_back() -> None:
    host = PfHost(module=True, enabled=True, rules="scrub in all fragment reassemble\n"
                  "pass in quick on igb0 proto tcp from any to any port = 22 flags S/SA keep "
                  "state\n", nat="nat on igb0 from 10.0.0.0/8 to any -> (igb0)\n")  # fmt: skip
    [step] = firewall.REGISTRY["pf"].plan(host, "pass all\n", WHERE)  # type: ignore[arg-type]
    # pf.conf(5)'s order: normalization, translation, filtering
    had = (
        "scrub in all fragment reassemble\nnat on igb0 from 10.0.0.0/8 to any -> (igb0)\n"
        "pass in quick on igb0 proto tcp from any to any port = 22 flags S/SA keep state\n"
    )
    assert (step.what, step.before, step.undo_input) == ("pf ruleset", had, had)
    assert step.note == "its pf ruleset (3 rules) is replaced by the run's and loaded back after"
    assert ["pfctl", "-s", "Tables"] in host.ran


@pytest.mark.parametrize(
    ("host", "rules", "says"),
    [
        (PfHost(module=True, tables=["bruteforce"]), "pass all\n",
         "pf has tables (bruteforce): ccbench would replace the ruleset"),
        (PfHost(), "pas all\n", "the pf ruleset does not load: stdin:1: syntax error"),
    ],
)  # fmt: skip
def test_pf_refusals(host: PfHost, rules: str, says: str) -> None:
    with pytest.raises(Refused, match=None) as e:
        firewall.REGISTRY["pf"].plan(host, rules, WHERE)  # type: ignore[arg-type]
    assert says in str(e.value)
    assert not {"kldload", "-e"} & {w for a in host.ran for w in a}


def test_ipfw_rules_go_into_set_29_and_only_that_set_is_deleted() -> None:
    host = IpfwHost()
    rules = (
        "add 1000 count tcp from any to any 5202 in  # flow 1\n"
        "add 1100 set 29 count udp from any to any\n"
    )
    [step] = firewall.REGISTRY["ipfw"].plan(host, rules, WHERE)  # type: ignore[arg-type]
    text = ("add 1000 set 29 count tcp from any to any 5202 in\n"
            "add 1100 set 29 count udp from any to any\n")  # fmt: skip
    assert (step.what, step.argv, step.undo, step.before, step.after, step.input) == (
        "ipfw set 29", ["ipfw", "-q", "/dev/stdin"], ["ipfw", "-q", "delete", "set", "29"],
        "", LOADED, text)  # fmt: skip
    assert host.ran == [["sysctl", "-n", "net.inet.ip.fw.enable"], ["ipfw", "-S", "list"],
                        ["ipfw", "-n", "/dev/stdin"]]  # fmt: skip


@pytest.mark.parametrize(
    ("host", "rules", "says"),
    [
        (IpfwHost(loaded=False), "add count ip from any to any",
         "ipfw is not loaded (sysctl: unknown oid 'net.inet.ip.fw.enable'): ccbench does "
         "not load it"),
        (IpfwHost(), "flush", "firewall ipfw line 1: only `add` rules are taken"),
        (IpfwHost(), "add 100 set 3 count ip from any to any",
         "line 1: ccbench's rules go in set 29"),
        (IpfwHost(rules=[(500, 29, "count ip from any to any")]), "add count ip from any to any",
         "it already has ipfw rules in set 29, the set ccbench loads and deletes (`ipfw "
         "delete set 29`): '00500 count ip from any to any'"),
        (IpfwHost(), "add 100 alow ip from any to any",
         "the ipfw rules do not load: Line 1: invalid action alow"),
    ],
)  # fmt: skip
def test_ipfw_refusals(host: IpfwHost, rules: str, says: str) -> None:
    with pytest.raises(Refused) as e:
        firewall.REGISTRY["ipfw"].plan(host, rules, WHERE)  # type: ignore[arg-type]
    assert says in str(e.value) and "\n" not in str(e.value)
    assert ["ipfw", "-q", "/dev/stdin"] not in host.ran


def test_ipfw_lines_put_the_set_after_the_rule_number() -> None:
    assert ipfw_lines("add allow ip from any to any\n\n# a comment\n", WHERE) == (
        "add set 29 allow ip from any to any\n"
    )


def test_each_kind_on_its_own_os_only() -> None:
    assert firewall.for_kind("pf", "freebsd", WHERE).kind == "pf"
    with pytest.raises(Refused, match=r"r1 \(receivers\): firewall nftables is for linux "
                       r"hosts; this one runs freebsd \(its firewalls: pf, ipfw\)"):  # fmt: skip
        firewall.for_kind("nftables", "freebsd", WHERE)
    with pytest.raises(Refused, match="firewall pf is for freebsd hosts; this one runs linux"):
        firewall.for_kind("pf", "linux", WHERE)


# --- the parsers ----------------------------------------------------------------------


def test_nft_counters_from_a_real_listing() -> None:
    assert parse_nft(cap("nft-a-list-table-ccbench-after.txt")) == [
        RuleCount('input: tcp dport 5202 counter comment "flow 1\'s data"', 167, 6300645),
        RuleCount("input: ip saddr @senders counter", 169, 6300813),
        RuleCount("input: meta l4proto icmp accept", None, None),
        RuleCount("output: tcp sport 5202 counter", 132, 7195),
    ]
    before = parse_nft(cap("nft-a-list-table-ccbench-before.txt"))
    assert [(r.packets, r.bytes) for r in before] == [(0, 0), (0, 0), (None, None), (0, 0)]


def test_pf_counters_written_from_pfctl_print_code() -> None:
    assert parse_pf(cap("freebsd-pfctl-v-s-rules.txt")) == [
        RuleCount("scrub in all fragment reassemble", 1204, 1742836),
        RuleCount("pass in quick on igb1 inet proto tcp from any to any port = 5202 flags "
                  "S/SA keep state", 1187, 1739410),
        RuleCount("pass all flags S/SA keep state", 96, 12744),
    ]  # fmt: skip


def test_ipfw_counters_of_set_29_written_from_ipfw_print_code() -> None:
    assert parse_ipfw(cap("freebsd-ipfw-S-show.txt")) == [
        RuleCount("01000 count tcp from any to any 5202 in", 1187, 1739410),
        RuleCount("01100 count udp from any to any", 0, 0),
    ]
    assert [r.rule for r in parse_ipfw(cap("freebsd-ipfw-S-show.txt"), 0)] == [
        "00100 allow ip from any to any via lo0",
        "00200 allow tcp from any to any 22 keep-state :default"]  # fmt: skip


def test_pf_conf_puts_what_pfctl_printed_in_pf_conf_order() -> None:
    assert pf_conf("", "scrub in all\npass all\n", "nat on em0 from any to any -> (em0)\n") == (
        "scrub in all\nnat on em0 from any to any -> (em0)\npass all\n")  # fmt: skip
    assert pf_conf("", "", "") == ""


# --- apply and put back through host_apply ------------------------------------------------


@pytest.fixture(autouse=True)
def _state_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """host_apply keeps its pending list beside the testbed's state: here, not /run."""
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")


def _asking(role: str, **settings: object) -> object:
    return _spec(HostSettings.from_dict({role: settings}))


def test_the_ruleset_loads_after_sysctls_and_offloads_and_goes_first(tmp_path: Path) -> None:
    host = NftHost({"net.ipv4.tcp_wmem": "4096\t16384\t10485760"})
    bed = Bed({"s1": host, "r1": StandIn({}, name="r1")})
    spec = _asking("senders", sysctl={"net.ipv4.tcp_wmem": "4096 16384 5242880"},
                   offloads={"gso": "on"},
                   firewall={"kind": "nftables", "rules": BODY})  # fmt: skip
    done = host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert host.table == TABLE
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    writes = [a[:3] for a in host.ran if a[:2] in (["sysctl", "-w"], ["ethtool", "-K"])
              or a[1] in ("-f", "delete")]  # fmt: skip
    assert writes == [["sysctl", "-w", "net.ipv4.tcp_wmem=4096 16384 5242880"],
                      ["ethtool", "-K", "s1-eth0"], ["nft", "-f", "-"],
                      ["nft", "delete", "table"], ["ethtool", "-K", "s1-eth0"],
                      ["sysctl", "-w", "net.ipv4.tcp_wmem=4096\t16384\t10485760"]]  # fmt: skip
    assert host.table is None
    rec = json.loads((tmp_path / "host-changes.json").read_text())
    fw = rec["changes"][-1]
    assert (fw["setting"], fw["firewall"], fw["input"]) == (
        "firewall nftables table inet ccbench",
        "nftables",
        TABLE,
    )
    assert [r["differs"] for r in rec["ran"] + rec["put_back"]] == [None] * 6


def test_a_ruleset_the_kernel_refuses_puts_back_what_was_set(tmp_path: Path) -> None:
    """`nft -c` passed, the load did not: the sysctl set before it goes back, the run's
    one line names host, setting and the kernel's word."""
    host = NftHost({"net.ipv4.tcp_wmem": "4096\t16384\t10485760"},
                   load_error="Error: Could not process rule: Operation not supported")  # fmt: skip
    bed = Bed({"s1": host, "r1": StandIn({}, name="r1")})
    spec = _asking("senders", sysctl={"net.ipv4.tcp_wmem": "1 2 3"},
                   firewall={"kind": "nftables", "rules": BODY})  # fmt: skip
    with pytest.raises(Refused) as e:
        host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert str(e.value) == (
        "testbed t1: s1: firewall nftables table inet ccbench = loaded refused: Error: Could "
        "not process rule: Operation not supported (every setting made before it is put back)"
    )
    assert host.sysctl["net.ipv4.tcp_wmem"] == "4096\t16384\t10485760" and host.table is None


def _freebsd(bed: Bed) -> Bed:
    bed.driver = lambda node: SimpleNamespace(os="freebsd")  # type: ignore[method-assign]
    return bed


def test_pf_is_put_back_as_found_and_the_user_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    had = "pass in quick proto tcp from any to any port = 22 flags S/SA keep state\n"
    host = PfHost(module=True, enabled=False, rules=had)
    bed = _freebsd(Bed({"s1": StandIn({}), "r1": host}))  # type: ignore[dict-item]
    spec = _asking("receivers", firewall={"kind": "pf", "rules": "pass all\n"})
    done = host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert (host.rules, host.enabled) == ("pass all\n", True)
    assert "r1: its pf ruleset (1 rules) is replaced by the run's" in capsys.readouterr().err
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    assert (host.module, host.rules, host.enabled) == (True, had, False)
    loads = [(a, i) for a, i in zip(host.ran, host.stdin, strict=True)
             if a in (["pfctl", "-f", "-"], ["pfctl", "-e"], ["pfctl", "-d"])]  # fmt: skip
    assert loads == [(["pfctl", "-f", "-"], "pass all\n"), (["pfctl", "-e"], None),
                     (["pfctl", "-d"], None), (["pfctl", "-f", "-"], had)]  # fmt: skip


def test_pf_loaded_by_ccbench_is_unloaded_after(tmp_path: Path) -> None:
    host = PfHost()
    bed = _freebsd(Bed({"s1": StandIn({}), "r1": host}))  # type: ignore[dict-item]
    spec = _asking("receivers", firewall={"kind": "pf", "rules": "pass all\n"})
    done = host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert [c.name for c in done] == ["pf module", "pf ruleset", "pf enabled"]
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    assert (host.module, host.enabled) == (False, False)
    rec = json.loads((tmp_path / "host-changes.json").read_text())
    assert [r["argv"] for r in rec["put_back"]] == [["pfctl", "-d"], ["pfctl", "-f", "-"],
                                                     ["kldunload", "pf"]]  # fmt: skip
    assert all(r["differs"] is None for r in rec["put_back"])


def test_ipfw_set_29_deleted_after_the_run_the_hosts_rules_kept(tmp_path: Path) -> None:
    host = IpfwHost()
    bed = _freebsd(Bed({"s1": StandIn({}), "r1": host}))  # type: ignore[dict-item]
    rules = "add 1000 count ip from any to any\n"
    spec = _asking("receivers", firewall={"kind": "ipfw", "rules": rules})
    done = host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert (1000, 29, "count ip from any to any") in host.rules
    host_apply.put_back_recorded(bed, tmp_path, done)  # type: ignore[arg-type]
    assert host.rules == IpfwHost().rules


def test_a_firewall_of_another_os_is_refused_before_anything_changes(tmp_path: Path) -> None:
    host = NftHost({"net.ipv4.tcp_wmem": "4096\t16384\t10485760"})
    bed = Bed({"s1": host, "r1": StandIn({}, name="r1")})
    spec = _asking("senders", sysctl={"net.ipv4.tcp_wmem": "1 2 3"},
                   firewall={"kind": "pf", "rules": "pass all\n"})  # fmt: skip
    with pytest.raises(Refused, match="s1 \\(senders\\): firewall pf is for freebsd hosts"):
        host_apply.apply(bed, spec, tmp_path)  # type: ignore[arg-type]
    assert not [a for a in host.ran if a[:2] == ["sysctl", "-w"]]


# --- the read-back's verdict --------------------------------------------------------


def _nft_reading(name: str, rc: int = 0) -> FirewallReading:
    return FirewallReading("nftables", [cap(name)], [rc])


def test_the_record_has_the_rules_before_and_the_counters_after() -> None:
    found, why = judge_firewall("r1", _nft_reading("nft-a-list-table-ccbench-before.txt"),
                                _nft_reading("nft-a-list-table-ccbench-after.txt"))  # fmt: skip
    assert why == [] and found.loaded and found.kind == "nftables"
    assert found.rules == cap("nft-a-list-table-ccbench-before.txt")
    assert [(c.rule.split(":")[0], c.packets) for c in found.counters] == [
        ("input", 167), ("input", 169), ("input", None), ("output", 132)]  # fmt: skip


@pytest.mark.parametrize(
    ("reading", "says"),
    [
        (FirewallReading("nftables", [cap("nft-a-list-table-absent.txt")], [1]),
         "r1: firewall nftables asked, found no table inet ccbench (Error: No such file or "
         "directory)"),
        (FirewallReading("pf", ["Disabled\n", "", cap("freebsd-pfctl-v-s-rules.txt")], [1, 0, 0]),
         "r1: firewall pf asked, found pf Disabled"),
        (FirewallReading("pf", ["Enabled\n", "", ""], [0, 0, 0]),
         "r1: firewall pf asked, found pf has no rules"),
        (FirewallReading("ipfw", ["0\n", cap("freebsd-ipfw-S-show.txt")], [0, 0]),
         "r1: firewall ipfw asked, found net.inet.ip.fw.enable = 0"),
        (FirewallReading("ipfw", ["1\n", "65535 0 0 set 31 allow ip from any to any\n"], [0, 0]),
         "r1: firewall ipfw asked, found no rules in set 29"),
        (FirewallReading("ipfw", ["1\n", "# DISABLED 01000 5 300 set 29 count ip from any to "
                                          "any\n"], [0, 0]),
         "r1: firewall ipfw asked, found set 29 disabled"),
    ],
)  # fmt: skip
def test_a_ruleset_not_in_force_makes_the_run_invalid(reading: FirewallReading,
                                                      says: str) -> None:  # fmt: skip
    found, why = judge_firewall("r1", reading, None)
    assert [(r.code, r.evidence) for r in why] == [
        (Code.HOST_SETTING, {"node": "r1", "setting": "firewall"})]  # fmt: skip
    assert why[0].text == says and not found.loaded  # what was found, named


def test_ipfw_and_pf_in_force() -> None:
    shown = FirewallReading("ipfw", ["1\n", cap("freebsd-ipfw-S-show.txt")], [0, 0])
    ipfw, why = judge_firewall("r1", shown, None)
    assert why == [] and ipfw.rules.splitlines()[0].startswith("01000  1187")
    pf, why = judge_firewall(
        "r1",
        FirewallReading("pf", ["Enabled\n", "", cap("freebsd-pfctl-v-s-rules.txt")], [0, 0, 0]),
        None,
    )
    assert why == [] and pf.loaded
