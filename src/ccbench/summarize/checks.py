"""The verdict on a run (`verdict`): every check on what its files say
(summarize.extract's Summary) and, once read, on what its time series says
(FromSeries), each made once, in the order its reasons are listed. Nothing is read
here: a reason is a check's answer to a value extraction found.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ccbench import validity
from ccbench.reasons import Reason
from ccbench.summarize import min_rtt, window

if TYPE_CHECKING:
    from ccbench.summarize import FromSeries, NotRun, Summary


def verdict(s: Summary | NotRun, series: FromSeries | None = None) -> list[Reason]:
    """A run's reasons (none: valid): the run's failure, each flow's (iperf3's client,
    then its server's report), the senders' stacks, the calibration and the delay
    element, the bottleneck's configuration, the loss ledger, the probe, plausibility,
    the instruments' parts, the router's steal, the kernel asked for, the raw files'
    problems; then, from `series` (None: not read), the sampler files' problems, the RTT
    excess, the base RTT, the receive window and a trace's lost events, each not
    already listed."""
    from ccbench.summarize import NotRun  # here: the package imports this module first

    if isinstance(s, NotRun):
        return _and_later(s.reasons, [] if series is None else series.problems)
    run, spec, fl, cal = s.run, s.run.spec, s.flows, s.run.calibration
    delay, led, bneck, probe = s.delay_element, s.loss_ledger, s.bottleneck, s.probe
    known = run.scope.buffer_known  # else a lab's own network: no RTT bound, no config
    held = validity.hidden_queue_cause(led, delay, cal)
    failed = validity.check_run_failed(s.error)
    flows = [r for k, (res, ok) in enumerate(zip(fl.results, fl.readable, strict=True), 1)
             if ok  # else the file's own problem says it
             for r in validity.check_flow(k, spec, res, run.meta.client_rc[k - 1],
                                          spec.stack_cc, held, known)]  # fmt: skip
    setup = validity.check_sender_setup(s.sender_stacks)
    calib: list[Reason] = []
    if cal is not None:  # else calibration.json's own problem says it
        calib += validity.check_calibration(cal)
        if delay is not None or not s.delay_damaged:
            calib += validity.check_delay(delay, cal.get("delay_method"))
    config = validity.check_bottleneck_config(spec, bneck.get("configured")) if known else []
    d = delay or {}  # what the delay element dropped or lost: its own check reports it
    delay_drops = (d.get("queue_full_drops") or 0) + (d.get("lost") or 0)
    losses = [] if led is None else validity.check_ledger(led, led["bottleneck_pkts"], delay_drops,
                                                          led["retransmits"],
                                                          led["spurious_retransmits"])  # fmt: skip
    probed = run.meta.probe_argv and not (probe and probe.get("tool") == "unreadable")
    probing = validity.check_probe(probe, spec.probe_tool) if probed else []
    plausible = validity.check_plausibility(spec, fl.results, s.utilization_pct, bneck)
    steal = validity.check_steal(s.parts.get("router_cpu"))
    reasons = [*failed, *flows, *fl.server_problems, *setup, *calib, *config, *losses, *probing,
               *plausible, *s.part_reasons, *steal, *s.kernel_reasons, *s.problems]  # fmt: skip
    if series is None or series.flows is None:
        return reasons
    excess = validity.check_rtt_excess(series.rtt_excess)
    lost = validity.check_trace_lost(series.tcp_events)
    base_rtt = min_rtt.reasons(spec, series.flows, run.scope)
    rwnd = window.reasons(spec, series.flows, s.buffers)
    return _and_later(reasons, [*series.problems, *excess, *base_rtt, *rwnd, *lost])


def _and_later(reasons: list[Reason], later: list[Reason]) -> list[Reason]:
    """`reasons`, then each of `later` not among them."""
    return reasons + [r for r in later if r not in reasons]
