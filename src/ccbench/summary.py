"""raw/ of one run -> summary.json: per-flow results, bottleneck, validity.

The schema is documented in README.md ("summary.json"). Every number here is computed
from a file in raw/, so `ccbench parse RUN_DIR` reproduces it exactly.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ccbench import metrics, validity
from ccbench.parse.iperf3 import Iperf3Result, parse_iperf3
from ccbench.parse.procstat import usage_between
from ccbench.parse.tc import parse_tc_qdisc_json
from ccbench.probe import read_probe
from ccbench.spec import RunSpec


def _clean(x: Any) -> Any:
    """NaN/inf -> None, so the file is strict JSON."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def write_json(path: Path, obj: Any) -> None:
    """Atomic write of strict JSON."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(obj), indent=2, allow_nan=False))
    tmp.replace(path)


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _bottleneck(raw: Path) -> dict[str, Any]:
    """Counters of the child queue (handle 10:) and the shaper, after minus before."""
    out: dict[str, Any] = {}
    try:
        before = parse_tc_qdisc_json((raw / "tc-before.json").read_text())
        after = parse_tc_qdisc_json((raw / "tc-after.json").read_text())
    except (OSError, ValueError):
        return {"drops": None}
    by_handle = {q.handle: q for q in before}
    for q in after:
        b = by_handle.get(q.handle)
        if b is None:
            continue
        name = {"10:": "queue", "1:": "shaper"}.get(q.handle, q.handle)
        out[name] = {
            "kind": q.kind,
            "sent_pkts": (q.sent_pkts or 0) - (b.sent_pkts or 0),
            "sent_bytes": (q.sent_bytes or 0) - (b.sent_bytes or 0),
            "dropped": (q.dropped or 0) - (b.dropped or 0),
            "overlimits": (q.overlimits or 0) - (b.overlimits or 0),
        }
    out["drops"] = out.get("queue", {}).get("dropped")
    return out


def _delay(raw: Path) -> dict[str, Any] | None:
    before, after = _load(raw / "delay-before.json"), _load(raw / "delay-after.json")
    if after is None:
        return None
    b = before or {}
    la, lb = after.get("lateness", {}), b.get("lateness", {})
    n = la.get("count", 0) - lb.get("count", 0)
    late = la.get("over_threshold", 0) - lb.get("over_threshold", 0)
    kq_a, kq_b = after.get("kernel_queue", {}), b.get("kernel_queue", {})
    cpu_a, cpu_b = after.get("cpu", {}), b.get("cpu", {})
    buckets = [
        x - y
        for x, y in zip(
            la.get("bucket_counts", []),
            lb.get("bucket_counts", [0] * len(la.get("bucket_counts", []))),
            strict=False,
        )
    ]
    return {
        "packets": n,
        "late_5ms": late,
        "late_share": late / n if n else None,
        "max_late_ms_since_start": la.get("max_ms"),
        "bucket_edges_ms": la.get("bucket_edges_ms"),
        "bucket_counts": buckets,
        "queue_full_drops": max(
            0, (kq_a.get("queue_full_drops") or 0) - (kq_b.get("queue_full_drops") or 0)
        ),
        # Packets the element never saw (netlink socket overflow) or chose to drop.
        "lost": max(0, (after.get("id_gaps") or 0) - (b.get("id_gaps") or 0))
        + max(0, (after.get("packets_dropped_late") or 0) - (b.get("packets_dropped_late") or 0)),
        "cpu_s": (cpu_a.get("user_s", 0) + cpu_a.get("system_s", 0))
        - (cpu_b.get("user_s", 0) + cpu_b.get("system_s", 0)),
        "clock_source": after.get("clock_source"),
    }


def _probe(raw: Path) -> dict[str, Any] | None:
    """RTT under load from the concurrent probe (ping, irtt or flent; ccbench.probe)."""
    try:
        p = read_probe(raw)
    except ValueError as e:
        return {"tool": "unreadable", "samples": 0, "error": str(e)}
    if p is None:
        return None
    rtts = sorted(p.rtts_us)
    rec: dict[str, Any] = {"tool": p.tool, "what": p.what, "samples": len(rtts),
                           "sent": p.sent, "received": p.received, "raw": p.raw}  # fmt: skip
    if p.series:
        rec["series"] = p.series
    if p.coverage is not None:
        rec["coverage"] = p.coverage
    if not rtts:
        return rec

    def pct(q: float) -> float:
        return rtts[min(len(rtts) - 1, int(q / 100 * len(rtts)))]

    rec.update(rtt_p50_us=pct(50), rtt_p95_us=pct(95), rtt_p99_us=pct(99), rtt_max_us=rtts[-1])
    return rec


def _router_cpu(raw: Path) -> dict[str, Any] | None:
    """CPU use at the bottleneck router over the traffic, from two /proc/stat reads."""
    before, after = raw / "cpu-before.txt", raw / "cpu-after.txt"
    if not (before.exists() and after.exists()):
        return None
    try:
        return usage_between(before.read_text(), after.read_text())
    except ValueError:
        return None


def summarize(raw: Path) -> dict[str, Any]:
    spec = RunSpec.from_dict(json.loads((raw / "spec.json").read_text()))
    skipped = _load(raw / "skipped.json")
    if skipped:
        return _skipped(spec, skipped["reason"])
    meta = _load(raw / "meta.json") or {}
    cal = _load(raw / "calibration.json") or {}
    rcs = meta.get("client_rc") or [None] * len(spec.flows)
    reasons: list[str] = []
    if (raw / "error.txt").exists():
        reasons.append(f"run failed: {(raw / 'error.txt').read_text().strip()}")
    flows: list[dict[str, Any]] = []
    results: list[Iperf3Result | None] = []
    for k, f in enumerate(spec.flows, start=1):
        doc = _load(raw / f"iperf3-{k}.json")
        res = parse_iperf3(doc) if isinstance(doc, dict) else None
        results.append(res)
        variant = spec.extra.get("variant") or {}
        stack_cc = variant.get("os") == "freebsd" and (
            f.cc == "bbr" or variant.get("stack") == "bbr"
        )
        reasons += validity.check_flow(k, spec, res, rcs[k - 1], stack_cc)
        flows.append(
            {
                "flow": k,
                "pair": f.pair,
                "cc_requested": f.cc,
                "cc_used": res.cc_sender if res else None,
                "start_s": f.start_s,
                "duration_s": f.duration_s,
                "streams": f.streams,
                "throughput_bps": res.throughput_bps if res and not res.error else None,
                "sender_throughput_bps": res.sender_bps if res else None,
                "bytes_received": res.bytes_received if res else None,
                "retransmits": res.retransmits if res else None,
                "rtt_min_us": res.min_rtt_us if res else None,
                "rtt_mean_us": res.mean_rtt_us if res else None,
                "rtt_max_us": res.max_rtt_us if res else None,
                "max_cwnd_bytes": res.max_snd_cwnd_bytes if res else None,
                "raw": f"iperf3-{k}.json",
            }
        )
    tputs: list[float | None] = [f["throughput_bps"] for f in flows]
    complete = all(t is not None for t in tputs)
    # Aggregate rate = all bytes delivered over the whole traffic window, so staggered
    # flows are not double-counted (summing their mean rates would be).
    window_s = spec.traffic_s - min(f.start_s for f in spec.flows)
    total = sum(f["bytes_received"] or 0 for f in flows) * 8 / window_s if complete else None
    delay = _delay(raw)
    setup = _load(raw / "sender-setup.json") or {}
    for node, rec in setup.items():
        reasons += [f"{node}: stack {rec['stack']}: {p}" for p in rec.get("problems", [])]
    reasons += validity.check_calibration(cal)
    reasons += validity.check_delay(delay, cal.get("delay_method"))
    bneck = _bottleneck(raw)
    probe = _probe(raw)
    if meta.get("probe_argv"):  # the run started a probe: it must have measured
        reasons += validity.check_probe(probe, spec.probe_tool)
    return {
        **_header(spec),
        "started_unix": meta.get("started_unix"),
        "flows": flows,
        "throughput_sum_bps": total,
        "utilization_pct": metrics.utilization_pct(total, spec.topology.rate_bps)
        if total is not None
        else None,
        "jain": metrics.jain([t for t in tputs if t is not None]) if complete else None,
        "bottleneck": bneck,
        "delay_element": delay,
        "probe": probe,
        "router_cpu": _router_cpu(raw),
        "calibration": {
            "delay_method": cal.get("delay_method"),
            "idle_rtt": cal.get("idle_rtt"),
            "rate_ratio": (cal.get("rate") or {}).get("ratio"),
        },
        "valid": not reasons,
        "reasons": reasons,
    }


def _header(spec: RunSpec) -> dict[str, Any]:
    return {
        "schema": "ccbench.summary/1",
        "run_id": spec.run_id,
        "scenario": spec.scenario,
        "variant": spec.variant,
        "repetition": spec.repetition,
        "spec": spec.to_dict(),
    }


def _skipped(spec: RunSpec, reason: str) -> dict[str, Any]:
    return {
        **_header(spec),
        "started_unix": None,
        "flows": [
            {
                "flow": k,
                "pair": f.pair,
                "cc_requested": f.cc,
                "cc_used": None,
                "start_s": f.start_s,
                "duration_s": f.duration_s,
                "streams": f.streams,
                "throughput_bps": None,
                "sender_throughput_bps": None,
                "bytes_received": None,
                "retransmits": None,
                "rtt_min_us": None,
                "rtt_mean_us": None,
                "rtt_max_us": None,
                "max_cwnd_bytes": None,
                "raw": None,
            }
            for k, f in enumerate(spec.flows, start=1)
        ],  # fmt: skip
        "throughput_sum_bps": None,
        "utilization_pct": None,
        "jain": None,
        "bottleneck": {"drops": None},
        "delay_element": None,
        "probe": None,
        "calibration": {},
        "valid": False,
        "skipped": True,
        "reasons": [f"skipped: {reason}"],
    }
