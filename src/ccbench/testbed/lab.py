"""A lab of your own hosts (testbed.kind: lab): senders and receivers from a lab
inventory (ccbench.lab_inventory), reached over SSH with the SSH testbed's machinery
(testbed.remote), the emulation on the receivers (testbed.lab_plans).

Roles: s_i are the inventory's senders; r_i is the receiver sender s_i sends to (several
r_i may be one host: each flow has its own server port), rt1 the optional router whose
egress ccbench shapes. Without a router the bottleneck is the network between them,
which ccbench does not control: it is named as such, and what would need its counters
is "not checkable" (ccbench.unproven).

`up` first runs every check that can refuse it, changing nothing (testbed.lab_guard),
then measures the path as found (its idle RTT), then changes the hosts (sysctls, the
router's qdisc, the receivers' delay and loss), recording each change with the plans
that put it back and check it is back in the testbed's state; then it calibrates
against the path's RTT plus the delay asked. `down` ends every process of the
testbed's runs on every host, removes the files they write there, puts every change
back, last first, and says "as found" only once each is checked back and no process or
file of its runs is left. A crashed testbed's changes are put back by the next
`up` (its state), and rules, an ifb or a ccdelay of ccbench's that no state lists are
swept (lab_plans.SWEEP).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ccbench import calibration, host_apply, jsonio, lab_inventory, ledger, roles
from ccbench.calibration import PathExpectation
from ccbench.errors import CalibrationFailed, CcbenchError
from ccbench.exec_ssh import batch_argv, reachable
from ccbench.hosts.base import Argv
from ccbench.hosts.linux import LinuxHost
from ccbench.inventory import Node
from ccbench.progress import info
from ccbench.roles import BOTTLENECK_ROUTER, Bottleneck, LossSite, Roles
from ccbench.spec import Topology, stable_hash
from ccbench.testbed import base, lab_guard
from ccbench.testbed import lab_plans as plans
from ccbench.testbed.base import TestbedBase
from ccbench.testbed.kinds import TestbedConfig
from ccbench.testbed.lab_checks import Change, absent, root_default, sysctl_is
from ccbench.testbed.remote import RemoteTestbed, SudoSsh

# FreeBSD senders: what a run's variant set-up changes host-wide (run_senders,
# hosts.freebsd set_cc_plan/set_stack_plan), read at `up` and put back by `down`.
FREEBSD_WATCHED = ("net.inet.tcp.functions_default", "net.inet.tcp.cc.algorithm")
# Unloads the kernel modules loaded since `up` ($1: the names loaded then), the last
# loaded first: a module loaded for another (tcphpts for tcp_rack) goes after it.
KLD_RESTORE = (
    "for m in $(kldstat | awk 'NR > 1 {m[NR] = $5} END {for (i = NR; i > 1; i--) print m[i]}'); "
    'do case " $1 " in *" $m "*) ;; *) kldunload -n "$m" 2>/dev/null ;; esac; done; true'
)
KLD_LIST = ["sh", "-c", "kldstat | awk 'NR > 1 {print $5}'"]
# Exits 0 when the modules loaded are $1 again (in kldstat's order).
KLD_SAME = '[ "$(echo $(kldstat | awk \'NR > 1 {print $5}\'))" = "$1" ]'


class LabTestbed(RemoteTestbed):
    kind = "lab"

    def __init__(self, cfg: TestbedConfig, topo: Topology):
        if not cfg.inventory:
            raise CcbenchError("testbed.inventory: kind lab needs a lab inventory (docs/lab.md)")
        TestbedBase.__init__(self, cfg, topo)
        self.lab = lab_inventory.load(cfg.inventory, cfg.dumbbell)  # its sender set
        self.inv = self.lab.as_ssh_inventory()
        self.nodes = dict(self.inv.dumbbells[1])
        if topo.pairs > len(self.lab.senders):
            raise CcbenchError(f"topology.pairs: {topo.pairs} pairs asked, {self.inv.source} "
                               f"has {len(self.lab.senders)} senders")  # fmt: skip
        if topo.has_loss and self.lab.emulation.loss is None:
            raise CcbenchError(f"topology.loss: {self.inv.source} names no emulation.loss tool")
        self._ex: dict[str, SudoSsh] = {}
        self._devs: dict[str, str] = {}  # node -> the interface `up` changes (lab_guard)

    # --- roles -> the inventory's hosts ----------------------------------------------
    def host_of(self, node: str) -> str:
        """The inventory's host behind a role: r_i is the receiver sender s_i sends to."""
        i = roles.pair_of(node)
        if i is not None and roles.is_receiver(node) and i <= len(self.lab.senders):
            return self.lab.receiver_of(i)
        return node

    def node(self, name: str) -> Node:
        return super().node(self.host_of(name))

    def ex(self, node: str) -> SudoSsh:
        return super().ex(self.host_of(node))

    def _senders(self) -> list[str]:
        return roles.senders(self.topo.pairs)

    def receivers(self) -> list[str]:
        """The receiving hosts of this topology's pairs, each once."""
        return sorted({self.lab.receiver_of(i) for i in range(1, self.topo.pairs + 1)})

    def interface(self, node: str) -> str:
        """The interface with `node`'s experiment address (what `up` changes)."""
        return self._find_dev(node)

    def _names(self) -> list[str]:
        router = [BOTTLENECK_ROUTER] if self.lab.router is not None else []
        return [*self._senders(), *self.receivers(), *router]

    def node_os(self) -> dict[str, str]:
        return {n: self.nodes[n].os for n in self._names()}

    @property
    def bottleneck(self) -> tuple[str, str]:
        b = self.roles.bottleneck
        if b is None:
            raise CcbenchError(f"testbed {self.id}: no bottleneck ccbench controls "
                               f"({self._uncontrolled()})")  # fmt: skip
        return b.node, b.dev

    @property
    def roles(self) -> Roles:
        b = None
        if self.lab.router is not None:
            st = self.read_state() or {}
            dev = (st.get("bottleneck_dev") or self._devs.get(BOTTLENECK_ROUTER)
                   or self._find_dev(BOTTLENECK_ROUTER))  # fmt: skip
            b = Bottleneck(BOTTLENECK_ROUTER, dev)
        rcv = self.receivers()
        delay = roles.lab_delay_element(self.lab.emulation.delay, rcv[0])
        tool = self.lab.emulation.loss or "iptables"
        return Roles(tuple(self._senders()), tuple(roles.receivers(self.topo.pairs)), b, delay,
                     LossSite(tuple(rcv), "INPUT", tool), self._pinned())  # fmt: skip

    def _pinned(self) -> tuple[tuple[int, int], ...]:
        """(pair, port) of each sender of this topology that pins its server port."""
        return tuple((i, s.port) for i, s in enumerate(self.lab.senders[: self.topo.pairs], 1)
                     if s.port is not None)  # fmt: skip

    def _ports(self) -> tuple[int, int]:
        """The server ports the loss rule and the delay element cover."""
        return plans.covered_ports(port for _, port in self._pinned())

    def delay_plan(self) -> plans.DelayPlan | None:
        """The element the receivers get (None: no delay asked)."""
        name = self.lab.emulation.delay
        if self.topo.rtt_ms <= 0 or name == roles.NoDelay.name:
            return None
        return plans.delay_plan(name).make(self.lab.emulation.ccdelay, self.id, self._ports())

    def _uncontrolled(self) -> str:
        return roles.path_between(tuple(self._senders()), tuple(self.receivers()))

    # --- snapshots -----------------------------------------------------------------
    def snapshot_drops(self, dest: Path) -> None:
        names = self._names()
        tool = plans.loss_tool(self.lab.emulation.loss or "iptables")
        extra = ({n: {tool.counters_key: tool.counters()} for n in self.receivers()}
                 if self.topo.has_loss and tool.counters_key != "iptables" else None)  # fmt: skip
        ledger.collect({n: self.ex(n) for n in names}, {n: self.nodes[n].os for n in names},
                       dest, control_route=True, softnet_host_wide=False,
                       extra_reads=extra)  # fmt: skip

    def snapshot_delay(self, dest: Path) -> None:
        """ccdelay's statistics: its receiver's as it wrote them, or, when several
        receivers run one, their sum with each one's own (lab_plans.merged_stats). A
        receiver whose statistics do not come leaves the file out: the run's check of
        the delay element then names it."""
        pids = (self.read_state() or {}).get("ccdelay_pids") or {}
        el = plans.CcdelayAtReceiver(self.lab.emulation.ccdelay, self.id)
        got: dict[str, str] = {}
        for node in self.receivers():
            if node in pids:
                res = self.ex(node).run(el.stats(int(pids[node])), check=False, timeout=30)
                if not (res.ok and res.stdout.strip()):
                    return
                got[node] = res.stdout
        if len(got) == 1:
            dest.write_text(next(iter(got.values())))
        elif got:
            try:
                merged = plans.merged_stats({n: json.loads(t) for n, t in got.items()})
            except ValueError as e:  # the attempt fails saying so (and is retried)
                raise CcbenchError(f"{', '.join(got)}: ccdelay statistics do not merge "
                                   f"({e})") from None  # fmt: skip
            jsonio.write_json(dest, merged)

    # --- up / down -------------------------------------------------------------------
    def up(self) -> dict[str, Any]:
        t0 = time.monotonic()
        self._all(lambda n: reachable(self.ex(n)))  # reachable, or say who not
        stale = self.read_state() or {}
        # Every check that can refuse, before the first change on any host.
        try:
            self._devs = lab_guard.preflight(self, self._pending())
        except CcbenchError:
            self._close()  # no connection of a refused `up` stays either
            raise
        self.end_leftovers()
        host_apply.put_back_killed(self)  # before tuning records the hosts as found
        self._release_other()
        self._undo(stale.get("changes") or [], "an earlier testbed of this id left")
        self._sweep()
        # The path as found: its idle RTT, before anything is emulated on it.
        found: list[str] = []
        path = calibration.idle_rtt(self, found, check=False)
        if found:
            raise CcbenchError(f"testbed {self.id}: the path as found: {'; '.join(found)}")
        st: dict[str, Any] = {
            "id": self.id, "kind": self.kind, "testbed": self.cfg.to_dict(),
            "topology": asdict(self.topo), "topology_key": self.topo.key(),
            "path_rtt": path, "changes": [], "complete": False, "devs": self._devs,
        }  # fmt: skip
        notes = self._apply(st)
        expect = PathExpectation(
            {i: path[f"pair{i}"]["judged_ms"] + self.topo.rtt_ms
             for i in range(1, self.topo.pairs + 1)},
            None if self.lab.router is not None else self._uncontrolled(),
        )  # fmt: skip
        method = self.lab.emulation.delay if self.topo.rtt_ms > 0 else roles.NoDelay.name
        try:
            cal = calibration.calibrate(self, method, expect=expect)
        except CalibrationFailed as e:
            e.record.update(self._lab_record(path, expect, notes, t0))
            st.update({"calibration": e.record})
            self.write_state(st)
            try:
                self.down()
            except CcbenchError as d:  # said, the failed calibration raised
                info(str(d))
            raise
        cal.update(self._lab_record(path, expect, notes, t0))
        st.update({"calibration": cal, "complete": True})
        self.write_state(st)
        self._write_claim()
        return cal

    def _lab_record(
        self, path: dict[str, Any], expect: PathExpectation, notes: list[str], t0: float
    ) -> dict[str, Any]:
        """What calibration.json says of a lab beyond the common checks."""
        return {
            "path_rtt": path,
            "expected_rtt_ms": {f"pair{i}": round(v, 3) for i, v in expect.rtt_ms.items()},
            "rtt_added_ms": self.topo.rtt_ms,
            "delay_direction": roles.LAB_DIRECTIONS[self.lab.emulation.delay],
            "emulation": {
                "delay": self.lab.emulation.delay,
                "loss": self.lab.emulation.loss if self.topo.has_loss else None,
                "at": self.receivers(),
            },  # fmt: skip
            "notes": notes,
            "setup_s": round(time.monotonic() - t0, 2),
        }

    def _apply(self, st: dict[str, Any]) -> list[str]:
        """Make every change (each recorded in `st` as soon as it is made, and the state
        written, so a crash leaves a list to put back); on failure the changes made so
        far are put back. Returns notes (tuning a host refused)."""
        notes: list[str] = []
        changes: list[dict[str, Any]] = st.setdefault("changes", [])

        def did(c: Change) -> None:
            changes.append(c.to_dict())
            self.write_state(st)

        devs = st.get("devs") or {}
        try:
            self._apply_tuning(did, notes)
            if self.lab.router is not None:
                st["bottleneck_dev"] = self._apply_bottleneck(did, devs[BOTTLENECK_ROUTER])
            st["ccdelay_pids"] = self._apply_delay(did, devs)
            self._apply_loss(did)
        except BaseException:
            self._undo(changes, "a failed `up` made")
            st["changes"] = []
            self.write_state(st)
            raise
        self.write_state(st)
        return notes

    def _run(self, node: str, argv: Argv) -> None:
        res = self.ex(node).run(argv, check=False, timeout=30)
        if not res.ok:
            raise CcbenchError(f"{node}: `{' '.join(argv)}` failed: "
                               f"{res.stderr.strip() or res.stdout.strip()}")  # fmt: skip

    def _apply_tuning(self, did: Any, notes: list[str]) -> None:
        for n in [*self._senders(), *self.receivers()]:
            for argv in self.driver(n).tune():
                old = self.ex(n).run(plans.sysctl_read(argv), check=False)
                res = self.ex(n).run(argv, check=False)
                if not res.ok or not old.ok:
                    # e.g. host-wide knobs inside a container or namespace: say so, go on.
                    notes.append(f"{n}: `{' '.join(argv)}` failed: {res.stderr.strip()}")
                    continue
                if " ".join(old.stdout.split()) != argv[-1].split("=", 1)[1]:
                    key = plans.sysctl_key(argv)
                    did(Change(n, f"sysctl {key}",
                               plans.argvs(plans.sysctl_restore(argv, old.stdout)),
                               plans.argvs(sysctl_is(key, old.stdout))))  # fmt: skip
            if self.nodes[n].os == "freebsd":
                self._watch_freebsd(n, did)

    def _watch_freebsd(self, n: str, did: Any) -> None:
        """A FreeBSD sender's variant set-up (each run) changes its default stack and CC
        and loads modules: what they are now is what `down` puts back. The modules are
        recorded first, so undone last (`_undo`: last first): FreeBSD refuses to unload
        the default stack or CC with EBUSY (sys/netinet/tcp_subr.c,
        deregister_tcp_functions: "You can't free the current default"; sys/netinet/cc/
        cc.c, cc_modevent MOD_UNLOAD and cc_deregister_algo_locked via cc_check_default),
        so the defaults go back before tcp_rack or cc_htcp is unloaded."""
        mods = self.ex(n).run(KLD_LIST, check=False)
        if mods.ok:
            keep = " ".join(mods.stdout.split())
            did(Change(n, "kernel modules loaded since up",
                       plans.argvs(["sh", "-c", KLD_RESTORE, "ccbench-kld", keep]),
                       plans.argvs(["sh", "-c", KLD_SAME, "ccbench-kld", keep])))  # fmt: skip
        for key in FREEBSD_WATCHED:
            old = self.ex(n).run(["sysctl", "-n", key], check=False)
            if old.ok and old.stdout.strip():
                did(Change(n, f"sysctl {key} (the runs' variants set it)",
                           plans.argvs(["sysctl", f"{key}={old.stdout.strip()}"]),
                           plans.argvs(sysctl_is(key, old.stdout))))  # fmt: skip

    def _apply_bottleneck(self, did: Any, dev: str) -> str:
        """The router's egress `dev` (its root a kernel default: lab_guard checked)."""
        plan = LinuxHost().bottleneck(dev, self.topo, self.cfg.shaper)
        for argv in plan[1:]:  # plan[0] deletes a root qdisc: there is none of ours
            self._run(BOTTLENECK_ROUTER, argv)
            if argv is plan[1]:
                did(Change(BOTTLENECK_ROUTER, f"qdisc {dev} root: shaper and queue",
                           plans.argvs(plan[0]), plans.argvs(root_default(dev))))  # fmt: skip
        return dev

    def _apply_delay(self, did: Any, devs: dict[str, str]) -> dict[str, int]:
        """The delay on each receiver's interface in `devs` (lab_guard checked them)."""
        el = self.delay_plan()
        pids: dict[str, int] = {}
        if el is None:
            return pids
        for node in self.receivers():
            if isinstance(el, plans.CcdelayAtReceiver):
                pids[node] = self._start_ccdelay(el, node, did)
                continue
            dev = devs[node]
            if el.takes_ingress and not self.ex(node).run(plans.NetemIfb.loaded_argv,
                                                          check=False).ok:  # fmt: skip
                self._run(node, plans.NetemIfb.load_argv)
                did(Change(node, "module ifb loaded", plans.argvs(plans.NetemIfb.unload_argv),
                           plans.argvs(absent(plans.NetemIfb.loaded_argv))))  # fmt: skip
            for argv in el.apply(dev, self.topo.rtt_ms):
                self._run(node, argv)
            did(Change(node, f"{el.element} {self.topo.rtt_ms:g} ms on {dev}",
                       plans.argvs(*el.undo(dev)), plans.argvs(*el.check(dev))))  # fmt: skip
        return pids

    def _start_ccdelay(self, el: plans.CcdelayAtReceiver, node: str, did: Any) -> int:
        out = ""
        for argv in el.start(self.topo.rtt_ms):
            res = self.ex(node).run(argv, check=False, timeout=30)
            out = res.stdout
        try:
            pid = int(out.split()[-1])
        except (ValueError, IndexError):
            raise CcbenchError(f"{node}: ccdelay did not start ({out.strip()!r})") from None
        did(Change(node, f"ccdelay (pid {pid}) and its files", plans.argvs(*el.stop(pid)),
                   plans.argvs(el.gone(pid))))  # fmt: skip
        if not self.ex(node).run(el.ready(), check=False, timeout=30).ok:
            log = self.ex(node).run(["cat", el.files()[1]], check=False).stdout.strip()
            raise CcbenchError(f"{node}: ccdelay did not start: {log or 'no output'}")
        for argv in el.rules():
            self._run(node, argv)
            did(Change(node, "NFQUEUE rule to ccdelay", plans.argvs(plans.delete_rule(argv)),
                       plans.argvs(absent(plans.rule_present(argv)))))  # fmt: skip
        return pid

    def _apply_loss(self, did: Any) -> None:
        if not self.topo.has_loss:
            return
        tool = plans.loss_tool(self.lab.emulation.loss or "iptables")
        for node in self.receivers():
            added = tool.add(self.topo, self._ports())
            for argv in added:
                self._run(node, argv)
            what = f"{tool.name} loss rule ({self.topo.loss_mode} {self.topo.loss_rate:g})"
            did(Change(node, what, plans.argvs(*tool.undo(added)),
                       plans.argvs(*tool.check(added))))  # fmt: skip

    def _undo(self, changes: list[dict[str, Any]], why: str) -> None:
        """Put back `changes`, each host's last first, the hosts at once (no change
        depends on another host's); a host that cannot be reached is said, with what
        stays on it."""
        by_node: dict[str, list[Change]] = {}
        for d in reversed(changes):
            c = Change.from_dict(d)
            by_node.setdefault(c.node, []).append(c)

        def undo(node: str) -> None:
            argvs = [a for c in by_node[node] for a in c.undo]  # one round trip
            try:
                self.ex(node).run(batch_argv(argvs), check=False, timeout=30 + 5 * len(argvs))
            except CcbenchError as e:
                left = ", ".join(c.what for c in by_node[node])
                info(f"testbed {self.id}: {node}: could not put back {left} ({why}): {e}")

        with ThreadPoolExecutor(max_workers=max(1, len(by_node))) as pool:
            list(pool.map(undo, sorted(by_node)))

    def _sweep(self) -> None:
        """What a lab testbed left that no state lists: say it, remove it."""
        for n in self.receivers():
            if self.nodes[n].os != "linux":
                continue
            out = self.ex(n).run(plans.sweep_argv(), check=False).stdout.strip()
            if out:
                info(f"testbed {self.id}: {n}: removed what an earlier testbed left "
                     f"({'; '.join(out.splitlines())})")  # fmt: skip

    # --- several testbeds on one lab (one per scenario and sender set) ---------------
    def _claim_file(self) -> Path:
        """One claim per lab inventory: every sender set sends to the same receivers."""
        key = stable_hash([str(Path(self.inv.source).resolve()), "lab"])[:12]
        return base.STATE_ROOT / f"lab-{key}.json"

    def _release_other(self) -> None:
        """The lab's hosts are this testbed's: the changes of the one that claimed them
        last are put back first (its state lists them), so its rules never apply to
        this one's runs and each testbed records the hosts as found."""
        self._release_claim("changes", lambda ch, owner: self._undo(ch, f"testbed {owner} made"))

    def _pending(self) -> list[Change]:
        """The changes an `up` puts back before it makes its own: those an earlier
        testbed of this id left (its state), and those of the testbed that claimed the
        hosts last."""
        lists = [(self.read_state() or {}).get("changes") or []]
        owner = self._claimed_by()
        if owner is not None and owner != self.id:
            other = jsonio.read_json(base.STATE_ROOT / owner / "state.json")
            lists.append((other.get("changes") or []) if isinstance(other, dict) else [])
        return [Change.from_dict(d) for changes in lists for d in changes]

    def prepare_run(self) -> None:
        """Before a run: what a crashed run left is ended; if another testbed changed
        the hosts since this one's `up`, its changes go and this one's are made again
        (no recalibration: the path is the same)."""
        self.end_leftovers()
        if self._claimed_by() == self.id:
            return
        st = self.read_state() or {}
        st["devs"] = lab_guard.preflight(self, self._pending())  # as `up`: checks first
        self._release_other()
        st["changes"] = []
        self._apply(st)
        self._write_claim()

    def down(self) -> str:
        """End every process of this testbed's runs on every host (a run killed
        mid-traffic included) and remove the files they write there, put back what a
        killed run set (host_apply.down_hosts: its host settings, ccbench's loader.conf
        block), then every change, last first, and check each is back and no process or
        file is left.
        Anything not as found raises, naming it; the state is kept then (marked not
        complete), so `down` again puts back what it lists."""
        st = self.read_state() or {}
        changes = st.get("changes") or []
        swept, unreachable = self.end_runs()
        # a killed run's host settings were made after `up`'s changes: back first
        problems, loader_said = host_apply.down_hosts(self, unreachable)
        self._undo([d for d in changes if d.get("node") not in unreachable], "down")
        problems += lab_guard.not_as_found(self, [Change.from_dict(d) for d in changes], swept,
                                           unreachable)  # fmt: skip
        if self.cfg.tools == "container":
            self._remove_containers()
        self._close()
        if problems:
            st.update({"complete": False, "down_problems": problems})
            self.write_state(st)
            raise CcbenchError(f"testbed {self.id}: not as found after down: "
                               f"{'; '.join(problems)} (its state is kept: `ccbench testbed "
                               f"down --id {self.id}` again puts back what it lists)")  # fmt: skip
        if self._claimed_by() == self.id:
            self._claim_file().unlink(missing_ok=True)
        self.remove_state()
        ended = sum(len(sw.ended) for sw in swept.values())
        killed = f"; ended {ended} process(es) of its runs" if ended else ""
        files = sorted({f for sw in swept.values() for f in sw.files})
        killed += f"; removed {', '.join(files)}" if files else ""
        return (f"lab hosts put back as found (checked: {len(changes)} change(s) back, no "
                f"process or file of its runs left on {', '.join(self._names())}"
                f"{killed}){loader_said}")  # fmt: skip


def down_from_state(tb_id: str, st: dict[str, Any]) -> str:
    """Put back what lab testbed `tb_id` (its state.json as `st`) changed on its hosts."""
    from ccbench.testbed.remote import down_with

    return down_with(LabTestbed, tb_id, st)
