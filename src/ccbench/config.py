"""Load and validate YAML configs (JSON Schema with defaults) into spec objects."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ccbench.errors import CcbenchError
from ccbench.spec import Flow, RunSpec, Topology, bdp_packets, check_flows, check_topology


def schema(name: str) -> dict[str, Any]:
    text = resources.files("ccbench").joinpath(f"schemas/{name}.yaml").read_text()
    return dict(yaml.safe_load(text))


def schema_path(name: str) -> Path:
    return Path(str(resources.files("ccbench").joinpath(f"schemas/{name}.yaml")))


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such config file")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise CcbenchError(f"{p}:{where}: not valid YAML ({getattr(e, 'problem', e)})") from e
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CcbenchError(f"{p}: the top level must be a mapping")
    return data


def _fill_defaults(validator_cls: Any) -> Any:
    validate_props = validator_cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Any, instance: Any, sch: Any) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(prop, copy.deepcopy(sub["default"]))
        yield from validate_props(validator, properties, instance, sch)

    return jsonschema.validators.extend(validator_cls, {"properties": set_defaults})


_Validator = _fill_defaults(jsonschema.Draft202012Validator)


def _resolve_ref_defaults(sch: dict[str, Any]) -> dict[str, Any]:
    """Copy each $defs entry's default onto the properties that $ref it."""
    sch = copy.deepcopy(sch)
    defs = sch.get("$defs", {})

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/") and "default" not in node:
                target = defs.get(ref.split("/")[-1], {})
                if "default" in target:
                    node["default"] = copy.deepcopy(target["default"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(sch)
    return sch


def validate(data: dict[str, Any], schema_name: str, source: str) -> dict[str, Any]:
    """Validate a copy of `data`, fill defaults, raise one clear line on the first error."""
    data = copy.deepcopy(data)
    sch = _resolve_ref_defaults(schema(schema_name))
    validator = _Validator(sch)
    # Two passes: defaults filled in the first can expose nested defaults in the second.
    for _ in range(2):
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            where = ".".join(str(p) for p in e.absolute_path) or "(top level)"
            raise CcbenchError(f"{source}: {where}: {e.message}")
    return data


@dataclass(frozen=True)
class TestbedConfig:
    kind: str = "local"
    id: str = "ccb"
    delay: str = "auto"
    shaper: str = "tbf"
    tools: str = "host"
    inventory: str | None = None
    dumbbell: int = 1

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TestbedConfig:
        return TestbedConfig(**d)


def topology_from(d: dict[str, Any]) -> Topology:
    q = d.get("queue", {})
    kind = q.get("kind", "pfifo")
    if "limit_pkts" in q:
        limit = int(q["limit_pkts"])
    elif "limit_bdp" in q:
        limit = max(2, round(q["limit_bdp"] * bdp_packets(d["rate_mbit"], d["rtt_ms"], d["mtu"])))
    else:
        limit = 48
    loss = d.get("loss", {})
    t = Topology(
        pairs=d["pairs"],
        rate_mbit=float(d["rate_mbit"]),
        rtt_ms=float(d["rtt_ms"]),
        queue_kind=kind,
        queue_limit_pkts=limit,
        loss_mode=loss.get("mode", "none"),
        loss_rate=float(loss.get("rate", 0.0)),
        mtu=d["mtu"],
    )
    check_topology(t)
    return t


def load_run_config(path: str | Path) -> tuple[TestbedConfig, RunSpec, int]:
    """(testbed, run spec, attempts) from a single-run config file."""
    data = validate(load_yaml(path), "run", str(path))
    topo = topology_from(data["topology"])
    run = data["run"]
    flows = tuple(
        Flow(
            pair=f.get("pair", 1),
            cc=f["cc"],
            start_s=float(f.get("start_s", 0)),
            duration_s=float(f.get("duration_s", run["duration_s"])),
            streams=f.get("streams", 1),
        )
        for f in run["flows"]
    )
    check_flows(topo, flows)
    spec = RunSpec(
        topology=topo,
        flows=flows,
        interval_s=float(run["interval_s"]),
        ss_interval_s=float(run["ss_interval_s"]),
        probe_interval_s=float(run["probe_interval_s"]),
        probe_tool=run["probe_tool"],
        probe_flent_test=run["probe_flent_test"],
    )
    return TestbedConfig.from_dict(data["testbed"]), spec, int(run["attempts"])


def load_testbed_config(path: str | Path) -> tuple[TestbedConfig, Topology]:
    tb, spec, _ = load_run_config(path)
    return tb, spec.topology
