"""The report from a small real results set (tests/fixtures/results-small, see its README).

The numbers in the PDF are checked against values recomputed here: the table cells
from the aggregated tables, the per-run flow throughputs from the raw iperf3 JSON.
"""

from __future__ import annotations

import html
import json
import math
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from ccbench.report import data, document, figures, provenance, tables
from ccbench.report.fmt import DIGITS, fmt, fmt_ci, significant

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "results-small"


@dataclass(frozen=True)
class Built:
    out: Path
    matrix: dict
    text: str  # pdftotext, whitespace collapsed
    layout_lines: list[str]  # pdftotext -layout, one table row per line, collapsed
    html: str


def _collapse(s: str) -> str:
    return " ".join(s.split())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    out = tmp_path_factory.mktemp("report")
    matrix = json.loads((FIX / "matrix.json").read_text())
    figures.make_all(FIX / "tables", FIX / "runs", matrix, out / "figures")
    document.build(
        FIX / "tables",
        out / "figures",
        matrix,
        FIX / "runs",
        out / "report.pdf",
        out / "report.html",
    )
    pdf = str(out / "report.pdf")
    text = subprocess.run(["pdftotext", pdf, "-"], capture_output=True, text=True, check=True)
    lay = subprocess.run(
        ["pdftotext", "-layout", pdf, "-"], capture_output=True, text=True, check=True
    )
    return Built(
        out=out,
        matrix=matrix,
        text=_collapse(text.stdout),
        layout_lines=[_collapse(ln) for ln in lay.stdout.splitlines()],
        html=(out / "report.html").read_text(),
    )


def _summary() -> pd.DataFrame:
    return pd.read_csv(FIX / "tables" / "summary.csv")


def test_pdf_and_html_exist(built: Built) -> None:
    pdf = built.out / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert built.html.startswith("<!DOCTYPE html>")


def test_names_and_labels_in_pdf_and_html(built: Built) -> None:
    names = list(built.matrix["scenarios"]) + [v["label"] for v in built.matrix["variants"]]
    names += [built.matrix["title"], built.matrix["question"]]
    for s in names:
        assert s in built.text, s
        assert s in built.html, s


def test_results_table_rows_match_the_tables(built: Built) -> None:
    """Each variant's row, cell by cell and in order, as fmt() renders the summary."""
    for _, r in _summary().iterrows():
        cells = [
            fmt_ci(r[f"flow{k}_throughput_mbps_mean"], r[f"flow{k}_throughput_mbps_ci95"], 1)
            for k in (1, 2)
        ]
        cells.append(fmt_ci(r["throughput_sum_mbps_mean"], r["throughput_sum_mbps_ci95"], 1))
        cells.append(
            "baseline"
            if r["baseline"]
            else fmt_ci(
                r["throughput_sum_mbps_delta_pct"],
                r["throughput_sum_mbps_delta_ci95_pct"],
                1,
                sign=True,
            )
        )
        for key, d in (
            ("utilization_pct", 1),
            ("jain", 3),
            ("srtt_mean_ms", 1),
            ("srtt_p95_ms", 1),
            ("srtt_max_ms", 1),
            ("retransmits", 0),
            ("drops_pkts", 0),
        ):
            cells.append(fmt_ci(r[f"{key}_mean"], r[f"{key}_ci95"], d))
        cells.append(f"{r['n_valid']}/{r['n_valid'] + r['n_invalid']}")
        row = " ".join(cells)
        assert any(row in ln for ln in built.layout_lines), row
        for c in cells:
            assert c in built.html, c
        if not math.isnan(r["throughput_sum_mbps_mean"]):
            # The concrete form, so a broken fmt() cannot pass by agreeing with itself.
            assert f"{r['throughput_sum_mbps_mean']:.1f} ± " in built.text


def test_per_run_flow_throughput_traces_to_raw_iperf3(built: Built) -> None:
    runs = pd.read_csv(FIX / "tables" / "runs.csv")
    for _, r in runs.iterrows():
        raw = FIX / "runs" / r["run_id"] / "raw"
        flows = []
        for k in (1, 2):
            doc = json.loads((raw / f"iperf3-{k}.json").read_text())
            flows.append(fmt(doc["end"]["sum_received"]["bits_per_second"] / 1e6, 1))
        total = fmt(r["throughput_sum_mbps"], 1)
        valid = "yes" if r["valid"] else "NO"
        row = f"{r['run_id']} {r['variant']} {r['repetition']} {valid} {' '.join(flows)} {total}"
        assert any(row in ln for ln in built.layout_lines), row
        assert all(f in built.html for f in flows)


def test_invalid_runs_listed_with_reasons(built: Built) -> None:
    runs = pd.read_csv(FIX / "tables" / "runs.csv")
    bad = runs[~runs["valid"]]
    assert len(bad) == 2  # the fixture's two bbr runs (see its README)
    for _, r in bad.iterrows():
        assert r["run_id"] in built.text
        assert r["reasons"] in built.text
        assert html.escape(r["reasons"]) in built.html
    assert "Not plotted: 2 invalid run(s) (bbr 2)" in built.text


def test_provenance_appendix(built: Built) -> None:
    assert provenance.matrix_sha256(built.matrix) in built.text
    for rid in built.matrix["order"]:
        assert str(FIX / "runs" / rid / "raw") in built.html
    cal = json.loads(
        (FIX / "runs" / built.matrix["order"][0] / "raw" / "calibration.json").read_text()
    )
    assert f"ratio {fmt(cal['rate']['ratio'], 3)}" in built.text
    assert "iperf 3." in built.text


def test_figures_manifest(built: Built) -> None:
    manifest = json.loads((built.out / "figures" / "figures.json").read_text())
    kinds = [(e["scenario"], e["kind"], e.get("variant")) for e in manifest]
    for scen in built.matrix["scenarios"]:
        assert (scen, "bars", None) in kinds
        assert (scen, "scatter", None) in kinds
        assert (scen, "metrics", None) in kinds
        for v in built.matrix["variants"]:
            assert (scen, "timeseries", v["label"]) in kinds
    for e in manifest:
        assert (built.out / "figures" / e["file"]).stat().st_size > 1000
        assert e["caption"]
    # Self-contained HTML: every figure embedded, nothing fetched.
    assert built.html.count('src="data:image/png;base64,') == len(manifest)
    assert 'src="http' not in built.html and "<link" not in built.html


# Pure helpers, on hand-made inputs.


def test_fmt() -> None:
    assert fmt(float("nan")) == "n/a"
    assert fmt(None) == "n/a"
    assert fmt("x") == "n/a"
    assert fmt(-0.04, 1) == "0.0"
    assert fmt(3.14159, 3) == "3.142"
    assert fmt(12.34, 1, sign=True) == "+12.3"
    assert fmt(-12.34, 1, sign=True) == "-12.3"
    assert fmt(166.0, DIGITS["count"]) == "166"
    assert fmt(2.5, None) == "2.5" and fmt(0.001, None) == "0.001"
    assert fmt_ci(47.7029, 0.19625, 1) == "47.7 ± 0.2"
    assert fmt_ci(47.7, float("nan"), 1) == "47.7 ± n/a"
    assert fmt_ci(float("nan"), 1.0, 1) == "n/a"
    assert significant(5.0, 4.9) and not significant(5.0, 5.1)
    assert not significant(5.0, float("nan"))


def test_representative_is_closest_to_median() -> None:
    df = pd.DataFrame(
        {
            "run_id": ["a", "b", "c"],
            "repetition": [1, 2, 3],
            "throughput_sum_mbps": [40.0, 47.0, 49.0],
        }
    )
    assert data.representative(df) == "b"
    assert data.representative(df.iloc[:0]) is None


def test_largest_delta_sentence() -> None:
    cols = {
        f"{m.key}_{s}": math.nan
        for m in tables.DELTA_METRICS
        for s in ("delta_pct", "delta_ci95_pct")
    }
    base = {"variant": "before", "baseline": True, **cols}
    a = {
        **cols,
        "variant": "after",
        "baseline": False,
        "throughput_sum_mbps_delta_pct": -3.1,
        "throughput_sum_mbps_delta_ci95_pct": 5.0,
        "retransmits_delta_pct": 40.0,
        "retransmits_delta_ci95_pct": 12.0,
    }
    s = tables.largest_delta_sentence(pd.DataFrame([base, a]), "before")
    assert "after, retrans. +40.0 % ± 12.0 %" in s
    assert "(1 of 2 deltas" in s
