"""Calibration checks that work on any testbed: idle RTT per pair, the bottleneck
queue read back from the kernel, and the rate the shaper really lets through."""

from __future__ import annotations

import json
import statistics
import time
from typing import Any

from ccbench.parse.ping import parse_ping
from ccbench.testbed.base import Testbed

RTT_TOLERANCE_MS = 1.0
PROBE_PORT = 5999


def ping_argv(os_name: str, dst: str) -> list[str]:
    if os_name == "freebsd":
        return ["ping", "-n", "-c", "50", "-i", "0.02", "-W", "2000", dst]
    return ["ping", "-n", "-c", "50", "-i", "0.01", "-W", "2", dst]


def idle_rtt(tb: Testbed, problems: list[str]) -> dict[str, Any]:
    rtts: dict[str, Any] = {}
    for i in range(1, tb.topo.pairs + 1):
        for attempt in (1, 2):
            out = tb.ex(f"s{i}").run(
                ping_argv(tb.driver(f"s{i}").os, tb.address(f"r{i}")), check=False, timeout=30
            )
            p = parse_ping(out.stdout)
            if not p.received or not p.rtts_us:
                break
            # The median: one late reply on a busy 2-core machine must not fail `up`;
            # a second series only when the first is off (a transient burst of load).
            med_ms = statistics.median(p.rtts_us) / 1000
            if abs(med_ms - tb.topo.rtt_ms) <= RTT_TOLERANCE_MS:
                break
            if attempt == 1:
                time.sleep(0.5)
        if not p.received or not p.rtts_us:
            problems.append(f"pair {i}: no ping replies")
            continue
        rtts[f"pair{i}"] = {"median_ms": med_ms, "min_ms": min(p.rtts_us) / 1000,
                            "max_ms": max(p.rtts_us) / 1000, "series": attempt,
                            "sent": p.sent, "received": p.received}  # fmt: skip
        if abs(med_ms - tb.topo.rtt_ms) > RTT_TOLERANCE_MS:
            problems.append(
                f"pair {i}: idle RTT {med_ms:.2f} ms (median), configured {tb.topo.rtt_ms:g} ms"
            )
    return rtts


def readback_queue(tb: Testbed, problems: list[str]) -> dict[str, Any]:
    node, dev = tb.bottleneck
    raw = tb.ex(node).run(["tc", "-s", "-j", "qdisc", "show", "dev", dev]).stdout
    qdiscs = json.loads(raw)
    child = next((q for q in qdiscs if q.get("handle") == "10:"), None)
    shaper = next((q for q in qdiscs if q.get("root")), None)
    kind = tb.topo.queue_kind
    if child is None or child.get("kind") != kind:
        problems.append(f"bottleneck queue is not {kind}: {raw.strip()}")
    elif kind == "pfifo" and child.get("options", {}).get("limit") != tb.topo.queue_limit_pkts:
        problems.append(f"pfifo limit read back as {child['options'].get('limit')}")
    return {"node": node, "dev": dev, "shaper": shaper, "queue": child}


def measure_rate(tb: Testbed, problems: list[str]) -> dict[str, Any]:
    """Two seconds of UDP slightly above the rate: what the shaper lets through.

    Two, not one: the receiver's count misses what is still in flight at the end
    (half an RTT plus the queue), and one vCPU stall weighs half as much.
    """
    srv = tb.ex("r1").spawn(["iperf3", "-s", "-1", "-p", str(PROBE_PORT)])
    try:
        tb.wait_listening("r1", PROBE_PORT)
        payload = 1400
        cp = tb.ex("s1").run(
            ["iperf3", "-c", tb.address("r1"), "-p", str(PROBE_PORT), "-u", "-l", str(payload),
             "-b", f"{int(tb.topo.rate_bps * 1.1)}", "-t", "2", "-J"],
            check=False, timeout=30,
        )  # fmt: skip
    finally:
        srv.stop()
    try:
        got = float(json.loads(cp.stdout)["end"]["sum_received"]["bits_per_second"])
    except (ValueError, KeyError, TypeError):
        got = None
    frame = payload + 28 + 14
    expected = tb.topo.rate_bps * payload / frame
    res = {
        "udp_payload_bytes": payload,
        "measured_goodput_bps": got,
        "expected_goodput_bps": expected,
        "ratio": (got / expected) if got else None,
    }
    if got is None:
        problems.append("bottleneck rate probe failed (iperf3 UDP)")
    elif got > expected * 1.10:
        problems.append(f"shaper not effective: {got / 1e6:.1f} Mbit/s through a "
                        f"{tb.topo.rate_mbit:g} Mbit/s bottleneck")  # fmt: skip
    return res


def base_record(tb: Testbed, method: str) -> dict[str, Any]:
    return {
        "testbed": tb.id,
        "kind": tb.kind,
        "delay_method": method,
        "rtt_configured_ms": tb.topo.rtt_ms,
        "rate_configured_mbit": tb.topo.rate_mbit,
        "time": time.time(),
    }
