"""The series a CC developer reads (docs/series.md), on one real traced run: CUBIC and BBR
through a 48-packet queue at 100 Mbit/s x 40 ms, every ACK traced (tcp_probe), ss every
0.1 s. Bytes in flight stay within cwnd and the peer's window, the congestion-state rows
enter Recovery and Loss exactly as often as the run's counts say, BBR's model is on its
ss rows with phases named from its gains, and CUBIC's ssthresh appears with its first
recovery or, where HyStart ended slow start, set to the cwnd then."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.hystart import MSS, hystart_set
from tests.integration.shared_runs import SharedRun, traced_recoveries
from tests.unit.test_series_columns import BBR_GAINS

pytestmark = pytest.mark.netns

OPEN, RECOVERY, LOSS = 0.0, 3.0, 4.0  # enum tcp_ca_state


def _state_at(rows: pd.DataFrame, ca: pd.DataFrame) -> np.ndarray:
    """Each row's congestion state: the last change before it (tcp_probe fires as an
    ACK arrives, before the ACK can change the state)."""
    got = pd.merge_asof(rows[["t_s"]].reset_index(), ca[["t_s", "ca_state"]], on="t_s",
                        allow_exact_matches=False)  # fmt: skip
    return got.set_index("index").loc[rows.index, "ca_state"].to_numpy()


def _cwnd_lately(rows: pd.DataFrame) -> np.ndarray:
    """The largest cwnd of the flow's last srtt (its largest: at most ~53 ms here) up to
    each row: what the data still in flight was sent under."""
    window = pd.Timedelta(microseconds=float(rows["rtt_us"].max()))
    s = pd.Series(rows["cwnd_bytes"].to_numpy(), index=pd.to_timedelta(rows["t_s"], unit="s"))
    return s.rolling(window).max().to_numpy()


def test_the_per_ack_series_of_a_traced_run(traced_q48_run: SharedRun) -> None:
    s, out = traced_q48_run.summary, traced_q48_run.out
    ts = pd.read_parquet(out / "timeseries.parquet")
    events = {f["flow"]: f for f in s["tcp_events"]["flows"]}
    assert s["tcp_events"]["lost_events"] == 0 and s["tcp_events"]["acks_thinned"] is None
    for k in (1, 2):
        ca = ts[(ts["source"] == "ca_state") & (ts["flow"] == k)].sort_values("t_s")
        tp = ts[(ts["source"] == "tcp_probe") & (ts["flow"] == k)].sort_values("t_s")
        assert len(tp) > 1000 and tp[["inflight_bytes", "rwnd_bytes"]].notna().all().all()

        # Entries into Recovery and Loss (each RTO expiry one) are the run's counts.
        assert (ca["ca_state"] == RECOVERY).sum() == events[k]["recoveries"] > 0
        assert (ca["ca_state"] == LOSS).sum() == events[k]["rtos"]
        # ... and its sender's own counters agree (nstat in s_k's namespace), counting
        c = s["retransmit_causes"][f"s{k}"]
        # ... with its other sockets' (traced_recoveries: iperf3's control connection)
        assert traced_recoveries(traced_q48_run, k) == c["recovery_episodes"], c

        # In flight <= cwnd, with a slack: only while Open (in Disorder, Recovery and
        # Loss snd_nxt - snd_una also counts SACKed and lost segments, which cwnd does
        # not bound: tcp_packets_in_flight), and against the largest cwnd of the last
        # srtt (BBR's ProbeRTT cuts cwnd to 4 packets while a BDP is still out; a
        # reduction drains over about an RTT), plus one MSS.
        open_ = _state_at(tp, ca) == OPEN
        assert open_.sum() > len(tp) // 3
        lately = _cwnd_lately(tp)
        assert (tp["inflight_bytes"].to_numpy()[open_] <= lately[open_] + MSS).all()
        # never beyond the peer's advertised window
        assert (tp["inflight_bytes"] <= tp["rwnd_bytes"]).all()

    # CUBIC (flow 1): ssthresh is infinite (NaN) until its first reduction, then set;
    # or HyStart set it earlier (seen in a CI run when the host stalled in slow start).
    ca1 = ts[(ts["source"] == "ca_state") & (ts["flow"] == 1)]
    first = ca1.loc[ca1["ca_state"] >= 2, "t_s"].min()  # CWR, Recovery or Loss
    tp1 = ts[(ts["source"] == "tcp_probe") & (ts["flow"] == 1)]
    set_at = min(first, hystart_set(tp1, first))
    after = tp1.loc[tp1["t_s"] > first, "ssthresh_bytes"]
    assert after.notna().mean() > 0.99 and after.min() >= 2 * MSS
    ss1 = ts[(ts["source"] == "ss") & (ts["flow"] == 1)]
    assert ss1.loc[ss1["t_s"] > first + 0.2, "ssthresh_bytes"].notna().all()
    # ss samples are stamped when ss returned (parse.ss: TE), after it read the socket:
    # none shows the ssthresh before the trace saw it set (stamped when the loop started
    # ss, one showed it up to 40 ms early). 5 ms: the trace's and the sampler's clocks.
    assert ss1.loc[ss1["t_s"] < set_at - 0.005, "ssthresh_bytes"].isna().all()
    assert ss1["bbr_bw_bps"].isna().all()

    # BBR (flow 2): its model on every ss row; the gains this kernel prints are
    # bbr_update_gains' pairs (docs/series.md), STARTUP's first, PROBE_BW's among them.
    ss2 = ts[(ts["source"] == "ss") & (ts["flow"] == 2)]
    model = ["bbr_bw_bps", "bbr_min_rtt_us", "bbr_pacing_gain", "bbr_cwnd_gain"]
    assert len(ss2) > 50 and ss2[model].notna().all().all()
    named = ss2[ss2["bbr_bw_bps"] > 0]
    pairs = list(zip(named["bbr_pacing_gain"], named["bbr_cwnd_gain"], strict=True))
    assert set(pairs) <= set(BBR_GAINS) and BBR_GAINS[pairs[0]] == "startup"
    assert "probe_bw" in {BBR_GAINS[p] for p in pairs}
    # BBR's min-RTT estimate and the kernel's minimum: the path's 40 ms, not below
    assert ss2["bbr_min_rtt_us"].min() > 39_000 and 39_000 < ss2["min_rtt_us"].min() < 41_000
