"""The dumbbell in network namespaces on this machine: build, calibrate, tear down.

Every namespace is named `ccb-<id>-<node>`, so testbeds with different ids coexist
and `down` removes only its own. All iptables rules live inside those namespaces and
die with them; no host sysctl is changed (CCs are set per socket with `iperf3 -C`,
which root may do for any built-in CC), so removing the namespaces and the processes
in them leaves the machine as found. Which namespaces and links: the testbed's layout
(testbed.layout, ccbench.topology), built from its command plan (local_layouts).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ccbench import calibration, instruments, interrupts, jsonio, layout, ledger, probes, safe
from ccbench import topology as tp
from ccbench.errors import CalibrationFailed, CcbenchError, Unavailable
from ccbench.exec import (
    CommandFailed,
    NetnsExecutor,
    comm,
    end_processes,
    pids_in_any,
    running,
    tagged,
)
from ccbench.hosts.linux import LinuxHost
from ccbench.leftovers import parse_sweep, remove_files_argv
from ccbench.native import ccdelay_path
from ccbench.privileges import require_root
from ccbench.progress import info
from ccbench.roles import Roles
from ccbench.spec import Topology
from ccbench.testbed import base
from ccbench.testbed import local_layouts as plans
from ccbench.testbed.base import TestbedBase, signals_deferred
from ccbench.testbed.kinds import TestbedConfig

# Testbed state: root's under /run (gone at reboot, like the namespaces); a lab user
# driving SSH testbeds keeps it in their cache.
REQUIRED_TOOLS = ("ip", "tc", "iptables", "ethtool", "ping", "iperf3", "ss")


def require_tools() -> None:
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise CcbenchError(f"missing tools: {', '.join(missing)} (run ./setup.sh)")


NS_ROOT = "ccb-"  # every testbed's namespaces: ccb-<id>-<node>


def ns_prefix(tb_id: str) -> str:
    return f"{NS_ROOT}{tb_id}-"


def strays(tb_id: str, orphans: bool = True) -> list[int]:
    """Processes started in testbed `tb_id`'s namespaces, found by their tag
    (exec.tagged) also where `ip netns delete` left them running in a namespace no name
    leads to any more; with `orphans`, those left so in any ccbench namespace (no
    testbed uses a deleted namespace; their traffic and CPU would disturb a run)."""
    mine = ns_prefix(tb_id)
    return [t.pid for t in tagged(NS_ROOT)
            if t.netns.startswith(mine) or (orphans and not t.mounted)]  # fmt: skip


def list_namespaces(prefix: str = "") -> list[str]:
    out = NetnsExecutor(None).run(["ip", "netns", "list"]).stdout
    names = [line.split()[0] for line in out.splitlines() if line.strip()]
    return [n for n in names if n.startswith(prefix)]


_CONTAINER_SEQ = itertools.count(1)


class ContainerNetnsExecutor(NetnsExecutor):
    """Tools run in the linux-node image joined to the namespace (`tools: container`:
    spawn and run_where_tools_run, through wrap_spawned); set-up commands (ip, tc,
    sysctl) still use the host's tools."""

    def __init__(self, netns: str, image: str):
        super().__init__(netns)
        self.image = image

    def wrap_spawned(self, inner: list[str], interactive: bool) -> list[str]:
        from ccbench.container import container_argv

        assert self.netns is not None
        name = f"{self.netns}-{os.getpid()}-{next(_CONTAINER_SEQ)}"
        return container_argv(self.netns, self.image, inner, name=name, interactive=interactive)


class LocalTestbed(TestbedBase):
    kind = "local"

    def __init__(self, cfg: TestbedConfig, topo: Topology):
        super().__init__(cfg, topo)
        self.host = LinuxHost()
        self.lay = tp.layout(cfg.layout)

    def nodes(self) -> list[str]:
        return self.lay.nodes(self.topo.pairs)

    def node_os(self) -> dict[str, str]:
        return dict.fromkeys(self.nodes(), "linux")

    # --- what a run uses (testbed.base.Testbed) -----------------------------
    def driver(self, node: str) -> LinuxHost:
        return self.host

    @property
    def bottleneck(self) -> tuple[str, str]:
        return self.lay.bottleneck

    @property
    def roles(self) -> Roles:
        return self.lay.roles(self.topo.pairs)

    def snapshot_delay(self, dest: Path) -> None:
        """Ask the delay element for fresh stats (SIGUSR1) and copy them."""
        st = self.read_state() or {}
        pid, path = st.get("ccdelay_pid"), st.get("ccdelay_stats")
        if not pid or not path:
            return
        p = Path(path)
        before = p.stat().st_mtime_ns if p.exists() else 0
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            if p.exists() and p.stat().st_mtime_ns != before:
                break
            time.sleep(0.005)
        if p.exists():
            shutil.copyfile(p, dest)

    def snapshot_drops(self, dest: Path) -> None:
        # Counters are read with the host's tools, also with `tools: container`.
        nodes = self.nodes()
        stacked = self.lay.stacked(self.topo.pairs)
        ledger.collect({n: NetnsExecutor(self.ns(n)) for n in nodes},
                       dict.fromkeys(nodes, "linux"), dest, control_route=False,
                       softnet_host_wide=True, stacked=stacked)  # fmt: skip

    # --- naming --------------------------------------------------------------
    def ns(self, node: str) -> str:
        return ns_prefix(self.id) + node

    def ex(self, node: str) -> NetnsExecutor:
        if self.cfg.tools == "container":
            from ccbench.container import DEFAULT_IMAGE

            return ContainerNetnsExecutor(self.ns(node), DEFAULT_IMAGE)
        return NetnsExecutor(self.ns(node))

    def address(self, node: str) -> str:
        return self.lay.address(node, self.topo.pairs)

    def prepare_run(self) -> None:
        """Before a run: processes an earlier run left in the testbed's namespaces (one
        killed with its workflow: iperf3, samplers, probes), or in any ccbench namespace
        deleted since (strays()), are ended, and it says so. The delay element is the
        testbed's own and stays."""
        keep = {(self.read_state() or {}).get("ccdelay_pid")}
        namespaces = [self.ns(n) for n in self.nodes()]

        end_left(self.id, lambda: [p for p in {*pids_in_any(namespaces), *strays(self.id)}
                                   if p not in keep])  # fmt: skip

    # --- state ---------------------------------------------------------------
    def is_up(self) -> bool:
        """Up, complete, and built for this very topology, layout and delay direction."""
        st = self.read_state()
        if not st or st.get("topology_key") != self.topo.key() or not st.get("complete"):
            return False
        built: dict[str, Any] = st["testbed"] if isinstance(st.get("testbed"), dict) else {}
        if (built.get("layout", tp.DEFAULT), built.get("delay_direction", "both")) != (
            self.cfg.layout,
            self.cfg.delay_direction,
        ):
            return False
        have = set(list_namespaces(ns_prefix(self.id)))
        if not {self.ns(n) for n in self.nodes()} <= have:
            return False
        pid = st.get("ccdelay_pid")
        return pid is None or running(pid)

    # --- build ---------------------------------------------------------------
    def up(self) -> dict[str, Any]:
        """Build and calibrate; on any failure or signal, remove everything built."""
        require_root()
        require_tools()
        if self.cfg.tools == "container":
            from ccbench.container import DEFAULT_IMAGE, image_present, missing_init

            if not image_present(DEFAULT_IMAGE):
                raise CcbenchError(
                    f"testbed.tools: container: image {DEFAULT_IMAGE} is not built "
                    "(run: sudo containers/build.sh)"
                )
            if lacks := missing_init():
                raise CcbenchError(f"testbed.tools: container: {lacks}")
        if list_namespaces(ns_prefix(self.id)):
            raise CcbenchError(
                f"testbed '{self.id}' already exists: `ccbench testbed down --id {self.id}` first"
            )
        end_left(self.id, lambda: strays(self.id))  # nothing of a deleted one runs on
        ok = False
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self._write_state({"complete": False})
            t0 = time.monotonic()
            self._build()
            method = self._delay()
            self._write_state({"complete": False, "delay_method": method})
            info(f"testbed {self.id}: built in {time.monotonic() - t0:.1f}s, delay via {method}")
            cal = self.calibrate(method)
            interrupts.redeliver()  # a stop swallowed after calibration's last command
            self._write_state({"complete": True, "delay_method": method, "calibration": cal})
            ok = True
            return cal
        finally:
            if not ok:
                with signals_deferred():
                    down(self.id)

    def _write_state(self, extra: dict[str, Any]) -> None:
        st = self.read_state() or {}
        st.update(
            {
                "id": self.id,
                "testbed": self.cfg.to_dict(),
                "topology": asdict(self.topo),
                "topology_key": self.topo.key(),
                "namespaces": [self.ns(n) for n in self.nodes()],
            }
        )
        st.update(extra)
        self.write_state(st)

    def _build(self) -> None:
        host = NetnsExecutor(None)
        plan = plans.build_plan(self.lay, self.ns, self.topo, self.host, self.cfg.shaper,
                                os.cpu_count() or 1)  # fmt: skip
        for node in plan.namespaces:
            host.run(["ip", "netns", "add", self.ns(node)])
            _no_dns(self.ns(node))
        for step in [*plan.links, *plan.nodes, *plan.routes]:
            self._do(step)
        try:
            for step in plan.bottleneck:
                self._do(step)
        except CommandFailed as e:
            if "unknown" in str(e).lower() or "no such file" in str(e).lower():
                raise Unavailable(
                    f"queue kind '{self.topo.queue_kind}' is not available in this kernel "
                    f"(no sch_{self.topo.queue_kind} module); use pfifo or bfifo here"
                ) from e
            raise
        for step in plan.loss:
            self._do(step)

    def _do(self, step: plans.Step) -> None:
        if isinstance(step, plans.Write):
            self.ex(step.node).write_file(step.path, step.text)
        elif step.node is None:
            NetnsExecutor(None).run(list(step.argv))
        else:
            self.ex(step.node).run(list(step.argv))

    def _netem_available(self) -> bool:
        dl = self.ex(self.lay.delay_node)
        res = dl.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
                     check=False)  # fmt: skip
        if res.ok:
            dl.run(["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        return res.ok

    def _delay(self) -> str:
        """Put the RTT on the path through the layout's delay node: RTT/2 each way
        (delay_direction both), or the whole RTT on the reverse path r -> s only
        (reverse: the senders' data is not delayed, their ACKs carry the RTT; a constant
        delay anywhere in the loop gives the bottleneck queue the same arrivals, and the
        element then handles only the ACKs, not every data packet too). Returns the
        method used."""
        reverse = self.cfg.delay_direction == "reverse"
        one_way = plans.one_way_ms(self.topo.rtt_ms, reverse)
        want = self.cfg.delay
        netem = self._netem_available()
        if want == "netem" and not netem:
            raise Unavailable("testbed.delay: netem is not available in this kernel")
        if want == "netem" or (want == "auto" and netem):
            for step in plans.netem_plan(self.lay, reverse, one_way, self.host):
                self._do(step)
            return "netem"
        if one_way <= 0:
            return "none"
        stats = self.state_dir / "ccdelay-stats.json"
        # The element is the project's own binary on the host, never a container tool.
        proc = NetnsExecutor(self.ns(self.lay.delay_node)).spawn(
            plans.ccdelay_argv(ccdelay_path(), one_way, stats, _last_cpu()),
            stderr=self.state_dir / "ccdelay.log",
        )
        # The element must be bound to the queue before packets are sent to it.
        deadline = time.monotonic() + 5
        while not stats.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                log = (self.state_dir / "ccdelay.log").read_text().strip()
                raise CcbenchError(f"delay element did not start: {log or 'no output'}")
            time.sleep(0.02)
        self._do(plans.nfqueue_plan(self.lay, reverse, self.host))
        self._write_state({"ccdelay_pid": proc.pid, "ccdelay_stats": str(stats)})
        return "ccdelay"

    # --- calibration ---------------------------------------------------------
    def calibrate(self, method: str) -> dict[str, Any]:
        """Every check, a failed one tried again after a pause (calibration.calibrate);
        raises CalibrationFailed with every try if the last one still failed."""
        try:
            cal = calibration.calibrate(
                self, method, lambda problems: self._readbacks(method, problems)
            )
        except CalibrationFailed as e:
            jsonio.write_json(self.state_dir / layout.CALIBRATION, e.record)
            raise
        jsonio.write_json(self.state_dir / layout.CALIBRATION, cal)
        return cal

    def _readbacks(self, method: str, problems: list[str]) -> dict[str, Any]:
        """What the build must have set and jitter cannot change: offloads per device,
        and no qdisc on any device but the bottleneck's (and netem's)."""
        kinds = {k for _, _, k in plans.offload_devices(self.lay, self.topo.pairs)}
        return {
            "layout": self.lay.name,
            "offloads": self._readback_offloads(problems),
            "offload_rule": [plans.OFFLOAD_RULE[k] for k in sorted(kinds, reverse=True)],
            "queues": self._readback_queues(method, problems),
            "delay_direction": self.cfg.delay_direction,
        }

    def _readback_offloads(self, problems: list[str]) -> dict[str, dict[str, str]]:
        seen: dict[str, dict[str, str]] = {}
        for node, dev, kind in plans.offload_devices(self.lay, self.topo.pairs):
            out = self.ex(node).run(self.host.offloads_show(dev)).stdout
            state = plans.offload_state(out)
            seen[f"{node}/{dev}"] = state
            problem = plans.offload_problem(f"{node}/{dev}", kind, state)
            if problem:
                problems.append(problem)
        return seen

    def _readback_queues(self, method: str, problems: list[str]) -> dict[str, list[str]]:
        allowed = plans.queue_devices(self.lay, method == "netem",
                                      self.cfg.delay_direction == "reverse")  # fmt: skip
        seen: dict[str, list[str]] = {}
        for node in self.nodes():
            out = self.ex(node).run(list(plans.QDISCS_ARGV)).stdout
            kinds, found = plans.queue_problems(node, out, allowed)
            seen.update({f"{node}/{dev}": k for dev, k in kinds.items() if dev != "lo"})
            problems.extend(found)
        return seen


def end_left(tb_id: str, pids: Callable[[], list[int]]) -> None:
    """End what `pids()` lists (exec.end_processes), saying so if it lists any."""
    first = pids()
    if first:
        what = ", ".join(sorted({comm(p) for p in first}))
        end_processes(pids)
        info(f"testbed {tb_id}: ended {len(first)} process(es) an earlier run left "
             f"behind ({what})")  # fmt: skip


def _last_cpu() -> int:
    return (os.cpu_count() or 1) - 1


def down(tb_id: str) -> list[str]:
    """Remove testbed `tb_id` whatever state it is in (also a stale one). Idempotent."""
    require_root()
    tb_id = safe.testbed_id(tb_id)
    prefix = ns_prefix(tb_id)
    names = list_namespaces(prefix)
    lost = [t.pid for t in tagged(prefix) if not t.mounted]
    if lost:  # only their tag leads to them (exec.tagged)
        info(f"testbed {tb_id}: ending {len(lost)} process(es) left in its namespaces "
             f"deleted before ({', '.join(sorted({comm(p) for p in lost}))})")  # fmt: skip
    end_processes(lambda: list({*pids_in_any(names), *strays(tb_id, orphans=False)}))
    _remove_containers(prefix)
    for n in names:
        NetnsExecutor(None).run(["ip", "netns", "delete", n], check=False)
    instruments.remove_local_leftovers(tb_id)  # what ran outside the namespaces
    _remove_probe_dirs(tb_id)
    for d in ETC_NETNS.glob(f"{prefix}*"):
        safe.remove_tree(d, ETC_NETNS)
    safe.remove_tree(base.STATE_ROOT / tb_id, base.STATE_ROOT)
    return names


ETC_NETNS = Path("/etc/netns")


def _remove_probe_dirs(tb_id: str) -> None:
    """The data directories a probe killed mid-run left on this machine (flent's under
    /var/tmp; the processes have ended), by the script a remote `down` runs on a node:
    one that is not ccbench's (a link, another user's) is left and named."""
    dirs = probes.node_dirs(tb_id)
    if dirs:
        sw = parse_sweep(NetnsExecutor(None).run(remove_files_argv(dirs), check=False).stdout)
        if sw.foreign:
            info(f"testbed {tb_id}: {sw.summary()}")


def _no_dns(ns: str) -> None:
    """The namespaces have no route to the host's resolver, so a name lookup would wait
    for its timeout (5 s; flent does lookups before it starts). `ip netns exec` mounts
    /etc/netns/<ns>/resolv.conf over /etc/resolv.conf: point it at 127.0.0.1, where
    nothing listens, and lookups fail at once. `down` removes the directory."""
    d = ETC_NETNS / ns
    d.mkdir(parents=True, exist_ok=True)
    (d / "resolv.conf").write_text("# ccbench testbed: no DNS here\nnameserver 127.0.0.1\n")


def _remove_containers(prefix: str) -> None:
    """Tool containers of this testbed (`tools: container`) that outlived their run."""
    if shutil.which("podman") is None:
        return
    host = NetnsExecutor(None)
    out = host.run(["podman", "ps", "-a", "--format", "{{.Names}}"], check=False).stdout
    names = [n for n in out.split() if n.startswith(prefix)]
    if names:
        host.run(["podman", "rm", "-f", "-t", "2", *names], check=False, timeout=60)


def all_ids() -> list[str]:
    """Every testbed here: by its namespaces, its state directory, or processes tagged
    with its namespaces' names (left after the namespaces were deleted)."""
    ids = set()
    for n in [*list_namespaces(NS_ROOT), *(t.netns for t in tagged(NS_ROOT))]:
        m = re.match(r"ccb-([a-z0-9]+)-", n)
        if m:
            ids.add(m.group(1))
    if base.STATE_ROOT.is_dir():
        # Only what ccbench could have made: anything else there is not ours to remove.
        ids |= {
            p.name
            for p in base.STATE_ROOT.iterdir()
            if p.is_dir() and not p.is_symlink() and safe.TESTBED_ID.fullmatch(p.name)
        }
    return sorted(ids)


def down_from_state(tb_id: str, state: dict[str, Any]) -> str:
    """`testbed down` of a local testbed (its state says nothing more than its id)."""
    return f"removed {len(down(tb_id))} namespace(s)"
