"""Loading what the report shows: the aggregated tables, per-run time series and the
conditions of each scenario (from the matrix, i.e. what was asked for)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench.report.fmt import fmt


@dataclass(frozen=True)
class Tables:
    runs: pd.DataFrame
    flows: pd.DataFrame
    summary: pd.DataFrame


def read_table(tables_dir: Path, name: str) -> pd.DataFrame:
    # Parquet keeps dtypes (bools, empty strings); CSV is the fallback.
    pq = tables_dir / f"{name}.parquet"
    df = pd.read_parquet(pq) if pq.exists() else pd.read_csv(tables_dir / f"{name}.csv")
    if "valid" in df.columns:
        df["valid"] = df["valid"].astype(bool)
    if "reasons" in df.columns:
        df["reasons"] = df["reasons"].fillna("").astype(str)
    return df


def load_tables(tables_dir: Path) -> Tables:
    return Tables(*(read_table(tables_dir, n) for n in ("runs", "flows", "summary")))


def scenario_names(matrix: dict[str, Any], runs: pd.DataFrame) -> list[str]:
    names = list(matrix.get("scenarios", {}))
    return names + [s for s in runs["scenario"].drop_duplicates() if s not in names]


def variant_labels(matrix: dict[str, Any]) -> list[str]:
    return [v["label"] for v in matrix.get("variants", [])]


@dataclass(frozen=True)
class Conditions:
    """The asked-for conditions of a scenario, from the first of its runs' specs."""

    scenario: str
    description: str
    rate_mbit: float
    rtt_ms: float
    queue_kind: str
    queue_limit_pkts: int | None
    mtu: int
    loss_mode: str
    loss_rate: float
    flows: tuple[dict[str, Any], ...]
    testbed_id: str
    traffic_s: float

    @property
    def n_flows(self) -> int:
        return len(self.flows)

    @property
    def bdp_bytes(self) -> float:
        return self.rate_mbit * 1e6 * self.rtt_ms / 1e3 / 8

    @property
    def full_queue_ms(self) -> float:
        """Queueing delay of a full tail-drop packet queue; NaN where not defined."""
        if self.queue_kind != "pfifo" or not self.queue_limit_pkts:
            return math.nan
        return self.queue_limit_pkts * self.mtu * 8 / (self.rate_mbit * 1e6) * 1e3

    @property
    def queue_bytes(self) -> float:
        if self.queue_kind != "pfifo" or not self.queue_limit_pkts:
            return math.nan
        return float(self.queue_limit_pkts * self.mtu)

    def queue_text(self) -> str:
        if not self.queue_limit_pkts:
            return self.queue_kind
        bdp = self.queue_limit_pkts * self.mtu / self.bdp_bytes
        return f"{self.queue_kind} {self.queue_limit_pkts} pkts ({fmt(bdp, 2)} BDP)"

    def loss_text(self) -> str:
        return (
            "none" if self.loss_mode == "none" else f"{self.loss_mode} {fmt(self.loss_rate, None)}"
        )

    def flows_text(self) -> str:
        durs = sorted({float(f.get("duration_s", 0)) for f in self.flows})
        starts = [float(f.get("start_s", 0)) for f in self.flows]
        s = f"{self.n_flows} × {'/'.join(fmt(d, None) for d in durs)} s"
        if any(starts):
            s += f", starts {'/'.join(fmt(x, None) for x in starts)} s"
        return s


def conditions(matrix: dict[str, Any], scenario: str) -> Conditions | None:
    for r in matrix.get("runs", {}).values():
        if r.get("scenario") != scenario:
            continue
        spec = r.get("spec", {}).get("run", {})
        t = spec.get("topology", {})
        return Conditions(
            scenario=scenario,
            description=matrix.get("scenarios", {}).get(scenario, {}).get("description", ""),
            rate_mbit=float(t.get("rate_mbit", math.nan)),
            rtt_ms=float(t.get("rtt_ms", math.nan)),
            queue_kind=str(t.get("queue_kind", "")),
            queue_limit_pkts=t.get("queue_limit_pkts"),
            mtu=int(t.get("mtu", 1500)),
            loss_mode=str(t.get("loss_mode", "none")),
            loss_rate=float(t.get("loss_rate", 0.0)),
            flows=tuple(spec.get("flows", [])),
            testbed_id=str(r.get("testbed_id", "")),
            traffic_s=float(r.get("traffic_s", math.nan)),
        )
    return None


def representative(valid_runs: pd.DataFrame) -> str | None:
    """The valid repetition closest to the median throughput sum (ties: the lower
    repetition), so the time series shown is a typical run, not the best one."""
    g = valid_runs.dropna(subset=["throughput_sum_mbps"])
    if g.empty:
        return None
    med = g["throughput_sum_mbps"].median()
    g = g.assign(_d=(g["throughput_sum_mbps"] - med).abs()).sort_values(["_d", "repetition"])
    return str(g.iloc[0]["run_id"])


def load_timeseries(runs_dir: Path, run_id: str) -> pd.DataFrame | None:
    p = runs_dir / run_id / "timeseries.parquet"
    return pd.read_parquet(p) if p.exists() else None


def group(df: pd.DataFrame, scenario: str, variant: str | None = None) -> pd.DataFrame:
    m = df["scenario"] == scenario
    if variant is not None:
        m &= df["variant"] == variant
    return df[m]
