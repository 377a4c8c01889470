"""The seeds' own labs as config examples (config/examples/lab-*.yaml): `ccbench matrix`
plans each without an inventory, each carries the seed's published numbers as
references, and with a lab inventory written for it each expands in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import matrix
from ccbench.cli import main
from ccbench.config import parse_yaml

REPO = Path(__file__).resolve().parents[2]
LABS = sorted((REPO / "config" / "examples").glob("lab-*.yaml"))


def write_lab_inventory(d: Path, os_by_set: dict[int, str], senders: int = 2) -> Path:
    """A lab inventory: per sender set (its OS), `senders` senders sending to one
    receiver."""

    def sender_set(n: int, os_name: str) -> dict[str, Any]:
        return {f"s{i}": {"host": f"set{n}-s{i}.lan", "os": os_name,
                          "address": f"10.0.{n}.{i}", "receiver": "r1"}
                for i in range(1, senders + 1)}  # fmt: skip

    inv: dict[str, Any] = {
        "ssh": {"user": "alice"},
        "senders": sender_set(1, os_by_set.get(1, "linux")),
        "receivers": {"r1": {"host": "r1.lan", "address": "10.0.0.100"}},
        "emulation": {"delay": "netem", "loss": "iptables"},
    }
    more = {n: sender_set(n, o) for n, o in os_by_set.items() if n > 1}
    if more:
        inv["sender_sets"] = more
    p = d / "lab.yaml"
    p.write_text(yaml.safe_dump(inv))
    return p


def test_every_seed_lab_has_an_example() -> None:
    names = {p.name for p in LABS}
    assert {"lab-seed000.yaml", "lab-seed001-single-path.yaml", "lab-seed001-loss.yaml",
            "lab-seed001-tripoint.yaml"} <= names  # fmt: skip


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_matrix_plans_a_lab_example_without_its_inventory(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert " runs on " in out and "no such lab inventory" in out and "docs/lab.md" in out
    assert "profile.py" not in out  # a lab is not booked on Emulab


@pytest.mark.parametrize("path", LABS, ids=lambda p: p.name)
def test_a_lab_example_expands_with_its_references(path: Path, tmp_path: Path) -> None:
    cfg = parse_yaml(path.read_bytes(), path.name)
    # one sender set per OS: a variant's `dumbbell` (default 1) is its set
    by_set = {v.get("dumbbell", 1): v.get("os", "linux") for v in cfg["variants"]}
    assert len(by_set) == len(set(by_set.values()))
    cfg["testbed"]["inventory"] = str(write_lab_inventory(tmp_path, by_set))
    m = matrix.load(cfg, path.name)
    assert m.testbeds and all(tb.testbed.kind == "lab" for tb in m.testbeds.values())
    for r in m.runs.values():  # every run on the sender set of its OS
        assert by_set[m.testbeds[r.testbed_id].dumbbell] == r.spec.os
    refs = cfg["references"]
    assert refs and all(r["source"].startswith("seed 00") for r in refs)
    # every variant of every scenario has the seed's number beside it
    assert {(r["scenario"], r["variant"]) for r in refs} == {
        (s, v["label"]) for s in cfg["scenarios"] for v in cfg["variants"]}  # fmt: skip


def test_the_loss_sweep_asks_the_seeds_nth_rates_without_delay() -> None:
    cfg = parse_yaml((REPO / "config/examples/lab-seed001-loss.yaml").read_bytes(), "loss")
    assert cfg["topology"]["rtt_ms"] == 0
    rates = [s["topology"]["loss"] for s in cfg["scenarios"].values()]
    assert rates == [{"mode": "nth", "rate": r} for r in (0.01, 0.02, 0.03, 0.04)]
