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
from typing import Any

from ccbench import kernel, probe
from ccbench.config import topology_from, validate
from ccbench.errors import CcbenchError
from ccbench.spec import Flow, RunSpec, check_flows


def _check_probe(
    source: str, sname: str, tool: str, flent_test: str, tb_cfg: dict[str, Any],
    variants: list[dict[str, Any]],
) -> None:  # fmt: skip
    """Probe choices that cannot work here fail before any run, naming the field."""
    if tool in ("ping", "fping"):  # on Linux and FreeBSD senders alike
        return
    for v in variants:
        if v.get("os", "linux") != "linux":
            raise CcbenchError(f"{source}: scenarios.{sname}: probe_tool {tool} needs Linux "
                               f"senders (variant {v['label']} runs {v['os']})")  # fmt: skip
    if (
        probe.needs_netperf(tool, flent_test)
        and tb_cfg["kind"] == "local"
        and tb_cfg["tools"] == "host"
        and shutil.which("netperf") is None
    ):
        raise CcbenchError(
            f"{source}: scenarios.{sname}: probe_flent_test {flent_test} needs netperf with "
            "demo mode, which this host lacks: set testbed.tools: container"
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


def load(config: dict[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate a comparison config (defaults filled), expand it, and check that what
    it asks of this machine exists here (the local testbed's CCs)."""
    cfg = validate(config, "matrix", source)
    m = expand(cfg, source)
    if cfg["testbed"]["kind"] == "local":
        _check_local_ccs(m, source)
    return m


def _check_local_ccs(m: dict[str, Any], source: str) -> None:
    from ccbench.hosts.linux import loadable_ccs

    have = loadable_ccs()
    for r in m["runs"].values():
        for f in r["spec"]["run"]["flows"]:
            if f["cc"] not in have:
                raise CcbenchError(
                    f"{source}: scenarios.{r['scenario']} (variant {r['variant']}): this "
                    f"kernel has no TCP congestion control '{f['cc']}' and cannot load it "
                    f"(it has: {', '.join(sorted(have))})"
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
    source: str, tb_cfg: dict[str, Any], testbeds: dict[str, dict[str, Any]]
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
            have = inventory.pairs(inv.dumbbell(tb["dumbbell"]))
            if tb["topology"]["pairs"] > have:
                raise CcbenchError(
                    f"dumbbell {tb['dumbbell']} has {have} sender/receiver "
                    f"pairs, a scenario asks for {tb['topology']['pairs']}"
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


def expand(cfg: dict[str, Any], source: str = "config") -> dict[str, Any]:
    variants = cfg["variants"]
    labels = [v["label"] for v in variants]
    if len(set(labels)) != len(labels):
        raise CcbenchError(f"{source}: variants: labels must be unique")
    baselines = [v["label"] for v in variants if v.get("baseline")]
    if len(baselines) > 1:
        raise CcbenchError(f"{source}: variants: more than one baseline ({', '.join(baselines)})")
    baseline = baselines[0] if baselines else labels[0]
    scenarios = list(cfg["scenarios"])
    for i, e in enumerate(cfg.get("expectations", [])):
        for key, known, what in (
            ("variant", labels, "variant"),
            ("than", labels, "variant"),
            ("scenario", scenarios, "scenario"),
        ):
            if key in e and e[key] not in known:
                raise CcbenchError(f"{source}: expectations[{i}].{key}: no {what} '{e[key]}'")
    _check_references(source, cfg, labels, scenarios)
    tb_cfg = cfg["testbed"]
    _check_results_dir(source, cfg["results_dir"])
    for v in variants:
        _check_variant(source, v)
    runs: list[dict[str, Any]] = []
    testbeds: dict[str, dict[str, Any]] = {}
    for sname, sc in cfg["scenarios"].items():
        tdict = _merge(cfg.get("topology", {}), sc.get("topology", {}))
        # Validate the merged topology with the run schema (same rules as `ccbench run`);
        # its defaults are the one place topology defaults live.
        tdict = validate({"topology": tdict}, "run", f"{source}: scenarios.{sname}")["topology"]
        topo = topology_from(tdict)
        duration = float(sc.get("duration_s", cfg["duration_s"]))
        probe_tool = sc.get("probe_tool", cfg["probe_tool"])
        flent_test = sc.get("probe_flent_test", cfg["probe_flent_test"])
        _check_probe(source, sname, probe_tool, flent_test, tb_cfg, variants)
        for v in variants:
            if v.get("os", "linux") != "linux" and tb_cfg["kind"] == "local":
                raise CcbenchError(
                    f"{source}: variant {v['label']}: os {v['os']} needs testbed.kind ssh "
                    "(the local testbed is Linux namespaces)"
                )
            flows = _flows(sc.get("flows", 1), v["cc"], duration)
            for f in flows:
                if f.cc != v["cc"]:
                    _check_variant(f"{source}: scenarios.{sname}", {**v, "cc": f.cc})
            try:
                check_flows(topo, flows)
            except CcbenchError as e:
                raise CcbenchError(f"{source}: scenarios.{sname}: {e}") from e
            # A variant pinned to a dumbbell (e.g. the one whose senders boot the patched
            # kernel) gets a testbed of its own there.
            pinned = v.get("dumbbell")
            tb_id = topo.key()[:8] if pinned is None else f"{topo.key()[:6]}d{pinned}"
            testbeds[tb_id] = {
                "testbed": {
                    "kind": tb_cfg["kind"],
                    "id": tb_id,
                    "delay": tb_cfg["delay"],
                    "shaper": tb_cfg["shaper"],
                    "tools": tb_cfg["tools"],
                    **({"inventory": tb_cfg["inventory"]} if "inventory" in tb_cfg else {}),
                },
                "topology": tdict,
                "pinned": pinned,
            }
            for rep in range(1, cfg["repetitions"] + 1):
                spec = RunSpec(
                    topology=topo,
                    flows=flows,
                    interval_s=float(cfg["interval_s"]),
                    ss_interval_s=float(cfg["ss_interval_s"]),
                    probe_interval_s=float(cfg["probe_interval_s"]),
                    probe_tool=probe_tool,
                    probe_flent_test=flent_test,
                    qdisc_interval_s=float(sc.get("qdisc_interval_s", cfg["qdisc_interval_s"])),
                    scenario=sname,
                    variant=v["label"],
                    repetition=rep,
                    extra={"variant": _kernel_label(v)},
                )
                runs.append(
                    {
                        "id": spec.run_id,
                        "scenario": sname,
                        "variant": v["label"],
                        "repetition": rep,
                        "testbed_id": tb_id,
                        "traffic_s": spec.traffic_s,
                        "spec": {
                            "testbed": testbeds[tb_id]["testbed"],
                            "run": spec.to_dict(),
                            "attempts": cfg["attempts"],
                            **({"kernel": req} if (req := kernel.requirement(v)) else {}),
                        },
                    }
                )
    # Seeded shuffle per testbed: order effects (warm-up, drift) hit all variants alike.
    rng = random.Random(cfg["seed"])
    order: list[str] = []
    for tb_id in testbeds:
        ids = [r["id"] for r in runs if r["testbed_id"] == tb_id]
        rng.shuffle(ids)
        order += ids
    # Spread testbeds over dumbbells (ssh); locally everything shares the one machine.
    n_db = tb_cfg["dumbbells"] if tb_cfg["kind"] == "ssh" else 1
    free = [t for t in testbeds if testbeds[t]["pinned"] is None]
    for tb_id, tb in testbeds.items():
        pinned = tb.pop("pinned")
        if pinned is not None and tb_cfg["kind"] == "ssh" and pinned > n_db:
            raise CcbenchError(f"{source}: a variant is pinned to dumbbell {pinned}, but "
                               f"testbed.dumbbells is {n_db}")  # fmt: skip
        if tb_cfg["kind"] != "ssh":
            d = 1  # one machine: every local testbed shares its CPU
        elif pinned is not None:
            d = pinned
        else:
            d = free.index(tb_id) % n_db + 1
        tb["dumbbell"] = d
        tb["testbed"]["dumbbell"] = d
    _check_inventory(source, tb_cfg, testbeds)
    return {
        "title": cfg["title"],
        "question": cfg["question"],
        "report_name": cfg["report_name"],
        "results_dir": cfg["results_dir"],
        "baseline": baseline,
        "variants": [_matrix_variant(v) for v in variants],
        "scenarios": {
            k: {"description": v.get("description", "")} for k, v in cfg["scenarios"].items()
        },  # fmt: skip
        "repetitions": cfg["repetitions"],
        "seed": cfg["seed"],
        "resolve_target_pct": cfg["resolve_target_pct"],
        "expectations": cfg.get("expectations", []),
        "references": cfg.get("references", []),
        "testbeds": testbeds,
        "runs": {r["id"]: r for r in runs},
        "order": order,
    }


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
