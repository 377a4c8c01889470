"""timeseries.parquet written as the rows are read (ccbench.timeseries_sink) is the table
the whole-frame write gives, and the verdict the same: a seed-scale run directory
(bench/streams.py's format-true streams: ss, siftr 1.3, the queue, iperf3, fping)
parsed with row groups and spill files forced small against the same run parsed in one
piece; a siftr2 log (written from the docs) whose rows wait for its footer, spilled
and not; a log that breaks after its rows were spilled gives none and leaves no file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from bench import seed_scale
from ccbench import timeseries, timeseries_samplers, timeseries_sink
from ccbench.instruments import SENDER_SOURCES
from ccbench.layout import RawDir
from ccbench.parse.siftr_stream import parse_siftr
from ccbench.summarize.judge import parse_run_dir
from ccbench.timeseries_stats import SeriesStats
from tests.conftest import REPO

D = 3.0
SIFTR2 = REPO / "tests" / "captures" / "freebsd" / "siftr2-2.4-written-from-docs.log"


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("streams")
    seed_scale.write_streams(d, D, 4)
    return d


def small(monkeypatch: pytest.MonkeyPatch, group: int = 5000, spill: int = 3000) -> None:
    monkeypatch.setattr(timeseries_sink, "GROUP_ROWS", group)
    monkeypatch.setattr(timeseries_sink, "SPILL_ROWS", spill)


def parse(root: Path) -> tuple[dict[str, object], pd.DataFrame]:
    rec = parse_run_dir(root)
    return rec.to_dict(), pd.read_parquet(root / "timeseries.parquet")


def test_streamed_table_and_verdict_are_the_whole_frames(
    streams: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [n for files in seed_scale.STREAMS.values() for n, _, _ in files]
    whole = seed_scale.run_dir(tmp_path / "whole", streams, names, D, 4)
    rec_w, df_w = parse(whole)
    assert pq.ParquetFile(whole / "timeseries.parquet").num_row_groups == 1
    shutil.copytree(whole / "raw", tmp_path / "streamed" / "raw")
    small(monkeypatch)
    rec_s, df_s = parse(tmp_path / "streamed")
    assert pq.ParquetFile(tmp_path / "streamed" / "timeseries.parquet").num_row_groups > 10
    assert len(df_w) > 40_000 and set(df_w["source"]) == {"iperf3", "ss", "siftr", "qdisc"}
    pd.testing.assert_frame_equal(df_s, df_w)
    assert rec_s == rec_w and rec_w["valid"], rec_w["reasons"]
    assert sorted(p.name for p in (tmp_path / "streamed").iterdir()) == [
        "raw", "summary.json", "timeseries.parquet"]  # fmt: skip


@pytest.mark.parametrize("spill", [1, 1000])
def test_siftr2_rows_find_their_flow_in_the_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spill: int
) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(SIFTR2, raw / "siftr-s1.log")
    small(monkeypatch, group=2, spill=spill)
    rd = RawDir(raw)
    sink = timeseries_sink.Sink(
        tmp_path / "ts.parquet", "r", timeseries._frame, SeriesStats(SENDER_SOURCES)
    )
    t0 = 1745600000.0
    timeseries_samplers.siftr_rows(rd, t0, {"10.1.1.11:54321": 1}, sink)
    df = sink.close().frame()
    assert rd.problems == []
    # a5b6c7d8's (10.1.1.11:54321) outgoing records; 1c2d3e4f is no flow of the run's
    assert df["flow"].tolist() == [1] * 4 and set(df["source"]) == {"siftr"}
    ms = (500, 540, 1250, 2000)  # 1f4, 21c, 4e2, 7d0 after enable_time (.012345)
    assert df["t_s"].tolist() == pytest.approx([0.012345 + x / 1e3 for x in ms])
    assert df["cwnd_bytes"].tolist() == [0x3890, 0x3E38, 0x2C3080, 0x173310]
    assert not list(tmp_path.glob(".spill-*"))


def test_a_log_broken_after_its_rows_spilled_gives_none(
    streams: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [n for files in seed_scale.STREAMS.values() for n, _, _ in files]
    run = seed_scale.run_dir(tmp_path / "run", streams, names, D, 4)
    log = run / "raw" / "siftr-s2.log"
    lines = log.read_text().splitlines(keepends=True)
    cut = int(len(lines) * 0.8)
    log.unlink()  # a hard link to the generated stream: write a new file
    log.write_text("".join([*lines[:cut], "o,not a record\n", *lines[cut:]]))
    small(monkeypatch)
    rec, df = parse(run)
    assert not rec["valid"]
    bad = [r["text"] for r in rec["reasons"] if r["evidence"].get("file") == "siftr-s2.log"]
    assert len(bad) == 1 and f": line {cut + 1}: " in bad[0], rec["reasons"]  # the line, named
    assert set(df.loc[df["source"] == "siftr", "flow"]) == {1}  # s1's rows, none of s2's
    assert not list(run.glob(".spill-*")) and not list(run.glob("*.tmp"))


def test_siftr_rows_are_the_records_line_by_line(
    streams: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Arrow path (SiftrReader's fast path, the series' columns, never pandas) gives
    the rows the line-by-line converter's records give, computed here with pandas."""
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(streams / "siftr-s1.log", raw / "siftr-s1.log")
    small(monkeypatch)
    log = parse_siftr((raw / "siftr-s1.log").read_text())
    data = max(log.flows, key=lambda f: f.records or 0)  # not iperf3's control connection
    assert data.local and len(log.flows) > 1
    local = {data.local: 1}
    sink = timeseries_sink.Sink(
        tmp_path / "ts.parquet", "r", timeseries._frame, SeriesStats(SENDER_SOURCES)
    )
    t0 = log.enable_time_s + 0.25
    timeseries_samplers.siftr_rows(RawDir(raw), t0, local, sink)
    got = sink.close().frame()
    want = pd.DataFrame(log.records)
    want = want[(want["direction"] == "out") & (want["local"] == data.local)]
    want = want.reset_index(drop=True)
    ssthresh = want["ssthresh_bytes"].astype(float)
    infinite = ssthresh >= timeseries_samplers.SIFTR_INFINITE_SSTHRESH
    assert len(got) == len(want) > 10_000 and set(got["run_id"]) == {"r"}
    assert set(got["flow"]) == {1}
    assert got["t_s"].tolist() == (log.enable_time_s + want["t_s"] - t0).tolist()
    for col, key in (
        ("cwnd_bytes", "cwnd_bytes"),
        ("rtt_us", "srtt_us"),
        ("inflight_bytes", "inflight_bytes"),
        ("rwnd_bytes", "snd_wnd_bytes"),
    ):
        assert got[col].tolist() == want[key].astype(float).tolist(), col
    assert got["ssthresh_bytes"].isna().tolist() == infinite.tolist()
    assert got["ssthresh_bytes"][~infinite].tolist() == ssthresh[~infinite].tolist()
    assert got[["throughput_bps", "min_rtt_us", "ca_state"]].isna().all().all()
