"""Calibration checks that work on any testbed: idle RTT per pair, the bottleneck
queue read back from the kernel, and the rate the shaper really lets through.

Host jitter (a vCPU stalled by the hypervisor, a busy neighbour) only ever adds delay
to a ping, so the idle RTT is judged on a low percentile of each series
(RTT_PERCENTILE), with the median and spread recorded beside it. A check that jitter
can fail (idle RTT, rate probe) is tried again after a pause (`retry_pauses`); one that
jitter cannot fail (queue or offloads read back wrong) fails at once. Every try is
kept in the record (`tries`).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ccbench.errors import CalibrationFailed, CcbenchError
from ccbench.metrics import percentile
from ccbench.parse.iperf3 import udp_received_bps
from ccbench.parse.ping import parse_ping
from ccbench.progress import info
from ccbench.spec import RTT_TOLERANCE_MS
from ccbench.testbed.base import Testbed

RTT_PERCENTILE = 10  # judge the idle RTT on this percentile of each ping series
PROBE_PORT = 5999
# Pauses before the 2nd, 3rd ... try of a calibration that failed a check host jitter
# can fail: three tries over about half a minute outlast a short stall or a burst of
# a hypervisor's other guests. CCBENCH_CALIBRATION_PAUSES ("5,20") overrides them.
RETRY_PAUSES_S: tuple[float, ...] = (5.0, 20.0)
PAUSES_ENV = "CCBENCH_CALIBRATION_PAUSES"


@dataclass(frozen=True)
class PathExpectation:
    """What a lab's path is checked against instead of the configured dumbbell
    (ccbench.testbed.lab): per pair, the path's own idle RTT plus the delay added, and
    a bottleneck ccbench does not control, named (None: the testbed's own, read back)."""

    rtt_ms: dict[int, float]
    uncontrolled: str | None = None


def rtt_stats(rtts_us: Sequence[float]) -> dict[str, Any]:
    """The judged RTT (RTT_PERCENTILE) of one ping series, with its median and spread."""
    ms = [x / 1000 for x in rtts_us]
    p_lo, p_hi = percentile(ms, RTT_PERCENTILE), percentile(ms, 100 - RTT_PERCENTILE)
    return {
        "judged_ms": p_lo,
        "judged_on": f"p{RTT_PERCENTILE}",
        "min_ms": min(ms),
        f"p{RTT_PERCENTILE}_ms": p_lo,
        "median_ms": percentile(ms, 50),
        f"p{100 - RTT_PERCENTILE}_ms": p_hi,
        "max_ms": max(ms),
        "spread_ms": p_hi - p_lo,  # p90 - p10: how much the host jittered
    }


def rtt_problem(pair: int, stats: dict[str, Any], configured_ms: float) -> str | None:
    """A problem if the judged idle RTT is more than RTT_TOLERANCE_MS off the
    configured RTT (above: the path adds delay; below: the delay is not applied)."""
    got = stats["judged_ms"]
    if abs(got - configured_ms) <= RTT_TOLERANCE_MS:
        return None
    return (
        f"pair {pair}: idle RTT {got:.2f} ms ({stats.get('judged_on', 'judged')}; "
        f"median {stats['median_ms']:.2f}, spread {stats['spread_ms']:.2f} ms), "
        f"configured {configured_ms:g} ms"
    )


def idle_rtt(
    tb: Testbed, problems: list[str], expect: PathExpectation | None = None, check: bool = True
) -> dict[str, Any]:
    """One ping series per pair, s_i -> r_i through the idle dumbbell, each judged
    against the configured RTT (or `expect`'s; `check` false: only measured).

    The pairs ping at once: 100 small packets a second each is nothing to the path, and
    one pair's series does not wait for the other's (half a second a pair)."""
    rtts: dict[str, Any] = {}
    roles = tb.roles
    pairs = range(1, tb.topo.pairs + 1)

    def ping(i: int) -> str:
        snd, rcv = roles.pair(i)
        argv = tb.driver(snd).idle_ping(tb.address(rcv))
        return tb.ex(snd).run(argv, check=False, timeout=30).stdout

    with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
        outs = list(pool.map(ping, pairs))
    for i, stdout in zip(pairs, outs, strict=True):
        p = parse_ping(stdout)
        if not p.received or not p.rtts_us:
            problems.append(f"pair {i}: no ping replies")
            rtts[f"pair{i}"] = {"sent": p.sent, "received": p.received or 0}
            continue
        st = rtt_stats(p.rtts_us)
        rtts[f"pair{i}"] = {**st, "sent": p.sent, "received": p.received}
        want = expect.rtt_ms[i] if expect is not None else tb.topo.rtt_ms
        problem = rtt_problem(i, st, want) if check else None
        if problem:
            problems.append(problem)
    return rtts


def retry_pauses() -> tuple[float, ...]:
    """The pauses between tries: RETRY_PAUSES_S, or the environment's override."""
    raw = os.environ.get(PAUSES_ENV)
    if raw is None:
        return RETRY_PAUSES_S
    try:
        pauses = tuple(float(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise CcbenchError(f"{PAUSES_ENV}={raw!r}: comma-separated seconds") from None
    if any(p < 0 for p in pauses):
        raise CcbenchError(f"{PAUSES_ENV}={raw!r}: pauses cannot be negative")
    return pauses


def with_retries(
    one_try: Callable[[], dict[str, Any]],
    pauses: Sequence[float],
    sleep: Callable[[float], None] = time.sleep,
    label: str = "calibration",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Call `one_try` until it reports no `problems`, a problem that a retry cannot
    fix (`retryable` false), or len(pauses) + 1 tries; pause pauses[k] before try k + 2.
    Returns (the last try, every try), each try numbered in `try`."""
    tries: list[dict[str, Any]] = []
    for k in range(len(pauses) + 1):
        rec = {"try": k + 1, **one_try()}
        tries.append(rec)
        if not rec["problems"] or not rec.get("retryable", True) or k == len(pauses):
            break
        info(f"{label}: try {k + 1} failed ({'; '.join(rec['problems'])}); "
             f"again in {pauses[k]:g}s")  # fmt: skip
        sleep(pauses[k])
    return tries[-1], tries


def calibrate(
    tb: Testbed,
    method: str,
    extra: Callable[[list[str]], dict[str, Any]] | None = None,
    pauses: Sequence[float] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    expect: PathExpectation | None = None,
) -> dict[str, Any]:
    """Every check, retried as `with_retries` says; the record holds the last try's
    results at its top level and every try under `tries`. Raises CalibrationFailed
    (carrying the record) if the last try still has problems.

    `extra(problems)` adds testbed-specific checks that jitter cannot fail (e.g.
    offloads read back); it returns fields for the record."""

    def one_try() -> dict[str, Any]:
        jitter: list[str] = []  # idle RTT, rate: a host stall can fail them
        fixed: list[str] = []  # what was read back: a retry reads the same
        rec: dict[str, Any] = {"time": time.time()}
        rec["idle_rtt"] = idle_rtt(tb, jitter, expect)
        uncontrolled = expect.uncontrolled if expect is not None else None
        if uncontrolled is None:
            rec["bottleneck"] = readback_queue(tb, fixed)
        else:  # nothing of ccbench's to read back: the report names it
            rec["bottleneck"] = {"controlled": False, "where": uncontrolled}
        if extra is not None:
            rec.update(extra(fixed))
        rec["rate"] = measure_rate(tb, jitter, shaped=uncontrolled is None)
        rec["problems"] = fixed + jitter
        rec["retryable"] = not fixed
        return rec

    pauses = retry_pauses() if pauses is None else tuple(pauses)
    last, tries = with_retries(one_try, pauses, sleep, f"testbed {tb.id} calibration")
    cal = base_record(tb, method)
    cal.update({k: v for k, v in last.items() if k not in ("time", "try", "retryable")})
    cal["judged_on"] = f"p{RTT_PERCENTILE} of each idle ping series, within {RTT_TOLERANCE_MS:g} ms"
    cal["retry_pauses_s"] = list(pauses)
    cal["tries"] = tries
    if cal["problems"]:
        n = len(tries)
        raise CalibrationFailed(
            f"testbed {tb.id} calibration failed ({n} {'try' if n == 1 else 'tries'}): "
            + "; ".join(cal["problems"]),
            record=cal,
        )
    return cal


def readback_queue(tb: Testbed, problems: list[str]) -> dict[str, Any]:
    node, dev = tb.bottleneck
    raw = tb.ex(node).run(tb.driver(node).qdisc_stats(dev)).stdout
    qdiscs = json.loads(raw)
    child = next((q for q in qdiscs if q.get("handle") == "10:"), None)
    shaper = next((q for q in qdiscs if q.get("root")), None)
    want = tb.topo.queue_kind
    if child is None or child.get("kind") != want:
        problems.append(f"bottleneck queue is not {want}: {raw.strip()}")
    else:
        t = tb.topo
        problem = t.queue.readback_problem(child.get("options", {}), t.queue_limit_pkts,
                                           t.frame_bytes)  # fmt: skip
        if problem:
            problems.append(problem)
    return {"node": node, "dev": dev, "shaper": shaper, "queue": child}


def measure_rate(tb: Testbed, problems: list[str], shaped: bool = True) -> dict[str, Any]:
    """Two seconds of UDP slightly above the rate, pair 1: what the shaper lets through
    (`shaped` false: a path ccbench does not shape, whose rate is only recorded).

    Two, not one: the receiver's count misses what is still in flight at the end
    (half an RTT plus the queue), and one vCPU stall weighs half as much.
    """
    snd, rcv = tb.roles.pair(1)
    srv = tb.ex(rcv).spawn(tb.driver(rcv).iperf3_server(PROBE_PORT))
    payload = 1400
    try:
        tb.wait_listening(rcv, PROBE_PORT)
        udp = tb.driver(snd).iperf3_udp_client(tb.address(rcv), PROBE_PORT, payload,
                                               tb.topo.rate_bps * 1.1, 2)  # fmt: skip
        cp = tb.ex(snd).run(udp, check=False, timeout=30)
    finally:
        srv.stop()
    try:
        got = udp_received_bps(json.loads(cp.stdout))
    except (ValueError, TypeError):  # no output, not JSON, or not iperf3's
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
    elif shaped and got > expected * 1.10:
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
