"""Parse iproute2's `nstat -a -z` (text) and `nstat -a -z --json` output: the
kernel's SNMP/MIB counters of the network namespace nstat ran in (/proc/net/snmp,
/proc/net/netstat, /proc/net/snmp6), and name the causes of TCP retransmissions
from the counters' increase over a run.

Formats (iproute2 misc/nstat.c, dump_kern_db()): text is a `#<source>` line
("#kernel" when nstat read /proc itself, the daemon's id when an `nstat -d` daemon
answered) then one `%-32s%-16llu%6.1f` line per counter (name, value, rate; an
incremental dump may add " (overflow)"); JSON is `{"<source>":{"<name>":<value>,...}}`.
`-a` gives absolute values (without it nstat prints increments since its history
file), `-z` includes zero counters, `-s` leaves the history file alone. nstat leaves
out TcpCurrEstab, TcpMaxConn, TcpRto* and IpForwarding/IpDefaultTTL (not counters).

The retransmission counters (net/ipv4/tcp_output.c, tcp_timer.c, tcp_input.c):
TcpRetransSegs counts every retransmitted segment; TcpExtTCPFastRetrans the
segments tcp_xmit_retransmit_queue() resent outside TCP_CA_Loss (fast recovery) and
TcpExtTCPSlowStartRetrans those resent in TCP_CA_Loss (after an RTO, beyond the
segment the timer itself resends); TcpExtTCPTimeouts counts RTO expiries;
TcpExtTCPLossProbes tail-loss probes sent (new data or a retransmission) and
TcpExtTCPLossProbeRecovery losses a probe repaired; TcpExtTCPSpuriousRTOs RTOs that
F-RTO found spurious; TcpExtTCPDSACKRecv/TCPDSACKOfoRecv D-SACKs received (the
receiver got a segment twice: a spurious retransmission, or duplication in the
network).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import model_validator

from ccbench.part import Part, d

_UNDOS = ("TcpExtTCPFullUndo", "TcpExtTCPPartialUndo", "TcpExtTCPDSACKUndo", "TcpExtTCPLossUndo")


@dataclass(frozen=True)
class NstatSnapshot:
    """One nstat dump: its source ("kernel") and counter name -> value."""

    source: str
    counters: dict[str, int]


def parse_nstat(text: str) -> NstatSnapshot:
    """nstat output, JSON or text (told apart by the first character)."""
    return parse_nstat_json(text) if text.lstrip().startswith("{") else parse_nstat_text(text)


def parse_nstat_json(text: str) -> NstatSnapshot:
    """`nstat --json` output -> snapshot. ValueError if it is not one object holding
    one object of non-negative integer counters."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"nstat JSON does not parse: {e}") from None
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError("nstat JSON is not one {source: {counters}} object")
    ((source, counters),) = data.items()
    if not isinstance(counters, dict):
        raise ValueError(f"nstat JSON: {source!r} does not hold an object of counters")
    out: dict[str, int] = {}
    for name, value in counters.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"nstat JSON: counter {name} = {value!r} is not a count")
        out[name] = value
    return NstatSnapshot(source=source, counters=out)


def parse_nstat_text(text: str) -> NstatSnapshot:
    """`nstat` text output -> snapshot. ValueError naming the line for a counter line
    that is not `name value [rate]`, or counters before the `#source` line."""
    source: str | None = None
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if line.startswith("#"):
            if source is not None:
                raise ValueError(f"line {n}: a second nstat dump ({line!r}); split it first")
            source = line[1:].strip()
            continue
        if source is None:
            raise ValueError(f"line {n}: counter before the #source line: {line[:80]!r}")
        cols = line.split()
        try:
            if len(cols) < 2:
                raise ValueError
            value = int(cols[1])
            if len(cols) > 2:
                float(cols[2])
        except ValueError:
            raise ValueError(f"line {n}: not an nstat counter line: {line[:80]!r}") from None
        out[cols[0]] = value
    if source is None:
        raise ValueError("no nstat output: no #source line")
    return NstatSnapshot(source=source, counters=out)


def counter_delta(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """after - before for every counter in `after` (one missing before counts from 0:
    a module loaded during the run). ValueError naming the first counter that went
    down: counters reset in between (`netstat -z`, a new namespace) or the snapshots
    are of different hosts; then the increase is unknown."""
    out: dict[str, int] = {}
    for name, value in after.items():
        d = value - before.get(name, 0)
        if d < 0:
            raise ValueError(f"counter {name} went down ({before[name]} -> {value}): reset?")
        out[name] = d
    return out


class RetransmitCauses(Part):
    """What a sender's counters say about its retransmissions over a run (deltas), and
    the causes they show (`causes`, from the counts when not given). None: the OS keeps
    no such counter (or the snapshot lacks it). The FreeBSD parser
    (ccbench.parse.netstat_freebsd) fills the same record."""

    os: str = d("the sender's OS (whose counters these are)")
    retransmitted_segments: int | None = d("segments retransmitted (Linux TcpRetransSegs)")
    retransmitted_bytes: int | None = d("bytes retransmitted (FreeBSD)")
    timeouts: int | None = d("retransmission timeouts (RTO expiries)")
    after_timeout_segments: int | None = d("segments resent in loss state after an RTO")
    fast_retransmit_segments: int | None = d("segments resent in fast (SACK) recovery")
    recovery_episodes: int | None = d("fast-recovery episodes entered")
    recoveries_ended_by_timeout: int | None = d("recoveries that ended in an RTO")
    loss_probes: int | None = d("tail-loss probes sent")
    loss_probe_recoveries: int | None = d("losses a tail-loss probe repaired")
    lost_retransmits: int | None = d("retransmissions found lost again")
    spurious_rtos: int | None = d("RTOs found unnecessary (F-RTO)")
    dsacks_received: int | None = d("D-SACKs received: the receiver had the data already")
    dsack_segments: int | None = d("segments D-SACKed")
    dsack_bytes: int | None = d("bytes D-SACKed (FreeBSD)")
    undos: int | None = d("cwnd reductions undone (Linux)")
    causes: list[str] = d("the causes the counters show: timeout, fast-retransmit, "
                          "tail-loss-probe, lost-retransmit, spurious-rto, dsack")  # fmt: skip

    @model_validator(mode="before")
    @classmethod
    def _with_causes(cls, data: Any) -> Any:
        if isinstance(data, dict) and "causes" not in data:
            return {**data, "causes": shown_causes(data)}
        return data


def shown_causes(counts: Mapping[str, Any]) -> list[str]:
    """Names of the causes the counts (RetransmitCauses' fields) show, in this order:
    "timeout", "fast-retransmit", "tail-loss-probe", "lost-retransmit", "spurious-rto",
    "dsack" (the receiver reported data it already had)."""

    def n(key: str) -> int:
        return counts.get(key) or 0

    shown = (
        ("timeout", n("timeouts")),
        ("fast-retransmit", n("fast_retransmit_segments") + n("recovery_episodes")),
        ("tail-loss-probe", n("loss_probes")),
        ("lost-retransmit", n("lost_retransmits")),
        ("spurious-rto", n("spurious_rtos")),
        ("dsack", n("dsacks_received") + n("dsack_bytes")),
    )
    return [name for name, count in shown if count]


def linux_retransmit_causes(delta: Mapping[str, int]) -> RetransmitCauses:
    """The causes from the increase of nstat counters over a run (counter_delta)."""

    def total(*names: str) -> int | None:
        present = [delta[n] for n in names if n in delta]
        return sum(present) if present else None

    return RetransmitCauses(
        os="linux",
        retransmitted_segments=total("TcpRetransSegs"),
        retransmitted_bytes=None,
        timeouts=total("TcpExtTCPTimeouts"),
        after_timeout_segments=total("TcpExtTCPSlowStartRetrans"),
        fast_retransmit_segments=total("TcpExtTCPFastRetrans"),
        recovery_episodes=total("TcpExtTCPSackRecovery", "TcpExtTCPRenoRecovery"),
        recoveries_ended_by_timeout=total("TcpExtTCPSackRecoveryFail", "TcpExtTCPRenoRecoveryFail"),
        loss_probes=total("TcpExtTCPLossProbes"),
        loss_probe_recoveries=total("TcpExtTCPLossProbeRecovery"),
        lost_retransmits=total("TcpExtTCPLostRetransmit"),
        spurious_rtos=total("TcpExtTCPSpuriousRTOs"),
        dsacks_received=total("TcpExtTCPDSACKRecv", "TcpExtTCPDSACKOfoRecv"),
        dsack_segments=total("TcpExtTCPDSACKRecvSegs"),
        dsack_bytes=None,
        undos=total(*_UNDOS),
    )
