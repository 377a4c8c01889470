"""What makes the figures and the report faster changes nothing they show: figures
drawn by worker processes have the same bytes and manifest as drawn one after another,
the HTML WeasyPrint prints names each figure by its file instead of embedding it, and a
key-value table whose values sit in a div.v (report.css, to spare WeasyPrint measuring
them) is laid out like one with plain cells. Timings: bench/report_speed.py.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench.cli import main
from ccbench.model import Matrix
from ccbench.report import document, figures

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "results-small"
CSS = Path(document.__file__).resolve().parents[1] / "templates" / "report.css"


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results-small's figures drawn one after another (one/) and by two workers (two/)."""
    out = tmp_path_factory.mktemp("drawn")
    matrix = Matrix.load(FIX / "matrix.json")
    for name, workers in (("one", 1), ("two", 2)):
        figures.make_all(FIX / "tables", FIX / "runs", matrix, out / name, workers)
    return out


def test_workers_draw_the_same_bytes_in_the_same_order(drawn: Path) -> None:
    names = sorted(p.name for p in (drawn / "one").iterdir())
    assert names == sorted(p.name for p in (drawn / "two").iterdir())
    assert len(names) > 8 and "figures.json" in names  # every kind of scenario figure
    for n in names:
        assert (drawn / "one" / n).read_bytes() == (drawn / "two" / n).read_bytes(), n


def test_shared_axes_are_the_union_of_each_variants_extent() -> None:
    """Each time-series worker reads its own variant's series; the axes they share,
    from the union of the variants' extents, are those of all the series read at once."""
    from ccbench.report import data, tsplot

    matrix = Matrix.load(FIX / "matrix.json")
    figures._start(figures._Inputs(data.load_tables(FIX / "tables"), FIX / "runs", matrix, FIX))
    jobs = [j for j in figures._jobs(figures._inputs().tables, matrix) if j.what == "timeseries"]
    assert len({j.scen for j in jobs}) < len(jobs)  # a scenario with several variants
    given = figures._with_limits(jobs, jobs, [figures._extent(j) for j in jobs])
    for j in given:
        sc = figures._scene(j)
        every = [s for v in sc.variants for s in sc.valid_series(v)]
        assert j.limits == tsplot.limits(tsplot.extent(every), sc.cond), j


def test_a_bad_number_of_workers_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["figures", f"--matrix={FIX}/matrix.json", f"--tables={FIX}/tables",
            f"--runs={FIX}/runs", "--out=/nonexistent/figures"]  # fmt: skip
    for bad in ("0", "two", "-1"):
        with pytest.raises(SystemExit) as e:
            main([*argv, "--workers", bad])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert f"not a number of processes (1-256): '{bad}'" in err[-1]


def test_printable_names_each_figure_by_its_file(drawn: Path) -> None:
    html = document.render_html(FIX / "tables", drawn / "two", Matrix.load(FIX / "matrix.json"),
                                FIX / "runs")  # fmt: skip
    page = document.printable(html, drawn / "two")
    assert "data:image" in html and "data:image" not in page
    back = page
    for e in document._figures(drawn / "two"):
        assert page.count(f'src="{e["file"]}"') == 1, e["file"]
        back = back.replace(f'src="{e["file"]}"', f'src="{e["src"]}"')
    assert back == html


def test_a_key_value_table_lays_out_like_plain_cells(tmp_path: Path) -> None:
    """Short values, a long value broken anywhere and a value of several lines, as the
    template writes them (div.v) and as plain cells with the table sized by its content
    (report.css before div.v): the same pixels."""
    weasyprint = pytest.importorskip("weasyprint")
    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed")
    long = " ".join(f"word{i}-{'x' * (i % 9)}" for i in range(40))
    two_lines = "net.core.rmem_max = 4194304<br>net.ipv4.tcp_window_scaling = 1"
    rows = [("os", "linux"), ("tcp_no_metrics_save", "1"), ("iperf3", long), ("buf", two_lines)]

    def tables(cell: str) -> str:
        trs = [f'<tr><th>{key}</th><td class="mono">{cell.format(v)}</td></tr>' for key, v in rows]
        return "".join(
            f'<h3>{k} rows</h3><table class="kv facts">{"".join(trs[:k])}</table>'
            for k in (1, 2, 4)
        )

    css = CSS.read_text()
    sized_by_content = "table.kv, table.kv td { width: auto; }"
    pngs = []
    for name, cell, extra in (("div", '<div class="v">{}</div>', ""),
                              ("plain", "{}", sized_by_content)):  # fmt: skip
        pdf = tmp_path / f"{name}.pdf"
        html = f"<html><style>{css}{extra}</style><body>{tables(cell)}</body></html>"
        weasyprint.HTML(string=html).write_pdf(pdf)
        subprocess.run(["pdftoppm", "-r", "72", "-png", str(pdf), str(tmp_path / name)],
                       check=True)  # fmt: skip
        pngs.append(sorted(tmp_path.glob(f"{name}-*.png")))
    assert len(pngs[0]) == len(pngs[1]) == 1
    assert pngs[0][0].read_bytes() == pngs[1][0].read_bytes()
