"""Each flow's result from its iperf3 JSON, and the run's throughput and fairness
(summary.json `flows`, `throughput_sum_bps`, `jain`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ccbench import layout, metrics
from ccbench.layout import RawDir
from ccbench.parse import split_hostport
from ccbench.parse.iperf3 import Iperf3Result, read_report
from ccbench.reasons import Reason
from ccbench.spec import Flow, RunSpec


@dataclass(frozen=True)
class Flows:
    """Each flow's summary record and iperf3 result (None: no usable output), whether
    its iperf3 JSON was readable (False: the file's own problem says what is wrong), the
    problems of its server's report, and the run's throughput sum and Jain's index."""

    records: list[dict[str, Any]]
    results: list[Iperf3Result | None]
    readable: list[bool]
    server_problems: list[Reason]
    throughput_sum_bps: float | None
    jain: float | None


def flows_of(rd: RawDir, spec: RunSpec, reads: list[tuple[Iperf3Result | None, bool]]) -> Flows:
    """What the flows' iperf3 reports say: each client's (`reads`: read_report of each
    iperf3-K.json), then each server's (read here: only for a client that reported)."""
    results = [res for res, _ in reads]
    pairs = zip(spec.flows, results, strict=True)
    records = [_flow_record(k, f, res) for k, (f, res) in enumerate(pairs, start=1)]
    total, jain = throughput_sum(spec, records), jain_of(records)
    readable = [not unreadable for _, unreadable in reads]
    return Flows(records, results, readable, _server_problems(rd, spec, results), total, jain)


def _server_problems(rd: RawDir, spec: RunSpec, results: list[Iperf3Result | None]) -> list[Reason]:
    """Each flow's delivered intervals (raw/server-K.json, its iperf3 server's `-J`
    report): the throughput over time, Jain's index over time and convergence_s are
    drawn from them (timeseries.DELIVERED). A run whose servers wrote JSON must have a
    readable report with intervals for every flow whose client reported: without one,
    that flow's line would be the sender's writes or missing, without a word. Runs made
    before servers wrote JSON (server-K.txt) have none: nothing to check. A flow whose
    client gave nothing has its own reason (validity.check_flow)."""
    names = [layout.server(k) for k in range(1, len(spec.flows) + 1)]
    if not any(rd.exists(n) for n in names):
        return []
    reasons = []
    for k, (name, res) in enumerate(zip(names, results, strict=True), start=1):
        if res is None or res.error:
            continue
        lacks = f"flow {k}'s delivered throughput per interval is not known"
        if not rd.exists(name):
            reasons.append(layout.file_problem(name, f"missing ({lacks})"))
            continue
        got, unreadable = read_report(rd, name)
        if unreadable:
            continue  # rd.problems names the file and what is wrong with it
        if got is None:
            reasons.append(layout.file_problem(name, f"empty ({lacks})"))
        elif got.error:
            reasons.append(layout.file_problem(name, f"iperf3 server error: {got.error} ({lacks})"))
        elif not got.intervals:
            reasons.append(layout.file_problem(name, f"no intervals ({lacks})"))
    return reasons


def _flow_record(k: int, f: Flow, res: Iperf3Result | None) -> dict[str, Any]:
    return {
        "flow": k,
        "pair": f.pair,
        "cc_requested": f.cc,
        "cc_used": res.cc_sender if res else None,
        "start_s": f.start_s,
        "duration_s": f.duration_s,
        "streams": f.streams,
        "server_port": _server_port(res),
        "throughput_bps": res.throughput_bps if res and not res.error else None,
        "sender_throughput_bps": res.sender_bps if res else None,
        "bytes_received": res.bytes_received if res else None,
        "retransmits": res.retransmits if res else None,
        "srtt_min_us": res.min_rtt_us if res else None,
        "srtt_mean_us": res.mean_rtt_us if res else None,
        "srtt_max_us": res.max_rtt_us if res else None,
        "min_rtt_us": None,  # the kernel's: from the time series (summarize.min_rtt)
        "min_rtt_source": None,
        "rwnd_limited_share": None,  # from the time series (summarize.window)
        "rwnd_source": None,
        "max_cwnd_bytes": res.max_snd_cwnd_bytes if res else None,
        "raw": layout.iperf3(k),
    }


def _server_port(res: Iperf3Result | None) -> int | None:
    """The port the client connected to (start.connected[].remote_port, as "host:port"
    in each stream's `peer`); None when iperf3 wrote none, or its streams disagree."""
    ports = {split_hostport(s.peer)[1] for s in (res.streams if res else []) if s.peer}
    return int(ports.pop()) if len(ports) == 1 and next(iter(ports)).isdigit() else None


def throughput_sum(spec: RunSpec, flows: list[dict[str, Any]]) -> float | None:
    """The flows' aggregate rate; None unless every flow has its throughput."""
    if not all(f["throughput_bps"] is not None for f in flows):
        return None
    # Aggregate rate = all bytes delivered over the whole traffic window, so staggered
    # flows are not double-counted (summing their mean rates would be).
    return sum(f["bytes_received"] or 0 for f in flows) * 8 / spec.window_s


def jain_of(flows: list[dict[str, Any]]) -> float | None:
    """Jain's index of the flows' throughputs; None unless every flow has one (>= 0)."""
    tputs: list[float | None] = [f["throughput_bps"] for f in flows]
    ok = [t for t in tputs if t is not None]
    complete = all(t is not None for t in tputs)
    return metrics.jain(ok) if complete and min(ok) >= 0 else None
