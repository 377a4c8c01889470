"""Real runs that tests in several modules assert on, each measured once per session
(the fixtures `cubic_bdp_run` and `traced_q48_run` in conftest.py).

A shared run's fidelity check is that of every test reading it: a try that fails any of
them is measured again (measure_fidelity), and each test then asserts what it is about
on the try that passed. 100 Mbit/s x 40 ms, 0.5 s intervals, as the default comparison.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from ccbench import timeseries, validity
from ccbench.layout import load_spec
from ccbench.parse import split_hostport
from ccbench.parse.iperf3 import parse_iperf3
from ccbench.spec import RunSpec
from tests.conftest import ccbench

INTERVAL_S = 0.5
STEADY_AFTER_S = 3.0  # slow start and its overshoot are over by then at 100 Mbit/s x 40 ms
# How far a drawn throughput series may be from the bottleneck's own count (cubic_bdp_check)
WIRE_OFF_MAX = 0.04  # mean relative deviation per interval
WIRE_CV_MARGIN = 0.02  # its CV above the wire's


@dataclass(frozen=True)
class SharedRun:
    """A measured run: its directory (raw/, summary.json, timeseries.parquet) and summary."""

    out: Path
    summary: dict[str, Any]


def drawn(out: Path, flow: int, ts: pd.DataFrame | None = None) -> pd.DataFrame:
    """The throughput rows the report draws for `flow` (tsplot: throughput_source), from
    the run's time series (`ts`, read from `out` when not given)."""
    ts = pd.read_parquet(out / "timeseries.parquet") if ts is None else ts
    src = timeseries.throughput_source(ts)
    assert src == timeseries.DELIVERED, "the receiver's intervals are missing"
    return _rows(ts, src, flow)


def _rows(ts: pd.DataFrame, source: str, flow: int) -> pd.DataFrame:
    return ts[(ts["source"] == source) & (ts["flow"] == flow)].sort_values("t_s")


def time_weighted_mean(rows: pd.DataFrame, start_s: float) -> float:
    t = rows["t_s"].to_numpy(float)
    dt = np.diff(np.concatenate([[start_s], t]))
    return float((rows["throughput_bps"].to_numpy(float) * dt).sum() / dt.sum())


def traced_recoveries(run: SharedRun, flow: int) -> int:
    """The recoveries the trace saw at `flow`'s sender: its data connection's and those
    of the other traced sockets at its address (iperf3's control connection: a results
    message lost in the full queue is a recovery the sender's counters count too)."""
    ev = run.summary["tcp_events"]
    [own] = [f["recoveries"] for f in ev["flows"] if f["flow"] == flow]
    res = parse_iperf3(json.loads((run.out / "raw" / f"iperf3-{flow}.json").read_text()))
    addrs = {split_hostport(s.local)[0] for s in res.streams if s.local}
    return own + sum(o["recoveries"] for o in ev["others"] if o["local"] in addrs)


def run_config(path: Path, tb_id: str, topology: dict[str, Any], run: dict[str, Any]) -> Path:
    cfg = {"testbed": {"id": tb_id}, "topology": topology,
           "run": {"interval_s": INTERVAL_S, **run}}  # fmt: skip
    path.write_text(yaml.safe_dump(cfg))
    return path


def measure_parsed(cfg: Path, out: Path, check: Callable[[Path, dict[str, Any]], None]) -> None:
    """One try: the run and its parse, as the workflow does them (`run --raw-only`, then
    `parse`: summary.json and the time series the report reads); valid, and `check`.
    One run a try, as run_measured."""
    shutil.rmtree(out, ignore_errors=True)
    ccbench("run", "--config", str(cfg), "--out", str(out), "--raw-only", "--attempts", "1")
    ccbench("parse", str(out))
    s = json.loads((out / "summary.json").read_text())
    assert s["valid"], s["reasons"]
    check(out, s)


# The shared testbeds' topologies (conftest: bdp_testbed, q48_testbed).
BDP = {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_bdp": 1}}
Q48 = {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "queue": {"limit_pkts": 48}}


# --- One CUBIC flow through a 1-BDP drop-tail queue, 15 s ---------------------------
# test_local_testbed (it fills the queue), test_series_wire (it is drawn as the wire
# carried it).
# 15 s: slow start (about 1 s here) must not dominate the mean, and 24 half-second
# intervals after it give the spread.
CUBIC_BDP = {"duration_s": 15, "flows": [{"cc": "cubic"}]}


def wire_bps(ts: pd.DataFrame, mss_bytes: int, ends_s: np.ndarray, start_s: float) -> np.ndarray:
    """What the bottleneck sent in each interval (start_s or the previous end, to the
    next end), in bit/s: its qdisc's packet count (the queue sampler's rows, every 50 ms,
    interpolated at the edges) x the MSS. The wire's own count, independent of iperf3."""
    q = ts[ts["source"] == "qdisc"].sort_values("t_s")
    edges = np.concatenate([[start_s], ends_s])
    sent = np.interp(edges, q["t_s"].to_numpy(float), q["sent_pkts"].to_numpy(float))
    return np.diff(sent) * mss_bytes * 8 / np.diff(edges)


def off_the_wire(ts: pd.DataFrame, source: str, spec: RunSpec) -> tuple[float, float, float]:
    """Flow 1's rows of `source` after slow start against the bottleneck's count: their
    mean relative deviation per interval, their CV and the wire's CV."""
    rows = _rows(ts, source, 1)
    start = spec.flows[0].start_s
    wire = wire_bps(ts, spec.topology.mss_bytes, rows["t_s"].to_numpy(float), start)
    late = (rows["t_s"] > STEADY_AFTER_S).to_numpy()
    got = rows[timeseries.throughput_column(source)].to_numpy(float)[late]
    want = wire[late]
    cv_got, cv_want = (float(x.std(ddof=1) / x.mean()) for x in (got, want))
    return float(np.abs(got / want - 1).mean()), cv_got, cv_want


def cubic_bdp_check(out: Path, s: dict[str, Any]) -> None:
    assert s["utilization_pct"] >= 90, s["utilization_pct"]
    # Drawn as the wire carried it: after slow start each drawn interval is within 4 %
    # of what the bottleneck sent in it (mean), and the drawn series varies no more than
    # the wire did (CV + 0.02). Measured: a quiet host 0.4 % and CV 0.004 (wire 0.005);
    # 9 % steal, which made the wire itself uneven, 2.6 % and CV 0.048 (wire 0.045). The
    # sender's writes, the series drawn before: 5-9 % and CV 0.09-0.11 on the same runs.
    ts = pd.read_parquet(out / "timeseries.parquet")
    rows = drawn(out, 1, ts)  # the receiver's rows: asserted to be what the report draws
    spec = RunSpec.from_dict(json.loads((out / "raw" / "spec.json").read_text()))
    off, cv, cv_wire = off_the_wire(ts, timeseries.DELIVERED, spec)
    assert off <= WIRE_OFF_MAX, f"drawn intervals {off:.1%} from the bottleneck's count"
    assert cv <= cv_wire + WIRE_CV_MARGIN, f"drawn throughput CV {cv:.3f}, wire {cv_wire:.3f}"
    f = s["flows"][0]
    mean = time_weighted_mean(rows, f["start_s"])
    assert abs(mean / f["throughput_bps"] - 1) <= 0.02, (mean, f["throughput_bps"])


# --- CUBIC and BBR through 48 packets, every ACK traced, 10 s -------------------------
# test_series_per_ack (the per-ACK series), test_instruments_local (tcp_probe and the
# counters), test_series_wire (each flow's drawn mean is its goodput), test_delay_direction
# (the default direction: RTT/2 each way).
TRACED_Q48 = {"duration_s": 10, "record": ["tcp_probe"],
              "flows": [{"cc": "cubic", "pair": 1}, {"cc": "bbr", "pair": 2}]}  # fmt: skip


def srtt_bounds_ms(raw: Path) -> tuple[float, float]:
    """A flow's mean smoothed RTT through the path of the run in `raw`: its configured
    RTT (less 0.5 ms), at most that plus a full drop-tail queue and the slack validity
    gives a mean RTT (Topology.rtt_bound_ms + validity.HIDDEN_QUEUE_MS: 40 + 5.8 + 5 ms
    through Q48)."""
    t = load_spec(raw).topology
    assert t.rtt_bound_ms is not None, "a drop-tail queue"
    return t.rtt_ms - 0.5, t.rtt_bound_ms + validity.HIDDEN_QUEUE_MS


def traced_q48_check(out: Path, s: dict[str, Any]) -> None:
    # A standing queue, a valid run (the base-RTT check reads the kernel's minimum),
    # each flow's drawn mean its goodput within 3 %, its smoothed RTT the path's and
    # at most the queue's (test_delay_direction: the default direction's RTT), the
    # queue sampled at its interval, 0.05 s (test_queue_sampling).
    q = s["queue"]
    assert q["sampled"] and q["interval_achieved_s"] == pytest.approx(0.05, rel=0.3), q
    low, high = srtt_bounds_ms(out / "raw")
    for f in s["flows"]:
        mean = time_weighted_mean(drawn(out, f["flow"]), f["start_s"])
        assert abs(mean / f["throughput_bps"] - 1) <= 0.03, (f["flow"], mean, f)
        assert abs(f["min_rtt_us"] / 1000 - 40) <= 1.0, f
        assert low <= f["srtt_mean_us"] / 1000 <= high, f
        assert f["rwnd_limited_share"] <= 0.05, f
