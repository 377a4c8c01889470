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

A run killed with SIGKILL never reaches its put-back: before the first change the changes
are written beside the testbed's state (`pending_file`), and that list is removed only
once they are back. The next run's `apply`, and the ssh and lab testbeds' `up` and
`down`, put back what it lists first (local namespaces go with their testbed, and its
state with them).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass
from pathlib import Path

from ccbench import jsonio, layout, progress
from ccbench.errors import CcbenchError, Refused
from ccbench.host_settings import RoleSettings
from ccbench.hosts import firewall, loader
from ccbench.hosts.settings import OsSettings, for_os, read_endpoint, same_value
from ccbench.instruments.host_settings import endpoints
from ccbench.spec import RunSpec
from ccbench.testbed import base
from ccbench.testbed.base import Testbed

PENDING = "host-pending.json"


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
    raw/host-changes.json records what ran. What a killed run left is put back first."""
    put_back_killed(tb)
    changes = plan(tb, spec)
    _keep_pending(tb, changes)  # before the first change: a SIGKILL leaves the list
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
            back = put_back(tb, done)
            log += back
            _keep_pending(tb, _not_back(done, back))
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
        try:
            res = tb.ex(c.node).run(c.undo, input=c.undo_input, check=False)
            ran.append(Ran(c.node, c.undo, res.returncode, _found(tb, c, c.before)))
        except CcbenchError as e:  # a host not reached: the others are still put back
            ran.append(Ran(c.node, c.undo, -1, f"not reached: {e}"))
    return ran


def put_back_recorded(tb: Testbed, raw: Path, changes: list[Change]) -> None:
    """After the run: undo its changes, recorded beside them in raw/host-changes.json;
    one line naming each node and setting the host does not report as found."""
    if not changes:
        return
    ran = put_back(tb, changes)
    _keep_pending(tb, _not_back(changes, ran))
    rec = jsonio.read_json(raw / layout.HOST_CHANGES)
    jsonio.write_json(raw / layout.HOST_CHANGES, {**rec, "put_back": [asdict(r) for r in ran]})
    failed = [f"{r.node}: {' '.join(r.argv)} ({r.differs})" for r in ran if r.differs]
    if failed:
        raise Refused(f"testbed {tb.id}: not put back: {'; '.join(failed)}")


# --- what a killed run left --------------------------------------------------------------


def pending_file(tb_id: str) -> Path:
    """The changes of testbed `tb_id`'s run not yet put back, beside its state.json (so a
    local testbed's `down` removes it with its state)."""
    return base.STATE_ROOT / tb_id / PENDING


def _keep_pending(tb: Testbed, changes: list[Change]) -> None:
    """`changes` as the testbed's pending list (written atomically); none: no list."""
    if changes:
        jsonio.write_json(pending_file(tb.id), {"changes": [asdict(c) for c in changes]})
    else:
        pending_file(tb.id).unlink(missing_ok=True)


def _not_back(changes: list[Change], ran: list[Ran]) -> list[Change]:
    """The changes whose undo (`ran`, last first as put_back runs them) the host does
    not report as back, in the order they were made."""
    return [c for c, r in zip(changes, reversed(ran), strict=True) if r.differs is not None]


def put_back_pending(tb: Testbed, skip: Collection[str] = ()) -> list[str]:
    """Put back what testbed `tb`'s pending list holds (a run killed before its
    put-back), said in one line; returns what is still not back, each naming its node
    and setting (kept in the list, as are the changes of the nodes in `skip`: not
    reached)."""
    if not pending_file(tb.id).exists():
        return []
    d = jsonio.read_json(pending_file(tb.id))
    try:
        changes = [Change(**c) for c in d["changes"]]
    except (TypeError, KeyError) as e:  # not JSON (None), or not such a list
        return [f"{pending_file(tb.id)} does not read ({type(e).__name__}: {e}): check the "
                "hosts, then remove it"]  # fmt: skip
    now = [c for c in changes if c.node not in skip]
    if now:
        progress.info(f"testbed {tb.id}: putting back what a killed run set: "
                      f"{', '.join(f'{c.node} {c.setting}' for c in now)}")  # fmt: skip
    ran = put_back(tb, now)
    left = _not_back(now, ran)
    _keep_pending(tb, [c for c in changes if c.node in skip or c in left])
    why = {id(c): "not reached" for c in changes if c.node in skip}
    why |= {id(c): r.differs for c, r in zip(now, reversed(ran), strict=True) if r.differs}
    return [f"{c.node}: {c.setting} not put back ({why[id(c)]})" for c in changes if id(c) in why]


def put_back_killed(tb: Testbed) -> None:
    """What a killed run set, put back before anything reads or changes the hosts: the
    next run's `apply`, and the ssh and lab testbeds' `up` (else its tuning would record
    the killed run's values as found, and its calibration measure a path with them on).
    What does not go back refuses, in one line naming it."""
    left = put_back_pending(tb)
    if left:
        raise Refused(f"testbed {tb.id}: what a killed run set is not all put back: "
                      f"{'; '.join(left)} (`ccbench testbed down --id {tb.id}` "
                      "retries)")  # fmt: skip


def down_hosts(tb: Testbed, skip: Collection[str] = ()) -> tuple[list[str], str]:
    """`down` of an ssh or lab testbed, for the hosts' side of its runs: what a killed
    run set put back, and ccbench's /boot/loader.conf block removed on its FreeBSD hosts
    (checked gone). Returns what is not as found (one entry each) and what to add to
    down's line."""
    problems = put_back_pending(tb, skip)
    removed = []
    for node, os_name in sorted(tb.node_os().items()):
        if os_name != loader.OS:
            continue
        if node in skip:
            problems.append(f"{node}: {loader.LOADER_CONF} not checked (not reached)")
            continue
        try:
            r = tb.ex(node).run(loader.remove_block(), check=False)
            gone = tb.ex(node).run(loader.block_gone(), check=False).ok
        except CcbenchError as e:
            problems.append(f"{node}: {loader.LOADER_CONF} not checked ({e})")
            continue
        if not gone:
            why = (r.stderr or r.stdout).strip().splitlines()
            problems.append(f"{node}: ccbench's block still in {loader.LOADER_CONF}"
                            f"{f' ({why[0]})' if why and not r.ok else ''}")  # fmt: skip
        elif r.stdout.strip() == "written":
            removed.append(node)
    if not removed:
        return problems, ""
    return problems, (f"; removed ccbench's {loader.LOADER_CONF} block on {', '.join(removed)} "
                      "(the running kernel keeps its tunables until the next reboot)")  # fmt: skip


def down_hosts_or_raise(tb: Testbed, skip: Collection[str] = ()) -> str:
    """down_hosts for the ssh testbed: what is not as found raises, in one line (its
    state, the pending list with it, is kept: `down` again retries)."""
    problems, said = down_hosts(tb, skip)
    if problems:
        raise CcbenchError(f"testbed {tb.id}: not put back: {'; '.join(problems)} (its "
                           f"state is kept: `ccbench testbed down --id {tb.id}` again "
                           "retries)")  # fmt: skip
    return said
