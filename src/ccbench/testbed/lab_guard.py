"""A lab's hosts guarded (ccbench.testbed.lab): every check that can refuse `up` runs
before it changes anything on any host, and `down` says "as found" only after checking
that each change is back and no process or file of the testbed's runs is left. The
checks' argv plans are testbed.lab_checks' (and ccbench.leftovers'); here they run, over
the testbed's executors.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from ccbench import leftovers
from ccbench.errors import CcbenchError
from ccbench.exec import Executor
from ccbench.exec_ssh import batch_argv, batch_rcs
from ccbench.lab_inventory import LabInventory
from ccbench.leftovers import Swept
from ccbench.roles import BOTTLENECK_ROUTER
from ccbench.spec import Topology
from ccbench.testbed import lab_checks as checks
from ccbench.testbed import lab_plans as plans
from ccbench.testbed.lab_checks import Change


class LabHosts(Protocol):
    """What the guard reads of a lab testbed (testbed.lab.LabTestbed, which imports
    this module: it is typed by what it has)."""

    lab: LabInventory
    topo: Topology

    @property
    def tools(self) -> str: ...

    def ex(self, node: str) -> Executor: ...

    def check_image(self) -> None:
        """`tools: container`: refuses when a host lacks the image."""
        ...

    def interface(self, node: str) -> str:
        """The interface with `node`'s experiment address; refuses when none has it."""
        ...

    def receivers(self) -> list[str]:
        """The receiving hosts (where the delay and the loss go), each once."""
        ...

    def delay_plan(self) -> plans.DelayPlan | None: ...

    def run_files(self) -> list[str]:
        """Every file and directory its runs may leave on a host."""
        ...


def preflight(tb: LabHosts, pending: Iterable[Change]) -> dict[str, str]:
    """Every check that can refuse `up`, each only reading: the interfaces ccbench
    changes found by their addresses (the router's egress; each receiver's when a delay
    goes there), none with a qdisc someone configured where ccbench puts one, and the
    programs the changes run. A qdisc in `pending` (changes of ccbench's own that `up`
    puts back first) is not someone's. Returns node -> its interface; raises, naming
    the problem, before anything is changed on any host."""
    if tb.tools == "container":
        tb.check_image()
    ours = checks.removed_by(pending)
    devs: dict[str, str] = {}
    if tb.lab.router is not None:
        dev = devs[BOTTLENECK_ROUTER] = tb.interface(BOTTLENECK_ROUTER)
        _root_free(tb, BOTTLENECK_ROUTER, dev, ours)
        _programs(tb, BOTTLENECK_ROUTER, ("tc",))
    el = tb.delay_plan()
    tool = plans.loss_tool(tb.lab.emulation.loss or "iptables") if tb.topo.has_loss else None
    for node in tb.receivers():
        needs = list(tool.programs) if tool else []
        if el is not None:
            dev = devs[node] = tb.interface(node)
            if el.takes_root:
                _root_free(tb, node, dev, ours)
            if el.takes_ingress:
                _no_ingress(tb, node, dev, ours)
            needs += el.needs()
        _programs(tb, node, needs)
    return devs


def _root_free(tb: LabHosts, node: str, dev: str, ours: set[tuple[str, str, str]]) -> None:
    if (node, dev, "root") in ours:
        return
    out = tb.ex(node).run([*checks.QDISC_SHOW, dev], check=False).stdout
    foreign = checks.foreign_root(out, dev)
    if foreign:
        raise CcbenchError(f"{node}: {dev} has a root qdisc ({foreign}) ccbench did not "
                           "put there: remove it, or ask nothing of it")  # fmt: skip


def _no_ingress(tb: LabHosts, node: str, dev: str, ours: set[tuple[str, str, str]]) -> None:
    if (node, dev, "ingress") in ours:
        return
    out = tb.ex(node).run([*checks.QDISC_SHOW, dev, "ingress"], check=False).stdout
    if checks.ingress_present(out):
        raise CcbenchError(f"{node}: {dev} has an ingress qdisc ccbench did not put "
                           "there: remove it, or use another delay")  # fmt: skip


def _programs(tb: LabHosts, node: str, names: Iterable[str]) -> None:
    names = list(dict.fromkeys(names))
    if not names:
        return
    res = tb.ex(node).run(checks.has_programs(*names), check=False)
    if not res.ok:
        missing = res.stdout.strip() or " ".join(names)
        raise CcbenchError(f"{node}: no program '{missing}' there (what the lab inventory's "
                           "emulation asks runs it: install it, or ask another)")  # fmt: skip


def not_as_found(
    tb: LabHosts, changes: Iterable[Change], swept: dict[str, Swept],
    unreachable: dict[str, str],
) -> list[str]:  # fmt: skip
    """What `down` could not leave as found, one line each: a host it did not reach, a
    process of the testbed's runs that even SIGKILL left, a change whose check fails, a
    file of its runs still there (every host it reached is checked for those)."""
    problems = [f"{n}: not reached ({why})" for n, why in sorted(unreachable.items())]
    for n, sw in sorted(swept.items()):
        if sw.alive:
            problems.append(f"{n}: {len(sw.alive)} process(es) of its runs still running "
                            f"after SIGKILL ({', '.join(sw.alive)})")  # fmt: skip
    by_node: dict[str, list[Change]] = {n: [] for n in swept if n not in unreachable}
    for c in changes:
        if c.node not in unreachable and c.check:
            by_node.setdefault(c.node, []).append(c)
    files = leftovers.files_left_argv(tb.run_files())

    def check(node: str) -> list[str]:
        argvs = [*(a for c in by_node[node] for a in c.check), files]  # one round trip
        try:
            res = tb.ex(node).run(batch_argv(argvs), check=False, timeout=30 + 5 * len(argvs))
        except CcbenchError as e:
            return [f"{node}: not checked ({e})"]
        rcs, out = batch_rcs(res.stdout), []
        for c in by_node[node]:
            got, rcs = rcs[: len(c.check)], rcs[len(c.check) :]
            if len(got) < len(c.check) or any(got):
                out.append(f"{node}: {c.what}: not put back")
        if not rcs:
            out.append(f"{node}: files of its runs not checked (its checks were cut short)")
        elif rcs != [0]:
            left = ", ".join(leftovers.files_left(res.stdout)) or "?"
            out.append(f"{node}: files of its runs still there ({left})")
        return out

    with ThreadPoolExecutor(max_workers=max(1, len(by_node))) as pool:
        for got in pool.map(check, sorted(by_node)):
            problems += got
    return problems
