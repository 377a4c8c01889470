"""Expand a comparison config into runs with stable ids and a seeded random order.

A run = scenario × variant × repetition. Its id is the hash of its RunSpec, so
editing one variant changes only that variant's run ids and only those rerun.
Runs that share a bottleneck configuration share a testbed (id = topology key).
"""

from __future__ import annotations

import copy
import random
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ccbench import instruments, probes
from ccbench.config import sampling_from, validate
from ccbench.errors import CcbenchError
from ccbench.host_settings import HostSettings
from ccbench.hosts import loader
from ccbench.model import Matrix, PlannedRun, PlannedTestbed, Reference, RunAsked, Scenario
from ccbench.spec import (
    Flow,
    RunSpec,
    Topology,
    Variant,
    check_flows,
    flows_from_config,
    os_titles,
)
from ccbench.testbed.kinds import REGISTRY, TestbedConfig, kind

# The sampling settings a scenario may set for itself (the rest are the config's).
SCENARIO_SAMPLING = ("probe_tool", "probe_flent_test", "qdisc_interval_s", "record")


def _check_probe(source: str, sname: str, tool: str, variants: list[Variant]) -> None:
    """A probe tool the variants' senders cannot run fails before any run, naming the
    field (what this machine lacks is checked by `load`)."""
    oses = probes.tool(tool).oses
    for v in variants:
        if v.os not in oses:
            raise CcbenchError(
                f"{source}: scenarios.{sname}: probe_tool {tool} needs "
                f"{os_titles(oses)} senders (variant {v.label} runs {v.os})"
            )


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if k == "queue" and isinstance(v, dict):
            # A queue given in full replaces the default (limit_pkts vs limit_bdp).
            out[k] = {"kind": out.get(k, {}).get("kind", "pfifo"), **v}
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def load(config: dict[str, Any], source: str = "config", need_inventory: bool = True) -> Matrix:
    """Validate a comparison config (defaults filled), expand it, and check that what
    it asks of this machine exists here (the local testbed's CCs) and, with
    `need_inventory`, that the hosts inventory an SSH testbed runs on holds its dumbbells
    (planning what to book needs no inventory: it exists once the experiment does)."""
    cfg = validate(config, "matrix", source)
    m = expand(cfg, source)
    if kind(cfg["testbed"]["kind"]).caps.senders_here:
        _check_local_machine(m, cfg["testbed"]["tools"], source)
    if need_inventory:
        check_inventory(source, cfg["testbed"], m.testbeds)
    return m


def _check_local_machine(m: Matrix, tools: str, source: str) -> None:
    """What the local testbed's runs ask of this machine (not part of `expand`, which
    does not depend on the machine): the flows' CCs, and netperf for flent's netperf
    tests when the tools run from the host."""
    from ccbench.hosts.linux import check_kernel_ccs

    check_kernel_ccs(
        (f"{source}: scenarios.{r.scenario} (variant {r.variant})", f.cc)
        for r in m.runs.values()
        for f in r.flows
    )
    if tools != "host" or shutil.which("netperf") is not None:
        return
    for r in m.runs.values():
        test = r.spec.probe_flent_test
        if probes.tool(r.spec.probe_tool).needs_netperf(test):
            raise CcbenchError(
                f"{source}: scenarios.{r.scenario}: probe_flent_test {test} needs netperf "
                "with demo mode, which this host lacks: set testbed.tools: container"
            )


def _check_variant(source: str, v: Variant) -> None:
    """A variant that names what its OS does not have is refused, not ignored."""
    where = f"{source}: variant {v.label}"
    if v.kernel_match is not None:
        try:
            re.compile(v.kernel_match)
        except re.error as e:
            raise CcbenchError(f"{where}: kernel.match: not a regular expression "
                               f"({e})") from None  # fmt: skip
    from ccbench.hosts import driver_for

    try:
        driver_for(v.os).check_variant(v.cc, v.stack)
    except CcbenchError as e:
        raise CcbenchError(f"{where}: {e}") from None


def _check_results_dir(source: str, path: str) -> None:
    if ".." in path.split("/"):
        raise CcbenchError(f"{source}: results_dir: '{path}' may not contain '..'")


def check_inventory(
    source: str, tb_cfg: dict[str, Any], testbeds: Mapping[str, PlannedTestbed]
) -> None:
    """A kind that takes its hosts from an inventory: it must exist, parse, and hold
    every dumbbell with the pairs its testbeds need, now, not after testbeds come up."""
    if not kind(tb_cfg["kind"]).caps.needs_inventory:
        return
    if not tb_cfg.get("inventory"):
        raise CcbenchError(
            f"{source}: testbed.inventory: kind {tb_cfg['kind']} needs a hosts inventory "
            "(make one: ccbench testbed inventory --manifest FILE)"
        )
    try:
        for tb in testbeds.values():
            have = kind(tb_cfg["kind"]).inventory_pairs(tb_cfg["inventory"], tb.dumbbell)
            if tb.topology.pairs > have:
                raise CcbenchError(
                    f"dumbbell {tb.dumbbell} has {have} sender/receiver "
                    f"pairs, a scenario asks for {tb.topology.pairs}"
                )
    except CcbenchError as e:
        raise CcbenchError(f"{source}: testbed.inventory: {e}") from None


def _check_references(
    source: str, cfg: dict[str, Any], labels: list[str], scenarios: list[str]
) -> None:
    """A reference row names a scenario and a variant of this config, and a flow the
    scenario has."""
    for i, r in enumerate(cfg.get("references", [])):
        where = f"{source}: references[{i}]"
        if r["scenario"] not in scenarios:
            raise CcbenchError(f"{where}.scenario: no scenario {r['scenario']!r}")
        if r["variant"] not in labels:
            raise CcbenchError(f"{where}.variant: no variant {r['variant']!r}")
        if r["metric"].startswith("flow"):
            k = int(r["metric"][4:].split("_", 1)[0])
            flows = cfg["scenarios"][r["scenario"]].get("flows", 1)
            n = flows if isinstance(flows, int) else len(flows)
            if k > n:
                raise CcbenchError(f"{where}.metric: scenario '{r['scenario']}' has {n} "
                                   f"flow(s), no flow {k}")  # fmt: skip


def expand(cfg: dict[str, Any], source: str = "config") -> Matrix:
    """A validated comparison config (defaults filled) as a Matrix: every scenario ×
    variant × repetition with its run id and testbed, in the seeded order. What cannot
    work is refused before any run, naming the field."""
    baseline = _baseline(source, cfg["variants"])
    variants = [Variant.from_config(v) for v in cfg["variants"]]
    _check_config(source, cfg, variants)
    runs: list[_Run] = []
    testbeds: dict[str, _Testbed] = {}
    for sname, sc in cfg["scenarios"].items():
        runs += _scenario_runs(source, cfg, variants, sname, sc, testbeds)
    order = _seeded_order(cfg["seed"], testbeds, runs)
    planned = _assign_dumbbells(source, cfg["testbed"], testbeds)
    return _matrix(cfg, baseline, variants, planned, runs, order)


def _baseline(source: str, variants: list[dict[str, Any]]) -> str:
    """The baseline's label: the variant marked `baseline`, else the first. Labels are
    unique (runs, tables and verdicts name a variant by its label)."""
    labels = [v["label"] for v in variants]
    if len(set(labels)) != len(labels):
        raise CcbenchError(f"{source}: variants: labels must be unique")
    baselines = [v["label"] for v in variants if v.get("baseline")]
    if len(baselines) > 1:
        raise CcbenchError(f"{source}: variants: more than one baseline ({', '.join(baselines)})")
    return baselines[0] if baselines else labels[0]


def _check_config(source: str, cfg: dict[str, Any], variants: list[Variant]) -> None:
    """What holds for the whole config: expectations and references name what it has,
    results_dir stays inside, the delay direction suits the testbed kind, and every
    variant is possible on its OS."""
    labels = [v["label"] for v in cfg["variants"]]
    scenarios = list(cfg["scenarios"])
    _check_expectations(source, cfg, labels, scenarios)
    _check_references(source, cfg, labels, scenarios)
    tb_cfg = cfg["testbed"]
    _check_results_dir(source, cfg["results_dir"])
    try:
        kind(tb_cfg["kind"]).check_delay_direction(tb_cfg["delay_direction"])
        kind(tb_cfg["kind"]).check_layout(tb_cfg["layout"], tb_cfg["delay_direction"])
    except CcbenchError as e:
        raise CcbenchError(f"{source}: {e}") from None
    for v in variants:
        _check_variant(source, v)


def _check_expectations(
    source: str, cfg: dict[str, Any], labels: list[str], scenarios: list[str]
) -> None:
    """An expectation names variants and a scenario of this config."""
    for i, e in enumerate(cfg.get("expectations", [])):
        for key, known, what in (
            ("variant", labels, "variant"),
            ("than", labels, "variant"),
            ("scenario", scenarios, "scenario"),
        ):
            if key in e and e[key] not in known:
                raise CcbenchError(f"{source}: expectations[{i}].{key}: no {what} {e[key]!r}")


@dataclass
class _Testbed:
    """A testbed while the matrix is built; the dumbbell is assigned last."""

    topology: Topology
    topology_config: dict[str, Any]
    pinned: int | None  # the dumbbell its variant is pinned to


@dataclass(frozen=True)
class _Run(RunAsked):
    """A run while the matrix is built (its testbed's dumbbell is not known yet)."""

    testbed_id: str


def _scenario_runs(
    source: str, cfg: dict[str, Any], variants: list[Variant], sname: str, sc: dict[str, Any],
    testbeds: dict[str, _Testbed],
) -> list[_Run]:  # fmt: skip
    """One scenario's runs, every variant × repetition; adds the testbeds they need to
    `testbeds` (runs with the same topology and dumbbell pin share one)."""
    tb_cfg = cfg["testbed"]
    tdict = _merge(cfg.get("topology", {}), sc.get("topology", {}))
    # Validate the merged topology with the run schema (same rules as `ccbench run`);
    # its defaults are the one place topology defaults live.
    tdict = validate({"topology": tdict}, "run", f"{source}: scenarios.{sname}")["topology"]
    topo = Topology.from_config(tdict)
    duration = float(sc.get("duration_s", cfg["duration_s"]))
    settings = {**cfg, **{k: sc[k] for k in SCENARIO_SAMPLING if k in sc}}
    _check_probe(source, sname, settings["probe_tool"], variants)
    # What every run of the scenario shares; each variant adds its flows and label.
    where = f"{source}: " + (f"scenarios.{sname}.record" if "record" in sc else "record")
    common = RunSpec(topology=topo, flows=(), scenario=sname, **sampling_from(settings, where))
    runs: list[_Run] = []
    top = _top_host(source, cfg)
    for v in variants:
        host = v.host.over(top)
        loader.check_variant(f"{source}: variant {v.label}", v.os,
                             kind(tb_cfg["kind"]).caps.oses, host)  # fmt: skip
        vtdict, vtopo = _variant_topology(source, tb_cfg, v, host, tdict, topo)
        flows = _variant_flows(source, sname, sc.get("flows", 1), v, vtopo, duration, tb_cfg)
        tb_id = _testbed_id(vtopo, v.dumbbell)
        testbeds.setdefault(tb_id, _Testbed(vtopo, vtdict, v.dumbbell))
        # The spec's variant has no regex: it goes beside the spec (`kernel`), so a
        # changed regex changes no run id and reruns nothing that is done.
        spec = replace(common, topology=vtopo, flows=flows, variant=v.label,
                       variant_def=replace(v, kernel_match=None),
                       host=host.without_mtu())  # fmt: skip
        for rep in range(1, cfg["repetitions"] + 1):
            for twin in _tracing_twins(replace(spec, repetition=rep), cfg["tracing"]):
                runs.append(_Run(tb_id, spec=twin, attempts=cfg["attempts"],
                                 kernel=v.kernel_requirement))  # fmt: skip
    return runs


def _top_host(source: str, cfg: dict[str, Any]) -> HostSettings:
    """The config's top-level `host`: every variant's endpoint settings."""
    top = HostSettings.from_dict(cfg.get("host"), f"{source}: host")
    if top.mtu is not None:
        raise CcbenchError(
            f"{source}: host.mtu: the path MTU every variant shares is "
            "topology.mtu (a variant's host.mtu changes it for its runs)"
        )
    return top


def _variant_topology(
    source: str, tb_cfg: dict[str, Any], v: Variant, host: HostSettings, tdict: dict[str, Any],
    topo: Topology,
) -> tuple[dict[str, Any], Topology]:  # fmt: skip
    """The scenario's topology for variant `v`: with its MTU where it asks one (queue
    sizes in packets of that MTU, limit_bdp computed with it), on a testbed of its own."""
    if host.mtu is None or host.mtu == topo.mtu:
        return tdict, topo
    if not kind(tb_cfg["kind"]).caps.sets_mtu:
        raise CcbenchError(f"{source}: variant {v.label}: host.mtu: the {tb_cfg['kind']} "
                           "testbed does not set its path's MTU (set it on the hosts and "
                           "routers, and topology.mtu to match)")  # fmt: skip
    vtdict = {**tdict, "mtu": host.mtu}
    return vtdict, Topology.from_config(vtdict)


def _tracing_twins(spec: RunSpec, tracing: str) -> list[RunSpec]:
    """The runs of one repetition: itself (inline), or an untraced run and a traced one
    (separate: instruments.traced_twin)."""
    if tracing == "inline":
        return [spec]
    return [replace(spec, tracing="untraced"), instruments.traced_twin(spec)]


def _variant_flows(
    source: str, sname: str, flows_cfg: int | list[dict[str, Any]], v: Variant,
    topo: Topology, duration: float, tb_cfg: dict[str, Any],
) -> tuple[Flow, ...]:  # fmt: skip
    """A scenario's flows for variant `v`, refused if its testbed cannot run the variant
    or the topology cannot carry the flows."""
    tb_kind = kind(tb_cfg["kind"])
    if v.os not in tb_kind.caps.oses:
        hosts = [k.name for k in REGISTRY.values() if v.os in k.caps.oses]
        raise CcbenchError(
            f"{source}: variant {v.label}: os {v.os} needs testbed.kind {' or '.join(hosts)} "
            f"(the {tb_kind.name} testbed is {tb_kind.description}: "
            f"{os_titles(tb_kind.caps.oses)} only)"
        )
    flows = flows_from_config(flows_cfg, v.cc, duration)
    for f in flows:
        if f.cc != v.cc:
            _check_variant(f"{source}: scenarios.{sname}", replace(v, cc=f.cc))
    try:
        check_flows(topo, flows)
    except CcbenchError as e:
        raise CcbenchError(f"{source}: scenarios.{sname}: {e}") from e
    return flows


def _testbed_id(topo: Topology, pinned: int | None) -> str:
    # A variant pinned to a dumbbell (e.g. the one whose senders boot the patched
    # kernel) gets a testbed of its own there.
    return topo.key()[:8] if pinned is None else f"{topo.key()[:6]}d{pinned}"


def _testbed_config(tb_cfg: dict[str, Any], tb_id: str, dumbbell: int) -> TestbedConfig:
    """What `ccbench testbed up` reads for testbed `tb_id` on `dumbbell`."""
    return TestbedConfig(
        kind=tb_cfg["kind"], id=tb_id, delay=tb_cfg["delay"],
        delay_direction=tb_cfg["delay_direction"], shaper=tb_cfg["shaper"],
        tools=tb_cfg["tools"], inventory=tb_cfg.get("inventory"), dumbbell=dumbbell,
        layout=tb_cfg["layout"],
    )  # fmt: skip


def _seeded_order(seed: int, testbeds: dict[str, _Testbed], runs: list[_Run]) -> list[str]:
    """Run ids in execution order: testbed after testbed, each one's runs in a seeded
    shuffle, so order effects (warm-up, drift) hit all variants alike."""
    rng = random.Random(seed)
    order: list[str] = []
    for tb_id in testbeds:
        ids = [r.spec.run_id for r in runs if r.testbed_id == tb_id]
        rng.shuffle(ids)
        order += ids
    return order


def _assign_dumbbells(
    source: str, tb_cfg: dict[str, Any], testbeds: dict[str, _Testbed]
) -> dict[str, PlannedTestbed]:
    """Each testbed's dumbbell: a pinned variant's, else spread over the dumbbells the
    testbed kind has (a local testbed has one: the machine's CPU). Where dumbbells share
    hosts (a lab's sender sets), spreading gains nothing and would change the senders'
    OS: an unpinned variant runs on the first."""
    caps = kind(tb_cfg["kind"]).caps
    n_db = min(tb_cfg["dumbbells"], caps.dumbbells)
    spread = 1 if caps.dumbbells_share_hosts else n_db
    free = [t for t in testbeds if testbeds[t].pinned is None]
    planned = {}
    for tb_id, tb in testbeds.items():
        pinned = tb.pinned
        if pinned is not None and pinned > n_db:
            raise CcbenchError(f"{source}: a variant is pinned to dumbbell {pinned}, but "
                               f"the testbed has {n_db}")  # fmt: skip
        d = pinned if pinned is not None else free.index(tb_id) % spread + 1
        planned[tb_id] = PlannedTestbed(tb_id, d, _testbed_config(tb_cfg, tb_id, d),
                                        tb.topology, tb.topology_config)  # fmt: skip
    return planned


def _matrix(
    cfg: dict[str, Any], baseline: str, variants: list[Variant],
    testbeds: dict[str, PlannedTestbed], runs: list[_Run], order: list[str],
) -> Matrix:  # fmt: skip
    planned = {}
    for r in runs:
        s = r.spec
        planned[s.run_id] = PlannedRun(
            id=s.run_id, scenario=s.scenario, variant=s.variant, repetition=s.repetition,
            testbed_id=r.testbed_id, traffic_s=s.traffic_s, spec=s,
            testbed=testbeds[r.testbed_id].testbed, attempts=r.attempts, kernel=r.kernel,
        )  # fmt: skip
    return Matrix(
        title=cfg["title"],
        question=cfg["question"],
        report_name=cfg["report_name"],
        results_dir=cfg["results_dir"],
        baseline=baseline,
        variants=tuple(variants),
        scenarios={k: Scenario(k, v.get("description", "")) for k, v in cfg["scenarios"].items()},
        repetitions=cfg["repetitions"],
        seed=cfg["seed"],
        resolve_target_pct=cfg["resolve_target_pct"],
        expectations=tuple(cfg.get("expectations", [])),
        references=tuple(
            Reference.from_dict(r, "config", f"references[{i}]")
            for i, r in enumerate(cfg.get("references", []))
        ),
        testbeds=testbeds,
        runs=planned,
        order=tuple(order),
    )
