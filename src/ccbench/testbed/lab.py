"""A lab of your own hosts (testbed.kind: lab): senders and receivers from a lab
inventory (ccbench.lab_inventory), reached over SSH with the SSH testbed's machinery
(testbed.remote), the emulation on the receivers (testbed.lab_plans).

Roles: s_i are the inventory's senders; r_i is the receiver sender s_i sends to (several
r_i may be one host: each flow has its own server port), rt1 the optional router whose
egress ccbench shapes. Without a router the bottleneck is the network between them,
which ccbench does not control: it is named as such, and what would need its counters
is "not checkable" (ccbench.unproven).

`up` first measures the path as found (its idle RTT), then changes the hosts (sysctls,
the router's qdisc, the receivers' delay and loss), recording each change with the
plan that puts it back in the testbed's state; then it calibrates against the path's
RTT plus the delay asked. `down` puts every change back, last first. A crashed
testbed's changes are put back by the next `up` (its state), and rules, an ifb or a
ccdelay of ccbench's that no state lists are swept (lab_plans.SWEEP).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ccbench import calibration, jsonio, lab_inventory, ledger, roles
from ccbench.calibration import PathExpectation
from ccbench.errors import CalibrationFailed, CcbenchError
from ccbench.hosts.base import Argv
from ccbench.hosts.linux import LinuxHost
from ccbench.inventory import Node
from ccbench.progress import info
from ccbench.roles import BOTTLENECK_ROUTER, Bottleneck, LossSite, Roles
from ccbench.spec import Topology, stable_hash
from ccbench.testbed import base
from ccbench.testbed import lab_plans as plans
from ccbench.testbed.base import TestbedBase
from ccbench.testbed.kinds import TestbedConfig
from ccbench.testbed.lab_plans import Change
from ccbench.testbed.remote import RemoteTestbed, SudoSsh

# FreeBSD senders: what a run's variant set-up changes host-wide (run_senders,
# hosts.freebsd set_cc_plan/set_stack_plan), read at `up` and put back by `down`.
FREEBSD_WATCHED = ("net.inet.tcp.functions_default", "net.inet.tcp.cc.algorithm")
# Unloads the kernel modules loaded since `up` ($1: the names loaded then).
KLD_RESTORE = (
    'for m in $(kldstat | awk \'NR > 1 {print $5}\'); do case " $1 " in *" $m "*) ;; '
    '*) kldunload -n "$m" 2>/dev/null ;; esac; done; true'
)
KLD_LIST = ["sh", "-c", "kldstat | awk 'NR > 1 {print $5}'"]


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

    def _receivers(self) -> list[str]:
        """The receiving hosts of this topology's pairs, each once."""
        return sorted({self.lab.receiver_of(i) for i in range(1, self.topo.pairs + 1)})

    def _names(self) -> list[str]:
        router = [BOTTLENECK_ROUTER] if self.lab.router is not None else []
        return [*self._senders(), *self._receivers(), *router]

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
            dev = st.get("bottleneck_dev") or self._find_dev(BOTTLENECK_ROUTER)
            b = Bottleneck(BOTTLENECK_ROUTER, dev)
        rcv = self._receivers()
        delay = roles.lab_delay_element(self.lab.emulation.delay, rcv[0])
        tool = self.lab.emulation.loss or "iptables"
        return Roles(tuple(self._senders()), tuple(roles.receivers(self.topo.pairs)), b, delay,
                     LossSite(tuple(rcv), "INPUT", tool))  # fmt: skip

    def _uncontrolled(self) -> str:
        return roles.path_between(tuple(self._senders()), tuple(self._receivers()))

    # --- snapshots -----------------------------------------------------------------
    def snapshot_drops(self, dest: Path) -> None:
        names = self._names()
        tool = plans.loss_tool(self.lab.emulation.loss or "iptables")
        extra = ({n: {tool.counters_key: tool.counters()} for n in self._receivers()}
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
        for node in self._receivers():
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
        self._all(lambda n: self.ex(n).run(["true"], timeout=30))  # reachable, or say who not
        self.end_leftovers()
        if self.cfg.tools == "container":
            self._check_image()
        self._release_other()
        stale = self.read_state() or {}
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
            "path_rtt": path, "changes": [], "complete": False,
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
            self.down()
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
                "at": self._receivers(),
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

        try:
            self._apply_tuning(did, notes)
            if self.lab.router is not None:
                st["bottleneck_dev"] = self._apply_bottleneck(did)
            st["ccdelay_pids"] = self._apply_delay(did)
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
        for n in [*self._senders(), *self._receivers()]:
            for argv in self.driver(n).tune():
                old = self.ex(n).run(plans.sysctl_read(argv), check=False)
                res = self.ex(n).run(argv, check=False)
                if not res.ok or not old.ok:
                    # e.g. host-wide knobs inside a container or namespace: say so, go on.
                    notes.append(f"{n}: `{' '.join(argv)}` failed: {res.stderr.strip()}")
                    continue
                if " ".join(old.stdout.split()) != argv[-1].split("=", 1)[1]:
                    did(Change(n, f"sysctl {plans.sysctl_key(argv)}",
                               plans.argvs(plans.sysctl_restore(argv, old.stdout))))  # fmt: skip
            if self.nodes[n].os == "freebsd":
                self._watch_freebsd(n, did)

    def _watch_freebsd(self, n: str, did: Any) -> None:
        """A FreeBSD sender's variant set-up (each run) changes its default stack and CC
        and loads modules: what they are now is what `down` puts back."""
        for key in FREEBSD_WATCHED:
            old = self.ex(n).run(["sysctl", "-n", key], check=False)
            if old.ok and old.stdout.strip():
                did(Change(n, f"sysctl {key} (the runs' variants set it)",
                           plans.argvs(["sysctl", f"{key}={old.stdout.strip()}"])))  # fmt: skip
        mods = self.ex(n).run(KLD_LIST, check=False)
        if mods.ok:
            keep = " ".join(mods.stdout.split())
            did(Change(n, "kernel modules loaded since up",
                       plans.argvs(["sh", "-c", KLD_RESTORE, "ccbench-kld", keep])))  # fmt: skip

    def _check_root_free(self, node: str, dev: str) -> None:
        out = self.ex(node).run([*plans.QDISC_SHOW, dev], check=False).stdout
        foreign = plans.foreign_root(out, dev)
        if foreign:
            raise CcbenchError(f"{node}: {dev} has a root qdisc ({foreign}) ccbench did not "
                               "put there: remove it, or ask nothing of it")  # fmt: skip

    def _apply_bottleneck(self, did: Any) -> str:
        dev = self._find_dev(BOTTLENECK_ROUTER)
        self._check_root_free(BOTTLENECK_ROUTER, dev)
        plan = LinuxHost().bottleneck(dev, self.topo, self.cfg.shaper)
        for argv in plan[1:]:  # plan[0] deletes a root qdisc: there is none of ours
            self._run(BOTTLENECK_ROUTER, argv)
            if argv is plan[1]:
                did(Change(BOTTLENECK_ROUTER, f"qdisc {dev} root: shaper and queue",
                           plans.argvs(plan[0])))  # fmt: skip
        return dev

    def _apply_delay(self, did: Any) -> dict[str, int]:
        name = self.lab.emulation.delay
        pids: dict[str, int] = {}
        if self.topo.rtt_ms <= 0 or name == roles.NoDelay.name:
            return pids
        kind = plans.delay_plan(name)
        for node in self._receivers():
            dev = self._find_dev(node)
            if kind.runs_a_process:
                pids[node] = self._start_ccdelay(node, did)
                continue
            el = kind()
            if el.takes_root:
                self._check_root_free(node, dev)
            if el.takes_ingress:
                out = self.ex(node).run([*plans.QDISC_SHOW, dev, "ingress"], check=False).stdout
                if plans.ingress_present(out):
                    raise CcbenchError(f"{node}: {dev} has an ingress qdisc ccbench did not "
                                       "put there: remove it, or use another delay")  # fmt: skip
                if not self.ex(node).run(plans.NetemIfb.loaded_argv, check=False).ok:
                    self._run(node, plans.NetemIfb.load_argv)
                    did(Change(node, "module ifb loaded", plans.argvs(plans.NetemIfb.unload_argv)))
            for argv in el.apply(dev, self.topo.rtt_ms):
                self._run(node, argv)
            did(Change(node, f"{name} {self.topo.rtt_ms:g} ms on {dev}",
                       plans.argvs(*el.undo(dev))))  # fmt: skip
        return pids

    def _start_ccdelay(self, node: str, did: Any) -> int:
        el = plans.CcdelayAtReceiver(self.lab.emulation.ccdelay, self.id)
        out = ""
        for argv in el.start(self.topo.rtt_ms):
            res = self.ex(node).run(argv, check=False, timeout=30)
            out = res.stdout
        try:
            pid = int(out.split()[-1])
        except (ValueError, IndexError):
            raise CcbenchError(f"{node}: ccdelay did not start ({out.strip()!r})") from None
        did(Change(node, f"ccdelay (pid {pid})", plans.argvs(el.stop(pid))))
        if not self.ex(node).run(el.ready(), check=False, timeout=30).ok:
            log = self.ex(node).run(["cat", el.files()[1]], check=False).stdout.strip()
            raise CcbenchError(f"{node}: ccdelay did not start: {log or 'no output'}")
        for argv in el.rules():
            self._run(node, argv)
            did(Change(node, "NFQUEUE rule to ccdelay", plans.argvs(plans.delete_rule(argv))))
        return pid

    def _apply_loss(self, did: Any) -> None:
        if not self.topo.has_loss:
            return
        tool = plans.loss_tool(self.lab.emulation.loss or "iptables")
        for node in self._receivers():
            added = tool.add(self.topo)
            for argv in added:
                self._run(node, argv)
            what = f"{tool.name} loss rule ({self.topo.loss_mode} {self.topo.loss_rate:g})"
            did(Change(node, what, plans.argvs(*tool.undo(added))))

    def _undo(self, changes: list[dict[str, Any]], why: str) -> None:
        """Put back `changes`, last first; a host that cannot be reached is said, and
        what stays on it listed."""
        for d in reversed(changes):
            c = Change.from_dict(d)
            try:
                for argv in c.undo:
                    self.ex(c.node).run(list(argv), check=False, timeout=30)
            except CcbenchError as e:
                info(f"testbed {self.id}: {c.node}: could not put back {c.what} ({why}): {e}")

    def _sweep(self) -> None:
        """What a lab testbed left that no state lists: say it, remove it."""
        for n in self._receivers():
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

    def prepare_run(self) -> None:
        """Before a run: what a crashed run left is ended; if another testbed changed
        the hosts since this one's `up`, its changes go and this one's are made again
        (no recalibration: the path is the same)."""
        self.end_leftovers()
        if self._claimed_by() == self.id:
            return
        self._release_other()
        st = self.read_state() or {}
        st["changes"] = []
        self._apply(st)
        self._write_claim()

    def down(self) -> None:
        st = self.read_state() or {}
        self._undo(st.get("changes") or [], "down")
        if self._claimed_by() == self.id:
            self._claim_file().unlink(missing_ok=True)
        if self.cfg.tools == "container":
            self._remove_containers()
        for ex in self._ex.values():
            ex.close()
        self.remove_state()


def down_from_state(tb_id: str, st: dict[str, Any]) -> str:
    """Put back what lab testbed `tb_id` (its state.json as `st`) changed on its hosts."""
    from ccbench.testbed.remote import down_with

    return down_with(LabTestbed, tb_id, st, "lab hosts put back as found")
