"""Every endpoint's settings read back right before the traffic, like the CC a flow used:
its data interface's MTU and offloads, and every sysctl the run expects (ccbench's
baseline with the run's own settings: `expected`). summary.json
`host_settings`: node -> what it reported; a run whose hosts report anything else than
what was asked is invalid, the reason naming the host, the setting, asked and found.

An offload the interface reports as '[fixed]' and the run did not ask to change is not
judged: it is the testbed's own (a macvlan's TSO: its calibration's offload rule says
why the queues still hold wire frames, and the bottleneck's super-packet check proves it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Self

from ccbench.errors import CcbenchError
from ccbench.host_settings import ROLES, RoleSettings
from ccbench.hosts.settings import EndpointReading, for_os, read_endpoint, same_value
from ccbench.instruments.base import Cost, Instrument, Recording, SummaryPart, need
from ccbench.jsonio import write_json
from ccbench.layout import RawDir
from ccbench.part import Part, d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed
from ccbench.testbed.kinds import kind

FILE = "host-settings.json"  # raw/: node -> EndpointReading, as read before the traffic


class HostFound(Part):
    """One endpoint's settings as it reported them before the traffic."""

    role: str = d("senders or receivers")
    os: str = d("its OS")
    interface: str | None = d("its data interface (the one holding its data address)")
    mtu: int | None = d("that interface's MTU")
    offloads: dict[str, str] = d("offload -> on/off as printed ('[fixed]': cannot change)")
    sysctl: dict[str, str | None] = d("each sysctl the run expects -> its value (null: none)")
    asked: dict[str, Any] = d("what the run expected: {sysctl, offloads, mtu} (baseline + run)")


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
          mtu: int) -> tuple[HostFound, list[str]]:  # fmt: skip
    """What `node` reported against what was asked; reasons name host, setting, asked,
    found. `explicit`: what the run itself asked (beyond the baseline)."""
    state = r.state()
    reasons = [f"{node}: host settings not read: {e}" for e in r.errors]
    where = f"{node}/{state.name}" if state else node
    if state is not None and state.mtu != mtu:
        reasons.append(f"{where}: MTU asked {mtu}, found {state.mtu}")
    asked_off = dict(explicit.offloads)
    for name, on in want.offloads:
        if state is None:
            break
        is_on = state.is_on(name)
        if is_on is None or is_on == on or (state.fixed(name) and name not in asked_off):
            continue
        reasons.append(f"{where}: offload {name} asked {'on' if on else 'off'}, "
                       f"found {state.offloads[name]}")  # fmt: skip
    for name, value in want.sysctl:
        have = r.sysctl.get(name)
        if have is not None and not same_value(value, have):
            reasons.append(f"{node}: sysctl {name} asked {value!r}, found {have!r}")
    found = HostFound(
        role=r.role, os=r.os, interface=r.interface, mtu=state.mtu if state else None,
        offloads=state.offloads if state else {}, sysctl=r.sysctl,
        asked={**want.to_dict(), "mtu": mtu},
    )  # fmt: skip
    return found, reasons


@dataclass
class HostSettings(Instrument):
    name = "host_settings"
    description = "every endpoint's MTU, offloads and sysctls read back before the traffic"
    cost = Cost.SNAPSHOT
    summary_key = "host_settings"
    summary_type = dict[str, HostFound]
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
        write_json(rec.raw / FILE, out)

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
        reasons: list[str] = []
        for node, role in self.nodes.items():
            if not isinstance(raw.get(node), dict):
                reasons.append(f"{node}: host settings not read ({FILE} has no record of it)")
                continue
            try:
                r = EndpointReading(**raw[node])
                want = RoleSettings.from_dict(self.expected.get(node, {}), "asked")
            except (TypeError, ValueError, CcbenchError) as e:
                rd.problem(FILE, f"{node}: {e}")
                continue
            found, why = judge(node, r, want, spec.host.role(role), spec.topology.mtu)
            out[node], reasons = found, reasons + why
        return SummaryPart(out, reasons)
