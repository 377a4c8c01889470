"""Seed numbers beside ours: `references` in a comparison config (checked against its
scenarios and variants, carried into the matrix), the Emulab seed configs that quote
the seeds' tables, and the report's table of reference vs measured."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from ccbench import matrix, record_load
from ccbench.config import parse_yaml
from ccbench.errors import CcbenchError
from ccbench.model import Matrix, Reference
from ccbench.report import checks, provenance

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "config" / "examples"
# The seeds' tables, verbatim excerpts (their sources: tests/captures/README.md).
SEEDS = REPO / "tests" / "captures" / "seeds"


def write_inventory(d: Path, oses: tuple[str, ...], pairs: int = 2) -> Path:
    """A hand-written inventory with one dumbbell per sender OS given."""
    dbs: dict[int, dict[str, Any]] = {}
    for n, os_name in enumerate(oses, start=1):
        nodes: dict[str, Any] = {"rt1": {"host": f"rt1-{n}.example.org"},
                                 "rt2": {"host": f"rt2-{n}.example.org"}}  # fmt: skip
        for i in range(1, pairs + 1):
            nodes[f"s{i}"] = {"host": f"s{i}-{n}.example.org", "os": os_name}
            nodes[f"r{i}"] = {"host": f"r{i}-{n}.example.org"}
        dbs[n] = nodes
    p = d / "hosts.yaml"
    p.write_text(yaml.safe_dump({"ssh": {"user": "alice"}, "dumbbells": dbs}))
    return p


def example(name: str, tmp_path: Path, oses: tuple[str, ...]) -> dict[str, Any]:
    cfg = parse_yaml((EXAMPLES / name).read_bytes(), name)
    cfg["testbed"]["inventory"] = str(write_inventory(tmp_path, oses))
    return dict(cfg)


def test_seed001_covers_the_whole_emulab_table(tmp_path: Path) -> None:
    cfg = example("emulab-seed001.yaml", tmp_path, ("freebsd", "freebsd", "linux"))
    m = matrix.load(cfg, "emulab-seed001.yaml")
    labels = {v.label: v for v in m.variants}
    # FreeBSD default and RACK x CUBIC before/after and NewReno, Linux CUBIC and NewReno.
    want = {("freebsd", "cubic", "before"), ("freebsd", "cubic", "after"),
            ("rack", "cubic", "before"), ("rack", "cubic", "after"),
            ("freebsd", "newreno", "before"), ("rack", "newreno", "before")}  # fmt: skip
    got = {(v.stack, v.cc, v.kernel.split()[0]) for v in labels.values()
           if v.os == "freebsd"}  # fmt: skip
    assert got == want
    assert {v.cc for v in labels.values() if v.os == "linux"} == {"cubic", "reno"}
    # Different sender images, each on its own dumbbell.
    assert {v.label: v.dumbbell for v in labels.values()} == {
        "fbsd-cubic-before": 1, "fbsd-newreno": 1, "rack-cubic-before": 1, "rack-newreno": 1,
        "fbsd-cubic-after": 2, "rack-cubic-after": 2, "linux-cubic": 3, "linux-reno": 3,
    }  # fmt: skip
    for r in m.runs.values():
        assert m.testbeds[r.testbed_id].dumbbell == labels[r.variant].dumbbell
    # Every row of the seed's Emulab table, four numbers each, is a reference.
    emulab = [r for r in m.references if r.scenario == "two-flows-48"]
    assert len(emulab) == 8 * 4
    assert {r.variant for r in emulab} == set(labels)
    linux_cubic = {r.metric: r.value for r in emulab if r.variant == "linux-cubic"}
    assert linux_cubic == {"flow1_throughput_mbps": 304.0, "flow2_throughput_mbps": 222.0,
                           "throughput_sum_mbps": 526.0, "jain": 0.976}  # fmt: skip


@pytest.mark.parametrize("n", ["000", "001", "002", "003", "004"])
def test_every_reference_number_is_in_its_seed(n: str, tmp_path: Path) -> None:
    """Each value (or, for seed 004's MBps and the fairness in %, the published figure
    it was converted from) appears in the seed's text."""
    cfg = parse_yaml((EXAMPLES / f"emulab-seed{n}.yaml").read_bytes(), n)
    text = (SEEDS / f"seed{n}-excerpt.txt").read_text()
    assert cfg["references"], f"emulab-seed{n}.yaml quotes no number"
    for r in cfg["references"]:
        assert r["source"].startswith(f"seed {n}")
        v = r["value"]
        if r["metric"] == "jain":
            figures = [f"{v * 100:.1f}%", f"{v * 100:.0f}%"]
        elif "MBps" in r.get("note", ""):
            figures = [r["note"].split()[1] + " MBps"]
            assert math.isclose(float(figures[0].split()[0]) * 8, v)
        else:
            figures = [
                f"{v:.1f} Mbits/sec",
                f"{v:g} Mbits/sec",
                f"{v:.1f} Mbit",
                f"{v:g} Mbit",
                f"{v / 1000:g} Gb/s",
                f"{v:.0f}             sender",
                f"{v:g}  ",
            ]
        assert any(f in text for f in figures), (r, figures)


def test_every_example_with_references_expands(tmp_path: Path) -> None:
    oses = {"000": ("freebsd", "linux"), "001": ("freebsd", "freebsd", "linux"),
            "002": ("freebsd",), "003": ("freebsd", "linux"), "004": ("freebsd",)}  # fmt: skip
    for n, o in oses.items():
        d = tmp_path / n
        d.mkdir()
        m = matrix.load(example(f"emulab-seed{n}.yaml", d, o), n)
        assert m.references


def base() -> dict[str, Any]:
    return {
        "scenarios": {"two": {"flows": 2}, "one": {"flows": [{"pair": 1}]}},
        "variants": [{"label": "cubic", "cc": "cubic"}, {"label": "reno", "cc": "reno"}],
        "references": [{"source": "seed 001", "scenario": "two", "variant": "cubic",
                        "metric": "flow2_throughput_mbps", "value": 222.0}],
    }  # fmt: skip


def test_references_are_carried_into_the_matrix() -> None:
    m = matrix.expand(matrix.validate(base(), "matrix", "t"), "t")
    assert m.to_dict()["references"] == base()["references"]
    assert m.references == (Reference("seed 001", "two", "cubic", "flow2_throughput_mbps", 222.0),)
    cfg = base()
    del cfg["references"]
    assert matrix.expand(matrix.validate(cfg, "matrix", "t"), "t").references == ()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"scenario": "three"}, r"references\[0\].scenario: no scenario 'three'"),
        ({"variant": "bbr"}, r"references\[0\].variant: no variant 'bbr'"),
        ({"scenario": "one"}, r"references\[0\].metric: scenario 'one' has 1 flow\(s\), no flow 2"),
        ({"metric": "goodput"}, r"references"),
        ({"value": "526"}, r"references"),
        ({"source": ""}, r"references"),
    ],
)
def test_bad_references_are_refused(change: dict[str, Any], message: str) -> None:
    cfg = copy.deepcopy(base())
    cfg["references"][0].update(change)
    with pytest.raises(CcbenchError, match=message):
        matrix.load(cfg, "t")


def test_report_rows_put_the_reference_beside_the_mean_and_the_ratio() -> None:
    summary = pd.DataFrame([
        {"scenario": "two", "variant": "cubic", "throughput_sum_mbps_mean": 263.0,
         "throughput_sum_mbps_ci95": 52.6, "flow2_throughput_mbps_mean": 111.0,
         "flow2_throughput_mbps_ci95": float("nan"), "jain_mean": 0.99, "jain_ci95": 0.004},
    ])  # fmt: skip
    refs = [
        {"source": "seed 001", "scenario": "two", "variant": "cubic",
         "metric": "throughput_sum_mbps", "value": 526.0, "note": "sum"},
        {"source": "seed 001", "scenario": "two", "variant": "cubic",
         "metric": "flow2_throughput_mbps", "value": 222.0},
        {"source": "seed 001", "scenario": "two", "variant": "cubic", "metric": "jain",
         "value": 0.976},
        {"source": "seed 001", "scenario": "two", "variant": "reno",
         "metric": "throughput_sum_mbps", "value": 446.0},
    ]  # fmt: skip
    m = dataclasses.replace(Matrix.load(REPO / "tests" / "fixtures" / "matrix-qdisc-check.json"),
                            references=tuple(Reference.from_dict(r) for r in refs))  # fmt: skip
    rows = checks.reference_rows(summary, m)
    assert [(r["reference"], r["measured"], r["ratio"]) for r in rows] == [
        ("526.0", "263.0 ± 52.6", "0.50 ± 0.10"),
        ("222.0", "111.0 ± n/a", "0.50 ± n/a"),
        ("0.976", "0.990 ± 0.004", "1.01 ± 0.00"),
        ("446.0", "n/a", "n/a"),  # no valid run of that variant
    ]
    assert rows[1]["metric_label"] == "flow 2 throughput" and rows[1]["unit"] == "Mbit/s"
    assert rows[0]["note"] == "sum" and rows[2]["metric_label"] == "Jain"


def test_report_nics_local_says_veths_and_ssh_shows_the_records(tmp_path: Path) -> None:
    local = provenance.nics("local", [], tmp_path)["text"]
    assert local.startswith("network namespaces on this machine: veths")
    assert provenance.nics("ssh", ["a"], tmp_path) == {
        "text": "not recorded (no run recorded NIC records)",
        "rows": [],
        "notes": [],
    }
    note = "rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum"
    rec = {"node": "rt1", "interface": "eth5", "driver": "igb",
           "driver_version": "6.8.0-48-generic", "speed_mbps": 1000, "tx_ring_asked": 48,
           "tx_ring_set": 64,
           "offloads": {"tso": "off", "gro": "off"}}  # fmt: skip
    small = REPO / "tests" / "fixtures" / "results-small" / "runs" / "two-flows-bbr-r1-3c359d7e"
    base = record_load.load(small).to_dict()
    for rid, notes in (("a", [note]), ("b", [note]), ("c", [])):
        (tmp_path / rid).mkdir()
        (tmp_path / rid / "summary.json").write_text(
            json.dumps({**base, "nics": [rec], "nic_notes": notes})
        )
    got = provenance.nics("ssh", ["a", "b", "c"], tmp_path)
    assert got["rows"] == [{"node": "rt1", "interface": "eth5", "driver": "igb 6.8.0-48-generic",
                            "speed": "1000 Mbit/s", "tx_ring": "48 asked, 64 set",
                            "offloads": "tso off, gro off"}]  # fmt: skip
    assert got["notes"] == [f"{note} (in 2 of 3 runs)"]


def test_conditions_say_where_the_delay_sat() -> None:
    """testbed.delay_direction reaches the report's testbed table from calibration.json;
    a calibration made before the option (no key) was RTT/2 each way."""
    rev = provenance._calibration({"delay_method": "ccdelay", "delay_direction": "reverse"}, 3)
    assert rev["delay_where"] == "the whole RTT on the path r → s (ACKs), none on the data path"
    old = provenance._calibration({"delay_method": "ccdelay"}, 3)
    assert old["delay_where"] == "RTT/2 on each direction"


def test_the_testbed_table_names_the_layout() -> None:
    """testbed.layout reaches the report from calibration.json (`layout`, as built);
    a calibration without it (SSH testbeds, older local ones) names none."""
    mv = provenance._calibration({"delay_method": "ccdelay", "layout": "macvlan"}, 3)
    assert mv["layout"].startswith("macvlan: ") and "macvlan" in mv["layout"][9:]
    assert provenance._calibration({"delay_method": "ccdelay", "layout": "routed"}, 3)[
        "layout"
    ].startswith("routed: s_i -> rt1 -> dl -> rt2 -> r_i")
    assert provenance._calibration({"delay_method": "ccdelay"}, 3)["layout"] == ""


def test_the_report_reads_run_data_from_summary_json(tmp_path: Path) -> None:
    """Provenance (calibration, facts, qdisc) and the probe samples come from summary.json
    (`recorded`, `probe.samples_us`), a declared output of parse: the report no longer
    needs raw/. A summary written before those keys existed is brought forward from raw/
    by ccbench.upgrade."""
    from ccbench.report import data

    fix = REPO / "tests" / "fixtures" / "results-small" / "runs"
    runs = tmp_path / "runs"
    shutil.copytree(fix, runs)
    rid = sorted(p.name for p in runs.iterdir())[0]
    raw = runs / rid / "raw"
    want_cal = json.loads((raw / "calibration.json").read_text())
    want_rtts = [x / 1e3 for x in json.loads((runs / rid / "summary.json").read_text())
                 ["probe"]["samples_us"]]  # fmt: skip
    for name in ("calibration.json", "facts.json", "qdisc-config.txt", "probe-ping.txt"):
        (raw / name).unlink()
    rec = data.recorded(runs, rid)
    assert rec is not None and rec.calibration == want_cal and rec.facts["host"]
    assert any("pfifo" in ln for ln in rec.qdisc_config or [])
    assert data.probe_rtts_ms(runs, rid) == want_rtts and len(want_rtts) > 20
    # an older summary (no `recorded`, no samples): the raw files, as before
    shutil.rmtree(raw)
    shutil.copytree(fix / rid / "raw", raw)
    s = json.loads((runs / rid / "summary.json").read_text())
    del s["recorded"], s["probe"]["samples_us"]
    (runs / rid / "summary.json").write_text(json.dumps(s))
    old = data.recorded(runs, rid)
    assert old is not None and old.calibration == want_cal
    assert sorted(data.probe_rtts_ms(runs, rid)) == sorted(want_rtts)
