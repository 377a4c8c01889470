"""The run matrix as one typed model: what `ccbench matrix` expands a comparison config
into and results/matrix.json holds.

`ccbench run` and `ccbench testbed up` take their specs from it by id; aggregate,
figures and the report read the rest. Snakemake (rules/common.smk) reads the same
JSON itself, so `to_dict()` is exactly the file's layout, and a file this version wrote
reads back unchanged (the report prints its sha256); an older file is brought forward
by ccbench.upgrade.matrix first.

Standard library only: the CLI reads a matrix to decide whether it needs root before
anything else is imported (ccbench.cli._testbed_kind).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench import upgrade
from ccbench.errors import CcbenchError
from ccbench.spec import Flow, RunSpec, Topology, Variant, spec_dict_problem
from ccbench.testbed.kinds import TestbedConfig

RESOLVE_TARGET_PCT = upgrade.RESOLVE_TARGET_PCT

_MISSING = object()
_STR, _INT, _NUM, _BOOL = (str,), (int,), (int, float), (bool,)
_LIST, _MAP = (list,), (dict,)
_WORDS = {str: "a string", int: "an integer", float: "a number", bool: "true or false",
          list: "a list", dict: "a mapping"}  # fmt: skip


def _kind(v: object) -> str:
    if v is None:
        return "null"
    return next((w for t, w in _WORDS.items() if type(v) is t), type(v).__name__)


class _Reader:
    """Typed access to one mapping of a matrix; a problem is one line naming the file
    and the key's path."""

    def __init__(self, d: object, source: str, path: str = "") -> None:
        if not isinstance(d, dict):
            where = f"{path}: " if path else ""
            raise CcbenchError(f"{source}: {where}{_kind(d)} where a mapping was expected")
        self.d: dict[str, Any] = d
        self.source = source
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def get(self, key: str, kinds: tuple[type, ...], default: Any = _MISSING) -> Any:
        if key not in self.d:
            if default is _MISSING:
                raise CcbenchError(f"{self.source}: {self.at(key)} is missing")
            return default
        v = self.d[key]
        # JSON true is a Python int too: only where true/false is asked for.
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            raise CcbenchError(f"{self.source}: {self.at(key)}: {_kind(v)} where "
                               f"{_WORDS[kinds[-1]]} was expected")  # fmt: skip
        return v

    def sub(self, key: str) -> _Reader:
        return _Reader(self.get(key, _MAP), self.source, self.at(key))


def _variant(r: _Reader) -> Variant:
    """A variant as matrix.json lists it, each key's type checked."""
    for key, kinds in (("label", _STR), ("cc", _STR), ("os", _STR), ("stack", _STR),
                       ("kernel", _STR), ("kernel_match", _STR), ("baseline", _BOOL),
                       ("dumbbell", _INT)):  # fmt: skip
        r.get(key, kinds, None)
    r.get("label", _STR)
    r.get("cc", _STR)
    v: Variant = _typed(r.source, r.path, Variant.from_dict, r.d)
    return v


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {"description": self.description}


@dataclass(frozen=True)
class Reference:
    """A published number shown beside the measured mean (config `references`)."""

    source: str
    scenario: str
    variant: str
    metric: str
    value: float
    note: str | None = None

    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any], source: str = "matrix", path: str = "reference"
    ) -> Reference:
        r = _Reader(d, source, path)
        return cls(
            source=r.get("source", _STR),
            scenario=r.get("scenario", _STR),
            variant=r.get("variant", _STR),
            metric=r.get("metric", _STR),
            value=r.get("value", _NUM),
            note=r.get("note", _STR, None),
        )

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source, "scenario": self.scenario,
                             "variant": self.variant, "metric": self.metric,
                             "value": self.value}  # fmt: skip
        return d if self.note is None else {**d, "note": self.note}


def _typed(source: str, path: str, build: Any, *args: Any) -> Any:
    """build(*args), a problem with the values it reads as one line naming the key."""
    try:
        return build(*args)
    except CcbenchError as e:
        raise CcbenchError(f"{source}: {path}: {e}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CcbenchError(f"{source}: {path}: {type(e).__name__}: {e}") from None


@dataclass(frozen=True)
class PlannedTestbed:
    """A dumbbell configuration runs share: the testbed `ccbench testbed up` builds and
    the topology it is built for. `topology_config` is the validated config section
    the topology came from, as matrix.json keeps it."""

    id: str
    dumbbell: int
    testbed: TestbedConfig
    topology: Topology
    topology_config: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_dict(cls, tb_id: str, d: Mapping[str, Any], source: str = "matrix") -> PlannedTestbed:
        path = f"testbeds.{tb_id}"
        r = _Reader(d, source, path)
        tb = r.sub("testbed")
        tb.get("kind", _STR)
        topo = r.sub("topology")
        return cls(
            id=tb_id,
            dumbbell=r.get("dumbbell", _INT),
            testbed=_typed(source, f"{path}.testbed", TestbedConfig.from_dict, dict(tb.d)),
            topology=_typed(source, f"{path}.topology", Topology.from_config, topo.d),
            topology_config=copy.deepcopy(topo.d),
        )

    @property
    def kind(self) -> str:
        return self.testbed.kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "testbed": self.testbed.to_dict(),
            "topology": copy.deepcopy(dict(self.topology_config)),
            "dumbbell": self.dumbbell,
        }


def _run_spec(d: dict[str, Any]) -> RunSpec:
    problem = spec_dict_problem(d)
    if problem:
        raise ValueError(problem)
    return RunSpec.from_dict(d)


@dataclass(frozen=True, kw_only=True)
class RunAsked:
    """What a run is asked besides where it runs: its spec, how many attempts, and the
    kernel its variant needs ({label, match}, or None). The kernel is beside the spec,
    not in it, so a changed regex changes no run id."""

    spec: RunSpec
    attempts: int
    kernel: dict[str, str] | None = None


@dataclass(frozen=True)
class PlannedRun(RunAsked):
    """One run: what `ccbench run --matrix` executes."""

    id: str
    scenario: str
    variant: str
    repetition: int
    testbed_id: str
    traffic_s: float
    testbed: TestbedConfig

    @classmethod
    def from_dict(
        cls, d: Mapping[str, Any], source: str = "matrix", path: str = "run"
    ) -> PlannedRun:
        r = _Reader(d, source, path)
        spec = r.sub("spec")
        spec.sub("testbed").get("kind", _STR)
        run = spec.sub("run")
        run.get("flows", _LIST)
        run.sub("topology")
        kernel = None
        if "kernel" in spec.d:
            k = spec.sub("kernel")
            kernel = {"label": k.get("label", _STR), "match": k.get("match", _STR)}
        return cls(
            id=r.get("id", _STR),
            scenario=r.get("scenario", _STR),
            variant=r.get("variant", _STR),
            repetition=r.get("repetition", _INT),
            testbed_id=r.get("testbed_id", _STR),
            traffic_s=r.get("traffic_s", _NUM),
            spec=_typed(source, f"{path}.spec.run", _run_spec, run.d),
            testbed=_typed(
                source, f"{path}.spec.testbed", TestbedConfig.from_dict, dict(spec.d["testbed"])
            ),  # fmt: skip
            attempts=spec.get("attempts", _INT),
            kernel=kernel,
        )

    @property
    def flows(self) -> tuple[Flow, ...]:
        return self.spec.flows

    @property
    def testbed_kind(self) -> str:
        return self.testbed.kind

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "scenario": self.scenario, "variant": self.variant,
            "repetition": self.repetition, "testbed_id": self.testbed_id,
            "traffic_s": self.traffic_s,
            "spec": {
                "testbed": self.testbed.to_dict(),
                # JSON types (lists, not the RunSpec's tuples)
                "run": json.loads(json.dumps(self.spec.to_dict())),
                "attempts": self.attempts,
                **({"kernel": dict(self.kernel)} if self.kernel else {}),
            },
        }  # fmt: skip


@dataclass(frozen=True)
class Matrix:
    """Everything results/matrix.json holds. Frozen; its dicts are not to be changed
    either (to_dict() hands out copies)."""

    title: str
    question: str
    report_name: str
    results_dir: str
    baseline: str  # a variant label
    variants: tuple[Variant, ...]  # in config order (colours and table rows follow it)
    # By name; the order is the source's: config order from expand(), sorted by name
    # from matrix.json (written with sorted keys), which is what the report shows.
    scenarios: Mapping[str, Scenario]
    repetitions: int
    seed: int
    resolve_target_pct: float
    expectations: tuple[dict[str, Any], ...]  # as ccbench.verdicts evaluates them
    references: tuple[Reference, ...]
    testbeds: Mapping[str, PlannedTestbed]  # by id
    runs: Mapping[str, PlannedRun]  # by id
    order: tuple[str, ...]  # run ids, the seeded execution order

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], source: str = "matrix") -> Matrix:
        """The model of a matrix.json's content; CcbenchError (one line naming `source`
        and the key) if it is not one."""
        r = _Reader(upgrade.matrix(d), source)
        variants = tuple(
            _variant(_Reader(v, source, f"variants[{i}]"))
            for i, v in enumerate(r.get("variants", _LIST))
        )
        scenarios = r.sub("scenarios")
        testbeds = r.sub("testbeds")
        runs: dict[str, PlannedRun] = {}
        for rid, rd in r.sub("runs").d.items():
            run = PlannedRun.from_dict(rd, source, f"runs.{rid}")
            if run.id != rid:
                raise CcbenchError(f"{source}: runs.{rid}.id: '{run.id}' is not its key")
            if run.testbed_id not in testbeds.d:
                raise CcbenchError(f"{source}: runs.{rid}.testbed_id: no testbed "
                                   f"'{run.testbed_id}'")  # fmt: skip
            runs[rid] = run
        order = r.get("order", _LIST)
        for i, rid in enumerate(order):
            if rid not in runs:
                raise CcbenchError(f"{source}: order[{i}]: no run '{rid}'")
        return cls(
            title=r.get("title", _STR),
            question=r.get("question", _STR),
            report_name=r.get("report_name", _STR),
            results_dir=r.get("results_dir", _STR),
            baseline=r.get("baseline", _STR),
            variants=variants,
            scenarios={
                name: Scenario(name, scenarios.sub(name).get("description", _STR))
                for name in scenarios.d
            },
            repetitions=r.get("repetitions", _INT),
            seed=r.get("seed", _INT),
            resolve_target_pct=r.get("resolve_target_pct", _NUM),
            expectations=tuple(
                copy.deepcopy(_Reader(e, source, f"expectations[{i}]").d)
                for i, e in enumerate(r.get("expectations", _LIST))
            ),
            references=tuple(
                Reference.from_dict(x, source, f"references[{i}]")
                for i, x in enumerate(r.get("references", _LIST))
            ),
            testbeds={
                tb_id: PlannedTestbed.from_dict(tb_id, tb, source)
                for tb_id, tb in testbeds.d.items()
            },
            runs=runs,
            order=tuple(order),
        )

    @classmethod
    def load(cls, path: str | Path) -> Matrix:
        """Read a matrix.json; a missing or garbled file is one CcbenchError line."""
        p = Path(path)
        if not p.is_file():
            raise CcbenchError(f"{p}: no such matrix file (`ccbench matrix --json` writes one; "
                               "the workflow keeps it in the results directory)")  # fmt: skip
        try:
            raw = p.read_bytes()
        except OSError as e:
            raise CcbenchError(f"{p}: cannot read ({e.strerror})") from None
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise CcbenchError(f"{p}: not valid JSON ({e.msg}, line {e.lineno})") from None
        except (ValueError, RecursionError):  # not UTF-8; nested deeper than Python goes
            raise CcbenchError(f"{p}: not valid JSON") from None
        return cls.from_dict(d, str(p))

    def to_dict(self) -> dict[str, Any]:
        """Exactly what matrix.json holds (rules/common.smk reads it too)."""
        d: dict[str, Any] = {
            "title": self.title,
            "question": self.question,
            "report_name": self.report_name,
            "results_dir": self.results_dir,
            "baseline": self.baseline,
            "variants": [v.to_dict() for v in self.variants],
            "scenarios": {name: s.to_dict() for name, s in self.scenarios.items()},
            "repetitions": self.repetitions,
            "seed": self.seed,
            "resolve_target_pct": self.resolve_target_pct,
            "expectations": copy.deepcopy(list(self.expectations)),
            "references": [x.to_dict() for x in self.references],
            "testbeds": {k: tb.to_dict() for k, tb in self.testbeds.items()},
            "runs": {k: r.to_dict() for k, r in self.runs.items()},
            "order": list(self.order),
        }
        return d

    @property
    def variant_labels(self) -> list[str]:
        return [v.label for v in self.variants]

    @property
    def scenario_names(self) -> list[str]:
        return list(self.scenarios)

    def variant(self, label: str) -> Variant | None:
        return next((v for v in self.variants if v.label == label), None)

    def scenario(self, name: str) -> Scenario | None:
        return self.scenarios.get(name)

    def runs_of_scenario(self, name: str) -> list[PlannedRun]:
        return [r for r in self.runs.values() if r.scenario == name]

    def runs_of_testbed(self, tb_id: str) -> list[PlannedRun]:
        return [r for r in self.runs.values() if r.testbed_id == tb_id]
