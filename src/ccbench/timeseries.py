"""Tidy time series of one run from its raw files (iperf3 intervals and ss samples).

Rows: run_id, flow, source ("iperf3" | "ss" | "siftr" | "qdisc"), t_s (seconds since the
run started), throughput_bps, cwnd_bytes, rtt_us, retransmits. iperf3 gives per-interval
averages on every OS; ss (Linux senders) and siftr (FreeBSD senders) give finer cwnd/RTT
samples. "qdisc" rows (flow 0: the bottleneck, not a flow) are rt1's queue sampled every
qdisc_interval_s: backlog_pkts, backlog_bytes, drops and sent_pkts (the child queue's,
cumulative since the first sample), overlimits (the shaper's, likewise); these columns
are empty on the other sources' rows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench import layout, metrics
from ccbench.layout import RawDir, load_spec
from ccbench.parse.iperf3 import Iperf3Result, parse_iperf3
from ccbench.parse.qdisc import parse_qdisc_samples, queue_points
from ccbench.parse.siftr_stream import parse_siftr
from ccbench.parse.ss import SsRecord, parse_ss_samples
from ccbench.spec import Flow, RunSpec

COLUMNS = ["run_id", "flow", "source", "t_s", "throughput_bps", "cwnd_bytes", "rtt_us",
           "retransmits", "backlog_pkts", "backlog_bytes", "drops", "sent_pkts",
           "overlimits"]  # fmt: skip
QUEUE_COLUMNS = COLUMNS[-5:]


# The sender's own cwnd/RTT samples, finest first: ss (Linux), siftr (FreeBSD); iperf3's
# per-interval TCP_INFO is the fallback every OS has.
SENDER_SOURCES = ("ss", "siftr")


def finest_source(ts: pd.DataFrame) -> str:
    """The finest source of cwnd/RTT samples these rows have: ss, siftr, else iperf3.
    The one choice behind the srtt statistics (summary.run_metrics), the cwnd/RTT
    plots (tsplot) and the figures' captions."""
    return next((s for s in SENDER_SOURCES if (ts["source"] == s).any()), "iperf3")


# The sampler runs from before the first flow to after the last: its samples must
# reach this share of the traffic, else the file was cut short.
SS_MIN_COVERAGE = 0.9


def build(raw: Path) -> pd.DataFrame:
    """The time series; rows from files that do not parse are left out (build_checked
    says which)."""
    return build_checked(raw, load_spec(raw))[0]


def build_checked(raw: Path, spec: RunSpec) -> tuple[pd.DataFrame, list[str]]:
    """The time series and one problem (naming the file) per sampler file (ss, siftr)
    that is not text, does not parse, or was cut short: its rows are left out, and
    the verdict (summarize.judge) makes the run invalid. iperf3 and meta.json problems
    are the summary's (they are its files too); here such a file just gives no rows.
    `spec` is the run's (layout.load_spec)."""
    if (raw / layout.SKIPPED).exists():
        return pd.DataFrame(columns=COLUMNS), []
    rd = RawDir(raw)
    meta = _meta(raw)
    t0 = _started_unix(meta)
    rows, local_to_flow = _iperf3_rows(raw, spec, _flow_starts(meta))
    rows += _ss_rows(rd, spec, t0, local_to_flow)
    rows += _siftr_rows(rd, spec.run_id, t0, local_to_flow)
    if t0 is not None:
        rows += _qdisc_rows(rd, meta, spec.run_id, t0)
    return _frame(rows), rd.problems


def _started_unix(meta: dict[str, Any]) -> float | None:
    """When the run started (meta.json), the time sampler rows are counted from."""
    t0 = meta.get("started_unix")
    return t0 if isinstance(t0, (int, float)) and not isinstance(t0, bool) else None


def _flow_starts(meta: dict[str, Any]) -> dict[Any, Any]:
    """Flow -> when it started (seconds into the run), as meta.json recorded it."""
    started: dict[Any, Any] = {}
    for m in meta.get("flows", []) if isinstance(meta.get("flows"), list) else []:
        if isinstance(m, dict) and isinstance(m.get("started_s"), (int, float)):
            started[m.get("flow")] = m["started_s"]
    return started


def _iperf3_rows(
    raw: Path, spec: RunSpec, started: dict[Any, Any]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Every flow's iperf3 interval rows, and each stream's local address -> its flow
    (how the samplers' sockets are told apart)."""
    rows: list[dict[str, Any]] = []
    local_to_flow: dict[str, int] = {}
    for k, f in enumerate(spec.flows, start=1):
        path = raw / f"iperf3-{k}.json"
        try:
            res = parse_iperf3(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
        for s in res.streams:
            if s.local:
                local_to_flow[s.local] = k
        rows += _iperf3_flow_rows(spec.run_id, k, started.get(k, f.start_s), res)
    return rows, local_to_flow


def _iperf3_flow_rows(
    run_id: str, k: int, offset: float, res: Iperf3Result
) -> list[dict[str, Any]]:
    # Several streams (-P): sum throughput per interval, average cwnd/RTT.
    by_t: dict[float, list[dict[str, Any]]] = {}
    for iv in res.intervals:
        if iv["t_end_s"] is not None:
            by_t.setdefault(iv["t_end_s"], []).append(iv)
    return [
        {
            "run_id": run_id,
            "flow": k,
            "source": "iperf3",
            "t_s": offset + t_end,
            "throughput_bps": sum(i["throughput_bps"] or 0 for i in ivs),
            "cwnd_bytes": _mean([i["cwnd_bytes"] for i in ivs]),
            "rtt_us": _mean([i["rtt_us"] for i in ivs]),
            "retransmits": sum(i["retransmits"] or 0 for i in ivs),
        }
        for t_end, ivs in sorted(by_t.items())
    ]


def _ss_rows(
    rd: RawDir, spec: RunSpec, t0: float | None, local_to_flow: dict[str, int]
) -> list[dict[str, Any]]:
    """The ss samplers' rows (Linux senders); every file is checked, even when the run's
    start time is unknown and it gives no rows."""
    rows: list[dict[str, Any]] = []
    for ss_file in sorted(rd.path.glob("ss-s*.txt")):
        samples = _ss_samples(rd, ss_file.name, t0, spec.traffic_s)
        if t0 is None:
            continue
        for r in samples:
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
    return rows


def _siftr_rows(
    rd: RawDir, run_id: str, t0: float | None, local_to_flow: dict[str, int]
) -> list[dict[str, Any]]:
    """The siftr logs' rows (FreeBSD senders: outgoing packets of the flows); every file
    is checked, even when the run's start time is unknown and it gives no rows."""
    rows: list[dict[str, Any]] = []
    for siftr_file in sorted(rd.path.glob("siftr-s*.log")):
        text = rd.text(siftr_file.name)
        if text is None:
            continue
        try:
            log = parse_siftr(text)
        except ValueError as e:
            rd.problem(siftr_file.name, str(e))
            continue
        for r in log.records:
            flow = local_to_flow.get(r.get("local") or "")
            if flow is None or r.get("direction") != "out" or t0 is None:
                continue
            rows.append(
                {
                    "run_id": run_id,
                    "flow": flow,
                    "source": "siftr",
                    "t_s": log.enable_time_s + r["t_s"] - t0,
                    "throughput_bps": None,
                    "cwnd_bytes": r.get("cwnd_bytes"),
                    "rtt_us": r.get("srtt_us"),
                    "retransmits": None,
                }
            )
    return rows


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The rows as the table, with the same column types however few rows there are."""
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"flow": "int64", "t_s": "float64", "throughput_bps": "float64",
                      "cwnd_bytes": "float64", "rtt_us": "float64",
                      **dict.fromkeys(QUEUE_COLUMNS, "float64")})  # fmt: skip


def _qdisc_rows(rd: Any, meta: dict[str, Any], run_id: str, t0: float) -> list[dict[str, Any]]:
    """The bottleneck queue's rows; the file's problems are the summary's (_queue)."""
    qs = meta.get("qdisc_sampler")
    if not isinstance(qs, dict):
        return []
    try:
        text = (rd.path / f"qdisc-{qs.get('node', 'rt1')}.txt").read_text()
        pts = queue_points(parse_qdisc_samples(text))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    if not pts:
        return []
    d0, s0 = pts[0].drops, pts[0].sent_pkts
    o0 = pts[0].overlimits
    return [
        {"run_id": run_id, "flow": 0, "source": "qdisc", "t_s": p.t_unix - t0,
         "throughput_bps": None, "cwnd_bytes": None, "rtt_us": None, "retransmits": None,
         "backlog_pkts": p.backlog_pkts, "backlog_bytes": p.backlog_bytes,
         "drops": p.drops - d0, "sent_pkts": p.sent_pkts - s0,
         "overlimits": None if p.overlimits is None or o0 is None else p.overlimits - o0}
        for p in pts
    ]  # fmt: skip


def _meta(raw: Path) -> dict[str, Any]:
    try:
        meta = json.loads((raw / "meta.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _ss_samples(rd: Any, name: str, t0: float | None, traffic_s: float) -> list[SsRecord]:
    """One sampler file's records; [] and a problem when it is not ss output, and a
    problem when its samples stop before SS_MIN_COVERAGE of the traffic (cut short)."""
    text = rd.text(name)
    if text is None:
        return []
    try:
        samples = parse_ss_samples(text)
    except ValueError as e:
        rd.problem(name, f"not ss samples ({e})")
        return []
    last = _last_ts(text)
    if last is None:
        rd.problem(name, "no samples")
        return []
    if t0 is not None and traffic_s > 0 and last - t0 < SS_MIN_COVERAGE * traffic_s:
        rd.problem(name, f"samples end {last - t0:.1f} s into {traffic_s:g} s of traffic "
                         "(cut short)")  # fmt: skip
    return samples


def _last_ts(text: str) -> float | None:
    """The last complete `TS` line's time (parse_ss_samples has checked them)."""
    complete = text[: text.rfind("\n") + 1]
    at = complete.rfind("\nTS ")
    if at < 0:
        return float(complete[3:].split("\n", 1)[0]) if complete.startswith("TS ") else None
    return float(complete[at + 4 :].split("\n", 1)[0])


def _mean(xs: list[Any]) -> float | None:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


def jain_series(
    ts: pd.DataFrame, flows: Sequence[Flow], interval_s: float
) -> tuple[list[float], list[float]]:
    """Jain's index per iperf3 interval, the one series behind convergence_s (summary)
    and the Jain-over-time figure: intervals after the last flow start until the first
    flow ends, binned to the interval grid (staggered flows to the nearest interval),
    times in seconds since the last flow started. ([], []) with fewer than 2 flows."""
    ts = ts[ts["source"] == "iperf3"]
    if ts.empty or len(flows) < 2 or not interval_s > 0:
        return [], []
    last_start = max(f.start_s for f in flows)
    end = min(f.start_s + f.duration_s for f in flows)
    ts = ts[(ts["t_s"] > last_start) & (ts["t_s"] <= end + 1e-6)]
    ts = ts.assign(bin=((ts["t_s"] - last_start) / interval_s).round().astype(int))
    wide = ts.pivot_table(index="bin", columns="flow", values="throughput_bps", aggfunc="mean")
    wide = wide.dropna()
    if wide.empty or wide.shape[1] < 2:
        return [], []
    jains = metrics.jain_over_time({str(c): wide[c].tolist() for c in wide.columns})
    return [float(b) * interval_s for b in wide.index], jains
