"""Load and validate YAML configs (JSON Schema with defaults) into spec objects."""

from __future__ import annotations

import copy
import functools
import math
import re
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from ccbench import instruments
from ccbench.errors import CcbenchError
from ccbench.host_settings import HostSettings
from ccbench.spec import RunSpec, Topology, check_flows, flows_from_config
from ccbench.testbed.kinds import TestbedConfig, kind


def _registry_lists() -> dict[str, Any]:
    """What the schemas' `x-from` / `x-max-from` name: each list's one source."""
    from ccbench import metric_catalog, probes, queues, topology
    from ccbench.probes.flent import FLENT_TESTS
    from ccbench.testbed import kinds

    oses = [o for k in kinds.REGISTRY.values() for o in k.caps.oses]
    return {
        "testbed_kinds": list(kinds.NAMES),
        "testbed_layouts": list(topology.NAMES),
        "probe_tools": list(probes.NAMES),
        "flent_tests": list(FLENT_TESTS),
        "queue_kinds": list(queues.NAMES),
        "expectable_metrics": list(metric_catalog.EXPECTABLE),
        "referable_metrics": list(metric_catalog.REFERABLE),
        "sender_oses": list(dict.fromkeys(oses)),
        "dumbbells": kinds.MAX_DUMBBELLS,
        "optional_instruments": [n for n, c in instruments.REGISTRY.items() if c.optional],
    }


def _fill(node: Any, lists: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        out = {k: _fill(v, lists) for k, v in node.items() if k not in ("x-from", "x-max-from")}
        if "x-from" in node:
            out["enum"] = list(lists[node["x-from"]])
        if "x-max-from" in node:
            out["maximum"] = lists[node["x-max-from"]]
        return out
    if isinstance(node, list):
        return [_fill(v, lists) for v in node]
    return node


@functools.cache
def _schema_file(name: str) -> Any:
    """The schema file as parsed, once a process: parsing it (~45 ms) was most of a
    validate(), which one `ccbench matrix` calls several times. Never handed out:
    schema() builds new containers from it (_fill)."""
    text = resources.files("ccbench").joinpath(f"schemas/{name}.yaml").read_text()
    return yaml.safe_load(text)


def schema(name: str) -> dict[str, Any]:
    """The config schema `name` (run, matrix) with its registry lists filled in."""
    return dict(_fill(_schema_file(name), _registry_lists()))


MAX_CONFIG_BYTES = 1_000_000
# Expanded size (nodes, counting every alias as a copy) above which a YAML document is
# refused: anchors are fine, a "billion laughs" is not.
MAX_YAML_NODES = 200_000
# No config nests deeper than a handful of levels; a deeper document is not a config.
MAX_YAML_DEPTH = 64


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML lets the last one win)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            dup = key in seen
        except TypeError:  # an unhashable key: let PyYAML say so
            break
        if dup:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _expanded_size(node: yaml.Node, source: str) -> int:
    """Nodes the document would have with every alias expanded (memoized: linear).
    A value that contains itself (`a: &a [*a]`) or nesting deeper than any config
    needs is refused: either would recurse without end in what reads it next."""
    memo: dict[int, int] = {}
    open_: set[int] = set()

    def size(n: yaml.Node, depth: int) -> int:
        if id(n) in open_:
            raise CcbenchError(f"{source}: line {n.start_mark.line + 1}: a value that "
                               "contains itself (a recursive YAML alias)")  # fmt: skip
        if id(n) in memo:
            return memo[id(n)]
        if depth > MAX_YAML_DEPTH:
            raise CcbenchError(f"{source}: line {n.start_mark.line + 1}: nested more than "
                               f"{MAX_YAML_DEPTH} levels deep")  # fmt: skip
        open_.add(id(n))
        if isinstance(n, yaml.MappingNode):
            total = 1 + sum(size(k, depth + 1) + size(v, depth + 1) for k, v in n.value)
        elif isinstance(n, yaml.SequenceNode):
            total = 1 + sum(size(v, depth + 1) for v in n.value)
        else:
            total = 1
        open_.discard(id(n))
        memo[id(n)] = total
        return total

    return size(node, 0)


def parse_yaml(raw: bytes, source: str) -> Any:
    """YAML bytes -> data, refusing what a config never is: over 1 MB, not UTF-8,
    binary, duplicate keys, alias bombs. One clear line per problem."""
    if len(raw) > MAX_CONFIG_BYTES:
        raise CcbenchError(f"{source}: {len(raw)} bytes; a config may have at most "
                           f"{MAX_CONFIG_BYTES}")  # fmt: skip
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CcbenchError(f"{source}: not UTF-8 text (byte {e.start})") from e
    if "\x00" in text:
        raise CcbenchError(f"{source}: a binary file, not YAML")
    try:
        try:
            node = yaml.compose(text, Loader=_StrictLoader)
        except RecursionError:  # PyYAML's composer recurses once per nesting level
            raise CcbenchError(f"{source}: nested more than {MAX_YAML_DEPTH} levels deep") from None
        if node is not None and _expanded_size(node, source) > MAX_YAML_NODES:
            raise CcbenchError(f"{source}: its aliases expand to more than {MAX_YAML_NODES} "
                               "values (a YAML alias bomb?)")  # fmt: skip
        loader = _StrictLoader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CcbenchError(f"{source}:{where}: not valid YAML ({problem})") from e


def load_yaml(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such config file")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CcbenchError(f"{p}: cannot read ({e.strerror})") from e
    data = parse_yaml(raw, str(p))
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


def _strict_types(validator_cls: Any) -> Any:
    """'integer' means an int: JSON Schema accepts 2.0, which would reach iperf3 as
    `-P 2.0`. Refused with the usual message instead."""
    checker = validator_cls.TYPE_CHECKER.redefine(
        "integer", lambda _, x: isinstance(x, int) and not isinstance(x, bool)
    )

    def pattern(validator: Any, patrn: str, instance: Any, sch: Any) -> Any:
        # Python's `$` also matches before a final newline: "cubic\n" would pass
        # "^[a-z0-9_]{1,16}$" and reach file names and argv. Anchor at the true end.
        if isinstance(instance, str) and patrn.endswith("$") and not patrn.endswith("\\$"):
            if not re.search(patrn[:-1] + r"\Z", instance):
                yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")
            return
        yield from validator_cls.VALIDATORS["pattern"](validator, patrn, instance, sch)

    return jsonschema.validators.extend(validator_cls, {"pattern": pattern}, type_checker=checker)


_Validator = _fill_defaults(_strict_types(jsonschema.Draft202012Validator))


def _check_finite(data: Any, path: str = "") -> None:
    """NaN and infinity pass JSON Schema's minimum/maximum (every comparison with NaN
    is false): refuse them wherever they stand."""
    if isinstance(data, float) and not math.isfinite(data):
        raise CcbenchError(f"{path or '(top level)'}: {data} is not a finite number")
    if isinstance(data, dict):
        for k, v in data.items():
            _check_finite(v, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_finite(v, f"{path}[{i}]")


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


# Config keys of 2026-11-25 that are now optional instruments under `record:`: key ->
# what to write instead (spec.OLD_RECORD_KEYS reads the specs written with them).
OLD_KEYS = {
    "tcp_probe": "record: [tcp_probe]",
    "tcp_probe_budget_mb": "record: [{tcp_probe: {budget_mb: N}}]",
    "bblog": "record: [bblog]",
}


def _check_old_keys(data: dict[str, Any], source: str) -> None:
    """One line naming a key that became `record:` and what to write instead."""
    scenarios = data.get("scenarios")
    where: list[tuple[str, Any]] = [("", data), ("run.", data.get("run"))]
    if isinstance(scenarios, dict):
        where += [(f"scenarios.{n}.", sc) for n, sc in scenarios.items()]
    for prefix, d in where:
        for key in OLD_KEYS:
            if isinstance(d, dict) and key in d:
                raise CcbenchError(f"{source}: {prefix}{key}: now an optional instrument: "
                                   f"write {OLD_KEYS[key]} (docs/configs.md)")  # fmt: skip


def validate(data: dict[str, Any], schema_name: str, source: str) -> dict[str, Any]:
    """Validate a copy of `data`, fill defaults, raise one clear line on the first error."""
    try:
        _check_finite(data)
    except CcbenchError as bad:
        raise CcbenchError(f"{source}: {bad}") from None
    if isinstance(data, dict):
        _check_old_keys(data, source)
    data = copy.deepcopy(data)
    sch = _resolve_ref_defaults(schema(schema_name))
    validator = _Validator(sch)
    # Two passes: defaults filled in the first can expose nested defaults in the second.
    for _ in range(2):
        errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if errors:
            e = errors[0]
            where = ".".join(str(p) for p in e.absolute_path) or "(top level)"
            msg = " ".join(e.message.split())  # one line, however odd the value
            if len(msg) > 240:
                msg = msg[:200] + " ... " + msg[-35:]
            raise CcbenchError(f"{source}: {where}: {msg}")
    return data


def topology_from(d: dict[str, Any]) -> Topology:
    return Topology.from_config(d)


def load_run_config(path: str | Path) -> tuple[TestbedConfig, RunSpec, int]:
    """(testbed, run spec, attempts) from a single-run config file."""
    data = validate(load_yaml(path), "run", str(path))
    topo = topology_from(data["topology"])
    run = data["run"]
    flows = flows_from_config(run["flows"], "", float(run["duration_s"]))
    check_flows(topo, flows)
    if kind(data["testbed"]["kind"]).caps.senders_here:
        from ccbench.hosts.linux import check_kernel_ccs

        check_kernel_ccs((f"{path}: run.flows[{i}]", f.cc) for i, f in enumerate(flows))
    host = HostSettings.from_dict(run["host"], f"{path}: run.host")
    if host.mtu is not None:
        raise CcbenchError(f"{path}: run.host.mtu: a run's path MTU is topology.mtu")
    spec = RunSpec(topology=topo, flows=flows, host=host,
                   **sampling_from(run, f"{path}: run.record"))  # fmt: skip
    return TestbedConfig.from_dict(data["testbed"]), spec, int(run["attempts"])


def sampling_from(d: dict[str, Any], where: str = "record") -> dict[str, Any]:
    """RunSpec's sampling and probe fields from a validated config mapping (a run
    config's `run:`, or a comparison config with its scenario's overrides): the one
    place config keys become these fields."""
    return {
        "interval_s": float(d["interval_s"]),
        "ss_interval_s": float(d["ss_interval_s"]),
        "probe_interval_s": float(d["probe_interval_s"]),
        "probe_tool": d["probe_tool"],
        "probe_flent_test": d["probe_flent_test"],
        "qdisc_interval_s": float(d["qdisc_interval_s"]),
        "siftr_budget_mb": float(d["siftr_budget_mb"]),
        "record": instruments.record_option(d["record"], where),
    }


def load_testbed_config(path: str | Path) -> tuple[TestbedConfig, Topology]:
    tb, spec, _ = load_run_config(path)
    return tb, spec.topology
