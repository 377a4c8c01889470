"""The typed run matrix (ccbench.model): every shipped config expands to a model whose
JSON reads back to the same model and writes back the same JSON; real results
directories' matrix.json files load unchanged (their sha256 in the report too); a
missing or garbled file is one line naming it.

tests/fixtures/matrix-qdisc-check.json is results-qdisc-check/matrix.json of a real
local run (config with `references`, made before `resolve_target_pct` existed).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from ccbench import cli, matrix, spec, upgrade
from ccbench.config import parse_yaml
from ccbench.errors import CcbenchError
from ccbench.model import RESOLVE_TARGET_PCT, Matrix
from ccbench.report import provenance
from ccbench.spec import Variant
from tests.unit.test_references import write_inventory

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
QDISC_CHECK = FIXTURES / "matrix-qdisc-check.json"
RESULTS_MATRICES = [
    QDISC_CHECK,
    FIXTURES / "results-small" / "matrix.json",
    FIXTURES / "results-loss" / "matrix.json",
]
CONFIGS = [
    REPO / "config" / "config.yaml",
    *sorted((REPO / "config" / "examples").glob("*.yaml")),
    REPO / ".test" / "config" / "config.yaml",
]
# Sender OS per dumbbell of the Emulab examples' inventories (as test_references).
EMULAB_OSES = {"000": ("freebsd", "linux"), "001": ("freebsd", "freebsd", "linux"),
               "002": ("freebsd",), "003": ("freebsd", "linux"), "004": ("freebsd",)}  # fmt: skip
TOP_KEYS = {"title", "question", "report_name", "results_dir", "baseline", "variants",
            "scenarios", "repetitions", "seed", "resolve_target_pct", "expectations",
            "references", "testbeds", "runs", "order"}  # fmt: skip


def fixture_matrix(**changes: Any) -> Matrix:
    """The real qdisc-check matrix with some fields replaced (for table tests)."""
    return dataclasses.replace(Matrix.load(QDISC_CHECK), **changes)


def expanded(path: Path, tmp_path: Path) -> Matrix:
    """A config expanded through the real path (`ccbench matrix` calls matrix.load)."""
    cfg = parse_yaml(path.read_bytes(), str(path))
    if path.name.startswith("lab-"):
        from tests.unit.test_lab_examples import write_lab_inventory

        by_set = {v.get("dumbbell", 1): v.get("os", "linux") for v in cfg["variants"]}
        cfg["testbed"]["inventory"] = str(write_lab_inventory(tmp_path, by_set))
    if path.name.startswith("emulab-seed"):
        oses = EMULAB_OSES[path.name[len("emulab-seed") :][:3]]
        cfg["testbed"]["inventory"] = str(write_inventory(tmp_path, oses, pairs=4))
    return matrix.load(cfg, str(path))


def canonical_sha256(d: Any) -> str:
    canon = json.dumps(d, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_round_trips_through_json(path: Path, tmp_path: Path) -> None:
    m = expanded(path, tmp_path)
    text = json.dumps(m.to_dict(), indent=1, sort_keys=True)  # as the workflow writes it
    d = json.loads(text)
    assert set(d) == TOP_KEYS
    back = Matrix.from_dict(d, "matrix.json")
    assert back == m
    assert back.to_dict() == d
    assert json.dumps(back.to_dict(), indent=1, sort_keys=True) == text
    # the pieces rules/common.smk and `ccbench run`/`testbed up` read
    assert sorted(d["order"]) == sorted(d["runs"]) == sorted(m.runs)
    for rid, r in d["runs"].items():
        assert r["testbed_id"] in d["testbeds"] and r["id"] == rid
        assert {"testbed", "run", "attempts"} <= set(r["spec"])
        assert m.runs[rid].testbed_kind == r["spec"]["testbed"]["kind"]
    for tb_id, tb in d["testbeds"].items():
        assert set(tb) == {"testbed", "topology", "dumbbell"}
        assert m.testbeds[tb_id].dumbbell == tb["dumbbell"] == tb["testbed"]["dumbbell"]


def test_the_cli_prints_the_models_json(capsys: pytest.CaptureFixture[str]) -> None:
    path = REPO / "config" / "config.yaml"
    assert cli.main(["matrix", "--json", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    m = matrix.load(parse_yaml(path.read_bytes(), str(path)), str(path))
    assert out == json.dumps(m.to_dict(), indent=1, sort_keys=True)
    assert Matrix.from_dict(json.loads(out)) == m


def test_helpers_on_an_expanded_config(tmp_path: Path) -> None:
    m = expanded(REPO / "config" / "config.yaml", tmp_path)
    assert m.variant_labels == [v["label"] for v in m.to_dict()["variants"]]
    assert m.scenario_names == list(m.to_dict()["scenarios"])
    assert m.baseline in m.variant_labels
    base = m.variant(m.baseline)
    assert base is not None and base.baseline and base.label == m.baseline
    assert m.variant("no-such-variant") is None and m.scenario("no-such-scenario") is None
    for name in m.scenario_names:
        s = m.scenario(name)
        assert s is not None and s.description == m.to_dict()["scenarios"][name]["description"]
        assert {r.scenario for r in m.runs_of_scenario(name)} == {name}
    assert sum(len(m.runs_of_testbed(t)) for t in m.testbeds) == len(m.runs)
    r = m.runs[m.order[0]]
    assert r.flows == r.spec.flows and r.to_dict()["spec"]["run"] == json.loads(
        json.dumps(r.spec.to_dict())
    )


def _without_defaults(run: dict[str, Any]) -> dict[str, Any]:
    """A run spec without the sampling keys later versions added at their defaults."""
    added = spec.FIELDS_ADDED
    return {k: v for k, v in run.items() if not (k in added and v == added[k])}


@pytest.mark.parametrize("path", RESULTS_MATRICES, ids=lambda p: p.parent.name + "/" + p.name)
def test_real_results_matrices_are_brought_forward_with_their_run_ids(path: Path) -> None:
    """Matrices of earlier versions (keys added since missing) load through
    ccbench.upgrade: what they lacked reads as its default, and nothing else changes;
    every run keeps its id (the hash of its spec)."""
    d = json.loads(path.read_text())
    m = Matrix.load(path)
    out = m.to_dict()
    assert Matrix.from_dict(out) == m
    assert provenance.matrix_sha256(m) == canonical_sha256(out)
    for key in TOP_KEYS - set(d):
        assert out[key] == upgrade.MATRIX_DEFAULTS[key]
    if "resolve_target_pct" not in d:
        assert m.resolve_target_pct == RESOLVE_TARGET_PCT
    assert {k: v for k, v in out.items() if k in d and k != "runs"} == {
        k: v for k, v in d.items() if k != "runs"
    }
    for rid, r in d["runs"].items():
        assert m.runs[rid].spec.run_id == rid
        got = out["runs"][rid]
        assert _without_defaults(got["spec"]["run"]) == _without_defaults(r["spec"]["run"])
        assert {k: v for k, v in got.items() if k != "spec"} == {
            k: v for k, v in r.items() if k != "spec"
        }
    assert m.variant_labels == [v["label"] for v in d["variants"]]
    assert m.baseline == d["baseline"] and m.order == tuple(d["order"])


def test_the_qdisc_check_results(tmp_path: Path) -> None:
    m = Matrix.load(QDISC_CHECK)
    assert m.report_name == "qdisc-check" and m.results_dir == "results-qdisc-check"
    assert m.variant_labels == ["cubic", "bbr"] and m.baseline == "cubic"
    assert m.scenario_names == ["single-bdp", "two-flows-48"]
    assert len(m.runs) == len(m.order) == 8 and m.repetitions == 2
    assert m.resolve_target_pct == RESOLVE_TARGET_PCT
    assert m.references == () and m.expectations == ()
    assert m.variant("cubic") == Variant(label="cubic", cc="cubic", os="linux", stack="default",
                                         kernel="", kernel_match=None, baseline=True)  # fmt: skip
    for tb in m.testbeds.values():
        assert tb.kind == "local" and tb.dumbbell == 1
        assert {r.testbed_id for r in m.runs_of_testbed(tb.id)} == {tb.id}
    # a copy elsewhere reads the same
    (tmp_path / "matrix.json").write_bytes(QDISC_CHECK.read_bytes())
    assert Matrix.load(tmp_path / "matrix.json") == m


def _garble(d: dict[str, Any], how: str) -> Any:
    rid = d["order"][0]
    tb_id = next(iter(d["testbeds"]))
    if how == "no runs":
        del d["runs"]
    elif how == "repetitions text":
        d["repetitions"] = "2"
    elif how == "baseline true":
        d["baseline"] = True
    elif how == "variant without cc":
        del d["variants"][1]["cc"]
    elif how == "run without spec":
        del d["runs"][rid]["spec"]
    elif how == "run on no testbed":
        d["runs"][rid]["testbed_id"] = "nope"
    elif how == "run under another id":
        d["runs"][rid]["id"] = "other"
    elif how == "order names no run":
        d["order"].append("ghost-r1-00000000")
    elif how == "testbed without kind":
        del d["testbeds"][tb_id]["testbed"]["kind"]
    elif how == "scenarios a list":
        d["scenarios"] = ["single-bdp"]
    elif how == "top level a list":
        return [d]
    return d


GARBLED = [
    ("no runs", "runs is missing"),
    ("repetitions text", "repetitions: a string where an integer was expected"),
    ("baseline true", "baseline: true or false where a string was expected"),
    ("variant without cc", r"variants\[1\].cc is missing"),
    ("run without spec", r"runs\.[^:]+\.spec is missing"),
    ("run on no testbed", "testbed_id: no testbed 'nope'"),
    ("run under another id", "is not its key"),
    ("order names no run", r"order\[8\]: no run 'ghost-r1-00000000'"),
    ("testbed without kind", r"testbeds\.[^:]+\.testbed\.kind is missing"),
    ("scenarios a list", "scenarios: a list where a mapping was expected"),
    ("top level a list", "a list where a mapping was expected"),
]


@pytest.mark.parametrize(("how", "message"), GARBLED, ids=[g[0] for g in GARBLED])
def test_a_garbled_matrix_is_one_line_naming_the_file(
    how: str, message: str, tmp_path: Path
) -> None:
    p = tmp_path / "matrix.json"
    p.write_text(json.dumps(_garble(json.loads(QDISC_CHECK.read_text()), how)))
    with pytest.raises(CcbenchError, match=message) as e:
        Matrix.load(p)
    assert str(e.value).startswith(f"{p}: ") and "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such matrix file"),
        (b"", r"not valid JSON \(Expecting value, line 1\)"),
        (b'{"title": "x",\n "runs": {', r"not valid JSON \(Expecting property name"),
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (b"{}", "baseline is missing|title is missing|variants is missing"),
    ],
    ids=["missing", "empty", "truncated", "not UTF-8", "nested too deep", "empty mapping"],
)
def test_a_missing_or_unreadable_file_is_one_line(
    content: bytes | None, message: str, tmp_path: Path
) -> None:
    p = tmp_path / "matrix.json"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(CcbenchError, match=message) as e:
        Matrix.load(p)
    assert str(e.value).startswith(f"{p}: ") and "\n" not in str(e.value)


def test_commands_reading_a_matrix_say_what_is_wrong_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "matrix.json"
    bad.write_text('{"runs": ')
    good = tmp_path / "good.json"
    good.write_bytes(QDISC_CHECK.read_bytes())
    cases = [
        (["run", "--matrix", str(bad), "--run-id", "x", "--out", str(tmp_path / "r")],
         f"{bad}: not valid JSON (Expecting value, line 1)"),
        (["aggregate", "--matrix", str(bad), "--out", str(tmp_path / "t"), "s.json"],
         f"{bad}: not valid JSON (Expecting value, line 1)"),
        (["run", "--matrix", str(good), "--run-id", "x", "--out", str(tmp_path / "r")],
         f"{good}: no run 'x'"),
        (["testbed", "up", "--matrix", str(good), "--testbed", "nope"],
         f"{good}: no testbed 'nope' (--testbed ID)"),
    ]  # fmt: skip
    for argv, line in cases:
        assert cli.main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines() == [f"ccbench: error: {line}"]
    assert not (tmp_path / "r").exists() and not (tmp_path / "t").exists()


def test_the_root_check_reads_the_testbed_kind_from_the_model(tmp_path: Path) -> None:
    d = json.loads(QDISC_CHECK.read_text())
    rid = d["order"][0]
    tb_id = d["runs"][rid]["testbed_id"]
    d["runs"][rid]["spec"]["testbed"]["kind"] = "ssh"
    d["testbeds"][tb_id]["testbed"]["kind"] = "ssh"
    p = tmp_path / "matrix.json"
    p.write_text(json.dumps(d))

    def kind(**kw: Any) -> str:
        return cli._testbed_kind(argparse.Namespace(**kw))

    assert kind(matrix=str(p), run_id=rid) == "ssh"
    assert kind(matrix=str(p), run_id=d["order"][1]) == "local"
    assert kind(matrix=str(p), testbed=tb_id) == "ssh"
    # unreadable or unknown here: "local" (so root is asked first); the command says why
    assert kind(matrix=str(p), run_id="nope") == "local"
    assert kind(matrix=str(tmp_path / "missing.json"), run_id=rid) == "local"
    p.write_text("{")
    assert kind(matrix=str(p), run_id=rid) == "local"
