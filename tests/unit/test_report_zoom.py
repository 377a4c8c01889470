"""The report's event zooms (report.episodes, report.zoom, report.zoomplot) on real traced
runs made here (tests/captures/zoom: two runs of config/examples/local-traced.yaml, 2 x
cubic and 2 x bbr through 48 packets at 100 Mbit/s x 40 ms, `record: [tcp_probe]`, the
queue every 10 ms; their summary.json and their time series' first seconds), and on the
report fixtures made before traces existed (their parquet lacks the state columns)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from ccbench import record_load
from ccbench.model import Matrix
from ccbench.report import data, episodes, figures, zoom, zoomplot
from ccbench.report.episodes import Event, Found
from ccbench.run_record import RunRecord
from ccbench.spec import RunSpec

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "zoom"
CUBIC = CAPTURES / "cubic-traced"  # rows up to 2.5 s
HYSTART = CAPTURES / "cubic-hystart"  # rows up to 3.0 s: HyStart at 0.512 s, Recovery 2.407 s
BBR = CAPTURES / "bbr-traced"  # rows up to 1.2 s
FIX = Path(__file__).resolve().parents[1] / "fixtures"
# ss stamps a sample when its loop starts it; on this 2-vCPU machine the socket was read
# up to 40 ms later (ss's ssthresh changes against the trace's, in the cubic runs).
SS_LAG_S = 0.05


def _rec(d: Path) -> RunRecord:
    return record_load.load(d)


def _cond(rec: RunRecord) -> data.Conditions:
    spec = RunSpec.from_dict(rec.spec)
    return data.Conditions(rec.scenario, "", spec.topology, spec.flows, "t", spec.traffic_s)


def _rows(d: Path) -> pd.DataFrame:
    return pd.read_parquet(d / "timeseries.parquet")


def test_a_trace_gives_its_episodes_per_ack_in_time_order() -> None:
    rec = _rec(CUBIC)
    found = episodes.find(rec, CUBIC / "timeseries.parquet")
    assert found is not None and found.per_ack and found.source == "tcp_probe"
    assert rec.tcp_events is not None
    want = sorted((t, f.flow) for f in rec.tcp_events.flows for t in f.recovery_s + f.rto_s)
    assert [(e.t_s, e.flow) for e in found.events] == want
    assert "tcp_events" in found.how and "per ACK" in found.how


def test_windows_start_3_rtts_before_and_end_3_rtts_after_open_again() -> None:
    rec = _rec(CUBIC)
    path = CUBIC / "timeseries.parquet"
    found = episodes.find(rec, path)
    assert found is not None
    rtt = zoom.rtt_s(_cond(rec))
    assert rtt == pytest.approx(0.040 + 48 * 1514 * 8 / 100e6)  # base RTT + a full queue
    zs = episodes.zooms(found, path, rtt, n=2)
    rows = _rows(CUBIC)
    ca = rows[rows["source"] == "ca_state"]
    for z in zs:
        assert z.lo == pytest.approx(z.t0 - 3 * rtt)
        # the end: the flow's first Open after its entry that the next state change does
        # not leave within 0.1 ms, as the raw rows have it
        mine = ca[(ca["flow"] == z.event.flow) & (ca["t_s"] > z.t0 + 1e-4)].sort_values("t_s")
        t, st = mine["t_s"].to_numpy(float), mine["ca_state"].to_numpy(float)
        lasting = [t[i] for i in range(len(t))
                   if st[i] == 0 and (i + 1 == len(t) or t[i + 1] - t[i] > 1e-4)]  # fmt: skip
        assert z.end_s == pytest.approx(lasting[0])
        assert z.end_s > z.t0
        assert z.hi == pytest.approx(max(z.end_s + 3 * rtt, z.t0 + 6 * rtt))
    # the slow start's overshoot: flow 1 Open at 0.5897 s and back in Recovery 2 µs
    # later (the same ACK); Open and staying so at 0.6305 s: that is the episode's end
    assert zs[0].end_s == pytest.approx(0.6305, abs=1e-4)
    assert [(round(t, 4), code) for t, code in zs[0].brief_opens] == [(0.5897, 3)]
    assert zs[1].brief_opens == ()
    # the real run: both flows entered recovery together at 0.457 s (the slow start's
    # overshoot); flow 1 again 132 ms later; then both about 1.87 s
    assert [z.t0 for z in zs] == [0.4572, 1.8645]
    assert [(e.flow, e.t_s) for e in zs[0].others] == [(2, 0.4575), (1, 0.5897)]
    assert [(e.flow, e.t_s) for e in zs[1].others] == [(2, 1.8833)]


def test_a_window_reads_only_its_rows_and_the_row_groups_that_hold_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = CUBIC / "timeseries.parquet"
    n_groups = pq.ParquetFile(path).metadata.num_row_groups
    assert n_groups > 3
    read: list[int] = []
    orig = pq.ParquetFile.read_row_group

    def spy(self: pq.ParquetFile, i: int, *a: object, **k: object) -> object:
        read.append(i)
        return orig(self, i, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    got = episodes.read_window(path, 1.80, 1.95)
    assert 0 < len(read) < n_groups
    rows = _rows(CUBIC)
    want = rows[(rows["t_s"] >= 1.80) & (rows["t_s"] <= 1.95) & (rows["source"] != "iperf3")]
    want = want[want["source"] != "receiver"]
    assert len(got) == len(want)
    assert set(got.columns) <= set(episodes.COLUMNS) and "run_id" not in got.columns
    t = got.loc[got["source"] == "tcp_probe"].sort_values(["flow", "t_s"])
    w = want.loc[want["source"] == "tcp_probe"].sort_values(["flow", "t_s"])
    assert t["cwnd_bytes"].tolist() == w["cwnd_bytes"].tolist()


def test_without_a_trace_episodes_come_from_ss_within_one_sample(tmp_path: Path) -> None:
    """The same real run with its trace taken away: ss's ssthresh (every 0.1 s) shows each
    flow's first recovery of each episode in the sample interval before it."""
    rows = _rows(CUBIC)
    path = tmp_path / "timeseries.parquet"
    rows[~rows["source"].isin(["tcp_probe", "ca_state"])].to_parquet(path)
    found = episodes.find(None, path)
    assert found is not None and not found.per_ack and found.source == "ss"
    assert found.step_s == pytest.approx(0.1, abs=0.01)
    assert "ssthresh" in found.how
    trace = episodes.find(_rec(CUBIC), CUBIC / "timeseries.parquet")
    assert trace is not None
    firsts = {(e.flow, round(e.t_s)): e.t_s for e in reversed(trace.events) if e.t_s < 2.4}
    for (k, _), t in firsts.items():
        assert any(e.flow == k and e.after_s is not None and e.after_s < t <= e.t_s + SS_LAG_S
                   for e in found.events), (k, t, found.events)  # fmt: skip
    # no ssthresh at all (a parquet from before the column): cwnd cuts instead
    rows[rows["source"] == "ss"].drop(columns=["ssthresh_bytes"]).to_parquet(path)
    cuts = episodes.find(None, path)
    assert cuts is not None and "cwnd is 20 %" in cuts.how and cuts.events


def test_hystarts_end_of_slow_start_is_not_a_cut(tmp_path: Path) -> None:
    """A real run whose HyStart set ssthresh with no loss: the trace shows it set while
    the flow stays Open; found from ss alone, the first episode is the first Recovery
    (within one sample), not the end of slow start."""
    rows = _rows(HYSTART)
    tp = rows[rows["source"] == "tcp_probe"].sort_values("t_s")
    recovery = rows.loc[(rows["source"] == "ca_state") & (rows["ca_state"] >= 2), "t_s"].min()
    hystart = tp.loc[tp["ssthresh_bytes"].notna(), "t_s"].min()
    assert hystart < recovery - 1.5 and recovery == pytest.approx(2.407, abs=0.001)
    path = tmp_path / "timeseries.parquet"
    rows[~rows["source"].isin(["tcp_probe", "ca_state"])].to_parquet(path)
    found = episodes.find(None, path)
    assert found is not None and found.source == "ss" and "HyStart" in found.how
    assert found.events and found.events[0].after_s < recovery <= found.events[0].t_s + SS_LAG_S
    # without ss's retransmission counts (a series from before them), the old rule's
    # first set is that end of slow start
    rows[rows["source"] == "ss"].drop(columns=["retransmits"]).to_parquet(path)
    old = episodes.find(None, path)
    assert old is not None and old.events[0].t_s < hystart + 0.2


def _found(*evs: tuple[str, float]) -> Found:
    return Found([Event(1, k, t) for k, t in evs], "tcp_probe", True, "test")


def test_first_three_episodes_and_the_first_rto_takes_the_last_place() -> None:
    path = CUBIC / "timeseries.parquet"
    rtt = 0.0458
    base = [("recovery", 0.46), ("recovery", 0.50), ("recovery", 1.86), ("recovery", 5.0)]
    zs = episodes.zooms(_found(*base, ("recovery", 7.0)), path, rtt)
    assert [z.t0 for z in zs] == [0.46, 1.86, 5.0]  # 0.50 is inside the first episode
    assert [e.t_s for e in zs[0].others] == [0.50]
    zs = episodes.zooms(_found(*base, ("RTO", 9.0)), path, rtt)
    assert [(z.event.what, z.t0) for z in zs] == [("recovery", 0.46), ("recovery", 1.86),
                                                  ("RTO", 9.0)]  # fmt: skip
    # an RTO's window also shows the minimum RTO's stall before it
    assert zs[2].lo == pytest.approx(9.0 - 3 * rtt - episodes.RTO_MIN_S)


def test_infinite_ssthresh_is_not_drawn() -> None:
    mss = 1448
    got = episodes.ssthresh_values(pd.Series([2147483647 * mss, 280912.0, math.nan]).to_numpy())
    assert math.isnan(got[0]) and got[1] == 280912.0 and math.isnan(got[2])


def _captioned(
    d: Path, tmp_path: Path, rec: RunRecord | None = None
) -> tuple[str, list[episodes.Zoom], dict[str, set[str]]]:
    rec = rec or _rec(d)
    run = tmp_path / rec.run_id
    (run / "raw").mkdir(parents=True)
    for name in ("tcp-probe-host.txt", "ss-s1.txt", "ss-s2.txt"):
        (run / "raw" / name).touch()  # the run's raw files by name (their content is not read)
    cond = _cond(rec)
    found = episodes.find(rec, d / "timeseries.parquet")
    assert found is not None
    zs = episodes.zooms(found, d / "timeseries.parquet", zoom.rtt_s(cond), n=2)
    cap = zoom.caption("v in s", f"{rec.run_id} (rep)", found, zs, rec, run, cond, 0.0)
    drawn: dict[str, set[str]] = {}
    for z in zs:
        for col, srcs in zoomplot.drawn_from(z, found.source).items():
            drawn.setdefault(col, set()).update(srcs)
    return cap, zs, drawn


def test_the_caption_traces_every_curve_to_its_raw_file(tmp_path: Path) -> None:
    cap, zs, drawn = _captioned(CUBIC, tmp_path)
    rec = _rec(CUBIC)
    assert rec.run_id in cap
    assert "cwnd, srtt, ssthresh, bytes in flight and the peer's receive window: tcp_probe, " \
           "every ACK (raw/tcp-probe-host.txt)" in cap  # fmt: skip
    assert "the kernel's min RTT: ss every 0.1 s, not per ACK (raw/ss-s1.txt, raw/ss-s2.txt)" in cap
    assert drawn["cwnd_bytes"] == {"tcp_probe"} and drawn["min_rtt_us"] == {"ss"}
    for z in zs:  # each episode's time, end and window as the rows have them
        assert f"flow {z.event.flow} recovery at {z.t0:.4f} s" in cap
        assert z.end_s is not None and f"Open again at {z.end_s:.4f} s" in cap
        assert f"window {z.lo:.3f}-{z.hi:.3f} s" in cap
    # which return to Open the caption means, and the one it does not
    assert "Open again at 0.6305 s and staying Open (dashed); before that Open for an " \
           "instant only, at 0.5897 s (back in Recovery): left within 0.1 ms" in cap  # fmt: skip
    assert rec.queue is not None and rec.queue.file
    assert f"sampled every 10 ms (raw/{rec.queue.file})" in cap


def test_the_caption_of_a_trace_that_lost_events_says_how_many(tmp_path: Path) -> None:
    """A run judged before lost events were a reason (valid, so it may be drawn) whose
    trace lost some (tests/unit/test_trace_lost.py: a real capture's 28,730)."""
    rec = _rec(CUBIC)
    assert rec.tcp_events is not None and rec.tcp_events.lost_events == 0
    ev = rec.tcp_events.model_copy(update={"lost_events": 28730})
    cap, _, _ = _captioned(CUBIC, tmp_path, rec.model_copy(update={"tcp_events": ev}))
    assert "tcp_probe, every ACK but 28730 events the kernel's trace buffer dropped " \
           "(trace_pipe's [LOST … EVENTS]" in cap  # fmt: skip


def test_bbr_figure_draws_the_model_from_ss(tmp_path: Path) -> None:
    cap, zs, drawn = _captioned(BBR, tmp_path)
    assert zoomplot.has_bbr(zs) and zoomplot.has_queue(zs)
    assert drawn["bbr_bw_bps"] == {"ss"} and drawn["bbr_pacing_gain"] == {"ss"}
    assert "BBR's bandwidth estimate" in cap and "ss every 0.1 s" in cap
    rec = _rec(BBR)
    p = zoomplot.Panel(_cond(rec), "#0072B2", "tcp_probe")
    fig = zoomplot.figure(zs, p, "bbr", 10.4)
    first = [ax.get_ylabel() for ax in fig.axes[: 4 * len(zs) : len(zs)]]  # column 1
    k = zs[0].event.flow
    assert first == [f"flow {k}: segments\n(MSS 1448 B)", "srtt (ms)", "queue (pkts)",
                     "BBR bw est.\n(Mbit/s)"]  # fmt: skip
    assert len([a for a in fig.axes if a.get_ylabel() == "srtt (ms)"]) == len(zs)


def test_cubic_figure_has_the_trace_s_curves(tmp_path: Path) -> None:
    rec = _rec(CUBIC)
    cond = _cond(rec)
    found = episodes.find(rec, CUBIC / "timeseries.parquet")
    assert found is not None
    zs = episodes.zooms(found, CUBIC / "timeseries.parquet", zoom.rtt_s(cond), n=2)
    assert not zoomplot.has_bbr(zs)
    fig = zoomplot.figure(zs, zoomplot.Panel(cond, "#000000", "tcp_probe"), "cubic", 10.4)
    labels = {t.get_text() for leg in fig.legends for t in leg.get_texts()}
    assert {"cwnd", "ssthresh", "in flight: sent, not cum. ACKed", "in Recovery",
            "bottleneck backlog", "Open again"} <= labels  # fmt: skip
    # the first window's cwnd as drawn: the trace's rows, in segments
    ax = fig.axes[0]
    mss = cond.topology.mss_bytes
    drawn = max(ax.get_lines(), key=lambda ln: ln.get_linewidth())
    rows = _rows(CUBIC)
    f = rows[(rows["source"] == "tcp_probe") & (rows["flow"] == 1)]
    f = f[(f["t_s"] >= zs[0].lo - episodes.PAD_S) & (f["t_s"] <= zs[0].hi + episodes.PAD_S)]
    assert list(drawn.get_ydata()) == pytest.approx((f["cwnd_bytes"] / mss).tolist())


def test_fixture_reports_without_traces_get_zooms_at_ss_resolution(tmp_path: Path) -> None:
    """A results set from before traces and state columns (its parquet has cwnd and
    srtt only): each variant's zoom is found in ss's cwnd and says so."""
    fix = FIX / "results-small"
    matrix = Matrix.load(fix / "matrix.json")
    figures.make_all(fix / "tables", fix / "runs", matrix, tmp_path)
    manifest = json.loads((tmp_path / "figures.json").read_text())
    zooms = [e for e in manifest if e["kind"] == "zoom"]
    for scen in matrix.scenario_names:
        assert {e["variant"] for e in zooms if e["scenario"] == scen} == set(matrix.variant_labels)
    for e in zooms:
        assert (tmp_path / e["file"]).stat().st_size > 1000
        assert "ss every 0.1 s, not per ACK" in e["caption"]
        assert "cwnd is 20 % or more below the sample before" in e["caption"]
        assert "the valid run closest to the median throughput sum" in e["caption"]


def test_a_run_without_losses_says_so(tmp_path: Path) -> None:
    rows = _rows(CUBIC)
    d = tmp_path / "quiet"
    d.mkdir()
    rows[rows["t_s"] < 0.4].to_parquet(d / "timeseries.parquet")  # before the first loss
    shutil.copy(CUBIC / "summary.json", d / "summary.json")
    found = episodes.find(None, d / "timeseries.parquet")
    assert found is not None and found.events == []
    assert episodes.zooms(found, d / "timeseries.parquet", 0.05) == []
