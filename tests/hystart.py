"""What a traced CUBIC flow's ssthresh says about HyStart (tcp_cubic.c), checked on the
real capture of a run where HyStart ended slow start (tests/unit/test_hystart.py) and on
every traced run of the integration tests (test_series_per_ack)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

MSS = 1448


def hystart_set(tp: pd.DataFrame, first: float) -> float:
    """When the trace first shows a CUBIC flow's ssthresh before its first reduction
    (`first`), checking what it shows: only HyStart sets one then (tcp_cubic.c
    hystart_update: snd_ssthresh = the cwnd, the flow stays Open), and from then on
    tcp_probe prints tcp_current_ssthresh (include/net/tcp.h), in Open max(snd_ssthresh,
    3/4 cwnd). inf: never set before `first` (slow start ended by the loss)."""
    pre = tp[tp["t_s"] < first].sort_values("t_s")
    set_ = pre["ssthresh_bytes"].notna().to_numpy()
    if not set_.any():
        return math.inf
    i = int(set_.argmax())
    assert i > 0 and set_[i:].all()
    hystart = pre["ssthresh_bytes"].iloc[i]
    assert hystart == pre["cwnd_bytes"].iloc[i - 1]  # the cwnd as the ACK before arrived
    cwnd = (pre["cwnd_bytes"].to_numpy()[i:] // MSS).astype(int)
    want = np.maximum(hystart, ((cwnd >> 1) + (cwnd >> 2)) * MSS)
    assert (pre["ssthresh_bytes"].to_numpy()[i:] == want).all()
    return float(pre["t_s"].iloc[i])
