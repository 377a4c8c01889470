"""The RTT-excess check on a real 3 % random-loss run (tests/captures/run-local-3pct-loss):
its senders' windows stay far below the BDP, so a burst's last segment waits for the
receiver's delayed ACK and srtt samples exceed RTT + a full queue. Judged with the
delayed ACK's wait (metrics.RttBound) the run is valid; held to the plain bound, 13 % of
its samples would call it a host stall, as every such run here was before."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pandas as pd

from ccbench import metrics, validity
from ccbench.instruments import SENDER_SOURCES
from ccbench.layout import load_spec
from ccbench.reasons import host_stalled_only
from ccbench.summarize.judge import parse_run_dir

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "run-local-3pct-loss"


def test_a_lossy_runs_delayed_acks_are_not_a_host_stall(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(CAPTURE, run / "raw")
    s = parse_run_dir(run).to_dict()
    assert s["valid"], s["reasons"]
    ex = s["rtt_excess"]
    assert ex["above"] == 0 and ex["delayed_ack_max_ms"] == 40.0 and ex["samples"] > 200

    bound = validity.excess_bound(load_spec(run / "raw"))
    assert bound is not None and bound.bdp_bytes > 400_000
    ts = pd.read_parquet(run / "timeseries.parquet")
    snd = ts[ts["source"].isin(SENDER_SOURCES)].dropna(subset=["rtt_us"])
    assert snd["cwnd_bytes"].max() < bound.bdp_bytes / 20  # far below the BDP throughout
    timed = {f: list(zip(g["t_s"], g["rtt_us"], g["cwnd_bytes"], strict=True))
             for f, g in snd.groupby("flow")}  # fmt: skip
    assert metrics.rtt_excess(bound, timed)["above"] == 0
    # the same samples with no window known: the plain bound, and a "host stall"
    plain = {f: [(t, r, math.nan) for t, r, _ in xs] for f, xs in timed.items()}
    got = metrics.rtt_excess(bound, plain)
    assert got["share"] > 0.1 and got["max_excess_ms"] > 5
    assert host_stalled_only(validity.check_rtt_excess(got))
