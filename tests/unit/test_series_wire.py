"""The throughput series from the receiver's intervals, each flow's kernel minimum RTT,
the receive-window check, and version-2 summaries read forward: on real runs made here
(tests/captures/run-local-wire-*, see its README) and on hand-made rows."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ccbench import timeseries, upgrade
from ccbench.instruments import SENDER_SOURCES
from ccbench.parse.iperf3 import parse_iperf3
from ccbench.reasons import Code
from ccbench.spec import RunSpec
from ccbench.summarize.hosts import receiver_buffers
from ccbench.summarize.judge import judge
from ccbench.summarize.window import reasons as window_reasons
from ccbench.timeseries_stats import RWND_LIMITED_SHARE, SeriesStats
from tests.conftest import REPO
from tests.integration import shared_runs

CAPTURES = REPO / "tests" / "captures"
STEADY = CAPTURES / "run-local-wire-cubic-bdp"
SMALL = CAPTURES / "run-local-wire-small-rcvbuf"


@pytest.fixture
def steady(tmp_path: Path) -> Path:
    shutil.copytree(STEADY / "raw", tmp_path / "raw")
    return tmp_path / "raw"


def test_server_json_is_the_receivers_intervals() -> None:
    """server-1.json (iperf3 -s -1 -J -i 0.5): intervals of bytes read, no TCP_INFO; the
    intervals add up to the bytes the receiver got."""
    res = parse_iperf3(json.loads((STEADY / "raw" / "server-1.json").read_text()))
    assert res.intervals and all(iv["rtt_us"] is None for iv in res.intervals)
    assert sum(iv["bytes"] for iv in res.intervals) == res.bytes_received
    client = parse_iperf3(json.loads((STEADY / "raw" / "iperf3-1.json").read_text()))
    assert res.bytes_received == client.bytes_received


def test_drawn_throughput_is_delivered_and_steady(steady: Path) -> None:
    """The run's series has the receiver's rows; the report draws them (throughput_source),
    and they are steady where the sender's writes are not (measured: CV 0.004 vs 0.11)."""
    ts = timeseries.build(steady)
    assert timeseries.throughput_source(ts) == timeseries.DELIVERED
    rx = ts[ts["source"] == timeseries.DELIVERED]
    tx = ts[ts["source"] == timeseries.WRITTEN]
    assert rx["retransmits"].isna().all()  # the receiver counts none: not zeros
    late = rx[rx["t_s"] > 3]["throughput_bps"]
    sent = tx[tx["t_s"] > 3][timeseries.WRITTEN_COLUMN]
    assert tx["throughput_bps"].isna().all()  # the writes never in the wire's column
    assert late.std() / late.mean() < 0.03 < sent.std() / sent.mean()
    # the rows' bytes over their intervals are the server's whole count
    doc = json.loads((steady / "server-1.json").read_text())
    spans = [iv["sum"]["seconds"] for iv in doc["intervals"]]
    total = float((rx.sort_values("t_s")["throughput_bps"].to_numpy() * spans).sum() / 8)
    assert total == pytest.approx(doc["end"]["sum_received"]["bytes"], rel=1e-6)


def test_drawn_intervals_are_the_bottlenecks_count_and_the_writes_are_not(steady: Path) -> None:
    """The check the integration tests' shared CUBIC run passes (shared_runs.cubic_bdp_check),
    on this capture: the receiver's intervals are within 0.4 % (mean) of what the
    bottleneck's qdisc sent in each, and vary as the wire did; the sender's writes, the
    series drawn before, are 9 % off and vary 20 times as much."""
    ts = timeseries.build(steady)
    spec = RunSpec.from_dict(json.loads((steady / "spec.json").read_text()))
    off, cv, cv_wire = shared_runs.off_the_wire(ts, timeseries.DELIVERED, spec)
    assert off <= 0.005 and cv <= cv_wire <= 0.006
    off, cv, cv_wire = shared_runs.off_the_wire(ts, timeseries.WRITTEN, spec)
    assert off > 2 * shared_runs.WIRE_OFF_MAX and cv > cv_wire + 5 * shared_runs.WIRE_CV_MARGIN


def test_older_runs_fall_back_to_the_senders_writes_labelled(steady: Path) -> None:
    (steady / "server-1.json").unlink()
    ts = timeseries.build(steady)
    assert timeseries.throughput_source(ts) == timeseries.WRITTEN
    assert "wrote" in timeseries.throughput_label(timeseries.WRITTEN)


def test_jain_series_uses_the_delivered_rows() -> None:
    rows = []
    for src, a, b in (("iperf3", 90e6, 10e6), ("receiver", 50e6, 50e6)):
        col = timeseries.throughput_column(src)
        for t in (0.5, 1.0, 1.5):
            rows += [{"flow": 1, "source": src, "t_s": t, col: a},
                     {"flow": 2, "source": src, "t_s": t, col: b}]  # fmt: skip
    spec_flows = [_Flow(0.0, 2.0), _Flow(0.0, 2.0)]
    _, jains = timeseries.jain_series(pd.DataFrame(rows), spec_flows, 0.5)  # type: ignore[arg-type]
    assert jains == [1.0, 1.0, 1.0]
    # a run without the receiver's rows: the writes, from their own column
    writes = pd.DataFrame([r for r in rows if r["source"] == "iperf3"])
    _, jains = timeseries.jain_series(writes, spec_flows, 0.5)  # type: ignore[arg-type]
    assert jains == pytest.approx([100**2 / (2 * (90**2 + 10**2))] * 3)


class _Flow:
    def __init__(self, start_s: float, duration_s: float) -> None:
        self.start_s, self.duration_s = start_s, duration_s


def test_min_rtt_is_the_kernels_from_ss(steady: Path) -> None:
    """min_rtt_us is the smallest `minrtt:` ss printed for the data socket; iperf3's
    smallest srtt sits ~18 ms above it (a standing 1-BDP queue)."""
    rec, _ = judge(steady)
    f = rec.flows[0]
    with gzip.open(steady / "ss-s1.txt.gz", "rt") as fh:
        text = fh.read()
    port = json.loads((steady / "iperf3-1.json").read_text())["start"]["connected"][0]
    local = f"{port['local_host']}:{port['local_port']}"
    mins = [float(m) * 1000 for blk in text.split(local)[1:]
            for m in re.findall(r"minrtt:([\d.]+)", blk.split("\n", 2)[1])]  # fmt: skip
    assert f.min_rtt_us == pytest.approx(min(mins))
    assert f.min_rtt_source is not None and f.min_rtt_source.startswith("ss minrtt")
    assert f.srtt_min_us is not None and f.srtt_min_us - f.min_rtt_us > 10_000
    assert rec.valid, rec.reasons


def test_small_receive_buffer_is_a_reason() -> None:
    """A real run with r1's tcp_rmem cut to 64 KB: at the window in every ss sample."""
    rec, _ = judge(SMALL / "raw")
    f = rec.flows[0]
    assert f.rwnd_limited_share == 1.0 and f.rwnd_source == "ss"
    [why] = [r for r in rec.reasons if r.code == Code.RWND_LIMITED]
    assert why.evidence == {"flow": 1, "share": 1.0, "limit": RWND_LIMITED_SHARE,
                            "receiver": "r1"}  # fmt: skip
    assert "tcp_rmem = 4096 32768 65536" in why.text  # its buffer limits, from facts.json
    assert not rec.valid


def test_window_share_counts_the_finest_source() -> None:
    """Per flow, samples within 2 MSS of the window; the finest source that has both."""
    st = SeriesStats(SENDER_SOURCES, mss_bytes=1000)
    st.add(pd.DataFrame({
        "flow": [1, 1, 1, 1, 2, 2], "source": "ss", "t_s": np.arange(6.0),
        "rtt_us": 40e3, "inflight_bytes": [10e3, 9e3, 7e3, np.nan, 1e3, 64e3],
        "rwnd_bytes": [10e3, 10e3, 10e3, 10e3, 64e3, 64e3],
    }))  # fmt: skip
    assert st.window_limited() == {1: (2 / 3, 3, "ss"), 2: (0.5, 2, "ss")}
    st.add(pd.DataFrame({"flow": [1], "source": "tcp_probe", "t_s": [0.0], "rtt_us": [4e4],
                         "inflight_bytes": [0.0], "rwnd_bytes": [1e6]}))  # fmt: skip
    assert st.window_limited() == {1: (0.0, 1, "tcp_probe")}


def test_window_reason_needs_more_than_the_share(tmp_path: Path) -> None:
    from ccbench import layout
    from ccbench.layout import RawDir, load_spec

    rd = RawDir(SMALL / "raw")
    spec = load_spec(SMALL / "raw")
    at = {"flow": 1, "rwnd_limited_share": RWND_LIMITED_SHARE, "rwnd_source": "ss"}
    buffers = receiver_buffers(rd.json(layout.HOST_FACTS), spec)
    assert window_reasons(spec, [at], buffers) == []
    over = {**at, "rwnd_limited_share": RWND_LIMITED_SHARE + 0.01}
    assert len(window_reasons(spec, [over], buffers)) == 1


def test_min_rtt_from_siftr_on_freebsd() -> None:
    """FreeBSD exports no minimum RTT: the smallest srtt siftr logged, named as such."""
    st = SeriesStats(SENDER_SOURCES)
    st.add(pd.DataFrame({"flow": [1, 1, 2], "source": "siftr", "t_s": [0.0, 1.0, 2.0],
                         "rtt_us": [41e3, 40.5e3, 45e3]}))  # fmt: skip
    got = st.kernel_min_rtt(1)
    assert got is not None and got[1].startswith("siftr srtt")
    assert st.kernel_min_rtt(3) is None


def test_version_2_summary_names_its_rtt_fields_forward(tmp_path: Path) -> None:
    flow = {"flow": 1, "rtt_min_us": 41e3, "rtt_mean_us": 43e3, "rtt_max_us": 47e3}
    d = upgrade.summary({"schema": "ccbench.summary/2", "flows": [flow]}, tmp_path)
    f = d["flows"][0]
    assert d["schema"] == upgrade.SUMMARY_SCHEMA
    assert (f["srtt_min_us"], f["srtt_mean_us"], f["srtt_max_us"]) == (41e3, 43e3, 47e3)
    assert f["min_rtt_us"] is None and f["min_rtt_source"] is None
    assert not any(k.startswith("rtt_") for k in f)
