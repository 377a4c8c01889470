"""The report's per-run table of retransmissions by cause: what each run's senders'
TCP counters name (summary.json retransmit_causes: nstat, netstat -s) and, where the
run traced every ACK, the recoveries and RTOs its flows went through (tcp_events)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ccbench.instruments.counters import TcpCounters
from ccbench.instruments.events import TcpEvents
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.report import data
from ccbench.report.fmt import fmt
from ccbench.run_record import RunRecord

# (header, unit, the counters' field summed over the run's senders)
COLUMNS = (
    ("retransmitted", "segments", "retransmitted_segments"),
    ("RTOs", "", "timeouts"),
    ("resent after RTO", "segments", "after_timeout_segments"),
    ("fast recoveries", "", "recovery_episodes"),
    ("fast-retransmitted", "segments", "fast_retransmit_segments"),
    ("tail-loss probes", "", "loss_probes"),
    ("spurious RTOs", "", "spurious_rtos"),
    ("D-SACKs", "", "dsacks_received"),
)


def _sum(rec: RunRecord, field: str) -> float:
    vals = [getattr(c, field) for c in (TcpCounters.part_of(rec) or {}).values()]
    return float("nan") if not vals or None in vals else float(sum(vals))


def traced_cell(ev: TcpEvents) -> str:
    """Each flow's recoveries/RTOs, then those of the other traced sockets that had any
    (iperf3's control connections: the counters count them too), by local address."""
    flows = ", ".join(f"{f.flow}: {f.recoveries}/{f.rtos}" for f in ev.flows) or "none"
    return flows + "".join(f"; {o.local}: {o.recoveries}/{o.rtos}"
                           for o in ev.others if o.recoveries or o.rtos)  # fmt: skip


def causes_table(
    runs: pd.DataFrame, runs_dir: Path, colours: dict[str, str]
) -> dict[str, Any] | None:
    """One row per run that read its senders' counters, in executed order; None when no
    run of the scenario did (runs made before ccbench read them)."""
    rows = []
    traced = False
    for _, r in runs.sort_values("order").iterrows():
        rec = data.run_summary(runs_dir, str(r["run_id"]))
        counters = TcpCounters.part_of(rec)
        if rec is None or not counters:
            continue
        cells = [str(r["order"]), str(r["run_id"]), str(r["variant"]), str(r["repetition"])]
        cells += [fmt(_sum(rec, f), 0) for _, _, f in COLUMNS]
        ev = TcpProbe.part_of(rec)
        traced |= ev is not None
        cells.append("" if ev is None else traced_cell(ev))
        causes = sorted({c for x in counters.values() for c in x.causes})
        cells.append(", ".join(causes) or "none")
        rows.append({"cells": cells, "valid": rec.valid,
                     "colour": colours.get(str(r["variant"]), "#999999")})  # fmt: skip
    if not rows:
        return None
    heads = [("#", ""), ("run id", ""), ("variant", ""), ("rep", "")]
    heads += [(h, u) for h, u, _ in COLUMNS]
    heads += [("traced: recoveries/RTOs per flow; other sockets" if traced else "traced", ""),
              ("causes", "")]  # fmt: skip
    return {"heads": heads, "rows": rows}
