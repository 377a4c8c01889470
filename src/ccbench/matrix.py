"""Expand a comparison config into runs with stable ids and a seeded random order.

A run = scenario × variant × repetition. Its id is the hash of its RunSpec, so
editing one variant changes only that variant's run ids and only those rerun.
Runs that share a bottleneck configuration share a testbed (id = topology key).
"""

from __future__ import annotations

import copy
import json
import random
import re
import shutil
from dataclasses import dataclass, replace
from typing import Any

from ccbench import kernel, probe
from ccbench.config import check_delay_direction, sampling_from, topology_from, validate
from ccbench.errors import CcbenchError
from ccbench.model import Matrix, PlannedRun, PlannedTestbed, Reference, Scenario, Variant
from ccbench.spec import Flow, RunSpec, Topology, check_flows

# The sampling settings a scenario may set for itself (the rest are the config's).
SCENARIO_SAMPLING = ("probe_tool", "probe_flent_test", "qdisc_interval_s")


def _check_probe(source: str, sname: str, tool: str, variants: list[dict[str, Any]]) -> None:
    """A probe tool the variants' senders cannot run fails before any run, naming the
    field (what this machine lacks is checked by `load`)."""
    if tool in ("ping", "fping"):  # on Linux and FreeBSD senders alike
        return
    for v in variants:
        if v.get("os", "linux") != "linux":
            raise CcbenchError(f"{source}: scenarios.{sname}: probe_tool {tool} needs Linux "
                               f"senders (variant {v['label']} runs {v['os']})")  # fmt: skip


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


def load(config: dict[str, Any], source: str = "config") -> Matrix:
    """Validate a comparison config (defaults filled), expand it, and check that what
    it asks of this machine exists here (the local testbed's CCs)."""
    cfg = validate(config, "matrix", source)
    m = expand(cfg, source)
    if cfg["testbed"]["kind"] == "local":
        _check_local_machine(m, cfg["testbed"]["tools"], source)
    return m


def _check_local_machine(m: Matrix, tools: str, source: str) -> None:
    """What the local testbed's runs ask of this machine (not part of `expand`, which
    does not depend on the machine): the flows' CCs, and netperf for flent's netperf
    tests when the tools run from the host."""
    from ccbench.hosts.linux import check_kernel_ccs

    check_kernel_ccs(
        (f"{source}: scenarios.{r.scenario} (variant {r.variant})", f["cc"])
        for r in m.runs.values()
        for f in r.flows
    )
    if tools != "host" or shutil.which("netperf") is not None:
        return
    for r in m.runs.values():
        test = r.run_spec["probe_flent_test"]
        if probe.needs_netperf(r.run_spec["probe_tool"], test):
            raise CcbenchError(
                f"{source}: scenarios.{r.scenario}: probe_flent_test {test} needs netperf "
                "with demo mode, which this host lacks: set testbed.tools: container"
            )


def _check_variant(source: str, v: dict[str, Any]) -> None:
    """A variant that names what its OS does not have is refused, not ignored."""
    where = f"{source}: variant {v['label']}"
    req = kernel.requirement(v)
    if req is not None:
        try:
            re.compile(req["match"])
        except re.error as e:
            raise CcbenchError(f"{where}: kernel.match: not a regular expression "
                               f"({e})") from None  # fmt: skip
    if v.get("os", "linux") == "linux":
        if v.get("stack", "default") != "default":
            raise CcbenchError(f"{where}: stack '{v['stack']}' is a FreeBSD setting; a Linux "
                               "variant has one TCP stack (leave stack out)")  # fmt: skip
        return
    from ccbench.hosts.freebsd import resolve_variant

    try:
        resolve_variant(v["cc"], v.get("stack", "default"))
    except CcbenchError as e:
        raise CcbenchError(f"{where}: {e}") from None


def _check_results_dir(source: str, path: str) -> None:
    if ".." in path.split("/"):
        raise CcbenchError(f"{source}: results_dir: '{path}' may not contain '..'")


def _check_inventory(
    source: str, tb_cfg: dict[str, Any], testbeds: dict[str, PlannedTestbed]
) -> None:
    """kind ssh: the inventory must exist, parse, and hold every dumbbell with the pairs
    its testbeds need, now, not after testbeds come up."""
    if tb_cfg["kind"] != "ssh":
        return
    if not tb_cfg.get("inventory"):
        raise CcbenchError(f"{source}: testbed.inventory: kind ssh needs a hosts inventory "
                           "(make one: ccbench testbed inventory --manifest FILE)")  # fmt: skip
    from ccbench import inventory

    try:
        inv = inventory.load(tb_cfg["inventory"])
        for tb in testbeds.values():
            have = inventory.pairs(inv.dumbbell(tb.dumbbell))
            if tb.topology["pairs"] > have:
                raise CcbenchError(
                    f"dumbbell {tb.dumbbell} has {have} sender/receiver "
                    f"pairs, a scenario asks for {tb.topology['pairs']}"
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
            raise CcbenchError(f"{where}.scenario: no scenario '{r['scenario']}'")
        if r["variant"] not in labels:
            raise CcbenchError(f"{where}.variant: no variant '{r['variant']}'")
        if r["metric"].startswith("flow"):
            k = int(r["metric"][4:].split("_", 1)[0])
            flows = cfg["scenarios"][r["scenario"]].get("flows", 1)
            n = flows if isinstance(flows, int) else len(flows)
            if k > n:
                raise CcbenchError(f"{where}.metric: scenario '{r['scenario']}' has {n} "
                                   f"flow(s), no flow {k}")  # fmt: skip


def _kernel_label(v: dict[str, Any]) -> dict[str, Any]:
    """The variant as its runs' specs hold it: `kernel` is the label alone, so a
    variant's `kernel: {label, match}` has the run ids of `kernel: label`, and a
    changed regex reruns nothing that is done (the regex goes beside the spec)."""
    k = v.get("kernel", "")
    return {**v, "kernel": k["label"]} if isinstance(k, dict) else v


def _matrix_variant(v: dict[str, Any]) -> dict[str, Any]:
    """The variant as matrix.json lists it: the label in `kernel`, the regex (if any)
    in `kernel_match`."""
    req = kernel.requirement(v)
    return {**_kernel_label(v), **({"kernel_match": req["match"]} if req else {})}


def expand(cfg: dict[str, Any], source: str = "config") -> Matrix:
    """A validated comparison config (defaults filled) as a Matrix: every scenario ×
    variant × repetition with its run id and testbed, in the seeded order. What cannot
    work is refused before any run, naming the field."""
    baseline = _baseline(source, cfg["variants"])
    _check_config(source, cfg)
    runs: list[PlannedRun] = []
    testbeds: dict[str, _Testbed] = {}
    for sname, sc in cfg["scenarios"].items():
        runs += _scenario_runs(source, cfg, sname, sc, testbeds)
    order = _seeded_order(cfg["seed"], testbeds, runs)
    planned = _assign_dumbbells(source, cfg["testbed"], testbeds)
    _check_inventory(source, cfg["testbed"], planned)
    return _matrix(source, cfg, baseline, planned, runs, order)


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


def _check_config(source: str, cfg: dict[str, Any]) -> None:
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
        check_delay_direction(tb_cfg["kind"], tb_cfg["delay_direction"])
    except CcbenchError as e:
        raise CcbenchError(f"{source}: {e}") from None
    for v in cfg["variants"]:
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
                raise CcbenchError(f"{source}: expectations[{i}].{key}: no {what} '{e[key]}'")


@dataclass
class _Testbed:
    """A testbed while the matrix is built. `spec` is the one dict every run on it holds
    as its spec's `testbed`, so the dumbbell assigned last reaches all of them (it once
    reached only the last variant's)."""

    spec: dict[str, Any]
    topology: dict[str, Any]
    pinned: int | None  # the dumbbell its variant is pinned to


def _scenario_runs(
    source: str, cfg: dict[str, Any], sname: str, sc: dict[str, Any],
    testbeds: dict[str, _Testbed],
) -> list[PlannedRun]:  # fmt: skip
    """One scenario's runs, every variant × repetition; adds the testbeds they need to
    `testbeds` (runs with the same topology and dumbbell pin share one)."""
    tb_cfg = cfg["testbed"]
    tdict = _merge(cfg.get("topology", {}), sc.get("topology", {}))
    # Validate the merged topology with the run schema (same rules as `ccbench run`);
    # its defaults are the one place topology defaults live.
    tdict = validate({"topology": tdict}, "run", f"{source}: scenarios.{sname}")["topology"]
    topo = topology_from(tdict)
    duration = float(sc.get("duration_s", cfg["duration_s"]))
    settings = {**cfg, **{k: sc[k] for k in SCENARIO_SAMPLING if k in sc}}
    _check_probe(source, sname, settings["probe_tool"], cfg["variants"])
    # What every run of the scenario shares; each variant adds its flows and label.
    common = RunSpec(topology=topo, flows=(), scenario=sname, **sampling_from(settings))
    runs: list[PlannedRun] = []
    for v in cfg["variants"]:
        flows = _variant_flows(source, sname, sc.get("flows", 1), v, topo, duration, tb_cfg)
        tb_id = _testbed_id(topo, v.get("dumbbell"))
        tb = testbeds.setdefault(
            tb_id, _Testbed(_testbed_spec(tb_cfg, tb_id), tdict, v.get("dumbbell"))
        )
        spec = replace(common, flows=flows, variant=v["label"],
                       extra={"variant": _kernel_label(v)})  # fmt: skip
        for rep in range(1, cfg["repetitions"] + 1):
            runs.append(
                _planned_run(replace(spec, repetition=rep), v, tb_id, tb.spec, cfg["attempts"])
            )
    return runs


def _variant_flows(
    source: str, sname: str, flows_cfg: int | list[dict[str, Any]], v: dict[str, Any],
    topo: Topology, duration: float, tb_cfg: dict[str, Any],
) -> tuple[Flow, ...]:  # fmt: skip
    """A scenario's flows for variant `v`, refused if its testbed cannot run the variant
    or the topology cannot carry the flows."""
    if v.get("os", "linux") != "linux" and tb_cfg["kind"] == "local":
        raise CcbenchError(
            f"{source}: variant {v['label']}: os {v['os']} needs testbed.kind ssh "
            "(the local testbed is Linux namespaces)"
        )
    flows = _flows(flows_cfg, v["cc"], duration)
    for f in flows:
        if f.cc != v["cc"]:
            _check_variant(f"{source}: scenarios.{sname}", {**v, "cc": f.cc})
    try:
        check_flows(topo, flows)
    except CcbenchError as e:
        raise CcbenchError(f"{source}: scenarios.{sname}: {e}") from e
    return flows


def _testbed_id(topo: Topology, pinned: int | None) -> str:
    # A variant pinned to a dumbbell (e.g. the one whose senders boot the patched
    # kernel) gets a testbed of its own there.
    return topo.key()[:8] if pinned is None else f"{topo.key()[:6]}d{pinned}"


def _testbed_spec(tb_cfg: dict[str, Any], tb_id: str) -> dict[str, Any]:
    """What `ccbench testbed up` reads (config.TestbedConfig), but for the dumbbell
    (_assign_dumbbells adds it)."""
    return {
        "kind": tb_cfg["kind"],
        "id": tb_id,
        "delay": tb_cfg["delay"],
        **({"delay_direction": tb_cfg["delay_direction"]}
           if tb_cfg["delay_direction"] != "both" else {}),
        "shaper": tb_cfg["shaper"],
        "tools": tb_cfg["tools"],
        **({"inventory": tb_cfg["inventory"]} if "inventory" in tb_cfg else {}),
    }  # fmt: skip


def _planned_run(
    spec: RunSpec, v: dict[str, Any], tb_id: str, tb_spec: dict[str, Any], attempts: int
) -> PlannedRun:
    return PlannedRun(
        id=spec.run_id,
        scenario=spec.scenario,
        variant=spec.variant,
        repetition=spec.repetition,
        testbed_id=tb_id,
        traffic_s=spec.traffic_s,
        spec={
            "testbed": tb_spec,
            # JSON types (lists, not RunSpec's tuples): the model equals one read back
            # from matrix.json.
            "run": json.loads(json.dumps(spec.to_dict())),
            "attempts": attempts,
            **({"kernel": req} if (req := kernel.requirement(v)) else {}),
        },
    )


def _seeded_order(seed: int, testbeds: dict[str, _Testbed], runs: list[PlannedRun]) -> list[str]:
    """Run ids in execution order: testbed after testbed, each one's runs in a seeded
    shuffle, so order effects (warm-up, drift) hit all variants alike."""
    rng = random.Random(seed)
    order: list[str] = []
    for tb_id in testbeds:
        ids = [r.id for r in runs if r.testbed_id == tb_id]
        rng.shuffle(ids)
        order += ids
    return order


def _assign_dumbbells(
    source: str, tb_cfg: dict[str, Any], testbeds: dict[str, _Testbed]
) -> dict[str, PlannedTestbed]:
    """Each testbed's dumbbell, written into the testbed spec its runs share: a pinned
    variant's, else spread over the dumbbells (ssh); locally everything shares the one
    machine."""
    n_db = tb_cfg["dumbbells"] if tb_cfg["kind"] == "ssh" else 1
    free = [t for t in testbeds if testbeds[t].pinned is None]
    planned = {}
    for tb_id, tb in testbeds.items():
        pinned = tb.pinned
        if pinned is not None and tb_cfg["kind"] == "ssh" and pinned > n_db:
            raise CcbenchError(f"{source}: a variant is pinned to dumbbell {pinned}, but "
                               f"testbed.dumbbells is {n_db}")  # fmt: skip
        if tb_cfg["kind"] != "ssh":
            d = 1  # one machine: every local testbed shares its CPU
        elif pinned is not None:
            d = pinned
        else:
            d = free.index(tb_id) % n_db + 1
        tb.spec["dumbbell"] = d
        planned[tb_id] = PlannedTestbed(tb_id, d, tb.spec, tb.topology)
    return planned


def _matrix(
    source: str, cfg: dict[str, Any], baseline: str, testbeds: dict[str, PlannedTestbed],
    runs: list[PlannedRun], order: list[str],
) -> Matrix:  # fmt: skip
    return Matrix(
        title=cfg["title"],
        question=cfg["question"],
        report_name=cfg["report_name"],
        results_dir=cfg["results_dir"],
        baseline=baseline,
        variants=tuple(
            Variant.from_dict(_matrix_variant(v), source, f"variants[{i}]")
            for i, v in enumerate(cfg["variants"])
        ),
        scenarios={k: Scenario(k, v.get("description", "")) for k, v in cfg["scenarios"].items()},
        repetitions=cfg["repetitions"],
        seed=cfg["seed"],
        resolve_target_pct=cfg["resolve_target_pct"],
        expectations=tuple(cfg.get("expectations", [])),
        references=tuple(
            Reference.from_dict(r, source, f"references[{i}]")
            for i, r in enumerate(cfg.get("references", []))
        ),
        testbeds=testbeds,
        runs={r.id: r for r in runs},
        order=tuple(order),
    )


def _flows(spec: int | list[dict[str, Any]], variant_cc: str, duration: float) -> tuple[Flow, ...]:
    if isinstance(spec, int):
        return tuple(Flow(pair=i, cc=variant_cc, duration_s=duration) for i in range(1, spec + 1))
    out = []
    for i, f in enumerate(spec, start=1):
        cc = f.get("cc", "variant")
        out.append(
            Flow(
                pair=f.get("pair", i),
                cc=variant_cc if cc == "variant" else cc,
                start_s=float(f.get("start_s", 0)),
                duration_s=float(f.get("duration_s", duration)),
                streams=int(f.get("streams", 1)),
            )
        )
    return tuple(out)
