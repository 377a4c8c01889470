"""bench/streams.py (the seed-scale benchmark's raw streams) against ccbench's own parsers:
each stream parses, at the rate and sampling interval asked, and a run directory made
of them (bench/seed_scale.py's) parses into a valid run whose time series has every
source. If a parser's format changes, this fails before the benchmark measures nonsense.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from bench import seed_scale
from bench.streams import data_pps
from ccbench.parse.fping import parse_fping
from ccbench.parse.iperf3 import parse_iperf3
from ccbench.parse.qdisc import parse_qdisc_samples
from ccbench.parse.siftr_stream import parse_siftr
from ccbench.parse.ss import parse_ss_samples
from ccbench.summarize.judge import parse_run_dir

D = 3.0


@pytest.fixture(scope="module")
def streams(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("streams")
    seed_scale.write_streams(d, D, 4)
    return d


def test_siftr_is_a_1_3_log_at_the_rate_and_ppl_asked(streams: Path) -> None:
    log = parse_siftr((streams / "siftr-s1.log").read_text())
    assert log.version == "1.3.0" and log.complete
    data = [r for r in log.records if r["local"] == "198.18.1.2:43638"]
    # 2 flows share 1 Gbit/s: per sender data out and one ACK in per two, every 4th logged
    assert len(data) == pytest.approx(1.5 * data_pps(1000, 2) * D / 4, rel=0.001)
    assert {f.local for f in log.flows} == {"198.18.1.2:43637", "198.18.1.2:43638"}
    times = [r["t_s"] for r in data]
    assert times == sorted(times)


def test_the_samplers_probe_and_iperf3_parse_at_their_intervals(streams: Path) -> None:
    ss = parse_ss_samples((streams / "ss-s1.txt").read_text())
    assert len({r["t_s"] for r in ss}) == D * 10 + 1  # every 0.1 s
    q = parse_qdisc_samples((streams / "qdisc-rt1.txt").read_text())
    assert len(q) == (D + 1) * 20 + 1  # every 50 ms, from before the traffic to after it
    ip = parse_iperf3(json.loads((streams / "iperf3-2.json").read_text()))
    assert len(ip.intervals) == D and ip.streams[0].local == "198.18.1.6:43640"
    fp = parse_fping((streams / "probe-fping.txt").read_text())
    assert fp.sent == D * 10 + 1 and fp.received == fp.sent


def test_the_benchmarks_run_directory_parses_valid_with_every_source(
    streams: Path, tmp_path: Path
) -> None:
    names = [n for files in seed_scale.STREAMS.values() for n, _, _ in files]
    root = seed_scale.run_dir(tmp_path / "run", streams, names, D, 4)
    s = parse_run_dir(root)
    assert s.valid, s.reasons
    sources = set(pd.read_parquet(root / "timeseries.parquet")["source"])
    assert sources == {"iperf3", "ss", "siftr", "qdisc"}
