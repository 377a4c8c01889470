"""Every endpoint's settings read back right before the traffic, like the CC a flow used:
its data interface's MTU and offloads, and every sysctl the run expects (ccbench's
baseline with the run's own settings: `expected`). summary.json
`host_settings`: node -> what it reported; a run whose hosts report anything else than
what was asked is invalid, the reason naming the host, the setting, asked and found.

An offload the interface reports as '[fixed]' and the run did not ask to change is not
judged: it is the testbed's own (a macvlan's TSO: its calibration's offload rule says
why the queues still hold wire frames, and the bottleneck's super-packet check proves it).

An endpoint whose role asks a firewall ruleset (hosts.firewall) is read twice: right
before the traffic (the ruleset as the host reports it: not in force makes the run
invalid) and right after it (each rule's counters).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Self

from ccbench.errors import CcbenchError
from ccbench.host_settings import ROLES, RoleSettings
from ccbench.hosts import firewall
from ccbench.hosts import loader as boot
from ccbench.hosts.firewall import FirewallReading
from ccbench.hosts.settings import EndpointReading, for_os, read_endpoint, same_value
from ccbench.instruments.base import Cost, Instrument, Recording, SummaryPart, need
from ccbench.jsonio import write_json
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.part import Part, d
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

FILE = "host-settings.json"  # raw/: node -> EndpointReading, as read before the traffic


def firewall_file(when: str) -> str:
    """raw/: node -> hosts.firewall.FirewallReading, before or after the traffic."""
    return f"host-firewall-{when}.json"


class RuleCounted(Part):
    """One rule of a run's firewall ruleset and what it counted during the run."""

    rule: str = d("the rule as the host printed it, counters taken out (nftables: "
                  "'chain: rule'; ipfw: 'NNNNN body')")  # fmt: skip
    packets: int | None = d("packets it matched, read right after the traffic (null: "
                            "it keeps no counter: an nftables rule without `counter`)")  # fmt: skip
    bytes: int | None = d("bytes it matched, read right after the traffic")


class FirewallFound(Part):
    """An endpoint's firewall as the run asked it: in force or not, and its counters."""

    kind: str = d("nftables, pf or ipfw")
    loaded: bool = d("the run's ruleset was in force right before the traffic (nftables: "
                     "table inet ccbench present; pf: enabled with rules; ipfw: enabled "
                     "with rules in set 29)")  # fmt: skip
    rules: str = d("the ruleset as the host printed it right before the traffic")
    counters: list[RuleCounted] = d("each rule and its counters right after the traffic")


class HostFound(Part):
    """One endpoint's settings as it reported them before the traffic."""

    role: str = d("senders or receivers")
    os: str = d("its OS")
    interface: str | None = d("its data interface (the one holding its data address)")
    mtu: int | None = d("that interface's MTU")
    offloads: dict[str, str] = d("offload -> on/off as printed ('[fixed]': cannot change)")
    sysctl: dict[str, str | None] = d("each sysctl the run expects -> its value (null: none)")
    asked: dict[str, Any] = d("what the run expected: {sysctl, offloads, mtu} (baseline + run)")
    firewall: FirewallFound | None = d("the firewall ruleset the run loaded on it (null: none "
                                       "asked)", None)  # fmt: skip
    loader: dict[str, boot.Reported] = d("each FreeBSD boot tunable the run asks -> what "
                                         "the loader passed and the kernel uses", {})  # fmt: skip
    baseline_differs: list[str] = d(
        "where the host differs from ccbench's baseline in a setting the run did not ask "
        "for itself (e.g. a host-wide net.core.* a namespace or container cannot set): "
        "shown, not judged", [])  # fmt: skip


def endpoints(spec: RunSpec) -> dict[str, str]:
    """node -> its role (ROLES) for the run's senders and receivers."""
    out = {n: ROLES[0] for n in spec.senders}
    out |= {f.receiver: ROLES[1] for f in spec.flows}
    return out


def baseline(tb: Testbed, node: str) -> RoleSettings:
    """ccbench's tuning of `node` as its testbed applied it at `up`."""
    plans = for_os(tb.driver(node).os)
    return plans.baseline(netns_local=kind(tb.kind).caps.senders_here)


def expected(tb: Testbed, spec: RunSpec, node: str, role: str) -> RoleSettings:
    """Everything the run expects of `node`: the baseline with the run's settings."""
    return spec.host.role(role).over(baseline(tb, node))


def judge(node: str, r: EndpointReading, want: RoleSettings, explicit: RoleSettings,
          mtu: int) -> tuple[HostFound, list[Reason]]:  # fmt: skip
    """What `node` reported against what was expected: what the run asked itself
    (`explicit`) and the path MTU are judged, reasons naming host, setting, asked, found;
    where the host differs from ccbench's baseline in what the run did not ask, that is
    listed (`baseline_differs`), not judged: the testbed set it at `up` as far as the
    host let it (a namespace's net.core.* is the machine's), and the super-packet check
    judges what offloads do to the bottleneck."""
    state = r.state()
    reasons = [Reason.of(Code.HOST_SETTING_UNREAD, f"{node}: host settings not read: {e}",
                         node=node) for e in r.errors]  # fmt: skip
    where = f"{node}/{state.name}" if state else node
    if state is not None and state.mtu != mtu:
        reasons.append(Reason.of(Code.HOST_SETTING, f"{where}: MTU asked {mtu}, found {state.mtu}",
                                 node=node, setting="mtu", asked=mtu, found=state.mtu))  # fmt: skip
    differs: list[tuple[bool, str, str]] = []  # (asked by the run, setting, what)
    asked_off, asked_sysctl = dict(explicit.offloads), dict(explicit.sysctl)
    for name, on in want.offloads:
        if state is None:
            break
        is_on = state.is_on(name)
        if is_on is None or is_on == on or (state.fixed(name) and name not in asked_off):
            continue
        differs.append((name in asked_off, f"offload {name}", f"{where}: offload {name} asked "
                        f"{'on' if on else 'off'}, found {state.offloads[name]}"))  # fmt: skip
    for name, value in want.sysctl:
        have = r.sysctl.get(name)
        if have is not None and not same_value(value, have):
            differs.append((name in asked_sysctl, f"sysctl {name}",
                            f"{node}: sysctl {name} asked {value!r}, found {have!r}"))  # fmt: skip
    found = HostFound(
        role=r.role, os=r.os, interface=r.interface, mtu=state.mtu if state else None,
        offloads=state.offloads if state else {}, sysctl=r.sysctl,
        asked={**want.to_dict(), "mtu": mtu},
        baseline_differs=[w for run, _, w in differs if not run],
    )  # fmt: skip
    return found, reasons + [Reason.of(Code.HOST_SETTING, w, node=node, setting=setting)
                             for run, setting, w in differs if run]  # fmt: skip


def judge_firewall(node: str, before: FirewallReading, after: FirewallReading | None
                   ) -> tuple[FirewallFound, list[Reason]]:  # fmt: skip
    """The ruleset as `node` reported it before the traffic and its counters after; a
    ruleset not in force is the reason, naming host and setting."""
    fw = firewall.REGISTRY[before.kind]
    was = fw.parse(before.outputs, before.rcs)
    counted = fw.parse(after.outputs, after.rcs).counters if after is not None else []
    found = FirewallFound(
        kind=before.kind, loaded=was.loaded, rules=was.rules,
        counters=[RuleCounted(rule=c.rule, packets=c.packets, bytes=c.bytes) for c in counted],
    )  # fmt: skip
    why = [] if was.loaded else [Reason.of(Code.HOST_SETTING, f"{node}: firewall {before.kind} "
                                           f"asked, found {was.why}", node=node,
                                           setting="firewall")]  # fmt: skip
    return found, why


@dataclass
class HostSettings(Instrument[dict[str, HostFound]]):
    name = "host_settings"
    description = (
        "every endpoint's MTU, offloads and sysctls read back before the traffic; a firewall "
        "ruleset's rules before it and counters after it"
    )
    raw_files = (
        RawFile(
            FILE, "every endpoint's MTU, offloads and sysctls read back right before the traffic"
        ),
        RawFile(firewall_file, "a firewall ruleset's reads right before and after the traffic"),
    )
    cost = Cost.SNAPSHOT
    summary_key = "host_settings"
    summary_doc = (
        "every sender and receiver: its data interface's MTU and offloads and each sysctl "
        "the run expects, as the host reported them right before the traffic, beside what "
        "was asked (ccbench's baseline with the config's host settings)"
    )

    # node -> role, and what each role expects (written at the run: a later baseline
    # change does not change what this run was judged against)
    nodes: dict[str, str] = field(default_factory=dict)
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = endpoints(spec)
        return cls(nodes=nodes, expected={n: expected(tb, spec, n, r).to_dict()
                                       for n, r in nodes.items()})  # fmt: skip

    def start(self, rec: Recording) -> None:
        out = {}
        for node, role in self.nodes.items():
            want = RoleSettings.from_dict(self.expected[node], "asked")
            plans = for_os(rec.tb.driver(node).os)
            r = read_endpoint(rec.tb.ex(node), plans, role, rec.tb.address(node),
                              dict(want.sysctl))  # fmt: skip
            out[node] = asdict(r)
            if want.loader:  # boot tunables: kenv and sysctl (hosts.loader)
                found = boot.read(rec.tb.ex(node), dict(want.loader))
                out[node]["loader"] = {k: v.model_dump() for k, v in found.items()}
        write_json(rec.raw / FILE, out)
        self._read_firewalls(rec, BEFORE)

    def stop(self, rec: Recording) -> None:
        self._read_firewalls(rec, AFTER)

    def _firewalls(self) -> dict[str, str]:
        """node -> the firewall kind its role asked."""
        wants = {n: RoleSettings.from_dict(self.expected[n], "asked") for n in self.nodes}
        return {n: w.firewall.kind for n, w in wants.items() if w.firewall is not None}

    def _read_firewalls(self, rec: Recording, when: str) -> None:
        kinds = self._firewalls()
        if kinds:
            out = {n: asdict(firewall.REGISTRY[k].read(rec.tb.ex(n))) for n, k in kinds.items()}
            write_json(rec.raw / firewall_file(when), out)

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and isinstance(d.get("nodes"), dict)
             and isinstance(d.get("expected"), dict), "not {nodes, expected}")  # fmt: skip
        return cls(nodes=d["nodes"], expected=d["expected"])

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        raw = rd.json(FILE, required=True)
        if raw is None:
            return SummaryPart(None)
        out: dict[str, HostFound] = {}
        reasons: list[Reason] = []
        for node, role in self.nodes.items():
            if not isinstance(raw.get(node), dict):
                unread = f"{node}: host settings not read ({FILE} has no record of it)"
                reasons.append(Reason.of(Code.HOST_SETTING_UNREAD, unread, node=node))
                continue
            try:
                fields = dict(raw[node])
                tunables = {k: boot.Reported(**v) for k, v in fields.pop("loader", {}).items()}
                r = EndpointReading(**fields)
                want = RoleSettings.from_dict(self.expected.get(node, {}), "asked")
            except (TypeError, ValueError, CcbenchError) as e:
                rd.problem(FILE, f"{node}: {e}")
                continue
            found, why = judge(node, r, want, spec.host.role(role), spec.topology.mtu)
            found = found.model_copy(update={"loader": tunables})
            why += boot.judge(node, dict(want.loader), tunables)
            out[node], reasons = found, reasons + why
        for node, fw in self._firewall_parts(rd, reasons).items():
            if node in out:
                out[node] = out[node].model_copy(update={"firewall": fw})
        return SummaryPart(out, reasons)

    def _firewall_parts(self, rd: RawDir, reasons: list[Reason]) -> dict[str, FirewallFound]:
        """node -> its firewall part, from the reads before and after the traffic."""
        kinds = self._firewalls()
        if not kinds:
            return {}
        before = rd.json(firewall_file(BEFORE), required=True) or {}
        after = rd.json(firewall_file(AFTER), required=True) or {}
        out = {}
        for node in kinds:
            if not isinstance(before.get(node), dict):
                reasons.append(Reason.of(Code.HOST_SETTING_UNREAD, f"{node}: firewall not read "
                                         "before the traffic", node=node))  # fmt: skip
                continue
            try:
                now = FirewallReading(**after[node]) if isinstance(after.get(node), dict) else None
                out[node], why = judge_firewall(node, FirewallReading(**before[node]), now)
            except (TypeError, ValueError, KeyError) as e:
                rd.problem(firewall_file(BEFORE), f"{node}: {e}")
                continue
            reasons += why
        return out
