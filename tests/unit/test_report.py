"""The report from two small real results sets (tests/fixtures/results-small and
results-loss, see their READMEs).

The numbers in the PDF are checked against values recomputed here: the table cells
from the aggregated tables, the per-run flow throughputs from the raw iperf3 JSON, the
RTT-under-load percentiles from the raw ping output, the Mathis prediction from the
configured conditions.
"""

from __future__ import annotations

import html
import json
import math
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from ccbench import metrics, timeseries
from ccbench.model import Matrix
from ccbench.parse.ping import parse_ping
from ccbench.report import checks, data, document, figures, provenance, tables
from ccbench.report.fmt import DIGITS, fmt, fmt_ci, significant

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "results-small"
FIX_LOSS = FIX.parent / "results-loss"


@dataclass(frozen=True)
class Built:
    out: Path
    matrix: Matrix
    text: str  # pdftotext, whitespace collapsed
    layout_lines: list[str]  # pdftotext -layout, one table row per line, collapsed
    html: str
    seconds: float  # figures + document


def _build(fix: Path, out: Path) -> Built:
    if shutil.which("pdftotext") is None:
        pytest.skip("pdftotext (poppler-utils) is not installed")
    matrix = Matrix.load(fix / "matrix.json")
    t0 = time.monotonic()
    figures.make_all(fix / "tables", fix / "runs", matrix, out / "figures")
    document.build(
        fix / "tables",
        out / "figures",
        matrix,
        fix / "runs",
        out / "report.pdf",
        out / "report.html",
    )
    seconds = time.monotonic() - t0
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
        seconds=seconds,
    )


def _collapse(s: str) -> str:
    return " ".join(s.split())


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(FIX, tmp_path_factory.mktemp("report"))


@pytest.fixture(scope="module")
def built_loss(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return _build(FIX_LOSS, tmp_path_factory.mktemp("report-loss"))


def _in_a_line(b: Built, *parts: str) -> bool:
    """All parts, adjacent and in this order, on one line of the -layout text (one table
    row)."""
    return any(" ".join(parts) in ln for ln in b.layout_lines)


def _in_order(b: Built, *parts: str) -> bool:
    """All parts in this order (other cells between them allowed) on one line."""

    def ok(ln: str) -> bool:
        i = 0
        for p in parts:
            i = ln.find(p, i)
            if i < 0:
                return False
            i += len(p)
        return True

    return any(ok(ln) for ln in b.layout_lines)


def _summary(fix: Path = FIX) -> pd.DataFrame:
    return pd.read_csv(fix / "tables" / "summary.csv")


def _runs(fix: Path = FIX) -> pd.DataFrame:
    return pd.read_csv(fix / "tables" / "runs.csv")


def test_pdf_and_html_exist(built: Built) -> None:
    pdf = built.out / "report.pdf"
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert built.html.startswith("<!DOCTYPE html>")


def test_names_and_labels_in_pdf_and_html(built: Built) -> None:
    names = built.matrix.scenario_names + built.matrix.variant_labels
    names += [built.matrix.title, built.matrix.question]
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
        delta = fmt_ci(
            r["throughput_sum_mbps_delta_pct"],
            r["throughput_sum_mbps_delta_ci95_pct"],
            1,
            sign=True,
        )
        if _unpaired(r["throughput_sum_mbps_delta_paired"]):
            delta += " †"
        cells.append("baseline" if r["baseline"] else delta)
        for key, d in (
            ("utilization_pct", 1),
            ("jain", 3),
            ("srtt_mean_ms", 1),
            ("srtt_p95_ms", 1),
            ("srtt_max_ms", 1),
            ("retransmits", 0),
            ("drops_pkts", 0),
            ("queue_backlog_mean_pkts", 1),  # n/a: these runs predate queue sampling
            ("queue_full_pct", 1),
        ):
            cells.append(fmt_ci(r.get(f"{key}_mean"), r.get(f"{key}_ci95"), d))
        cells.append(f"{r['n_valid']}/{r['n_valid'] + r['n_invalid']}")
        row = " ".join(cells)
        assert any(row in ln for ln in built.layout_lines), row
        for c in cells:
            assert c in built.html, c
        if not math.isnan(r["throughput_sum_mbps_mean"]):
            # The concrete form, so a broken fmt() cannot pass by agreeing with itself.
            assert f"{r['throughput_sum_mbps_mean']:.1f} ± " in built.text


def _unpaired(x: object) -> bool:
    return x is False or str(x) == "False"


def test_delta_table_rows_with_unpaired_marks(built: Built) -> None:
    """Every non-baseline variant's Δ row: each metric incl. RTT under load, † when the
    summary says the delta is unpaired."""
    keys = ["throughput_sum_mbps", "jain", "srtt_mean_ms", "srtt_p95_ms", "srtt_max_ms"]
    keys += ["retransmits", "drops_pkts", "queue_backlog_mean_pkts", "queue_full_pct"]
    keys += ["probe_rtt_p50_ms", "probe_rtt_p95_ms"]
    summ = _summary()
    assert (~summ["baseline"]).any()
    for _, r in summ[~summ["baseline"]].iterrows():
        cells = []
        for k in keys:
            c = fmt_ci(r.get(f"{k}_delta_pct"), r.get(f"{k}_delta_ci95_pct"), DIGITS["pct"],
                       sign=True)  # fmt: skip
            cells.append(c + " †" if c != "n/a" and _unpaired(r.get(f"{k}_delta_paired")) else c)
        assert _in_a_line(built, r["variant"], *cells), cells
    assert "Δ vs baseline" in built.text


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
    runs = _runs()
    bad = runs[~runs["valid"]]
    assert len(bad) >= 1  # the fixture has invalid runs on purpose (see its README)
    for _, r in bad.iterrows():
        assert r["run_id"] in built.text
        assert r["reasons"] in built.text
        assert html.escape(r["reasons"]) in built.html
    # the fixture's tables predate the reasons' codes (test_invalid_run_codes: newer ones)
    assert "n/a: these tables were made before the codes were stored" in built.html
    per = ", ".join(f"{v} {n}" for v, n in bad.groupby("variant", sort=False).size().items())
    assert f"Not plotted: {len(bad)} invalid run(s) ({per})" in built.text


def test_provenance_appendix(built: Built) -> None:
    assert provenance.matrix_sha256(built.matrix) in built.text
    for rid in built.matrix.order:
        # relative to the results directory, never where the measuring machine kept it
        assert f"runs/{rid}/raw" in built.html
    assert str(FIX) not in built.html
    cal = json.loads(
        (FIX / "runs" / built.matrix.order[0] / "raw" / "calibration.json").read_text()
    )
    assert f"ratio {fmt(cal['rate']['ratio'], 3)}" in built.text
    assert "iperf 3." in built.text


def test_figures_manifest(built: Built) -> None:
    manifest = json.loads((built.out / "figures" / "figures.json").read_text())
    kinds = [(e["scenario"], e["kind"], e.get("variant")) for e in manifest]
    for scen in built.matrix.scenario_names:
        assert (scen, "bars", None) in kinds
        assert (scen, "scatter", None) in kinds
        assert (scen, "metrics", None) in kinds
        assert (scen, "probe", None) in kinds
        assert (scen, "jain_time", None) in kinds  # two flows
        for label in built.matrix.variant_labels:
            assert (scen, "timeseries", label) in kinds
    for e in manifest:
        assert (built.out / "figures" / e["file"]).stat().st_size > 1000
        assert e["caption"]
    # Self-contained HTML: every figure embedded, nothing fetched.
    assert built.html.count('src="data:image/png;base64,') == len(manifest)
    assert 'src="http' not in built.html and "<link" not in built.html


def test_build_time(built: Built, built_loss: Built) -> None:
    # Generous: the fixtures build in ~5-10 s here, also on a busy 2-CPU machine.
    assert built.seconds < 60 and built_loss.seconds < 60, (built.seconds, built_loss.seconds)


# Verdicts


def test_verdict_rows_with_pass_fail_and_gate(built: Built) -> None:
    v = pd.read_csv(FIX / "tables" / "verdicts.csv")
    # the fixture has all three: pass, fail, and not resolved (bbr's one valid repetition
    # gives its paired delta vs cubic no confidence interval)
    assert set(v["status"]) == {"pass", "fail", "not resolved"}
    assert v["gate"].any()
    marks = {"pass": "✓ PASS", "fail": "✗ FAIL", "not resolved": "? NOT RESOLVED"}
    for _, r in v.iterrows():
        mark = marks[r["status"]]
        measured = fmt(r["measured"], tables.digits_for(r["metric"]))
        # a long expectation name wraps in its cell: its first line is on the row's line
        head = next(
            " ".join(r["expectation"].split()[:k])
            for k in range(len(r["expectation"].split()), 0, -1)
            if _in_a_line(built, mark, *r["expectation"].split()[:k], r["scenario"], r["variant"])
        )
        line = next(
            ln for ln in built.layout_lines if f"{mark} {head} {r['scenario']} {r['variant']}" in ln
        )
        assert f" {measured}" in line
        assert line.endswith(" gate") == bool(r["gate"]), line
    # Colour and words: the classes carry the colour, the text survives grey printing.
    for status, cls in (("pass", "pass"), ("fail", "fail"), ("not resolved", "open")):
        assert built.html.count(f'class="verdict {cls}"') == int((v["status"] == status).sum())


def test_verdict_summary_on_title_page(built: Built) -> None:
    v = pd.read_csv(FIX / "tables" / "verdicts.csv")
    n, k = len(v), v["expectation"].nunique()
    p, f, u = (int((v["status"] == s).sum()) for s in ("pass", "fail", "not resolved"))
    g = int((v["gate"] & (v["status"] == "fail")).sum())
    line = f"{n} checks of {k} expectations: {p} passed, {f} failed" + (
        f", {u} not resolved" if u else ""
    )
    line += f" ({g} gated)." if g else "."
    assert f"Verdicts: {line}" in built.text
    assert built.text.index(f"Verdicts: {line}") < built.text.index("Conditions")


def test_no_expectations(built: Built, tmp_path: Path) -> None:
    tdir = tmp_path / "tables"
    shutil.copytree(FIX / "tables", tdir)
    (tdir / "verdicts.csv").unlink()
    out = document.render_html(tdir, built.out / "figures", built.matrix, FIX / "runs")
    assert "No expectations configured" in out
    (tdir / "verdicts.csv").write_text("")  # an empty file: the same
    assert data.read_verdicts(tdir).empty
    assert checks.verdict_summary(data.read_verdicts(tdir)) == "No expectations configured."


# Latency under load (ping), convergence


def _ping_p(rtts_us: list[float], q: float) -> float:
    # ccbench's one percentile (metrics.percentile), by hand: nearest rank, the
    # ceil(q/100 * n)-th smallest reply.
    xs = sorted(rtts_us)
    return xs[max(1, math.ceil(q / 100 * len(xs))) - 1]


def test_probe_percentiles_trace_to_raw_ping(built: Built) -> None:
    runs = _runs()
    assert runs["probe_rtt_p95_ms"].notna().all()
    for _, r in runs.iterrows():
        ping = parse_ping((FIX / "runs" / r["run_id"] / "raw" / "probe-ping.txt").read_text())
        ps = [fmt(_ping_p(ping.rtts_us, q) / 1e3, DIGITS["ms"]) for q in (50, 95, 99)]
        assert ps[1] == fmt(r["probe_rtt_p95_ms"], DIGITS["ms"])
        valid = "yes" if r["valid"] else "NO"
        assert _in_a_line(built, r["run_id"], r["variant"], str(r["repetition"]), valid, *ps), ps
    summ = json.loads((FIX / "runs" / runs["run_id"][0] / "summary.json").read_text())
    assert summ["probe"]["tool"] == "ping"
    assert "RTT under load: ping (ICMP echo) from s1 to r1, 10 Hz" in built.text


def test_probe_means_in_scenario_table(built: Built) -> None:
    for _, r in _summary().iterrows():
        p50 = fmt_ci(r["probe_rtt_p50_ms_mean"], r["probe_rtt_p50_ms_ci95"], DIGITS["ms"])
        p95 = fmt_ci(r["probe_rtt_p95_ms_mean"], r["probe_rtt_p95_ms_ci95"], DIGITS["ms"])
        assert _in_a_line(built, r["variant"], *(["baseline"] if r["baseline"] else []), p50, p95)
        assert p95 in built.html


def test_convergence_matches_the_runs_table(built: Built) -> None:
    """The Jain-over-time panel recomputes the series convergence_s was computed from."""
    runs = _runs()
    for _, r in runs.iterrows():
        ts = data.load_timeseries(FIX / "runs", r["run_id"])
        assert ts is not None
        cond = data.conditions(built.matrix, r["scenario"])
        assert cond is not None
        t, j = timeseries.jain_series(
            ts, data.run_flows(built.matrix, r["run_id"]), cond.interval_s
        )
        c = metrics.convergence_time_s(t, j, 0.95, 2.0)
        if math.isnan(r["convergence_s"]):
            assert c is None
        else:
            assert c == pytest.approx(r["convergence_s"])
    for _, r in _summary().iterrows():
        g = runs[(runs["variant"] == r["variant"]) & runs["valid"]]
        conv = fmt_ci(r["convergence_s_mean"], r["convergence_s_ci95"], DIGITS["s"])
        assert _in_a_line(built, conv, f"{g['convergence_s'].notna().sum()}/{len(g)}")


# Loss, Mathis, skipped scenarios (results-loss)


def test_mathis_ratio_for_loss_scenarios(built_loss: Built) -> None:
    runs = _runs(FIX_LOSS)
    summ = _summary(FIX_LOSS)
    lossy = runs[runs["loss_rate"] > 0]
    assert len(lossy) >= 2
    for _, r in lossy.iterrows():
        t = built_loss.matrix.runs[r["run_id"]].spec.topology
        model = metrics.mathis_bps(t.mtu - 52, t.rtt_ms / 1e3, t.loss_rate) / 1e6
        assert fmt(model, 1) == fmt(r["mathis_mbps_per_flow"], 1)
        s = summ[(summ["scenario"] == r["scenario"]) & (summ["variant"] == r["variant"])].iloc[0]
        ratio = fmt_ci(s["mathis_ratio_mean"], s["mathis_ratio_ci95"], DIGITS["ratio"])
        loss = f"{t.loss_mode} {fmt(t.loss_rate, None)}"
        # The scenario's second table and the loss-resilience table.
        p95 = fmt_ci(s["probe_rtt_p95_ms_mean"], s["probe_rtt_p95_ms_ci95"], DIGITS["ms"])
        assert _in_order(built_loss, r["variant"], "baseline", p95, loss, fmt(model, 1), ratio)
        assert _in_a_line(built_loss, r["scenario"], loss, fmt(model, 1))
        assert fmt(r["mathis_ratio"], DIGITS["ratio"]) in built_loss.text
    assert "Loss resilience" in built_loss.text
    manifest = json.loads((built_loss.out / "figures" / "figures.json").read_text())
    loss_figs = [e for e in manifest if e["kind"] == "loss"]
    assert len(loss_figs) == 1
    assert set(loss_figs[0]["scenarios"]) == {"loss-0", *lossy["scenario"]}
    assert "MSS = MTU − 52 = 1448 B" in built_loss.text


def test_skipped_scenario_shows_its_reason(built_loss: Built) -> None:
    runs = _runs(FIX_LOSS)
    sk = runs[runs["skipped"]]
    assert len(sk) == 1
    reason = sk["reasons"].iloc[0]
    assert reason.startswith("skipped: ")
    assert f"Not run: {reason.removeprefix('skipped: ')}" in built_loss.text
    assert reason.removeprefix("skipped: ") in html.unescape(built_loss.html)
    scen = sk["scenario"].iloc[0]
    manifest = json.loads((built_loss.out / "figures" / "figures.json").read_text())
    assert not [e for e in manifest if e["scenario"] == scen]  # no empty plots
    # Counted apart from invalid runs; a skipped run is not in the invalid-runs table.
    ran = len(runs) - len(sk)
    assert f"{ran} executed: {int(runs['valid'].sum())} valid, 0 invalid; 1 not run" in (
        built_loss.text
    )
    assert f"Scenario {scen} (not run)" in built_loss.text


# Pure helpers, on hand-made inputs.


def test_delta_unpaired() -> None:
    import numpy as np

    assert data.delta_unpaired(False) and data.delta_unpaired(np.False_)
    assert data.delta_unpaired("False")
    for x in (None, True, np.True_, float("nan"), "", "True"):
        assert not data.delta_unpaired(x), x


def test_verdict_summary() -> None:
    v = pd.DataFrame(
        {
            "expectation": ["a", "b", "c"],
            "passed": [True, True, False],
            "gate": [False, True, True],
        }
    )
    assert checks.verdict_summary(v) == "3 expectations: 2 passed, 1 failed (1 gated failure)."
    assert checks.verdict_summary(v.iloc[:1]) == "1 expectation: 1 passed, 0 failed."
    v["status"] = ["pass", "not resolved", "fail"]
    assert checks.verdict_summary(v) == (
        "3 expectations: 1 passed, 1 failed, 1 not resolved (1 gated failure)."
    )


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


def test_conditions_name_parallel_streams_and_starts() -> None:
    from ccbench.report.data import Conditions
    from ccbench.spec import Flow, Topology

    def cond(flows: tuple[Flow, ...]) -> Conditions:
        return Conditions(scenario="p", description="", topology=Topology(), flows=flows,
                          testbed_id="t", traffic_s=10)  # fmt: skip

    one = (Flow(1, "cubic", duration_s=10, streams=4),)
    assert cond(one).flows_text() == "1 × 10 s, 4 streams each"
    two = (Flow(1, "cubic", duration_s=20), Flow(2, "cubic", duration_s=20, start_s=5))
    assert cond(two).flows_text() == "2 × 20 s, starts 0/5 s"


def test_runs_waiting_for_their_kernel_are_named_apart() -> None:
    """Conditions table and scenario sentence: runs waiting for the kernel their variant
    needs are not 'not run' (they run once the senders boot it)."""
    three = document.Waits(kernel=3)
    assert document._runs_text(3, 3, 0) == "3/3"
    assert document._runs_text(3, 3, 3, three) == "3/3 (3 waiting for their kernel)"
    assert document._runs_text(2, 3, 4, three) == "2/3 (1 not run, 3 waiting for their kernel)"
    assert document._runs_text(0, 0, 3, three) == "waiting for their kernel"
    assert document._runs_text(0, 0, 3) == "not run"
    assert document._runs_sentence(3, 3, 3, three) == "3/3 runs valid, 3 waiting for their kernel"
    assert document._runs_sentence(0, 0, 2, document.Waits(kernel=2)) == (
        "no run ran (all wait for their kernel)")  # fmt: skip


def test_runs_waiting_only_for_boot_tunables_are_not_said_to_wait_for_a_kernel() -> None:
    """A run recorded as waiting for FreeBSD loader tunables alone (hosts.loader: its
    runs.csv `waiting_kernel` is empty) waits for its boot tunables, not for a kernel."""
    runs = pd.DataFrame({"status": ["waiting", "waiting", "valid", "waiting"],
                         "waiting_kernel": ["", "patched", "", None]})  # fmt: skip
    waits = document._waits(runs)
    assert waits == document.Waits(kernel=1, boot=2)
    assert document._runs_text(1, 1, 3, waits) == (
        "1/1 (1 waiting for their kernel, 2 waiting for their boot tunables)")  # fmt: skip
    boot = document._waits(runs[runs["waiting_kernel"].fillna("") == ""])
    assert boot == document.Waits(boot=2)
    assert document._runs_text(0, 0, 2, boot) == "waiting for their boot tunables"
    assert document._runs_sentence(0, 0, 2, boot) == (
        "no run ran (all wait for their boot tunables)")  # fmt: skip
    assert document._runs_text(0, 0, 3, waits) == (
        "waiting for their kernel or their boot tunables")  # fmt: skip
    # tables written before the column: every wait was a kernel's
    assert document._waits(runs.drop(columns="waiting_kernel")) == document.Waits(kernel=3)


def test_a_lab_without_a_router_says_what_was_not_proven(built: Built, tmp_path: Path) -> None:
    """A lab's bottleneck is not ccbench's: the report names it and lists the checks that
    could not be made (summary.json `not_controlled`, `not_checkable`), not a pass."""
    runs = tmp_path / "runs"
    shutil.copytree(FIX / "runs", runs)
    where = "the network between s1, s2 and r1; its buffer is not known"
    lines = [f"bottleneck queue drops: not checkable ({where})",
             f"RTT excess share: not checkable ({where})"]  # fmt: skip
    for d in runs.iterdir():
        p = d / "summary.json"
        if p.exists():
            s = json.loads(p.read_text())
            s["bottleneck"]["not_controlled"] = where
            s["not_checkable"] = lines
            p.write_text(json.dumps(s))
    out = document.render_html(FIX / "tables", built.out / "figures", built.matrix, runs)
    text = _collapse(html.unescape(re.sub(r"<[^>]+>", " ", out)))
    assert f"bottleneck: {where} (not ccbench's: its queue is not checkable)" in text
    assert "Not proven here" in text and "; ".join(lines) in text
    plain = document.render_html(FIX / "tables", built.out / "figures", built.matrix, FIX / "runs")
    assert "Not proven here" not in plain
