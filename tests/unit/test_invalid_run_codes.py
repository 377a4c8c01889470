"""The runs table carries each reason's class (its code) and whether only the host
failed the run (reasons.host_stalled_only); the report's invalid-runs table shows the
codes and says how many runs a quieter host may make valid. On the fixture results
(tests/fixtures/results-small: a real 4-run set whose bbr repetition 1 the delay
element made invalid, `delay_late`; results-loss: a run skipped for fq_codel)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ccbench import aggregate, record_load, upgrade
from ccbench.model import Matrix
from ccbench.report import data, document, invalid_runs
from tests.conftest import REPO

FIX = REPO / "tests" / "fixtures"
LATE = "two-flows-bbr-r1-3c359d7e"  # results-small's invalid run
SKIPPED = "fq_codel-cubic-r1-881d5c8e"  # results-loss's skipped run


def _rows(results: Path) -> pd.DataFrame:
    return pd.DataFrame([aggregate.run_rows(d)[0] for d in sorted((results / "runs").iterdir())])


def test_the_runs_table_carries_the_codes_in_the_reasons_order() -> None:
    for results in (FIX / "results-small", FIX / "results-loss"):
        for d in sorted((results / "runs").iterdir()):
            row, _ = aggregate.run_rows(d)
            rec = record_load.load(d)
            assert row["reason_codes"].split() == [r.code.value for r in rec.reasons], d.name
    runs = pd.concat([_rows(FIX / "results-small"), _rows(FIX / "results-loss")])
    by_id = runs.set_index("run_id")
    assert by_id.loc[LATE, "reason_codes"] == "delay_late"
    assert by_id.loc[SKIPPED, "reason_codes"] == "skipped"
    # only the delay element's lateness, a host stall: measured again, it may pass; a
    # skipped run and a valid one are not "stalled"
    assert by_id["host_stalled"].to_dict() == {rid: rid == LATE for rid in by_id.index}


def test_the_invalid_runs_table_shows_the_codes_and_counts_the_host_stalls() -> None:
    runs, absent = upgrade.runs_table(_rows(FIX / "results-small"))
    assert "reason_codes" not in absent
    [row] = invalid_runs.rows(runs)
    assert (row["run_id"], row["codes"]) == (LATE, "delay_late")
    assert row["reasons"].startswith("delay element late: 1.55% of packets > 5 ms late")
    assert invalid_runs.host_stalled_sentence(runs) == (
        "1 of them only because the host stalled (delay_late, rtt_excess, steal, "
        "trace_lost): measured again on a quieter host, they may be valid."
    )
    # a run invalid for the path as well is not counted
    runs.loc[runs["run_id"] == LATE, "host_stalled"] = False
    assert invalid_runs.host_stalled_sentence(runs) == ""


def test_tables_from_before_the_codes_show_words_only() -> None:
    """The fixture's own tables predate the columns: read through upgrade.runs_table,
    no code is shown (n/a) and no run is counted as stalled."""
    t = data.load_tables(FIX / "results-small" / "tables")
    assert {"reason_codes", "host_stalled"} <= t.absent
    [row] = invalid_runs.rows(t.runs)
    assert row["codes"] == "n/a" and row["reasons"].startswith("delay element late")
    assert invalid_runs.host_stalled_sentence(t.runs) == ""
    # (the report says why: test_report.test_invalid_runs_listed_with_reasons)


def test_the_report_shows_them(tmp_path: Path) -> None:
    """Tables made now (aggregate on the fixture's runs): the invalid-runs table in the
    HTML and the PDF shows the code, and the note counts the run only the host failed."""
    matrix = Matrix.load(FIX / "results-small" / "matrix.json")
    run_dirs = sorted((FIX / "results-small" / "runs").iterdir())
    aggregate.aggregate(run_dirs, matrix, tmp_path / "tables")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "figures.json").write_text("[]")
    pdf, page = tmp_path / "r.pdf", tmp_path / "r.html"
    document.build(tmp_path / "tables", tmp_path / "figures", matrix,
                   FIX / "results-small" / "runs", pdf, page)  # fmt: skip
    html = page.read_text()
    assert f'<td class="lead mono">{LATE}</td>' in html
    assert '<td class="lead mono">delay_late</td>' in html
    assert "1 of them only because the host stalled" in html
    assert "made before the codes were stored" not in html
