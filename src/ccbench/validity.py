"""Per-run checks: did the run do what was asked? Each failed check is one reason.

An invalid run is kept (its raw files and reasons are shown in the report) but never
averaged into a result.
"""

from __future__ import annotations

from typing import Any

from ccbench import topology
from ccbench.errors import CcbenchError
from ccbench.ledger import RETX_SLACK_PKTS, RETX_SLACK_SHARE
from ccbench.metrics import RttBound
from ccbench.parse.iperf3 import Iperf3Result
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.testbed.kinds import kind

LATE_SHARE_MAX = 0.01  # share of packets the delay element released > 5 ms late
# The words that end a reason whose code is a host stall's (reasons.HOST_STALLS), for
# people; programs read the code.
HOST_STALLED = "the host stalled"
PROBE_COVERAGE_MIN = 0.9  # share of the traffic a self-starting probe (flent) must span
MIN_DURATION_SHARE = 0.9  # a flow must run at least 90 % of what was asked
# A flow's mean RTT may exceed the configured RTT + a full bottleneck queue by this
# much (delayed ACKs, the delay element's release quantum, scheduling) and no more.
HIDDEN_QUEUE_MS = 5.0


def _os_cc_name(cc: str, os_name: str | None) -> str:
    """FreeBSD calls Linux's reno newreno; iperf3 reports the OS's own name."""
    return "newreno" if os_name == "freebsd" and cc == "reno" else cc


def check_flow(
    k: int, spec: RunSpec, res: Iperf3Result | None, rc: int | None, stack_cc: bool = False,
    held_cause: str | None = None, buffer_known: bool = True,
) -> list[Reason]:  # fmt: skip
    """`stack_cc`: the CC is the TCP stack's own (FreeBSD tcp_bbr), not a socket option.
    `held_cause`: what the host's counters saw (hidden_queue_cause), named in a
    hidden-queue reason. `buffer_known` false: the bottleneck is not ccbench's (a lab's
    own network), so no RTT bound exists: the hidden-queue check is not checkable
    (ccbench.unproven says so in the record)."""
    f = spec.flows[k - 1]
    if res is None:
        return [Reason.of(Code.FLOW_NO_OUTPUT, f"flow {k}: no iperf3 output (exit {rc})",
                          flow=k, exit=rc)]  # fmt: skip
    if res.error:
        return [Reason.of(Code.FLOW_ERROR, f"flow {k}: iperf3 error: {res.error}", flow=k)]
    reasons = []
    if rc not in (0, None):
        reasons.append(Reason.of(Code.FLOW_ERROR, f"flow {k}: iperf3 exited {rc}", flow=k, exit=rc))
    if stack_cc:
        pass  # FreeBSD's bbr stack does its own CC: verified from functions_available
    elif res.cc_sender is not None and res.cc_sender != _os_cc_name(f.cc, res.os):
        text = f"flow {k}: CC used {res.cc_sender}, asked for {f.cc}"
        reasons.append(Reason.of(Code.CC_MISMATCH, text, flow=k, used=res.cc_sender, asked=f.cc))
    elif res.cc_sender is None:
        reasons.append(Reason.of(Code.CC_MISMATCH, f"flow {k}: iperf3 did not report the CC used",
                                 flow=k, asked=f.cc))  # fmt: skip
    if res.duration_s is None or res.duration_s < MIN_DURATION_SHARE * f.duration_s:
        reasons.append(Reason.of(Code.SHORT_RUN, f"flow {k}: ran {res.duration_s or 0:.1f}s of "
                                 f"{f.duration_s:g}s", flow=k, ran_s=res.duration_s,
                                 asked_s=f.duration_s))  # fmt: skip
    # The minimum RTT (delay applied?) is checked once the time series gave the kernel's
    # own minimum: summarize.min_rtt.
    if not res.throughput_bps:
        reasons.append(Reason.of(Code.NO_BYTES, f"flow {k}: no bytes received", flow=k))
    if buffer_known:
        reasons += _hidden_queue(k, spec, res, held_cause)
    return reasons


def check_run_failed(error: str | None) -> list[Reason]:
    """The run's own failure (raw/error.txt's words; None: it did not fail)."""
    return [] if error is None else [Reason.of(Code.RUN_FAILED, f"run failed: {error}")]


def check_sender_setup(stacks: list[tuple[str, str, list[str]]]) -> list[Reason]:
    """What setting up each sender's TCP stack (node, stack, problems: sender-setup.json)
    could not do."""
    return [Reason.of(Code.STACK_MISMATCH, f"{node}: stack {stack}: {p}", node=node, asked=stack)
            for node, stack, problems in stacks for p in problems]  # fmt: skip


def excess_bound(spec: RunSpec) -> RttBound | None:
    """The RTT above which a sample is excess: what the configured path can give plus
    HIDDEN_QUEUE_MS, and a sender's delayed-ACK wait while its window is below the BDP
    (metrics.RttBound); None for AQM queues (no fixed bound)."""
    t = spec.topology
    bound = t.rtt_bound_ms
    if bound is None:
        return None
    return RttBound(bound + HIDDEN_QUEUE_MS, t.rtt_ms, t.bdp_pkts * t.mss_bytes)


def _hidden_queue(k: int, spec: RunSpec, res: Iperf3Result, held_cause: str | None) -> list[Reason]:
    """Packets held anywhere but the bottleneck queue (an emulator that fell behind, a
    backlog on a busy CPU, a NIC ring) give the flow a bigger buffer than asked for:
    its throughput and RTT are then not the configured path's. No delayed-ACK wait is
    allowed here (excess_bound allows it per sample): a flow held below the BDP by a
    slower element elsewhere is what this check is for."""
    bound = spec.topology.rtt_bound_ms
    if bound is None or res.mean_rtt_us is None:
        return []
    mean_ms = res.mean_rtt_us / 1000
    if mean_ms <= bound + HIDDEN_QUEUE_MS:
        return []
    text = (f"flow {k}: mean RTT {mean_ms:.1f} ms above the {bound:.1f} ms the path can give "
            f"(RTT + a full queue): packets were held outside the bottleneck"
            + (f" ({held_cause})" if held_cause else ""))  # fmt: skip
    return [Reason.of(Code.HIDDEN_QUEUE, text, flow=k, mean_rtt_ms=round(mean_ms, 3),
                      bound_ms=bound, margin_ms=HIDDEN_QUEUE_MS)]  # fmt: skip


def hidden_queue_cause(
    led: dict[str, Any] | None, delay: dict[str, Any] | None, cal: dict[str, Any] | None = None
) -> str | None:
    """For a hidden-queue reason: what the counters saw while the run lasted (receive
    processing that ran out of budget: softnet time squeezes, backlog drops, a delay
    element releasing late; nothing for runs recorded without a ledger), and the
    layout that carries the rate here when the testbed (`cal`, its calibration) used
    another (layout_hint)."""
    seen, hint = _seen(led, delay), layout_hint(cal)
    parts = ([f"seen: {seen}"] if seen else []) + ([hint] if hint else [])
    return ". ".join(parts) or None


def layout_hint(cal: dict[str, Any] | None) -> str | None:
    """A layout the testbed's kind offers that docs/fidelity.md found to carry the
    testbed's rate on a 2-vCPU machine (topology.Layout.carries_mbit), when the layout
    the testbed used is not documented to: a routed local testbed at 1 Gbit/s is told
    of `testbed.layout: macvlan`; at 50 Mbit/s, which routed carries, nothing."""
    if not cal or not isinstance(rate := cal.get("rate_configured_mbit"), int | float):
        return None
    try:
        offered = kind(str(cal.get("kind"))).caps.layouts
        used = str(cal.get("layout", topology.DEFAULT))
        carried = topology.layout(used).carries_mbit
    except CcbenchError:
        return None
    if carried is not None and rate <= carried:
        return None  # its own layout carries the rate: the hops are not why
    for name in offered:
        lay = topology.layout(name)
        if name != used and lay.carries_mbit is not None and rate <= lay.carries_mbit:
            why = "" if carried is None else f", the {used} layout up to {carried:g} Mbit/s"
            return (
                f"At {rate:g} Mbit/s use `testbed.layout: {name}` (delay_direction: "
                f"{' or '.join(lay.delay_directions)}): fewer hops per packet; "
                f'docs/fidelity.md ("Layouts") measured it valid up to '
                f"{lay.carries_mbit:g} Mbit/s on 2 vCPUs{why}"
            )
    return None


def _seen(led: dict[str, Any] | None, delay: dict[str, Any] | None) -> str | None:
    """What the counters saw (None: no ledger recorded)."""
    if led is None:
        return None
    seen = []
    if led.get("softnet_time_squeeze"):
        seen.append(f"{led['softnet_time_squeeze']} softnet time squeezes (the kernel's "
                    "receive processing ran out of budget)")  # fmt: skip
    if led.get("softnet_backlog_pkts"):
        seen.append(f"{led['softnet_backlog_pkts']} softnet backlog drops")
    late = (delay or {}).get("late_share")
    if late:
        seen.append(f"the delay element released {late:.2%} of packets > 5 ms late")
    return "; ".join(seen) if seen else "no softnet squeeze, backlog drop or late release counted"


def check_calibration(cal: dict[str, Any]) -> list[Reason]:
    if not cal:
        return [Reason.of(Code.CALIBRATION, "no calibration of the testbed recorded")]
    return [Reason.of(Code.CALIBRATION, f"calibration: {p}") for p in cal.get("problems", [])]


def check_probe(probe: dict[str, Any] | None, tool: str) -> list[Reason]:
    """The latency-under-load probe was asked for: it must have measured the traffic,
    not the idle path before or after it (a tool that started late, e.g. flent stalled
    on a name lookup, measures the wrong thing)."""
    if probe is None:
        return [Reason.of(Code.PROBE_FAILED, f"probe: the {tool} probe left no data", tool=tool)]
    if probe.get("error"):
        return [Reason.of(Code.PROBE_FAILED, f"probe: {probe['error']}", tool=probe.get("tool"))]
    if not probe.get("samples"):
        return [Reason.of(Code.PROBE_FAILED, f"probe: {probe['tool']} took no RTT samples while "
                          "the flows ran", tool=probe["tool"], samples=0)]  # fmt: skip
    cov = probe.get("coverage")
    if cov is not None and cov < PROBE_COVERAGE_MIN:
        first = probe.get("first_sample_s")
        why = ""
        if first is not None:
            why = (f": its first sample came {first:.2f} s after the traffic began (a slow "
                   "start: a busy host, a name lookup)" if first > 0 else
                   ": its samples have gaps or end early")  # fmt: skip
        text = (f"probe: {probe['tool']} sampled only {cov * 100:.0f}% of the traffic "
                f"(need {PROBE_COVERAGE_MIN * 100:g}%){why}")  # fmt: skip
        return [Reason.of(Code.PROBE_SHORT, text, tool=probe["tool"], coverage=cov,
                          limit=PROBE_COVERAGE_MIN, first_sample_s=first)]  # fmt: skip
    return []


def check_delay(delay: dict[str, Any] | None, method: str | None) -> list[Reason]:
    if method != "ccdelay":
        return []
    bad = Code.DELAY_ELEMENT
    if delay is None:
        return [Reason.of(bad, "delay element: no statistics for this run")]
    reasons = []
    n = delay.get("packets", 0)
    late = delay.get("late_share")
    if n == 0:
        reasons.append(Reason.of(bad, "delay element: saw no packets during the run", packets=0))
    elif late is not None and late > LATE_SHARE_MAX:
        reasons.append(Reason.of(Code.DELAY_LATE,
            f"delay element late: {late * 100:.2f}% of packets > 5 ms late "
            f"(limit {LATE_SHARE_MAX * 100:g}%)", late_share=late, limit=LATE_SHARE_MAX,
        ))  # fmt: skip
    if (lost := delay.get("lost", 0)) > 0:
        reasons.append(Reason.of(bad, f"delay element: {lost} packets lost inside it", lost=lost))
    if (full := delay.get("queue_full_drops", 0)) > 0:
        reasons.append(Reason.of(bad, f"delay element: kernel queue overflowed ({full})",
                                 queue_full_drops=full))  # fmt: skip
    return reasons


def check_ledger(
    ledger: dict[str, Any], bottleneck_pkts: int | None, delay_pkts: int,
    retransmits: int | None, spurious: int | None = None,
) -> list[Reason]:  # fmt: skip
    """The loss ledger (ccbench.ledger): every lost packet is accounted for.
    The delay element's own drops (`delay_pkts`) are reported by its check
    (validity.check_delay); here they only count as drops that were seen.
    `spurious`: retransmissions the receivers reported as duplicates (D-SACK): their
    original arrived, so no drop needs to be behind them."""
    reasons = []
    outside = ledger["outside"]
    if outside:
        where = ", ".join(f"{k} {v}" for k, v in sorted(outside.items(), key=lambda kv: -kv[1]))
        reasons.append(Reason.of(Code.LOSS_OUTSIDE, f"{ledger['outside_pkts']} packets were lost "
                                 f"outside the bottleneck ({where})",
                                 outside_pkts=ledger["outside_pkts"]))  # fmt: skip
    if bottleneck_pkts is None or retransmits is None:
        return reasons
    configured = bottleneck_pkts + ledger["loss_rules_pkts"]
    seen = configured + ledger["outside_pkts"] + delay_pkts
    slack = max(RETX_SLACK_PKTS, RETX_SLACK_SHARE * configured)
    lost = retransmits - (spurious or 0)
    if lost > seen + slack:
        dup = f", {spurious} of them received twice (D-SACK)" if spurious else ""
        reasons.append(Reason.of(Code.LOSS_UNCOUNTED,
            f"the senders retransmitted {retransmits} packets{dup}, the path dropped "
            f"{configured} (bottleneck {bottleneck_pkts}, loss rules "
            f"{ledger['loss_rules_pkts']}): {lost - seen} retransmissions have no counted "
            "drop behind them (packets lost or held in the host)",
            retransmits=retransmits, spurious=spurious, dropped=seen, slack=slack,
            unexplained=lost - seen,
        ))  # fmt: skip
    return reasons


# Plausibility: numbers no run can produce, so the raw files must be damaged.
# Utilization is iperf3 payload over the link rate for the traffic window (TCP/IP and
# Ethernet headers alone keep it below ~96 % at MTU 1500). The receivers may still
# read for one RTT plus the time to drain a full queue after the window, so the limit
# is 100 % of the link over window + drain, plus this margin (pacing jitter, the
# shaper's burst, rounding in iperf3's seconds).
UTILIZATION_MARGIN_PCT = 2.0


def _drain_s(spec: RunSpec) -> float:
    """How long after the traffic the bottleneck may still deliver: one RTT and a full
    queue (for AQMs, whose queue is theirs to size, the same as a drop-tail BDP)."""
    t = spec.topology
    bound = t.rtt_bound_ms
    return (bound if bound is not None else 2 * t.rtt_ms) / 1e3


def check_plausibility(
    spec: RunSpec,
    results: list[Iperf3Result | None],
    utilization_pct: float | None,
    bottleneck: dict[str, Any],
) -> list[Reason]:
    """Each flow's numbers are non-negative, its receiver got no more than its sender
    sent and no more than the bottleneck can carry in the flow's time; the run's
    utilization is at most 100 % (+ UTILIZATION_MARGIN_PCT, over the window plus the
    drain time); the bottleneck's counters did not go backwards and it sent at least
    the bytes the receivers got (tc counts them with their headers)."""
    reasons: list[str] = []  # all of one class: Code.PLAUSIBILITY
    rate = spec.topology.rate_bps
    drain = _drain_s(spec)
    margin = 1 + UTILIZATION_MARGIN_PCT / 100
    received = 0
    for k, res in enumerate(results, start=1):
        if res is None or res.error:
            continue
        f = spec.flows[k - 1]
        for label, v in (
            ("throughput", res.throughput_bps),
            ("sender throughput", res.sender_bps),
            ("bytes received", res.bytes_received),
            ("bytes sent", res.bytes_sent),
            ("retransmits", res.retransmits),
            ("duration", res.duration_s),
        ):
            if v is not None and v < 0:
                reasons.append(f"flow {k}: negative {label} ({v:g})")
        rcvd, sent = res.bytes_received, res.bytes_sent
        if rcvd is not None and sent is not None and rcvd > sent:
            reasons.append(f"flow {k}: receiver got {rcvd} bytes, more than the {sent} sent")
        if rcvd is not None:
            received += max(rcvd, 0)
            cap = rate / 8 * (f.duration_s + drain) * margin
            if rcvd > cap:
                reasons.append(
                    f"flow {k}: {rcvd} bytes received, more than the {rate / 1e6:g} Mbit/s "
                    f"bottleneck can carry in {f.duration_s:g} s ({cap:.0f})"
                )
        if res.throughput_bps is not None and res.throughput_bps > rate * margin:
            reasons.append(
                f"flow {k}: throughput {res.throughput_bps / 1e6:.1f} Mbit/s above the "
                f"{rate / 1e6:g} Mbit/s bottleneck"
            )
    window = spec.window_s
    limit = 100 * (window + drain) / window + UTILIZATION_MARGIN_PCT
    if utilization_pct is not None and utilization_pct > limit:
        reasons.append(
            f"utilization {utilization_pct:.1f}% above the {limit:.1f}% the bottleneck can "
            f"give in {window:g} s"
        )
    for name in ("queue", "shaper"):
        rec = bottleneck.get(name)
        if not isinstance(rec, dict):
            continue
        back = [f"{c} {rec[c]}" for c in ("sent_pkts", "sent_bytes", "dropped", "overlimits")
                if rec.get(c) is not None and rec[c] < 0]  # fmt: skip
        if back:
            reasons.append(
                f"bottleneck {name}: counters went backwards from tc-before.json to "
                f"tc-after.json ({', '.join(back)})"
            )
    queue = bottleneck.get("queue")
    if isinstance(queue, dict) and received > queue["sent_bytes"] >= 0:
        reasons.append(
            f"flows received {received} bytes, more than the {queue['sent_bytes']} the "
            f"bottleneck queue sent (tc-before.json/tc-after.json)"
        )
    return [Reason.of(Code.PLAUSIBILITY, r) for r in reasons]


def _same_stack(seen: str | None, want: str) -> bool:
    """A stack may be listed under an alias of its name (e.g. rack_18q21 for rack)."""
    return seen is not None and (seen == want or seen.startswith(f"{want}_"))


def check_sockstat(
    k: int, node: str, peer: str, conns: list[Any], cc: str, stack: str
) -> list[Reason]:
    """Flow k's connections (parse.sockstat.connections_to, sampled on FreeBSD sender
    `node` while the flow ran) each ran on the stack and CC the variant asked for.
    iperf3's control and data connections go to the same port and sockstat cannot tell
    them apart, so every one of them must match. On the bbr stack the CC is the
    stack's own: only the stack is checked."""
    from ccbench.hosts.freebsd import resolve_variant

    want_cc, want_stack = resolve_variant(cc, stack)
    if not conns:
        return [Reason.of(Code.STACK_UNVERIFIED, f"flow {k}: sockstat on {node} lists no "
                          f"connection to {peer} while it ran", flow=k)]  # fmt: skip
    reasons = []
    for c in conns:
        who = f"flow {k}: {node} {c.local} -> {c.foreign}"
        if not _same_stack(c.stack, want_stack):
            reasons.append(Reason.of(Code.STACK_MISMATCH, f"{who} ran on TCP stack "
                                     f"{c.stack or '(none)'}, asked {want_stack}", flow=k,
                                     used=c.stack, asked=want_stack))  # fmt: skip
        if want_cc is not None and c.cc != want_cc:
            reasons.append(Reason.of(Code.CC_MISMATCH, f"{who} ran CC {c.cc or '(none)'}, asked "
                                     f"{want_cc}", flow=k, used=c.cc, asked=want_cc))  # fmt: skip
    return reasons


# RTT samples (ss/siftr srtt, the probe) above RTT + a full queue + HIDDEN_QUEUE_MS
# (and, for a sender's sample while its window was below the BDP, the receiver's delayed
# ACK: metrics.RttBound) are host stalls (the path cannot give them). A run with more
# than this share of them measured the host, not the path.
RTT_EXCESS_SHARE_MAX = 0.02


def check_rtt_excess(ex: dict[str, Any] | None) -> list[Reason]:
    if not ex or ex.get("share") is None or ex["share"] <= RTT_EXCESS_SHARE_MAX:
        return []
    delack = ex.get("delayed_ack_max_ms")
    more = f" (+ up to {delack:g} ms of delayed ACK below the BDP)" if delack else ""
    text = (f"{ex['share'] * 100:.1f}% of RTT samples above the {ex['bound_ms']:.1f} ms the path "
            f"can give{more} (limit {RTT_EXCESS_SHARE_MAX * 100:g}%; worst +"
            f"{ex['max_excess_ms']:.1f} ms, longest {ex['longest_above_s']:.2f} s): "
            f"{HOST_STALLED}")  # fmt: skip
    return [Reason.of(Code.RTT_EXCESS, text, share=ex["share"], limit=RTT_EXCESS_SHARE_MAX,
                      bound_ms=ex["bound_ms"], max_excess_ms=ex["max_excess_ms"],
                      longest_above_s=ex["longest_above_s"])]  # fmt: skip


# The share of the bottleneck router's CPU time the hypervisor gave other guests over
# the traffic (router_cpu.steal_pct: /proc/stat before and after; locally the whole
# machine's) at which a run measured the neighbours, not the path. A quick start on this
# project's 2-vCPU VM (tests/captures/quickstart-tables): the runs at >= 10 % steal
# carried 2.8-10.4 points of utilization less than their siblings at <= 6.4 %, valid
# by every other check (single-bdp reno 89.5 % at 10.9 % against 95.0 % at 0.5 %, and
# 84.9 % at 16.4 % in a run its RTT samples made invalid; bbr 88.7 and 88.9 % at 10.7
# and 10.8 % against 91.6 % at 5.4 %; two-flows-48 reno 72.5 % at 16.7 % against
# 80.9-82.8 %), while the runs at 7.5-9.2 % (two-flows-48 bbr, cubic) stayed within
# 0.3 points of, or above, theirs.
STEAL_MAX_PCT = 10.0


def check_steal(cpu: dict[str, Any] | None) -> list[Reason]:
    """The router's CPU over the traffic (summary `router_cpu`; None: not recorded) was
    not taken by the hypervisor at STEAL_MAX_PCT or more: a host stall."""
    steal = (cpu or {}).get("steal_pct")
    if not isinstance(steal, int | float) or steal < STEAL_MAX_PCT:
        return []
    text = (f"router CPU: {steal:.1f}% of its time stolen by the hypervisor while the flows ran "
            f"(limit {STEAL_MAX_PCT:g}%: runs at that steal carried 3-10 points of utilization "
            f"less): {HOST_STALLED}")  # fmt: skip
    return [Reason.of(Code.STEAL, text, steal_pct=steal, limit_pct=STEAL_MAX_PCT)]


def check_trace_lost(events: dict[str, Any] | None) -> list[Reason]:
    """A per-ACK trace (summary `tcp_events`; None: not traced) whose kernel ring buffer
    overflowed: trace_pipe wrote `CPU:N [LOST M EVENTS]` where its reader fell behind
    (instruments.tcp_probe's buffer holds seconds of ACKs, so the reader was stalled that
    long), and the recoveries, RTOs and ACKs in the gap are missing from the counts, the
    congestion-state rows and the zooms. A host stall."""
    if not events or not isinstance(lost := events.get("lost_events"), int) or lost <= 0:
        return []
    text = (
        f"{events['source']}: the kernel's trace buffer dropped {lost} "
        "events (trace_pipe's [LOST … EVENTS]: its reader fell behind), so recoveries, "
        f"RTOs and ACKs are missing from its events, rows and zooms: {HOST_STALLED}"
    )
    return [Reason.of(Code.TRACE_LOST, text, lost_events=lost)]


SHAPER_RATE_TOLERANCE = 0.01  # tc rounds rates; more than 1 % off is another rate


def check_bottleneck_config(spec: RunSpec, have: dict[str, Any] | None) -> list[Reason]:
    """The queue and shaper rt1 had when the run started (tc-before.json) must be the
    ones the run asked for: on an SSH dumbbell shared by several testbeds, a run on
    another testbed's queue would be valid-looking numbers of the wrong experiment."""
    if not have or have.get("queue_kind") is None:
        return []
    t = spec.topology
    had = have["queue_kind"]
    wrong_limit, got, asked = t.queue.as_configured(
        had, have["queue_limit_pkts"], have["queue_limit_bytes"], t.queue_limit_pkts, t.frame_bytes
    )
    reasons = []
    if wrong_limit or had != t.queue_kind:
        reasons.append(Reason.of(Code.BOTTLENECK_CONFIG, f"rt1's queue was {got}, the run asked "
                                 f"for {asked}", queue=got, asked=asked))  # fmt: skip
    rate = have.get("shaper_rate_bps")
    if rate and abs(rate / t.rate_bps - 1) > SHAPER_RATE_TOLERANCE:
        reasons.append(Reason.of(Code.BOTTLENECK_CONFIG, f"rt1's shaper ran at {rate / 1e6:g} "
                                 f"Mbit/s, the run asked for {t.rate_mbit:g}",
                                 rate_bps=rate, asked_bps=t.rate_bps))  # fmt: skip
    return reasons
