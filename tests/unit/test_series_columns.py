"""The series a CC developer reads (docs/series.md), from real captures: ssthresh, bytes
in flight, the peer's window, the kernel's minimum RTT and BBR's model on ss rows; the
same on tcp_probe rows with one ca_state row per congestion-state change; siftr's; BBR's
phase from its gains; and a time series written before these columns existed."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ccbench import timeseries, timeseries_samplers, upgrade
from ccbench.instruments import SENDER_SOURCES, SeriesContext, events
from ccbench.instruments import tcp_probe as tp
from ccbench.layout import RawDir
from ccbench.parse.siftr_stream import SiftrReader, parse_siftr
from ccbench.parse.ss import parse_ss_samples
from ccbench.parse.tcp_probe import CONG_STATE_SET, CongStateChange, parse_tcp_trace
from ccbench.report import thinned
from ccbench.timeseries_sink import Sink
from ccbench.timeseries_stats import SeriesStats

CAPTURES = Path(__file__).resolve().parents[1] / "captures"
BBR_VS_CUBIC = CAPTURES / "ss-bbr-vs-cubic-12s.txt"  # raw/ss-s2.txt of a real run
BBR_DATA = "198.18.1.6:48540"  # its BBR flow's data socket (iperf3-2.json `connected`)
LOSS = CAPTURES / "tracefs" / "trace_pipe-cubic-2M-loss5.txt"
LOSS_DATA = "10.250.0.1:54894"  # the loss trace's data connection (its README)
MSS = 1448


def _sink(tmp_path: Path) -> Sink:
    return Sink(tmp_path / "ts.parquet", "r1", timeseries._frame, SeriesStats(SENDER_SOURCES))


def _ss_frame(tmp_path: Path, capture: Path, local: str) -> pd.DataFrame:
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(capture, raw / "ss-s2.txt")
    sink = _sink(tmp_path)
    rd = RawDir(raw)
    recs = parse_ss_samples(capture.read_text())
    timeseries_samplers.ss_rows(rd, recs[0]["t_s"], 0.0, {local: 2}, sink)
    assert rd.problems == []
    return sink.close().frame()


def test_ss_rows_carry_bbrs_model_and_the_kernels_state(tmp_path: Path) -> None:
    df = _ss_frame(tmp_path, BBR_VS_CUBIC, BBR_DATA)
    recs = [r for r in parse_ss_samples(BBR_VS_CUBIC.read_text()) if r["local"] == BBR_DATA]
    assert list(df.columns) == timeseries.COLUMNS and len(df) == len(recs) == 121
    assert (df["source"] == "ss").all() and (df["flow"] == 2).all()
    for (_, row), r in zip(df.iterrows(), recs, strict=True):
        ss_thresh = r["ssthresh_pkts"] * MSS if r["ssthresh_pkts"] is not None else math.nan
        assert row["ssthresh_bytes"] == pytest.approx(ss_thresh, nan_ok=True)
        # ss omits `unacked:` at zero: 0 bytes in flight then, never NaN
        assert row["inflight_bytes"] == (r["unacked"] or 0) * MSS
        assert row["rwnd_bytes"] == r["snd_wnd_bytes"]
        assert row["min_rtt_us"] == r["minrtt_us"]
        assert row["bbr_bw_bps"] == r["bbr_bw_bps"]
        assert row["bbr_min_rtt_us"] == r["bbr_mrtt_us"]
        assert (row["bbr_pacing_gain"], row["bbr_cwnd_gain"]) == (
            r["bbr_pacing_gain"], r["bbr_cwnd_gain"])  # fmt: skip
    # the run's path is 40 ms: the kernel's minimum sits on it; the peer's window is
    # the receiver's autotuned buffer (MB), far above the first 64 KB
    assert df["min_rtt_us"].min() == 40000.0 and df["min_rtt_us"].max() < 40400.0
    assert df["rwnd_bytes"].iloc[0] < 70_000 < 1_000_000 < df["rwnd_bytes"].max()
    assert df["ca_state"].isna().all() and df["backlog_pkts"].isna().all()


def test_ss_rows_count_what_was_retransmitted_since_the_sample_before(tmp_path: Path) -> None:
    """ss prints a socket's cumulative retransmissions (and nothing while there are
    none): each row gets the increase since the flow's previous sample, so they add up
    to the last total and none is negative or missing."""
    df = _ss_frame(tmp_path, BBR_VS_CUBIC, BBR_DATA)
    recs = [r for r in parse_ss_samples(BBR_VS_CUBIC.read_text()) if r["local"] == BBR_DATA]
    totals = [r["retrans_total"] or 0 for r in recs]
    assert totals[-1] > 0 and any(r["retrans_total"] is None for r in recs)
    assert df["retransmits"].tolist() == np.diff([0, *totals]).tolist()


# bbr_update_gains' (pacing, cwnd) gain pairs per mode (net/ipv4/tcp_bbr.c), as ss prints
# them (%g of the fixed-point value: BBR_UNIT * 2885 / 1000 + 1 = 739 and
# BBR_UNIT * 1000 / 2885 = 88, of 256), named as docs/series.md names them.
HIGH, DRAIN = round(739 / 256, 5), round(88 / 256, 5)
BBR_GAINS = {(HIGH, HIGH): "startup", (DRAIN, HIGH): "drain", (1.25, 2.0): "probe_bw",
             (0.75, 2.0): "probe_bw", (1.0, 2.0): "probe_bw", (1.0, 1.0): "probe_rtt"}  # fmt: skip


def test_bbrs_gains_on_a_real_flow_are_the_kernels_pairs(tmp_path: Path) -> None:
    """12 s of BBR against CUBIC through 48 packets: every sample after the first (no
    bandwidth sample yet: bw 0, gains 1 and 1) carries a pair bbr_update_gains sets, in
    the order STARTUP, DRAIN, the PROBE_BW cycle, and PROBE_RTT once its 10 s min-RTT
    filter expired (cwnd down to 4), as docs/series.md reads them."""
    df = _ss_frame(tmp_path, BBR_VS_CUBIC, BBR_DATA)
    pairs = list(zip(df["bbr_pacing_gain"], df["bbr_cwnd_gain"], strict=True))
    assert df["bbr_bw_bps"].iloc[0] == 0 and (df["bbr_bw_bps"].iloc[1:] > 0).all()
    assert set(pairs[1:]) <= set(BBR_GAINS)
    got = [BBR_GAINS[p] for p in pairs[1:]]
    order = [p for i, p in enumerate(got[1:]) if p != got[i]]  # each change of mode
    assert [got[0], *order[:2]] == ["startup", "drain", "probe_bw"]
    rtt = df.iloc[1:][[p == "probe_rtt" for p in got]]
    assert len(rtt) >= 2 and (rtt["t_s"] > 10).all() and rtt["cwnd_bytes"].min() <= 4 * MSS
    assert {p for p, c in pairs[1:] if c == 2.0} == {1.25, 0.75, 1.0}
    five_s = parse_ss_samples((CAPTURES / "ss-bbr-5s.txt").read_text())
    seen = {r["bbr_pacing_gain"] for r in five_s}
    assert {HIGH, 1.25, 0.75, 1.0} == {g for g in seen if g}


def _traced_raw(tmp_path: Path, offset: float) -> Path:
    """The loss capture as a run's trace: with the marker `start` writes (its trace
    clock + `offset` = wall-clock time)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    text = LOSS.read_text()
    first = float(text.split(": ", 1)[0].split()[-1])
    marker = (f" ccbench-1 [000] ..... {first:.6f}: tracing_mark_write: "
              f"ccbench_unix={first + offset:.6f}\n")  # fmt: skip
    (raw / tp.trace_file("host")).write_text(marker + text)
    return raw


def test_trace_rows_carry_ssthresh_inflight_and_the_peers_window(tmp_path: Path) -> None:
    t0 = 1000.0
    raw = _traced_raw(tmp_path, t0)  # trace clock + t0 = wall clock: t_s = trace time
    sink = _sink(tmp_path)
    ctx = SeriesContext(t0=t0, traffic_s=4.0, local_to_flow={LOSS_DATA: 1}, mss_bytes=MSS)
    tp.trace_rows(RawDir(raw), ctx, sink, None)
    st = sink.stats
    df = sink.close().frame()
    plain = parse_tcp_trace(LOSS.read_text(), mss_bytes=MSS)
    probes = [p for p in plain.probes if p.local == LOSS_DATA]
    rows = df[df["source"] == "tcp_probe"].reset_index(drop=True)
    assert len(rows) == len(probes) == 674
    for col, want in (
        ("t_s", [p.t_s for p in probes]),
        ("cwnd_bytes", [p.cwnd_bytes for p in probes]),
        ("inflight_bytes", [p.inflight_bytes for p in probes]),
        ("rwnd_bytes", [p.snd_wnd_bytes for p in probes]),
        # infinite (2147483647) until the first reduction: NaN
        ("ssthresh_bytes", [math.nan if p.ssthresh_pkts is None else p.ssthresh_pkts * MSS
                            for p in probes]),
    ):  # fmt: skip
        np.testing.assert_allclose(rows[col].to_numpy(), np.array(want, dtype=float), rtol=1e-12)
    assert rows["ssthresh_bytes"].isna().iloc[0] and rows["ssthresh_bytes"].notna().iloc[-1]
    # one ca_state row per change of state, an RTO's Loss each time: the counts' events
    ca = df[df["source"] == "ca_state"]
    changes = [c for c in plain.cong_states if c.local == LOSS_DATA
               and (c.state == "TCP_CA_Loss" or c.state != c.prev_state)]  # fmt: skip
    assert ca["ca_state"].tolist() == [float(c.state_code) for c in changes]
    np.testing.assert_allclose(ca["t_s"], [c.t_s for c in changes], rtol=1e-12)
    assert ca[["cwnd_bytes", "rtt_us", "inflight_bytes"]].isna().all().all()
    ev = st.tcp_events
    assert ev is not None
    (f,) = ev["flows"].values()
    # 38 of the trace's 39 recoveries are the data connection's (the other: the control's)
    entered = ((ca["ca_state"] == 3).sum(), (ca["ca_state"] == 4).sum())
    assert entered == (f["recoveries"], f["rtos"]) == (38, 2)


def test_state_rows_go_to_the_files_rows_a_batch_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many state changes: held CA_ROWS at a time, never all (memory bounded)."""
    monkeypatch.setattr(events, "CA_ROWS", 3)
    parts: list[pd.DataFrame] = []

    class Rows:
        def add(self, part: pd.DataFrame) -> None:
            parts.append(part)

    ev = events.EventCounter({"10.0.0.1:1": 1}, shift=-100.0, rows=Rows())  # type: ignore[arg-type]
    states = ["TCP_CA_Open", "TCP_CA_Disorder", "TCP_CA_Recovery", "TCP_CA_Recovery",
              "TCP_CA_Open", "TCP_CA_Loss", "TCP_CA_Loss"]  # fmt: skip
    prev = None
    for i, s in enumerate(states):
        ev.add(CongStateChange(100.0 + i, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET", s,
                               ["TCP_CA_Open", "TCP_CA_Disorder", "TCP_CA_CWR",
                                "TCP_CA_Recovery", "TCP_CA_Loss"].index(s), prev))  # fmt: skip
        prev = s
        assert len(ev._changes) < 3
    ev.flush()
    got = pd.concat(parts, ignore_index=True)
    assert [len(p) for p in parts] == [3, 3]  # the repeated Recovery is no change
    assert got["ca_state"].tolist() == [0.0, 1.0, 3.0, 0.0, 4.0, 4.0]
    assert got["t_s"].tolist() == [0.0, 1.0, 2.0, 4.0, 5.0, 6.0]
    assert set(got["source"]) == {events.CA_STATE} and CONG_STATE_SET == "tcp_cong_state_set"


def test_siftr_rows_carry_ssthresh_inflight_and_the_peers_window() -> None:
    path = CAPTURES / "freebsd" / "siftr-1.3.0-written-from-docs.log"
    log = parse_siftr(path.read_text())
    with path.open() as fh:
        (b,) = SiftrReader(fh).batches()
    got = {k: v.to_numpy(zero_copy_only=False)
           for k, v in timeseries_samplers.siftr_columns(b).items()}  # fmt: skip
    for k, key in (("inflight_bytes", "inflight_bytes"), ("rwnd_bytes", "snd_wnd_bytes"),
                   ("cwnd_bytes", "cwnd_bytes")):  # fmt: skip
        assert got[k].tolist() == [float(r[key]) for r in log.records]
    # FreeBSD's initial ssthresh, TCP_MAXWIN << TCP_MAX_WINSHIFT: infinite, NaN
    want = [math.nan if r["ssthresh_bytes"] == 1073725440 else r["ssthresh_bytes"]
            for r in log.records]  # fmt: skip
    np.testing.assert_array_equal(got["ssthresh_bytes"], np.array(want, dtype=float))
    assert any(math.isnan(x) for x in want)


def test_a_series_written_before_these_columns_reads_with_them_empty() -> None:
    """tests/captures/timeseries-local-2cubic was written before the state columns and
    before the sender's writes had their own: the figures' reader gives the state
    columns, NaN, moves the iperf3 rows' throughput_bps (what the application wrote) to
    app_written_bps (upgrade.timeseries), and leaves every other cell as it was."""
    path = CAPTURES / "timeseries-local-2cubic" / "timeseries.parquet"
    old = pd.read_parquet(path)
    added = [*timeseries.STATE_COLUMNS, timeseries.WRITTEN_COLUMN]
    assert not set(added) & set(old.columns)
    got = thinned.load(path)
    assert sorted(got.columns) == sorted(timeseries.COLUMNS)
    written = (old["source"] == timeseries.WRITTEN).to_numpy()
    assert written.sum() == 120 and old.loc[written, "throughput_bps"].notna().all()
    np.testing.assert_array_equal(got.loc[written, timeseries.WRITTEN_COLUMN],
                                  old.loc[written, "throughput_bps"])  # fmt: skip
    assert got.loc[~written, timeseries.WRITTEN_COLUMN].isna().all()
    # ss's delivery rate (the wire's) stays in throughput_bps; the writes leave it
    moved = old.assign(throughput_bps=old["throughput_bps"].mask(written))
    pd.testing.assert_frame_equal(got[old.columns], moved)
    assert got.loc[old["source"] == "ss", "throughput_bps"].notna().any()
    assert got[timeseries.STATE_COLUMNS].isna().all().all()
    assert (got[added].dtypes == "float64").all()
    # read again, it is as it was: the step runs once
    pd.testing.assert_frame_equal(upgrade.timeseries(got), got)


def test_the_upgrade_step_names_the_current_layouts_columns() -> None:
    """upgrade stays standard library only: its names are timeseries' own."""
    assert upgrade.WRITTEN_COLUMN == timeseries.WRITTEN_COLUMN == timeseries.COLUMNS[-1]
    assert upgrade.WRITTEN_SOURCE == timeseries.WRITTEN
