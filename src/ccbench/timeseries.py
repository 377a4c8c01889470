"""Tidy time series of one run from its raw files (iperf3 intervals and ss samples).

Rows: run_id, flow, source ("iperf3" | "ss" | "siftr"), t_s (seconds since the run started),
throughput_bps, cwnd_bytes, rtt_us, retransmits. iperf3 gives per-interval averages
on every OS; ss (Linux senders) and siftr (FreeBSD senders) give finer cwnd/RTT samples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench.parse.iperf3 import parse_iperf3
from ccbench.parse.siftr import parse_siftr
from ccbench.parse.ss import parse_ss_samples
from ccbench.spec import RunSpec

COLUMNS = ["run_id", "flow", "source", "t_s", "throughput_bps", "cwnd_bytes", "rtt_us",
           "retransmits"]  # fmt: skip


def build(raw: Path) -> pd.DataFrame:
    spec = RunSpec.from_dict(json.loads((raw / "spec.json").read_text()))
    meta = json.loads((raw / "meta.json").read_text()) if (raw / "meta.json").exists() else {}
    if (raw / "skipped.json").exists():
        return pd.DataFrame(columns=COLUMNS)
    t0 = meta.get("started_unix")
    started = {m["flow"]: m["started_s"] for m in meta.get("flows", [])}
    rows: list[dict[str, Any]] = []
    local_to_flow: dict[str, int] = {}
    for k, f in enumerate(spec.flows, start=1):
        path = raw / f"iperf3-{k}.json"
        try:
            res = parse_iperf3(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        offset = started.get(k, f.start_s)
        for s in res.streams:
            if s.local:
                local_to_flow[s.local] = k
        # Several streams (-P): sum throughput per interval, average cwnd/RTT.
        by_t: dict[float, list[dict[str, Any]]] = {}
        for iv in res.intervals:
            if iv["t_end_s"] is not None:
                by_t.setdefault(iv["t_end_s"], []).append(iv)
        for t_end, ivs in sorted(by_t.items()):
            rows.append(
                {
                    "run_id": spec.run_id,
                    "flow": k,
                    "source": "iperf3",
                    "t_s": offset + t_end,
                    "throughput_bps": sum(i["throughput_bps"] or 0 for i in ivs),
                    "cwnd_bytes": _mean([i["cwnd_bytes"] for i in ivs]),
                    "rtt_us": _mean([i["rtt_us"] for i in ivs]),
                    "retransmits": sum(i["retransmits"] or 0 for i in ivs),
                }
            )
    if t0 is not None:
        for ss_file in sorted(raw.glob("ss-s*.txt")):
            for r in parse_ss_samples(ss_file.read_text()):
                flow = local_to_flow.get(r.get("local") or "")
                if flow is None:
                    continue  # iperf3's control connection, or another socket
                rows.append(
                    {
                        "run_id": spec.run_id,
                        "flow": flow,
                        "source": "ss",
                        "t_s": r["t_s"] - t0,
                        "throughput_bps": r.get("delivery_rate_bps"),
                        "cwnd_bytes": r.get("cwnd_bytes"),
                        "rtt_us": r.get("rtt_us"),
                        "retransmits": None,
                    }
                )
    for siftr_file in sorted(raw.glob("siftr-s*.log")):
        log = parse_siftr(siftr_file.read_text())
        for r in log.records:
            flow = local_to_flow.get(r.get("local") or "")
            if flow is None or r.get("direction") != "out" or t0 is None:
                continue
            rows.append(
                {
                    "run_id": spec.run_id,
                    "flow": flow,
                    "source": "siftr",
                    "t_s": log.enable_time_s + r["t_s"] - t0,
                    "throughput_bps": None,
                    "cwnd_bytes": r.get("cwnd_bytes"),
                    "rtt_us": r.get("srtt_us"),
                    "retransmits": None,
                }
            )
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"flow": "int64", "t_s": "float64", "throughput_bps": "float64",
                      "cwnd_bytes": "float64", "rtt_us": "float64"})  # fmt: skip


def _mean(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None
