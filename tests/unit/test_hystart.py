"""tests/hystart.py's check on real captures (tests/captures/zoom/, README there):
one run where HyStart ended slow start before the first Recovery, one where the loss
did."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from tests.hystart import hystart_set

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "zoom"


def test_a_hystart_capture_sets_ssthresh_before_any_reduction() -> None:
    """hystart_set on a real run where HyStart ended slow start 1.9 s before the first
    Recovery (tests/captures/zoom/cubic-hystart), and on one where the loss did."""
    for name, want in (("cubic-hystart", 0.511583), ("cubic-traced", math.inf)):
        ts = pd.read_parquet(CAPTURES / name / "timeseries.parquet")
        ca = ts[(ts["source"] == "ca_state") & (ts["flow"] == 1)]
        first = ca.loc[ca["ca_state"] >= 2, "t_s"].min()
        tp = ts[(ts["source"] == "tcp_probe") & (ts["flow"] == 1)]
        assert hystart_set(tp, first) == pytest.approx(want)
