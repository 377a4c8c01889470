"""A traced run's congestion events, its part of summary.json (`tcp_events`):
timeseries_stats counts them from the per-ACK instrument's rows (tcp_probe), the
report marks them and counts their causes."""

from __future__ import annotations

from typing import Protocol

from ccbench.part import Part, d


class TcpEventsFlow(Part):
    flow: int = d("flow number")
    recoveries: int = d("fast-recovery episodes (entries into TCP_CA_Recovery)")
    rtos: int = d(
        "retransmission timeouts: each expiry sets TCP_CA_Loss, again while in it "
        "(the flow's data connection; the counters' timeouts also count iperf3's "
        "control connection)"
    )
    retransmits: int = d(
        "retransmissions (tcp_retransmit_skb: one per skb, which may carry several segments)"
    )
    recovery_s: list[float] = d("when each recovery began, s from the traffic start "
                                "(the first MAX_MARKS)")  # fmt: skip
    rto_s: list[float] = d("when each RTO fired, s from the traffic start (the first "
                           "MAX_MARKS)")  # fmt: skip


class TcpEvents(Part):
    source: str = d("the instrument whose trace they came from")
    acks_thinned: str | None = d("how the per-ACK samples were thinned; null: every ACK")
    lost_events: int = d("events the kernel's trace buffer dropped (0: none)")
    flows: list[TcpEventsFlow] = d("per flow, its congestion events")


class WithTcpEvents(Protocol):
    """What the caption reads of a run's record (ccbench.record.RunRecord has it)."""

    @property
    def tcp_events(self) -> TcpEvents | None: ...
