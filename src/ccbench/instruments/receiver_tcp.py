"""The Linux receivers' TCP receive side before and after the traffic (`record:
[receiver_tcp]`): `nstat` in each receiver's network namespace (that namespace's own
/proc/net/snmp and /proc/net/netstat; read by ccbench.parse.nstat). summary.json
`receiver_tcp`: receiver -> the increase of its receive-side counters.

What it adds to the loss ledger: the ledger counts packets lost on the way (interfaces,
backlogs, the configured loss rules, the bottleneck), up to the receiver's IP layer. A
segment the receiver's TCP threw away after that (no receive memory, a full socket
backlog, a zero window) is lost to the sender all the same and retransmitted, but no
counter the ledger reads saw it: the ledger's "retransmitted more than dropped" check
is where it shows. These counts say whether the receiver's TCP did it. They only record:
they make no run invalid.

The counters are the namespace's, all its sockets together (iperf3's control
connections and the probe's too), and count skbs as TCP handled them: a GRO
super-packet is one. The names are iproute2's (`TcpExt` + the kernel's name in
net/ipv4/proc.c snmp4_net_list, `Tcp` + snmp4_tcp_list).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from ccbench.instruments.base import NodeReads, SummaryPart, read_pair
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.needs import Needs
from ccbench.parse.nstat import counter_delta, parse_nstat
from ccbench.part import Part, d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

READ = ["nstat", "-asz", "--json"]  # every counter, absolute, zeros too; history untouched

# Segments the receiver's TCP dropped (Linux; each counter per skb, the field it fills):
DROPS = {
    # net/ipv4/tcp_input.c tcp_data_queue(): an in-order segment for which
    # tcp_try_rmem_schedule() found no receive memory (sk_rmem_alloc above sk_rcvbuf
    # after pruning, or the protocol's memory limit) while the receive queue held data.
    "TcpExtTCPRcvQDrop": "rcvq_dropped",
    # tcp_data_queue_ofo(): an out-of-order segment dropped for the same reason.
    "TcpExtTCPOFODrop": "ofo_dropped",
    # net/ipv4/tcp_ipv4.c tcp_add_backlog() (tcp_v4_rcv): a segment that arrived while the
    # application held the socket, its backlog over its limit (about twice sk_rcvbuf).
    "TcpExtTCPBacklogDrop": "backlog_dropped",
    # tcp_data_queue(): an in-sequence segment that arrived while the window the
    # receiver advertised was zero.
    "TcpExtTCPZeroWindowDrop": "zero_window_dropped",
}
# Other receive-side counts (no new data lost by them):
COUNTS = {
    # tcp_data_queue_ofo(): segments queued out of order (a hole before them: a loss or
    # reordering upstream); each later SACKed.
    "TcpExtTCPOFOQueue": "ofo_queued",
    # tcp_data_queue_ofo(): out-of-order segments whose data the queue held already
    # (dropped and D-SACKed: duplicates, not loss).
    "TcpExtTCPOFOMerge": "ofo_duplicates",
    # tcp_try_coalesce() (tcp_queue_rcv, tcp_data_queue_ofo): segments appended to the
    # queue's previous skb instead of queued on their own.
    "TcpExtTCPRcvCoalesce": "coalesced",
    # tcp_prune_queue(): called when receive memory ran over (tcp_try_rmem_schedule).
    "TcpExtPruneCalled": "prune_calls",
    # tcp_collapse(): skbs copied into fewer, tighter ones while pruning.
    "TcpExtTCPRcvCollapsed": "collapsed",
    # tcp_prune_ofo_queue(): the out-of-order queue pruned, data already SACKed thrown
    # away (the sender must resend it; once per pruning, not per segment).
    "TcpExtOfoPruned": "ofo_prunes",
    # tcp_prune_queue(): pruning did not bring memory under sk_rcvbuf; the segment that
    # asked is then dropped (and counted as rcvq_dropped or ofo_dropped too).
    "TcpExtRcvPruned": "prunes_failed",
    # tcp_v4_rcv() (bad_packet, csum_error), tcp_rcv_established() (csum_error) and
    # tcp_validate_incoming() (an in-window SYN): segments received in error, dropped.
    "TcpInErrs": "in_errors",
}


def file(node: str, when: str) -> str:
    """Its raw file of receiver `node` read `when` (layout.BEFORE or AFTER)."""
    return f"receiver-tcp-{node}-{when}.json"


class ReceiverTcp(Part):
    """A Linux receiver's TCP receive side over the run (after minus before; null: the
    kernel has no such counter)."""

    dropped_segments: int = d("the four drops below together: segments its TCP threw "
                              "away after the interfaces delivered them (skbs)")  # fmt: skip
    rcvq_dropped: int | None = d("in-order segments dropped: no receive memory (TCPRcvQDrop)")
    ofo_dropped: int | None = d("out-of-order segments dropped: no receive memory (TCPOFODrop)")
    backlog_dropped: int | None = d("segments dropped: the socket's backlog full while the "
                                    "application held it (TCPBacklogDrop)")  # fmt: skip
    zero_window_dropped: int | None = d("in-sequence segments dropped: the window was zero "
                                        "(TCPZeroWindowDrop)")  # fmt: skip
    ofo_queued: int | None = d("segments queued out of order: a hole before them (TCPOFOQueue)")
    ofo_duplicates: int | None = d("out-of-order segments it held already (TCPOFOMerge)")
    coalesced: int | None = d("segments appended to the previous one queued (TCPRcvCoalesce)")
    prune_calls: int | None = d("receive memory ran over: queues pruned (PruneCalled)")
    collapsed: int | None = d("skbs collapsed into fewer while pruning (TCPRcvCollapsed)")
    ofo_prunes: int | None = d("prunings that threw away SACKed out-of-order data (OfoPruned)")
    prunes_failed: int | None = d("prunings that freed too little (RcvPruned)")
    in_errors: int | None = d("segments received in error: header, checksum, SYN (TcpInErrs)")
    raw: list[str] = d("the counter snapshots it came from (before, after)")


def receiver_tcp(delta: Mapping[str, int], raw: list[str]) -> ReceiverTcp:
    """The part from the increase of a receiver's nstat counters (counter_delta)."""
    counts: dict[str, Any] = {f: delta.get(c) for c, f in (DROPS | COUNTS).items()}
    dropped = sum(delta.get(c, 0) for c in DROPS)
    return ReceiverTcp(dropped_segments=dropped, raw=raw, **counts)


@dataclass
class ReceiverTcpCounters(NodeReads[dict[str, ReceiverTcp]]):
    name = "receiver_tcp"
    description = "TCP receive-side counters on every Linux receiver before and after (nstat)"
    optional = True
    needs = {"linux": Needs(("nstat",))}  # its receivers' OS; any sender OS (`oses`)
    raw_files = (RawFile(file, "Linux receiver NODE's TCP receive-side counters (nstat)"),)
    read = tuple(READ)
    raw_name = staticmethod(file)
    summary_key = "receiver_tcp"
    summary_doc = (
        "`record: [receiver_tcp]`, Linux receivers: node -> its TCP's receive side over the "
        "run (nstat, the receiver's namespace): segments it dropped after its interfaces "
        "delivered them, which the loss ledger does not count, and out-of-order and "
        "coalescing counts; recorded, not judged"
    )
    summary_after = "interfaces"  # beside the other per-node counters

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if cls.asked(spec) is None:
            return None
        receivers = dict.fromkeys(f.receiver for f in spec.flows)
        nodes = [n for n in receivers if tb.driver(n).os in cls.needs]
        return cls(nodes=nodes) if nodes else None

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """receiver -> after minus before. A receiver's reads missing or not parsing, or
        a counter that went down, are one problem naming them; it is left out."""
        out: dict[str, Any] = {}
        for node in self.nodes:
            names = [file(node, BEFORE), file(node, AFTER)]
            texts = read_pair(rd, *names)
            if texts is None:
                continue
            try:
                before, after = (parse_nstat(t).counters for t in texts)
            except ValueError as e:
                rd.problem(f"{names[0]}/{names[1]}", f"not nstat counters ({e})")
                continue
            try:
                delta = counter_delta(before, after)
            except ValueError as e:
                rd.problem(names[1], str(e))
                continue
            out[node] = receiver_tcp(delta, names).model_dump()
        return SummaryPart(out)
