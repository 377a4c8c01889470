"""A traced run's congestion events, its part of summary.json (`tcp_events`): counted
as a per-ACK instrument's trace streams past (EventCounter, for tcp_probe), marked in
the report's figures and beside the counters in its causes table."""

from __future__ import annotations

from typing import Any, Protocol

from ccbench.parse import split_hostport
from ccbench.part import Part, d


class TcpEventsFlow(Part):
    flow: int = d("flow number")
    recoveries: int = d("fast-recovery episodes (entries into TCP_CA_Recovery)")
    rtos: int = d(
        "retransmission timeouts: each expiry sets TCP_CA_Loss, again while in it "
        "(the flow's data connection; the counters' timeouts also count the sender's "
        "other sockets: `others`)"
    )
    retransmits: int = d(
        "retransmissions (tcp_retransmit_skb: one per skb, which may carry several segments)"
    )
    recovery_s: list[float] = d("when each recovery began, s from the traffic start "
                                "(the first MAX_MARKS)")  # fmt: skip
    rto_s: list[float] = d("when each RTO fired, s from the traffic start (the first "
                           "MAX_MARKS)")  # fmt: skip


class TcpEventsOther(Part):
    local: str = d("the sockets' local address")
    recoveries: int = d("fast-recovery episodes (entries into TCP_CA_Recovery)")
    rtos: int = d("retransmission timeouts (each expiry)")
    retransmits: int = d("retransmissions (tcp_retransmit_skb)")


class TcpEvents(Part):
    source: str = d("the instrument whose trace they came from")
    acks_thinned: str | None = d("how the per-ACK samples were thinned; null: every ACK")
    lost_events: int = d("events the kernel's trace buffer dropped (0: none)")
    flows: list[TcpEventsFlow] = d("per flow, its congestion events")
    others: list[TcpEventsOther] = d(
        "the traced sockets that are no flow's data connection (iperf3's control "
        "connections, the receivers' sockets), per local address, where they had any: "
        "a sender's counters (retransmit_causes) count its ones too",
        default=[],
    )


class Rows(Protocol):
    """Where the congestion-state rows go (timeseries_sink.FileRows)."""

    def add(self, frame: Any) -> None: ...


def lost_text(lost: int) -> str:
    """What a caption says of a trace that lost events (`TcpEvents.lost_events` > 0)."""
    return (f"{lost} events the kernel's trace buffer dropped (trace_pipe's [LOST … EVENTS]: "
            "recoveries and ACKs in those gaps are not shown)")  # fmt: skip


MAX_MARKS = 500  # event times kept per kind and flow (the counts are whole)
CA_STATE = "ca_state"  # the source of the congestion-state rows
CA_ROWS = 4096  # state changes held before they join the file's rows
# A congestion state entered -> the count and the times it adds to (enum tcp_ca_state,
# include/net/tcp.h: Recovery is fast recovery, Loss follows an RTO).
ENTERED = {"TCP_CA_Recovery": ("recoveries", "recovery_s"), "TCP_CA_Loss": ("rtos", "rto_s")}


class EventCounter:
    """One trace's recoveries (entries into TCP_CA_Recovery), RTOs (into TCP_CA_Loss) and
    retransmissions per flow, times from the traffic start (`shift`: trace clock to
    that; None: unknown, nothing kept), gathered as the trace streams past: counts whole,
    at most MAX_MARKS times each, so memory does not grow with the trace. With `rows`,
    also one CA_STATE row per change of a flow's state (the same changes the counts
    count: an RTO re-entering Loss is one), given to `rows` CA_ROWS at a time and at
    `flush`. The same counts, without times or rows, for the traced sockets that are no
    flow's (iperf3's control connections, the receivers' sockets) per local address: a
    sender's counters count its ones too (a results message lost in a full queue is a
    recovery of its own)."""

    def __init__(
        self, local_to_flow: dict[str, int], shift: float | None, rows: Rows | None = None
    ) -> None:
        self.local_to_flow = local_to_flow
        self.shift = shift
        self.flows: dict[int, dict[str, Any]] = {}
        self._rows = rows
        self._changes: list[tuple[int, float, int]] = []  # (flow, t_s, state code)
        self.others: dict[str, dict[str, Any]] = {}  # local address -> counts

    def add(self, rec: Any) -> None:
        from ccbench.parse.tcp_probe import CongStateChange, Retransmit

        if self.shift is None:
            return
        k = self.local_to_flow.get(rec.local, 0)
        # An RTO sets TCP_CA_Loss at each expiry, again while in it (tcp_enter_loss);
        # a fast recovery is entered once (tcp_enter_recovery).
        if isinstance(rec, CongStateChange) and (rec.state == "TCP_CA_Loss"
                                                 or rec.state != rec.prev_state):  # fmt: skip
            entered = ENTERED.get(rec.state)
            if not k:
                if entered is not None:
                    self._other(rec.local)[entered[0]] += 1
                return
            if self._rows is not None:
                self._changes.append((k, rec.t_s + self.shift, rec.state_code))
                if len(self._changes) >= CA_ROWS:
                    self.flush()
            f = self.flows.setdefault(k, _flow_events(k))
            if entered is not None:
                count, times = entered
                f[count] += 1
                if len(f[times]) < MAX_MARKS:
                    f[times].append(round(rec.t_s + self.shift, 4))
        elif isinstance(rec, Retransmit):
            f = self.flows.setdefault(k, _flow_events(k)) if k else self._other(rec.local)
            f["retransmits"] += 1

    def _other(self, local: str) -> dict[str, Any]:
        addr = split_hostport(local)[0]
        return self.others.setdefault(addr, _other_events(addr))

    def flush(self) -> None:
        """The state changes held, as rows of their file."""
        if self._rows is None or not self._changes:
            return
        import pandas as pd

        flow, t_s, code = zip(*self._changes, strict=True)
        self._rows.add(pd.DataFrame({"flow": flow, "t_s": t_s, "source": CA_STATE,
                                     "ca_state": [float(c) for c in code]}))  # fmt: skip
        self._changes = []

    def merged(
        self, ev: dict[str, Any] | None, source: str, lost_events: int, thinning: str | None
    ) -> dict[str, Any]:
        """`ev` (the statistics' tcp_events so far; None: none yet) with this trace's
        added, once it was read whole."""
        ev = ev or {"source": source, "acks_thinned": thinning, "lost_events": 0,
                    "flows": {}, "others": {}}  # fmt: skip
        ev["lost_events"] += lost_events
        for k, f in self.flows.items():
            g = ev["flows"].setdefault(k, _flow_events(k))
            for count in COUNTS:
                g[count] += f[count]
            for times in ("recovery_s", "rto_s"):
                g[times] += f[times][: MAX_MARKS - len(g[times])]
        for addr, o in self.others.items():
            g = ev["others"].setdefault(addr, _other_events(addr))
            for count in COUNTS:
                g[count] += o[count]
        return ev


COUNTS = ("recoveries", "rtos", "retransmits")


def _flow_events(k: int) -> dict[str, Any]:
    return {"flow": k, **dict.fromkeys(COUNTS, 0), "recovery_s": [], "rto_s": []}


def _other_events(addr: str) -> dict[str, Any]:
    return {"local": addr, **dict.fromkeys(COUNTS, 0)}
