"""What every figure of a scenario reads and how a figure is saved: the scene (its runs'
tables and time series, conditions, variants in the matrix's order, colours, baseline,
the time series' shared axes), the writer of each PNG and its manifest entry, the
printed sizes and file names (report.figures draws them)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from ccbench.instruments.tcp_probe import TcpProbe  # noqa: E402
from ccbench.model import Matrix  # noqa: E402
from ccbench.report import data, style, tsplot  # noqa: E402

# Printed sizes (inches) on an A4 landscape page with 14 mm margins (10.5 in wide).
PAGE_W = 10.4
TS_H = 5.6
TS_PER_ROW = 3
PAIR_SIZE = (5.1, 3.45)
LOSS_SIZE = (7.4, 4.2)


def ts_size(n_variants: int) -> tuple[float, float]:
    per_row = max(1, min(TS_PER_ROW, n_variants))
    return (round(min(PAGE_W / per_row - 0.1, 5.6), 2), TS_H)


def slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", s).strip("_") or "x"


def invalid_note(runs: pd.DataFrame) -> str:
    bad = runs[data.is_invalid(runs)]
    n_skip = int(runs["skipped"].sum())
    skip = f" {n_skip} run(s) not run." if n_skip else ""
    if bad.empty:
        return "No invalid runs." + skip
    per = ", ".join(f"{v} {n}" for v, n in bad.groupby("variant", sort=False).size().items())
    return f"Not plotted: {len(bad)} invalid run(s) ({per}); see the invalid-runs table." + skip


class Writer:
    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.entries: list[dict[str, Any]] = []

    def save(self, fig: Figure, name: str, **entry: Any) -> None:
        fig.savefig(self.out_dir / name, dpi=style.DPI)
        w, h = fig.get_size_inches()
        plt.close(fig)
        self.entries.append({"file": name, **entry, "width_in": float(w), "height_in": float(h)})


@dataclass(frozen=True)
class Scene:
    """What every figure of one scenario reads: its runs' tables and time series, its
    conditions, the variants that ran (in the matrix's order), colours and baseline."""

    tables: data.Tables
    runs_dir: Path
    matrix: Matrix
    scen: str
    cond: data.Conditions
    variants: list[str]
    colours: dict[str, str]
    baseline: str
    limits: tsplot.Limits | None = None  # the time series' shared axes (_Job.limits)

    def runs(self, variant: str | None = None) -> pd.DataFrame:
        return data.group(self.tables.runs, self.scen, variant)

    def valid_series(self, variant: str) -> list[tsplot.RunSeries]:
        """The time series of the variant's valid runs (runs without one left out); with
        `tracing: separate`, of its traced runs."""
        traced = data.group(self.tables.traced, self.scen, variant)
        valid = traced if not traced.empty else self.runs(variant)
        out = []
        for _, r in valid[valid["valid"]].iterrows():
            ts = data.load_timeseries(self.runs_dir, str(r["run_id"]))
            if ts is not None:
                out.append(tsplot.RunSeries(str(r["run_id"]), int(r["repetition"]), ts,
                                            self.events(str(r["run_id"]))))  # fmt: skip
        return out

    def events(self, run_id: str) -> dict[int, dict[str, list[float]]]:
        """The run's congestion events (a per-ACK trace's: summary.json tcp_events),
        flow -> times; {}: none."""
        rec = data.run_summary(self.runs_dir, run_id)
        ev = TcpProbe.part_of(rec)
        if ev is None:
            return {}
        return {f.flow: {"rto_s": f.rto_s, "recovery_s": f.recovery_s}
                for f in ev.flows}  # fmt: skip

    def tag(self, variant: str) -> str:
        return " (baseline)" if variant == self.baseline else ""

    def colour(self, variant: str) -> str:
        return self.colours.get(variant, style.PALETTE[-1])
