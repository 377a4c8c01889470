"""A scenario's CPU table and figure (ccbench.report.cpu) on the small real results set
(tests/fixtures/results-small): its runs predate the host counters, so their CPU figures
are the iperf3 processes' service demand, taken from each run's raw iperf3 JSON as
`ccbench parse` does (host_cpu's reading of a run from before its record)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ccbench import aggregate, metrics, record_load
from ccbench.instruments.host_cpu import HostCpu, HostCpuPart
from ccbench.layout import RawDir, load_spec
from ccbench.model import Matrix
from ccbench.report import cpu, data, style
from ccbench.report.figscene import PAGE_W, Scene, Writer
from ccbench.report.fmt import NA, fmt_ci

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "results-small"
SCEN = "two-flows"


@pytest.fixture(scope="module")
def tables() -> data.Tables:
    """The fixture's tables with the CPU columns its runs give when parsed again."""
    t = data.load_tables(FIX / "tables")
    cols = {}
    for rid in t.runs["run_id"]:
        raw = FIX / "runs" / rid / "raw"
        ins = HostCpu.without_record(RawDir(raw), load_spec(raw))
        assert ins is not None
        part = HostCpuPart.model_validate(ins.summary_part(RawDir(raw), load_spec(raw)).value)
        rec = record_load.load(FIX / "runs" / rid).model_copy(update={"host_cpu": part})
        cols[rid] = aggregate._cpu_columns(rec)
    runs = t.runs.assign(**{k: t.runs["run_id"].map(lambda r, k=k: cols[r][k])
                            for k in next(iter(cols.values()))})  # fmt: skip
    matrix = Matrix.load(FIX / "matrix.json")
    summary = aggregate.summarize_groups(runs, t.flows, matrix.baseline, matrix.variant_labels)
    return dataclasses.replace(t, runs=runs, summary=summary)


def test_the_cpu_table_recomputed_from_the_runs(tables: data.Tables) -> None:
    colours = style.variant_colours(Matrix.load(FIX / "matrix.json"))
    t = cpu.cpu_table(data.group(tables.summary, SCEN), data.group(tables.runs, SCEN), colours)
    assert t is not None
    assert [h for h, _ in t["heads"]] == ["sender CPU", "Δ", "receiver CPU", "Δ",
                                          "sender µs/KB", "Δ", "receiver µs/KB", "Δ"]  # fmt: skip
    rows = {r["label"]: r for r in t["rows"]}
    assert [c["text"] for c in rows["cubic"]["cells"][1::2]] == ["baseline"] * 4
    runs = tables.runs
    for label in ("cubic", "bbr"):
        g = runs[(runs["variant"] == label) & runs["valid"]]
        ci = metrics.mean_ci(g["sender_sd_us_per_kb"].tolist())
        assert rows[label]["cells"][4]["text"] == fmt_ci(ci.mean, ci.half_width, 2)
        assert rows[label]["cells"][0]["text"] == NA  # no host counters: no CPU %
    assert t["sources"].startswith("iperf3_process: the iperf3 client's (sender)")


def test_no_cpu_table_or_figure_for_tables_without_it(tmp_path: Path) -> None:
    t = data.load_tables(FIX / "tables")
    assert cpu.cpu_table(t.summary, t.runs, {}) is None
    w = Writer(tmp_path)
    cpu.draw(w, _scene(t))
    assert w.entries == []


def _scene(t: data.Tables) -> Scene:
    matrix = Matrix.load(FIX / "matrix.json")
    cond = data.conditions(matrix, SCEN)
    assert cond is not None
    return Scene(t, FIX / "runs", matrix, SCEN, cond, ["cubic", "bbr"],
                 style.variant_colours(matrix), matrix.baseline)  # fmt: skip


def test_the_figure_has_a_panel_per_measured_figure(tables: data.Tables, tmp_path: Path) -> None:
    w = Writer(tmp_path)
    cpu.draw(w, _scene(tables))
    (e,) = w.entries
    assert e["kind"] == "cpu" and (tmp_path / e["file"]).stat().st_size > 0
    assert e["width_in"] == pytest.approx(PAGE_W / 2)  # the two service demands only
    assert "Not measured in these runs: sender CPU, receiver CPU." in e["caption"]
    assert "Source: iperf3_process" in e["caption"] and "1 invalid run(s)" in e["caption"]
