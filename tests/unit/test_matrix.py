"""The run matrix: stable ids, what changes when a variant changes, clear config errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from ccbench import matrix
from ccbench.config import validate
from ccbench.errors import CcbenchError

REPO = Path(__file__).resolve().parents[2]


def write_inventory(d: Path, pairs: int = 2) -> Path:
    """A hand-written hosts inventory of one dumbbell (as a lab user writes one)."""
    nodes = {"rt1": {"host": "rt1.example.org"}, "rt2": {"host": "rt2.example.org"}}
    for i in range(1, pairs + 1):
        nodes[f"s{i}"] = {"host": f"s{i}.example.org", "os": "freebsd"}
        nodes[f"r{i}"] = {"host": f"r{i}.example.org"}
    p = d / "hosts.yaml"
    p.write_text(yaml.safe_dump({"ssh": {"user": "alice"}, "dumbbells": {1: nodes}}))
    return p


def default() -> dict:
    return yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def test_default_config_expands_to_18_runs_on_2_testbeds() -> None:
    m = matrix.load(default())
    assert len(m.runs) == 2 * 3 * 3
    assert len(m.testbeds) == 2
    assert m.baseline == "cubic"
    assert sorted(m.order) == sorted(m.runs)
    single = m.runs_of_scenario("single-bdp")[0]
    assert single.spec.topology.queue_limit_pkts == 331  # 100 Mbit/s x 40 ms / 1514 B, up
    two = m.runs_of_scenario("two-flows-48")[0]
    assert two.spec.topology.queue_limit_pkts == 48
    assert [f.pair for f in two.flows] == [1, 2]


def test_ids_are_stable_and_only_the_changed_variant_changes() -> None:
    a = matrix.load(default())
    assert matrix.load(default()).runs.keys() == a.runs.keys()
    cfg = default()
    cfg["variants"][1]["cc"] = "bbr"  # 'reno' now runs bbr
    b = matrix.load(cfg)
    changed = set(a.runs) ^ set(b.runs)
    assert changed and all("-reno-" in rid for rid in changed)


def test_order_is_seeded() -> None:
    a = matrix.load(default()).order
    cfg = default()
    cfg["seed"] = 2
    assert matrix.load(cfg).order != a
    assert matrix.load(default()).order == a


def test_flow_lists_mix_ccs_and_stagger() -> None:
    cfg = default()
    cfg["scenarios"] = {"mixed": {"flows": [{"cc": "variant"}, {"cc": "bbr", "start_s": 5}]}}
    cfg["expectations"] = []
    m = matrix.load(cfg)
    r = next(r for r in m.runs.values() if r.variant == "reno")
    flows = r.flows
    assert [(f.pair, f.cc, f.start_s) for f in flows] == [(1, "reno", 0), (2, "bbr", 5)]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c["variants"].append(copy.deepcopy(c["variants"][0])), "labels must be unique"),
        (lambda c: c.update(repetitions=0), "repetitions: 0 is less than the minimum of 1"),
        (lambda c: c["scenarios"]["single-bdp"].update(flows=3), "3 is not in 1..2"),
        (lambda c: c["variants"][0].update(os="freebsd"), "needs testbed.kind ssh"),
        (lambda c: c["variants"].__setitem__(1, {**c["variants"][1], "baseline": True}),
         "more than one baseline"),
    ],
)  # fmt: skip
def test_bad_configs_name_the_problem(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    cfg = default()
    mutate(cfg)
    with pytest.raises(CcbenchError, match=message):
        matrix.load(cfg)


def test_probe_tool_per_scenario_and_default_ids_unchanged() -> None:
    a = matrix.load(default())
    cfg = default()
    cfg["scenarios"]["two-flows-48"]["probe_tool"] = "irtt"
    b = matrix.load(cfg)
    changed = set(a.runs) ^ set(b.runs)
    # only that scenario's runs change id; ping (the default) hashes as before the field
    assert changed and all("two-flows-48" in rid for rid in changed)
    irtt = b.runs_of_scenario("two-flows-48")
    assert {r.spec.probe_tool for r in irtt} == {"irtt"}


def test_probe_on_freebsd_senders_is_refused(tmp_path: Path) -> None:
    cfg = default()
    cfg["testbed"] = {"kind": "ssh", "inventory": str(write_inventory(tmp_path))}
    cfg["variants"][1].update(os="freebsd", stack="rack")
    cfg["probe_tool"] = "flent"
    with pytest.raises(CcbenchError, match="probe_tool flent needs Linux senders"):
        matrix.load(cfg)


def test_netperf_flent_test_needs_netperf_or_the_container(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(matrix.shutil, "which", lambda name: None)
    cfg = default()
    cfg.update(probe_tool="flent", probe_flent_test="tcp_1up")
    with pytest.raises(CcbenchError, match="needs netperf with demo mode.*tools: container"):
        matrix.load(cfg)
    # Expanding the config does not depend on this machine: only `load` checks it.
    assert matrix.expand(validate(cfg, "matrix", "cfg"), "cfg").runs
    cfg["testbed"] = {"tools": "container"}
    assert matrix.load(cfg).runs


def test_qdisc_interval_per_scenario_and_default_ids_unchanged() -> None:
    a = matrix.load(default())
    assert {r.spec.qdisc_interval_s for r in a.runs.values()} == {0.05}
    cfg = default()
    cfg["qdisc_interval_s"] = 0.05  # the default, written out: same ids
    assert matrix.load(cfg).runs.keys() == a.runs.keys()
    cfg["scenarios"]["two-flows-48"]["qdisc_interval_s"] = 0
    b = matrix.load(cfg)
    changed = set(a.runs) ^ set(b.runs)
    assert changed and all("two-flows-48" in rid for rid in changed)
    off = b.runs_of_scenario("two-flows-48")
    assert {r.spec.qdisc_interval_s for r in off} == {0.0}
    # the ids are the ones results measured before the key existed carry
    assert "single-bdp-bbr-r1-2c472fc4" in a.runs


def test_every_run_goes_to_its_testbeds_dumbbell(tmp_path: Path) -> None:
    """ssh, 2 dumbbells: each run's spec names the dumbbell its testbed was given (all
    variants, not only the last one written to a shared testbed)."""
    inv = write_inventory(tmp_path)
    doc = yaml.safe_load(inv.read_text())
    doc["dumbbells"][2] = {n: {**h, "host": h["host"].replace(".", "-2.", 1)}
                           for n, h in doc["dumbbells"][1].items()}  # fmt: skip
    for h in (*doc["dumbbells"][1].values(), *doc["dumbbells"][2].values()):
        h.pop("os", None)  # Linux senders: the default variants are Linux CCs
    inv.write_text(yaml.safe_dump(doc))
    cfg = default()
    cfg["testbed"] = {"kind": "ssh", "inventory": str(inv), "dumbbells": 2}
    m = matrix.load(cfg)
    assert sorted(tb.dumbbell for tb in m.testbeds.values()) == [1, 2]
    for r in m.runs.values():
        assert r.testbed.dumbbell == m.testbeds[r.testbed_id].dumbbell, r.id


def test_delay_direction_reverse_is_local_only(tmp_path: Path) -> None:
    cfg = default()
    cfg["testbed"] = {"delay_direction": "reverse"}
    m = matrix.load(cfg)
    assert {tb.testbed.delay_direction for tb in m.testbeds.values()} == {"reverse"}
    # the default leaves matrix.json as before (no key, so no testbed is due again)
    assert all(
        "delay_direction" not in tb.to_dict()["testbed"]
        for tb in matrix.load(default()).testbeds.values()
    )
    cfg["testbed"] = {"kind": "ssh", "inventory": str(write_inventory(tmp_path)),
                      "delay_direction": "reverse"}  # fmt: skip
    with pytest.raises(CcbenchError, match="delay_direction: reverse is not for a ssh testbed"):
        matrix.load(cfg)
