"""The SSH testbed: the same dumbbell roles on real hosts (Emulab/CloudLab, or any
SSH-reachable machines listed in a hosts inventory).

ccbench does not build this dumbbell (profile.py and its start-up scripts do); `up`
checks every node answers, applies the seed tuning, (re)configures the bottleneck
queue for the topology asked, adds loss rules, and calibrates exactly like the local
testbed. `down` ends every process of the testbed's runs on every node (recorded under
its id: ccbench.leftovers), removes the files its instruments write there, puts back what
a run killed with SIGKILL set (host_apply) and removes what `up` added (loss rules).
"""

from __future__ import annotations

import itertools
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ccbench import (
    calibration,
    delaynode,
    host_apply,
    instruments,
    inventory,
    jsonio,
    ledger,
    leftovers,
    probes,
)
from ccbench.container import DEFAULT_IMAGE, INIT_PATH, host_network_argv, init_missing
from ccbench.errors import CalibrationFailed, CcbenchError
from ccbench.exec import Result
from ccbench.exec_ssh import SshExecutor, SshProc, batch_argv, reachable, remove_stale_stderr
from ccbench.hosts import driver_for
from ccbench.hosts.base import HostDriver
from ccbench.hosts.linux import LinuxHost
from ccbench.leftovers import Swept
from ccbench.progress import info
from ccbench.roles import (
    BOTTLENECK_ROUTER,
    DELAY_NODE,
    Bottleneck,
    NoDelay,
    Roles,
    delay_element,
    dumbbell,
)
from ccbench.spec import Topology, stable_hash
from ccbench.testbed import base
from ccbench.testbed.base import TestbedBase
from ccbench.testbed.kinds import TestbedConfig


class SudoSsh(SshExecutor):
    """Prefix `sudo -n` on hosts where the login user is not root (Emulab)."""

    def __init__(self, *args: Any, sudo: bool = False, **kw: Any):
        super().__init__(*args, **kw)
        self.sudo = sudo

    def command(self, argv: Any) -> list[str]:
        return super().command(["sudo", "-n", *argv] if self.sudo else list(argv))


class ContainerSsh(SudoSsh):
    """`tools: container` on a Linux host: background tools (iperf3, ss, probes) and
    run_where_tools_run run in the linux-node image with the host's network (through
    wrap_spawned); set-up commands use the host's tools.
    The pid and gate wrappers stay outside, so stop() signals podman, which passes the
    signal on to the tool (ping prints its summary on SIGINT)."""

    def __init__(self, *args: Any, image: str, name_prefix: str, **kw: Any):
        super().__init__(*args, **kw)
        self.image = image
        self.name_prefix = name_prefix

    def wrap_spawned(self, argv: list[str]) -> list[str]:
        name = f"{self.name_prefix}{os.getpid()}-{next(_CONTAINER_SEQ)}"
        return host_network_argv(self.image, argv, name=name)


_CONTAINER_SEQ = itertools.count(1)


class RemoteTestbed(TestbedBase):
    kind = "ssh"
    listen_poll_s = 0.05  # each ask is an ssh round trip
    listen_timeout_s = 10.0

    def __init__(self, cfg: TestbedConfig, topo: Topology):
        if not cfg.inventory:
            raise CcbenchError("testbed.inventory: kind ssh needs a hosts inventory file")
        super().__init__(cfg, topo)
        self.inv = inventory.load(cfg.inventory)
        self.nodes = self.inv.dumbbell(cfg.dumbbell)
        have = inventory.pairs(self.nodes)
        if topo.pairs > have:
            raise CcbenchError(
                f"topology.pairs: {topo.pairs} pairs asked, dumbbell {cfg.dumbbell} of "
                f"{self.inv.source} has {have}"
            )
        self._ex: dict[str, SudoSsh] = {}

    def node_os(self) -> dict[str, str]:
        return {n: node.os for n, node in self.nodes.items()}

    # --- testbed.base.Testbed ------------------------------------------------
    def node(self, name: str) -> inventory.Node:
        if name not in self.nodes:
            raise CcbenchError(f"{self.inv.source}: dumbbell {self.cfg.dumbbell} has no {name}")
        return self.nodes[name]

    def ex(self, node: str) -> SudoSsh:
        if node not in self._ex:
            n = self.node(node)
            # its runs' processes recorded under this testbed's id: its `down` ends them
            own = leftovers.proc_dir(self.id)
            if self.cfg.tools == "container" and n.os == "linux":
                self._ex[node] = ContainerSsh(node, n.target, sudo=self.inv.sudo,
                                              image=DEFAULT_IMAGE, proc_dir=own,
                                              name_prefix=self._container_prefix(node))  # fmt: skip
            else:
                self._ex[node] = SudoSsh(node, n.target, sudo=self.inv.sudo, proc_dir=own)
        return self._ex[node]

    def _container_prefix(self, node: str) -> str:
        return f"ccb-{self.id}-{node}-"

    def _linux_nodes(self) -> list[str]:
        return [n for n in sorted(self.nodes) if self.nodes[n].os == "linux"]

    def check_image(self) -> None:
        """`tools: container`: every Linux node must have the image (built by its
        start-up script with container=yes, the profile's 'Linux tooling container')."""
        missing = [n for n in self._linux_nodes()
                   if not self.ex(n).run(["podman", "image", "exists", DEFAULT_IMAGE],
                                         check=False).ok]  # fmt: skip
        if missing:
            raise CcbenchError(
                f"testbed.tools: container: image {DEFAULT_IMAGE} is missing on "
                f"{', '.join(missing)} (profile parameter 'Linux tooling container' = yes, "
                "or rerun emulab/setup-linux-host.sh with container=yes there)"
            )
        no_init = [n for n in self._linux_nodes()
                   if not self.ex(n).run(["test", "-x", INIT_PATH], check=False).ok]  # fmt: skip
        if no_init:
            raise CcbenchError("testbed.tools: container: " + init_missing(
                f" on {', '.join(no_init)}",
                "apt-get install catatonit there, or rerun emulab/setup-linux-host.sh with "
                "container=yes"))  # fmt: skip

    def _remove_containers(self) -> None:
        """Tool containers of this testbed that outlived their run (a killed ccbench)."""
        for n in self._linux_nodes():
            ex = self.ex(n)
            try:
                out = ex.run(["podman", "ps", "-a", "--format", "{{.Names}}"], check=False)
            except CcbenchError as e:  # gone: its containers (--rm) went with their tools
                info(f"down: {e}; its tool containers were not checked")
                continue
            names = [x for x in out.stdout.split() if x.startswith(self._container_prefix(n))]
            if names:
                ex.run(["podman", "rm", "-f", "-t", "0", *names], check=False)

    def driver(self, node: str) -> HostDriver:
        return driver_for(self.node(node).os)

    def address(self, node: str) -> str:
        a = self.node(node).address
        if not a:
            raise CcbenchError(f"{self.inv.source}: {node} has no experiment address")
        return a

    @property
    def bottleneck(self) -> tuple[str, str]:
        st = self.read_state() or {}
        dev = st.get("bottleneck_dev") or self._find_dev(BOTTLENECK_ROUTER)
        return BOTTLENECK_ROUTER, dev

    @property
    def roles(self) -> Roles:
        return self._roles(self.bottleneck[1])

    def _roles(self, bottleneck_dev: str) -> Roles:
        """The Emulab dumbbell: rt1's interface `bottleneck_dev` holds the queue, the
        delay node delays (a dummynet bridge, named by its os in the inventory; none in
        link-shaping mode), loss rules at the receivers."""
        delay = (delay_element(self.nodes[DELAY_NODE].os, DELAY_NODE)
                 if DELAY_NODE in self.nodes else NoDelay())  # fmt: skip
        return dumbbell(self.topo.pairs, Bottleneck(BOTTLENECK_ROUTER, bottleneck_dev), delay)

    def snapshot_drops(self, dest: Path) -> None:
        # Every node's own counters (each is a machine), the delay node's dummynet pipes.
        names = sorted(self.nodes)
        ledger.collect({n: self.ex(n) for n in names}, {n: self.nodes[n].os for n in names},
                       dest, control_route=True, softnet_host_wide=False)  # fmt: skip

    def snapshot_delay(self, dest: Path) -> None:
        return None  # Emulab's delay node (or none) keeps no statistics per run

    def is_up(self) -> bool:
        st = self.read_state()
        return bool(st and st.get("complete") and st.get("topology_key") == self.topo.key())

    # --- up / down -----------------------------------------------------------
    def _find_dev(self, node: str) -> str:
        want = self.address(node)
        out = self.ex(node).run(["ip", "-j", "-4", "addr", "show"]).stdout
        for link in json.loads(out):
            for a in link.get("addr_info", []):
                if a.get("local") == want:
                    return str(link["ifname"])
        raise CcbenchError(f"{node}: no interface has the experiment address {want}")

    def _names(self) -> list[str]:
        # Every node ccbench logs in to: not the delay node (a dummynet bridge).
        return [n for n in sorted(self.nodes) if self.nodes[n].os != "dummynet"]

    def _all(self, fn: Any) -> list[Any]:
        names = self._names()
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            return list(pool.map(fn, names))

    def end_leftovers(self) -> dict[str, Swept]:
        """End what an earlier run whose control machine died left on the nodes
        (ccbench.leftovers: its processes, of any testbed's runs, a FreeBSD logger still
        on), and say so."""
        remove_stale_stderr()  # this machine's side of such a run
        found, _ = self._sweep_nodes([leftovers.sweep_argv()], must_reach=True)
        found = {n: sw for n, sw in found.items() if sw}
        for n, sw in found.items():
            info(f"testbed {self.id}: {n}: {sw.summary()}, left behind by an earlier run")
        return found

    def end_runs(self) -> tuple[dict[str, Swept], dict[str, str]]:
        """`down`: end every process of this testbed's runs on every node (a run killed
        mid-traffic included: its processes are recorded under this testbed's id),
        undo what its instruments switched on, remove the files they write there, and
        remove its record directory. Returns what each node had, and the nodes that
        could not be reached (why)."""
        mine = leftovers.proc_dir(self.id)
        return self._sweep_nodes([leftovers.sweep_argv(mine, every_testbed=False)],
                                 must_reach=False,
                                 then=[leftovers.remove_files_argv(down_paths(self.id)),
                                       leftovers.rmdirs_argv(mine, leftovers.PROC_DIR,
                                                             leftovers.ROOT_DIR)])  # fmt: skip

    def run_files(self) -> list[str]:
        """What this testbed's runs may leave on a node (what `down` checks is gone): what
        its instruments and probes write (down_paths), its processes' records."""
        return [*down_paths(self.id), leftovers.proc_dir(self.id)]

    def _sweep_nodes(
        self, sweeps: list[list[str]], must_reach: bool, then: list[list[str]] | None = None
    ) -> tuple[dict[str, Swept], dict[str, str]]:
        """`sweeps`, then each instrument's own undo, then `then`, on every node at once
        (POSIX sh: the same on both OSes); what each found (leftovers.parse_sweep). A node
        that cannot be reached raises when `must_reach`, else is returned with why."""

        def sweep(n: str) -> Swept | str:
            plan = batch_argv([*sweeps, *instruments.leftovers_argv(self.driver(n).os),
                               *(then or [])])  # fmt: skip
            try:
                out = self.ex(n).run(plan, check=False).stdout  # one round trip
            except CcbenchError as e:
                if must_reach:
                    raise
                return str(e)
            return leftovers.parse_sweep(out)

        got = dict(zip(self._names(), self._all(sweep), strict=True))
        return ({n: g for n, g in got.items() if isinstance(g, Swept)},
                {n: g for n, g in got.items() if isinstance(g, str)})  # fmt: skip

    def up(self) -> dict[str, Any]:
        t0 = time.monotonic()
        self._all(lambda n: reachable(self.ex(n)))  # reachable, or say who not
        self.end_leftovers()
        host_apply.put_back_killed(self)  # calibrated as the runs will find the hosts
        if self.cfg.tools == "container":
            self.check_image()
        dev = self._find_dev(BOTTLENECK_ROUTER)
        notes: list[str] = []
        for n in self._roles(dev).hosts:
            for argv in self.driver(n).tune():
                res = self.ex(n).run(argv, check=False)
                if not res.ok:
                    # e.g. host-wide knobs inside a container or namespace: say so, go on.
                    notes.append(f"{n}: `{' '.join(argv)}` failed: {res.stderr.strip()}")
        self._release_dumbbell()
        loss_rules = self._configure_path(dev)
        st = {
            "id": self.id,
            "kind": self.kind,
            "testbed": self.cfg.to_dict(),
            "topology": asdict(self.topo),
            "topology_key": self.topo.key(),
            "bottleneck_dev": dev,
            "loss_rules": loss_rules,
            "complete": False,
        }
        self.write_state(st)
        try:
            dl = self._check_delay_node(dev)
            # A failed check that host jitter can fail is tried again after a pause.
            cal = calibration.calibrate(self, "testbed (Emulab delay node)")
        except CalibrationFailed as e:
            e.record.update({"notes": notes, "setup_s": round(time.monotonic() - t0, 2)})
            st.update({"calibration": e.record, "complete": False})
            self.write_state(st)
            self.down()
            raise
        cal.update({"delay_node": dl, "notes": notes, "setup_s": round(time.monotonic() - t0, 2)})
        st.update({"calibration": cal, "complete": True})
        self.write_state(st)
        self._write_claim()
        return cal

    def _check_delay_node(self, bottleneck_dev: str) -> dict[str, Any]:
        """dl as it really is (ccbench.delaynode: kern.hz and its dummynet pipes) against
        the run's RTT; a wrong dl fails `up` (CalibrationFailed: fixed on the node, the
        next `up` tries again). A dl that cannot be read (no dummynet: a stand-in, or
        link-shaping mode with no dl to log in to) is recorded as such, not failed."""
        shape = self._roles(bottleneck_dev)
        dl = shape.delay.node
        if not shape.delay.read_back or dl is None:
            return delaynode.DelayNodeUnread(
                DELAY_NODE, "link-shaping mode: the inventory has no delay node to log in to"
            ).to_dict()
        outputs = {}
        for name, argv in delaynode.READ_COMMANDS.items():
            res = self.ex(dl).run(argv, check=False, timeout=30)
            outputs[name] = (res.returncode, res.stdout, res.stderr)
        got = delaynode.from_outputs(dl, outputs)
        if isinstance(got, delaynode.DelayNodeUnread):
            return got.to_dict()
        link_mbit = self._link_mbit(shape.bottleneck)
        problems = delaynode.check(got, self.topo.rtt_ms, link_mbit)
        rec = {**got.to_dict(), "link_mbit": link_mbit, "problems": problems}
        if problems:
            raise CalibrationFailed(f"testbed {self.id}: delay node: " + "; ".join(problems),
                                    record={"delay_node": rec, "problems": problems})  # fmt: skip
        return rec

    def _link_mbit(self, b: Bottleneck | None) -> float:
        """The speed of rt1's link toward dl (its start-up script's NIC record), 1000
        where it recorded none: frames arrive at dl that fast, whatever rt1 shapes to."""
        if b is None:
            return 1000.0
        res = self.ex(b.node).run(self.driver(b.node).nic_records(), check=False)
        for line in res.stdout.splitlines():
            try:
                rec = jsonio.loads(line)
            except ValueError:
                continue
            if not isinstance(rec, dict) or rec.get("interface") != b.dev:
                continue
            speed = rec.get("speed_mbps")
            if isinstance(speed, (int, float)) and speed > 0:
                return float(speed)
        return 1000.0

    # --- one dumbbell, several testbeds ------------------------------------------
    # Scenarios with different bottlenecks are different testbeds, and on the SSH
    # testbed they share the dumbbell's hosts: rt1's qdisc and the receivers' loss rules
    # are whatever the last `up` set. A claim file (per inventory and dumbbell) names the
    # testbed that configured them; a run of another testbed first puts its own back.
    def _claim_file(self) -> Path:
        key = stable_hash([str(Path(self.inv.source).resolve()), self.cfg.dumbbell])[:12]
        return base.STATE_ROOT / f"dumbbell-{key}.json"

    def _write_claim(self) -> None:
        jsonio.write_json(self._claim_file(), {"testbed": self.id})

    def _claimed_by(self) -> str | None:
        try:
            return str(json.loads(self._claim_file().read_text())["testbed"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _configure_path(self, dev: str) -> list[list[str]]:
        """rt1's shaper and queue on `dev` for this topology, the loss rules at the loss
        site (the receivers); returns the rules added (node, argv) so they can be removed."""
        shape = self._roles(dev)
        router = LinuxHost()
        if shape.bottleneck is not None:
            plan = router.bottleneck(shape.bottleneck.dev, self.topo, self.cfg.shaper)
            rt = self.ex(shape.bottleneck.node)
            rt.run(plan[0], check=False)  # deleting a root qdisc that is not there is fine
            for argv in plan[1:]:
                rt.run(argv)
        loss_rules: list[list[str]] = []
        for node in shape.loss.nodes:
            for argv in router.loss(self.topo, shape.loss.chain):
                self.ex(node).run(argv)
                loss_rules.append([node, *argv])
        return loss_rules

    def _release_claim(self, key: str, undo: Any) -> None:
        """The testbed that last claimed these hosts, when it is another one: `undo`
        what its state lists under `key` (called with that list and its id), and the
        list emptied in its state, so it never applies to this testbed's runs."""
        owner = self._claimed_by()
        if owner is None or owner == self.id:
            return
        other = base.STATE_ROOT / owner / "state.json"
        st = jsonio.read_json(other)
        if not isinstance(st, dict):
            return
        undo(st.get(key) or [], owner)
        st[key] = []
        jsonio.write_json(other, st)

    def _release_dumbbell(self) -> None:
        """Remove the loss rules of the testbed that last configured this dumbbell."""
        self._release_claim("loss_rules", lambda rules, _owner: self._remove_loss_rules(rules))

    def _remove_loss_rules(self, rules: list[list[str]]) -> None:
        for node, *argv in rules:
            delete = ["-D" if a == "-A" else a for a in argv]
            res: Result = self.ex(node).run(delete, check=False)
            if not res.ok and "does a matching rule exist" not in res.stderr:
                raise CcbenchError(f"{node}: could not remove loss rule: {res.stderr.strip()}")

    def prepare_run(self) -> None:
        """Before a run: if another testbed configured this dumbbell since this one's
        `up`, put this topology's queue and loss rules back (no recalibration: the
        path itself is the same). First, what a crashed earlier run left is ended."""
        self.end_leftovers()
        if self._claimed_by() == self.id:
            return
        st = self.read_state() or {}
        self._release_dumbbell()
        st["loss_rules"] = self._configure_path(self.bottleneck[1])
        self.write_state(st)
        self._write_claim()

    def down(self) -> str:
        """Its runs' processes ended on every node, what a killed run set put back
        (host_apply.down_hosts: raises, the state kept, if not), its loss rules removed."""
        st, unreachable = self.read_state() or {}, self.end_runs()[1]
        for n, why in unreachable.items():
            info(f"testbed {self.id}: {n}: its runs' processes not checked ({why})")
        loader_said = host_apply.down_hosts_or_raise(self, unreachable)
        self._remove_loss_rules(st.get("loss_rules", []))
        if self._claimed_by() == self.id:
            self._claim_file().unlink(missing_ok=True)
        if self.cfg.tools == "container":
            self._remove_containers()
        self._close()
        self.remove_state()
        return f"remote loss rules removed{loader_said}"

    def _close(self) -> None:
        """Every host's shared ssh connection ended (none stays after `down`)."""
        for ex in self._ex.values():
            ex.close()


__all__ = ["RemoteTestbed", "SshProc"]


def node_files() -> list[str]:
    """Every file and directory a run writes on a node outside raw/ (the instruments'
    and the probes' declared node_files): a run killed before it removed them leaves
    them, and `down` removes them."""
    return [*instruments.node_files(), *probes.node_files()]


def down_paths(tb_id: str) -> list[str]:
    """What `down` of testbed `tb_id` removes on a node and checks gone: node_files, and
    its probes' directories of per-process entries (probes.node_dirs: its own, never
    another testbed's on the same node)."""
    return [*node_files(), *probes.node_dirs(tb_id)]


def down_from_state(tb_id: str, st: dict[str, Any]) -> str:
    """Remove what SSH testbed `tb_id` (its state.json as `st`) left on its hosts."""
    return down_with(RemoteTestbed, tb_id, st)


def down_with(cls: type[RemoteTestbed], tb_id: str, st: dict[str, Any]) -> str:
    """`down` of an SSH-reached testbed of class `cls` from its state (also a lab's)."""
    from ccbench import safe

    try:
        remote = cls(TestbedConfig.from_dict(st["testbed"]), Topology(**st["topology"]))
    except (TypeError, KeyError, ValueError, CcbenchError) as e:
        # Which hosts it used is not readable: its state goes, the hosts are not
        # touched (`up` then `down` with its config removes what it left there).
        safe.remove_tree(base.STATE_ROOT / tb_id, base.STATE_ROOT)
        return (f"state.json was damaged ({type(e).__name__}: {e}): removed it; what it "
                "left on its SSH hosts, if anything, stays until `testbed up` and "
                "`down` with its config")  # fmt: skip
    return remote.down()
