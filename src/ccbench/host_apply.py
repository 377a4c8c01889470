"""A run's host settings on its endpoints: what the run asks beyond ccbench's baseline
(ccbench.host_settings), checked on every endpoint before anything changes, set, and put
back after the run.

Everything that can be refused is refused before the first change, in one line: a sysctl
the host does not have, an offload the interface cannot switch ('[fixed]') or its OS has
no switch for, a firewall ruleset the host's own tool does not take in a dry run
(hosts.firewall). What only the host can refuse (a value a sysctl rejects, a namespace's
read-only knob) is found when it is set: every change made before it is put back, and the
commands run are in raw/host-changes.json either way. A ruleset is loaded after the
node's sysctls and offloads and removed before them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from ccbench import jsonio, layout, progress
from ccbench.errors import Refused
from ccbench.host_settings import RoleSettings
from ccbench.hosts import firewall, loader
from ccbench.hosts.settings import OsSettings, for_os, read_endpoint, same_value
from ccbench.instruments.host_settings import endpoints
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed


@dataclass(frozen=True)
class Change:
    """One setting changed on one node: its command, the command that puts it back, and
    the value found before."""

    node: str
    setting: str  # "sysctl NAME", "offload NAME on DEV" or "firewall STEP"
    name: str  # the sysctl's, the offload's or the firewall step's
    dev: str | None  # the interface an offload is switched on
    before: str
    after: str
    argv: list[str]
    undo: list[str]
    # A firewall step (hosts.firewall): its kind, the ruleset its command and its undo
    # read on stdin, and what the user is told when it is made
    firewall: str | None = None
    input: str | None = None
    undo_input: str | None = None
    note: str = ""


def plan(tb: Testbed, spec: RunSpec) -> list[Change]:
    """The changes the run's settings need, read from every endpoint first; Refused
    (one line, nothing changed) for any the hosts cannot take."""
    changes: list[Change] = []
    for node, role in endpoints(spec).items():
        want = spec.host.role(role)
        if want.empty:
            continue
        plans = for_os(tb.driver(node).os)
        changes += _node_changes(tb, node, role, plans, want)
        changes += _firewall_changes(tb, node, role, want)
    return changes


def _node_changes(
    tb: Testbed, node: str, role: str, plans: OsSettings, want: RoleSettings
) -> list[Change]:
    where = f"testbed {tb.id}: {node} ({role})"
    if want.loader:  # boot tunables: the run waited for the reboot (lifecycle); proven here
        loader.check_booted(tb.ex(node), where, plans.os, dict(want.loader))
    no_switch = plans.unsupported(dict(want.offloads))
    if no_switch:
        known = ", ".join(plans.switches)
        raise Refused(
            f"{where}: {plans.os} has no switch for offload "
            f"{', '.join(no_switch)} (it has: {known})"
        )
    found = read_endpoint(tb.ex(node), plans, role, tb.address(node), dict(want.sysctl))
    out = []
    for name, value in want.sysctl:
        have = found.sysctl.get(name)
        if have is None:
            raise Refused(f"{where}: sysctl {name}: the host has no such setting "
                               f"({found.errors[-1] if found.errors else 'no value'})")  # fmt: skip
        if not same_value(value, have):
            do, undo = plans.sysctl_write(name, value), plans.sysctl_write(name, have)
            out.append(Change(node, f"sysctl {name}", name, None, have, value, do, undo))
    if want.offloads:
        state = found.state()
        if state is None:
            why = "; ".join(found.errors)
            raise Refused(f"{where}: its data interface did not read: {why}")
        for name, on in want.offloads:
            is_on = state.is_on(name)
            if is_on is None:
                raise Refused(f"{where}: {state.name} reports no offload {name}")
            if is_on == on:
                continue
            if state.fixed(name):
                raise Refused(f"{where}: {state.name} cannot switch offload {name} "
                                   f"({state.offloads[name]})")  # fmt: skip
            now, then = ("on" if is_on else "off"), ("on" if on else "off")
            out.append(Change(node, f"offload {name} on {state.name}", name, state.name, now, then,
                              plans.offloads_set(state.name, {name: on})[0],
                              plans.offloads_set(state.name, {name: is_on})[0]))  # fmt: skip
    return out


def _firewall_changes(tb: Testbed, node: str, role: str, want: RoleSettings) -> list[Change]:
    """The run's ruleset on `node`, loaded after its sysctls and offloads (a ruleset
    may count what they change): checked on the host without loading it first."""
    if want.firewall is None:
        return []
    where = f"testbed {tb.id}: {node} ({role})"
    fw = firewall.for_kind(want.firewall.kind, tb.driver(node).os, where)
    return [Change(node, f"firewall {s.what}", s.what, None, s.before, s.after, s.argv, s.undo,
                   fw.kind, s.input, s.undo_input, s.note)
            for s in fw.plan(tb.ex(node), want.firewall.rules, where)]  # fmt: skip


def apply(tb: Testbed, spec: RunSpec, raw: Path) -> list[Change]:
    """Make the run's changes; on a refusal put back what was made and raise one line.
    raw/host-changes.json records what ran."""
    changes = plan(tb, spec)
    done: list[Change] = []
    log: list[Ran] = []
    for c in changes:
        if c.note:
            progress.info(f"testbed {tb.id}: {c.node}: {c.note}")
        res = tb.ex(c.node).run(c.argv, input=c.input, check=False)
        # The exit status is not the host's word: procps sysctl -w exits 0 on EINVAL (a
        # namespace's read-only net.core.*) and a kernel may take part of a value; what
        # the host reports after the change is.
        found = _found(tb, c, c.after)
        log.append(Ran(c.node, c.argv, res.returncode, found))
        done.append(c)  # a refused change may still have changed something: put back too
        if found is not None:
            log += put_back(tb, done)
            _write(raw, done, log)
            err = (res.stderr or res.stdout).strip().splitlines()
            raise Refused(f"testbed {tb.id}: {c.node}: {c.setting} = {c.after} refused: "
                               f"{err[0] if err else found} (every setting made before it "
                               "is put back)")  # fmt: skip
    if changes:
        _write(raw, done, log)
    return done


@dataclass(frozen=True)
class Ran:
    """A command as it ran, and what the host reported after it (None: as intended)."""

    node: str
    argv: list[str]
    rc: int
    differs: str | None


def _write(raw: Path, done: list[Change], ran: list[Ran]) -> None:
    rec = {"changes": [asdict(c) for c in done], "ran": [asdict(r) for r in ran]}
    jsonio.write_json(raw / layout.HOST_CHANGES, rec)


def _found(tb: Testbed, c: Change, want: str) -> str | None:
    """None when the host reports `c`'s setting at `want`; else what it reports."""
    ex = tb.ex(c.node)
    if c.firewall is not None:
        return firewall.REGISTRY[c.firewall].found(ex, c.name, want)
    plans = for_os(tb.driver(c.node).os)
    if c.dev is None:
        r = ex.run(plans.sysctl_read(c.name), check=False)
        ok = r.ok and same_value(want, r.stdout)
        return None if ok else f"it reads {r.stdout.strip() or r.stderr.strip()!r}"
    outs = [ex.run(a, check=False).stdout for a in plans.interface_read(c.dev)]
    try:
        state = plans.interface_state(c.dev, outs)
    except ValueError as e:
        return str(e)
    ok = state.is_on(c.name) == (want == "on")
    return None if ok else f"it reads {state.offloads.get(c.name)}"


def put_back(tb: Testbed, changes: list[Change]) -> list[Ran]:
    """Undo `changes`, last first (a later change may rest on an earlier one: ethtool's
    `tx off` takes TSO with it); every undo is tried and checked."""
    ran = []
    for c in reversed(changes):
        res = tb.ex(c.node).run(c.undo, input=c.undo_input, check=False)
        ran.append(Ran(c.node, c.undo, res.returncode, _found(tb, c, c.before)))
    return ran


def put_back_recorded(tb: Testbed, raw: Path, changes: list[Change]) -> None:
    """After the run: undo its changes, recorded beside them in raw/host-changes.json;
    one line naming each node and setting the host does not report as found."""
    if not changes:
        return
    ran = put_back(tb, changes)
    rec = jsonio.read_json(raw / layout.HOST_CHANGES)
    jsonio.write_json(raw / layout.HOST_CHANGES, {**rec, "put_back": [asdict(r) for r in ran]})
    failed = [f"{r.node}: {' '.join(r.argv)} ({r.differs})" for r in ran if r.differs]
    if failed:
        raise Refused(f"testbed {tb.id}: not put back: {'; '.join(failed)}")
