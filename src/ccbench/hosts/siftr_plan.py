"""What a FreeBSD sender's siftr/siftr2 log covers and how finely: a pure plan.

Read in sys/netinet/siftr.c (siftr 1.3.0, FreeBSD 14) and ccfbsd/siftr2's siftr2.c:

* `port_filter` is ONE TCP port (a uint16_t sysctl; 0 = every port). A packet passes
  when the filter equals its source OR its destination port, in both directions
  (`siftr_chkpkt`: `siftr_port_filter != ntohs(th->th_sport) && ... th_dport` skips),
  so the server port 5201+k catches flow k's data connection, its ACKs, and iperf3's
  control connection to the same port (a few packets).
* Each module is one instance with one sysctl tree and one log file: there is no
  second filter and no log per port. (siftr2 2.4's README also lists a
  `flowid_filter`, but a flowid exists only once the connection does: no use when
  logging must start before the flows.)
* `ppl` is global and counts per flow over its in AND out packets (one counter per
  flow in the hash node): with ppl N the N-th, 2N-th, ... packet of each flow is
  logged, whichever its direction. The counter is a uint16_t, so ppl <= 65535.

Hence `port_filter()`: a sender with one flow filters on that flow's server port; a
sender with several flows cannot be covered by one port (their server ports differ and
their local ports are ephemeral), so it logs every port (0) and the parser keeps the
run's flows (by local address). Nothing else on a sender sends at a rate that matters
(ssh and iperf3's control connections are a few packets per second), so the byte
budget holds either way: `choose_ppl()` sizes ppl from the flows' packets alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DEFAULT_BUDGET_BYTES = 64 * 2**20  # per sender per run
PPL_MAX = 65535  # siftr/siftr2 keep the per-flow counter in a uint16_t
FRAME_BYTES = 1514  # a full Ethernet frame as tbf counts it (net/sched/sch_tbf.c)
# One ACK per two full-size segments at 1 Gbit/s (~82k data packets and ~41k ACKs a
# second; delayed ACKs: net/ipv4/tcp_input.c __tcp_ack_snd_check).
ACKS_PER_DATA = 0.5
# Bytes per record, at the seeds' magnitudes (1 Gbit/s, 40 ms: 7-digit cwnd, 5-digit
# srtt, 10-digit flowid and sequence numbers): siftr 1.3's 27 fields come to 169 bytes
# on average in ccbench.parse.siftr_synth's log (checked in the tests); siftr2 2.2's
# decimal records (the longer of its two layouts, with th_seq/th_ack) to about 130.
RECORD_BYTES = {"siftr": 175, "siftr2": 140}


@dataclass(frozen=True)
class SiftrPlan:
    logger: str
    ppl: int  # net.inet.<logger>.ppl
    port_filter: int  # net.inet.<logger>.port_filter (0: every port)
    packets: int  # the flows' in + out packets over the run, at most (estimate)
    records: int  # records the log will hold, at most (estimate)
    log_bytes: int  # the log's size, estimated
    budget_bytes: int
    within_budget: bool  # False only when even PPL_MAX cannot meet the budget
    rate_bps: float
    record_interval_s: float  # between one flow's records when it alone has rate_bps

    def resolution(self, flows_sharing: int = 1) -> str:
        """One sentence for the report: how finely the cwnd/srtt series are sampled
        (`flows_sharing`: flows dividing the bottleneck, each then sampled that much
        less often)."""
        every = "every packet" if self.ppl == 1 else f"every {_ordinal(self.ppl)} packet"
        alone = _duration(self.record_interval_s)
        text = (f"{self.logger} logged {every} (in or out) of each flow: at "
                f"{_rate(self.rate_bps)} one flow alone is sampled every {alone}")  # fmt: skip
        if flows_sharing > 1:
            shared = _duration(self.record_interval_s * flows_sharing)
            text += f", each of {flows_sharing} flows sharing it every {shared}"
        scope = "its flow's port" if self.port_filter else "every port"
        return (f"{text} (log filtered to {scope}; about {self.log_bytes / 2**20:.0f} MiB "
                f"for a budget of {self.budget_bytes / 2**20:.0f} MiB)")  # fmt: skip


def port_filter(ports: Sequence[int]) -> int:
    """port_filter for a sender whose flows are served on `ports` (5201 + k for flow
    k): that port when there is one, else 0 (every port; see the module doc)."""
    distinct = set(ports)
    if any(not 0 < p < 65536 for p in distinct):
        raise ValueError(f"TCP ports are 1..65535, not {sorted(distinct)}")
    return distinct.pop() if len(distinct) == 1 else 0


def choose_ppl(
    flows: Sequence[tuple[float, float]],
    ports: Sequence[int],
    rate_bps: float,
    logger: str = "siftr",
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    frame_bytes: int = FRAME_BYTES,
    acks_per_data: float = ACKS_PER_DATA,
) -> SiftrPlan:
    """The smallest ppl whose log stays within `budget_bytes`, for one sender.

    flows: (start_s, duration_s) of each flow this sender carries; ports: their
    server ports; rate_bps: the most they can send together (the bottleneck rate: a
    sender's flows share it, so the packets are counted over the time any of them
    runs, not per flow). The estimate counts full frames at rate_bps and
    `acks_per_data` ACKs in per data packet: an upper bound when the flows fill the
    bottleneck, as bulk flows do."""
    if logger not in RECORD_BYTES:
        raise ValueError(f"unknown logger '{logger}' (siftr or siftr2)")
    if not flows or rate_bps <= 0 or budget_bytes <= 0 or frame_bytes <= 0:
        raise ValueError("choose_ppl needs flows, a positive rate, budget and frame size")
    if any(d < 0 or s < 0 for s, d in flows):
        raise ValueError("flow start and duration must not be negative")
    pps = rate_bps / (8 * frame_bytes) * (1 + acks_per_data)
    packets = math.ceil(pps * _busy_s(flows))
    per_record = RECORD_BYTES[logger]
    # + one record per flow: siftr logs the ppl-th packet, so a flow may round up once
    ppl = max(1, math.ceil(packets * per_record / max(1, budget_bytes - len(flows) * per_record)))
    ppl = min(ppl, PPL_MAX)
    records = packets // ppl + len(flows)
    return SiftrPlan(
        logger=logger,
        ppl=ppl,
        port_filter=port_filter(ports),
        packets=packets,
        records=records,
        log_bytes=records * per_record,
        budget_bytes=budget_bytes,
        within_budget=records * per_record <= budget_bytes,
        rate_bps=rate_bps,
        record_interval_s=ppl / pps,
    )


def _busy_s(flows: Sequence[tuple[float, float]]) -> float:
    """Length of the union of the flows' [start, start + duration) intervals."""
    busy, end = 0.0, -math.inf
    for start, dur in sorted(flows):
        stop = start + dur
        if stop > end:
            busy += stop - max(start, end)
            end = stop
    return busy


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _duration(s: float) -> str:
    return f"{s * 1e6:.0f} µs" if s < 1e-3 else f"{s * 1e3:.2g} ms" if s < 1 else f"{s:.3g} s"


def _rate(bps: float) -> str:
    return f"{bps / 1e9:g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:g} Mbit/s"
