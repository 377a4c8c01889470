"""Parse FreeBSD's TCP statistics, `netstat -s -p tcp` as text or as libxo JSON
(`netstat -s -p tcp --libxo json`), into one dict of counters, and name the causes of
retransmissions from their increase over a run.

Both forms come from tcp_stats() in usr.bin/netstat/inet.c, one xo_emit() per
counter: in text a line such as "\\t\\t17 data packets (24616 bytes) retransmitted"
(the plural "s" by plural(), "entry/entries" by pluralies()), in JSON the field names
of the same format strings, inside {"statistics": {"tcp": {...}}} with the containers
syncache, hostcache, sack, ecn, tcp-signature, pmtud, tw and "TCP connection count by
state". Here a counter's key is its libxo field name, prefixed by its container
("sack.segment-retransmits"); the per-state connection counts are "states.<STATE>".

`-s` prints every counter, `-ss` only those that are not zero (absent keys);
`-z` zeroes the counters after reading them (fetch_stats()), so with `netstat -sz`
before a run the snapshot after it IS the run's increase. Releases add and drop
lines: every line of the FreeBSD 11-15 inet.c is known here; a line that is not
is kept in `unknown_lines`, not guessed at.

The retransmission counters (sys/netinet/tcp_var.h, tcp_input.c, tcp_sack.c):
tcps_sndrexmitpack/byte (sent-retransmitted-packets/-bytes) count all retransmitted
data, tcps_rexmttimeo (retransmit-timeouts) RTO expiries, tcps_sack_rexmits
(sack.segment-retransmits) segments resent in SACK recovery, tcps_sack_lostrexmt
(sack.lost-retransmissions) retransmissions lost again, tcps_sndrexmitbad
(sent-unnecessary-retransmitted-packets) RTOs found spurious (cc_cong_signal()
CC_RTO_ERR), tcps_dsack_* D-SACKs received.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ccbench.parse.nstat import RetransmitCauses

# (container, line) in the order tcp_stats() prints them; {name} is a counter,
# {s} plural(), {ies} pluralies(). Older releases' lines are kept (marked).
_LINES: tuple[tuple[str, str], ...] = (
    ("", "{sent-packets} packet{s} sent"),
    ("", "{sent-data-packets} data packet{s} ({sent-data-bytes} byte{s})"),
    ("", "{sent-retransmitted-packets} data packet{s} ({sent-retransmitted-bytes} byte{s})"
         " retransmitted"),
    ("", "{sent-unnecessary-retransmitted-packets} data packet{s} unnecessarily retransmitted"),
    ("", "{sent-resends-by-mtu-discovery} resend{s} initiated by MTU discovery"),
    ("", "{sent-ack-only-packets} ack-only packet{s} ({sent-packets-delayed} delayed)"),
    ("", "{sent-urg-only-packets} URG only packet{s}"),
    ("", "{sent-window-probe-packets} window probe packet{s}"),
    ("", "{sent-window-update-packets} window update packet{s}"),
    ("", "{sent-control-packets} control packet{s}"),
    ("", "{received-packets} packet{s} received"),
    ("", "{received-ack-packets} ack{s} (for {received-ack-bytes} byte{s})"),
    ("", "{received-duplicate-acks} duplicate ack{s}"),
    ("", "{received-udp-tunneled-pkts} UDP tunneled pkt{s}"),
    ("", "{received-bad-udp-tunneled-pkts} UDP tunneled pkt cnt with error{s}"),
    ("", "{received-acks-for-unsent-data} ack{s} for unsent data"),
    ("", "{received-in-sequence-packets} packet{s} ({received-in-sequence-bytes} byte{s})"
         " received in-sequence"),
    ("", "{received-completely-duplicate-packets} completely duplicate packet{s}"
         " ({received-completely-duplicate-bytes} byte{s})"),
    ("", "{received-old-duplicate-packets} old duplicate packet{s}"),
    ("", "{received-some-duplicate-packets} packet{s} with some dup. data"
         " ({received-some-duplicate-bytes} byte{s} duped)"),
    ("", "{received-out-of-order} out-of-order packet{s} ({received-out-of-order-bytes} byte{s})"),
    ("", "{received-after-window-packets} packet{s} ({received-after-window-bytes} byte{s})"
         " of data after window"),
    ("", "{received-window-probes} window probe{s}"),
    ("", "{receive-window-update-packets} window update packet{s}"),
    ("", "{received-with-dsack-packets} packet{s} received with dsack"),
    ("", "{received-with-dsack-bytes} dsack byte{s} received (no TLP involved)"),
    ("", "{received-with-dsack-bytes-tlp} dsack byte{s} received (TLP responsible)"),
    ("", "{received-after-close-packets} packet{s} received after close"),
    ("", "{discard-bad-checksum} discarded for bad checksum{s}"),
    ("", "{discard-bad-header-offset} discarded for bad header offset field{s}"),
    ("", "{discard-too-short} discarded because packet too short"),
    ("", "{discard-memory-problems} discarded due to memory problems"),  # before 14
    ("", "{discard-reassembly-queue-full} discarded due to full reassembly queue"),
    ("", "{connection-requests} connection request{s}"),
    ("", "{connections-accepts} connection accept{s}"),
    ("", "{bad-connection-attempts} bad connection attempt{s}"),
    ("", "{listen-queue-overflows} listen queue overflow{s}"),
    ("", "{ignored-in-window-resets} ignored RSTs in the window{s}"),
    ("", "{connections-established} connection{s} established (including accepts)"),
    ("", "{connections-hostcache-rtt} time{s} used RTT from hostcache"),
    ("", "{connections-hostcache-rttvar} time{s} used RTT variance from hostcache"),
    ("", "{connections-hostcache-ssthresh} time{s} used slow-start threshold from hostcache"),
    ("", "{connections-closed} connection{s} closed (including {connection-drops} drop{s})"),
    ("", "{connections-updated-rtt-on-close} connection{s} updated cached RTT on close"),
    ("", "{connections-updated-variance-on-close} connection{s} updated cached RTT variance"
         " on close"),
    ("", "{connections-updated-ssthresh-on-close} connection{s} updated cached ssthresh"
         " on close"),
    ("", "{embryonic-connections-dropped} embryonic connection{s} dropped"),
    ("", "{segments-updated-rtt} segment{s} updated rtt (of {segment-update-attempts}"
         " attempt{s})"),
    ("", "{retransmit-timeouts} retransmit timeout{s}"),
    ("", "{connections-dropped-by-retransmit-timeout} connection{s} dropped by rexmit timeout"),
    ("", "{persist-timeout} persist timeout{s}"),
    ("", "{connections-dropped-by-persist-timeout} connection{s} dropped by persist timeout"),
    ("", "{connections-dropped-by-finwait2-timeout} Connection{s} (fin_wait_2) dropped"
         " because of timeout"),
    ("", "{keepalive-timeout} keepalive timeout{s}"),
    ("", "{keepalive-probes} keepalive probe{s} sent"),
    ("", "{connections-dropped-by-keepalives} connection{s} dropped by keepalive"),
    ("", "{connections-dropped-due-to-progress-time} connection{s} dropped due to exceeding"
         " progress time"),
    ("", "{ack-header-predictions} correct ACK header prediction{s}"),
    ("", "{data-packet-header-predictions} correct data packet header prediction{s}"),
    ("syncache", "{entries-added} syncache entr{ies} added"),
    ("syncache", "{retransmitted} retransmitted"),
    ("syncache", "{duplicates} dupsyn"),
    ("syncache", "{dropped} dropped"),
    ("syncache", "{completed} completed"),
    ("syncache", "{bucket-overflow} bucket overflow"),
    ("syncache", "{cache-overflow} cache overflow"),
    ("syncache", "{reset} reset"),
    ("syncache", "{stale} stale"),
    ("syncache", "{aborted} aborted"),
    ("syncache", "{bad-ack} badack"),
    ("syncache", "{unreachable} unreach"),
    ("syncache", "{zone-failures} zone failure{s}"),
    ("syncache", "{sent-cookies} cookie{s} sent"),
    ("syncache", "{receivd-cookies} cookie{s} received"),  # sic
    ("hostcache", "{entries-added} hostcache entr{ies} added"),
    ("hostcache", "{buffer-overflows} bucket overflow"),
    ("sack", "{recovery-episodes} SACK recovery episode{s}"),
    ("sack", "{segment-retransmits} segment rexmit{s} in SACK recovery episodes"),
    ("sack", "{byte-retransmits} byte rexmit{s} in SACK recovery episodes"),
    ("sack", "{received-blocks} SACK option{s} (SACK blocks) received"),
    ("sack", "{sent-option-blocks} SACK option{s} (SACK blocks) sent"),
    ("sack", "{lost-retransmissions} SACK retransmission{s} lost"),
    ("sack", "{scoreboard-overflows} SACK scoreboard overflow"),
    ("ecn", "{ce-packets} packet{s} with ECN CE bit set"),  # before 14
    ("ecn", "{ect0-packets} packet{s} with ECN ECT(0) bit set"),  # before 14
    ("ecn", "{ect1-packets} packet{s} with ECN ECT(1) bit set"),  # before 14
    ("ecn", "{received-ce-packets} packet{s} received with ECN CE bit set"),
    ("ecn", "{received-ect0-packets} packet{s} received with ECN ECT(0) bit set"),
    ("ecn", "{received-ect1-packets} packet{s} received with ECN ECT(1) bit set"),
    ("ecn", "{sent-ect0-packets} packet{s} sent with ECN ECT(0) bit set"),
    ("ecn", "{sent-ect1-packets} packet{s} sent with ECN ECT(1) bit set"),
    ("ecn", "{handshakes} successful ECN handshake{s}"),
    ("ecn", "{congestion-reductions} time{s} ECN reduced the congestion window"),
    ("ecn", "{ace-nonect-syn} ACE SYN packet{s} with Non-ECT"),
    ("ecn", "{ace-ect0-syn} ACE SYN packet{s} with ECT0"),
    ("ecn", "{ace-ect1-syn} ACE SYN packet{s} with ECT1"),
    ("ecn", "{ace-ce-syn} ACE SYN packet{s} with CE"),
    ("tcp-signature", "{received-good-signature} packet{s} with matching signature received"),
    ("tcp-signature", "{received-bad-signature} packet{s} with bad signature received"),
    ("tcp-signature", "{failed-make-signature} time{s} failed to make signature due to no SA"),
    ("tcp-signature", "{no-signature-expected} time{s} unexpected signature received"),
    ("tcp-signature", "{no-signature-provided} time{s} no signature provided by segment"),
    ("pmtud", "{pmtud-activated} Path MTU discovery black hole detection activation{s}"),
    ("pmtud", "{pmtud-activated-min-mss} Path MTU discovery black hole detection min MSS"
              " activation{s}"),
    ("pmtud", "{pmtud-failed} Path MTU discovery black hole detection failure{s}"),
    ("tw", "{tw_responds} time{s} connection in TIME-WAIT responded with ACK"),
    ("tw", "{tw_recycles} time{s} connection in TIME-WAIT was actively recycled"),
    ("tw", "{tw_resets} time{s} connection in TIME-WAIT responded with RST"),
)  # fmt: skip
_STATES_CONTAINER = "TCP connection count by state"
_STATES_TITLE = _STATES_CONTAINER + ":"
# "\t{:%s/%ju} {Np:/connection ,connections} in %s state": "connection " when 1.
_STATE_LINE = re.compile(r"^(\d+) connections? +in (\w+) state$")
_TOKEN = re.compile(r"\{([^}]+)\}")


def _line_regex(line: str) -> tuple[re.Pattern[str], tuple[str, ...]]:
    parts, names, pos = [], [], 0
    for m in _TOKEN.finditer(line):
        parts.append(re.escape(line[pos : m.start()]))
        tok = m.group(1)
        if tok == "s":
            parts.append("s?")
        elif tok == "ies":
            parts.append("(?:ies|y)")
        else:
            parts.append(r"(\d+)")
            names.append(tok)
        pos = m.end()
    parts.append(re.escape(line[pos:]))
    return re.compile("^" + "".join(parts) + "$"), tuple(names)


_COMPILED = [(container, *_line_regex(line)) for container, line in _LINES]


@dataclass
class FreebsdTcpStats:
    """TCP counters: key (libxo name, "container.name", "states.<STATE>") -> value;
    `unknown_lines`: text lines this parser does not know (another release)."""

    counters: dict[str, int]
    unknown_lines: list[str] = field(default_factory=list)


def parse_netstat_tcp(text: str) -> FreebsdTcpStats:
    """`netstat -s -p tcp` output, libxo JSON or text (told apart by the first
    character)."""
    if text.lstrip().startswith("{"):
        return parse_netstat_tcp_json(text)
    return parse_netstat_tcp_text(text)


def parse_netstat_tcp_text(text: str) -> FreebsdTcpStats:
    """The "tcp:" section of `netstat -s [-p tcp]` text. ValueError if there is none
    or a counter appears twice. A line that fits several counters (syncache and
    hostcache both print "N bucket overflow"; sent and received both print "N window
    update packets") is the first of them after the last line read, as inet.c prints
    them in that order."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "tcp:")
    except StopIteration:
        raise ValueError("no 'tcp:' section in the netstat -s output") from None
    stats = FreebsdTcpStats(counters={})
    last = -1  # index in _COMPILED of the last line matched
    in_states = False
    for n, raw in enumerate(lines[start + 1 :], start=start + 2):
        if not raw.strip():
            continue
        if not raw[0].isspace():
            if raw.rstrip() == _STATES_TITLE:
                in_states = True
                continue
            break  # the next protocol's section
        line = " ".join(raw.split())
        if in_states:
            m = _STATE_LINE.match(line)
            if m:
                _put(stats.counters, f"states.{m.group(2)}", int(m.group(1)), n)
            else:
                stats.unknown_lines.append(raw)
            continue
        hits = [(i, m) for i, (_, rx, _) in enumerate(_COMPILED) if (m := rx.match(line))]
        if not hits:
            stats.unknown_lines.append(raw)
            continue
        i, m = next(((i, m) for i, m in hits if i > last), hits[-1])
        container, _, names = _COMPILED[i]
        for name, value in zip(names, m.groups(), strict=True):
            _put(stats.counters, f"{container}.{name}" if container else name, int(value), n)
        last = i
    return stats


def parse_netstat_tcp_json(text: str) -> FreebsdTcpStats:
    """`netstat -s -p tcp --libxo json` -> counters. ValueError if there is no
    statistics.tcp object or a counter is not a non-negative integer."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"netstat JSON does not parse: {e}") from None
    tcp = data.get("statistics", {}).get("tcp") if isinstance(data, dict) else None
    if not isinstance(tcp, dict):
        raise ValueError("netstat JSON has no statistics.tcp object")
    counters: dict[str, int] = {}
    _flatten(tcp, "", counters)
    return FreebsdTcpStats(counters=counters)


def freebsd_retransmit_causes(delta: Mapping[str, int]) -> RetransmitCauses:
    """The causes from the increase of the counters over a run
    (ccbench.parse.nstat.counter_delta of two FreebsdTcpStats.counters)."""

    def total(*names: str) -> int | None:
        present = [delta[n] for n in names if n in delta]
        return sum(present) if present else None

    return RetransmitCauses(
        os="freebsd",
        retransmitted_segments=total("sent-retransmitted-packets"),
        retransmitted_bytes=total("sent-retransmitted-bytes"),
        timeouts=total("retransmit-timeouts"),
        after_timeout_segments=None,
        fast_retransmit_segments=total("sack.segment-retransmits"),
        recovery_episodes=total("sack.recovery-episodes"),
        recoveries_ended_by_timeout=None,
        loss_probes=None,
        loss_probe_recoveries=None,
        lost_retransmits=total("sack.lost-retransmissions"),
        spurious_rtos=total("sent-unnecessary-retransmitted-packets"),
        dsacks_received=total("received-with-dsack-packets"),
        dsack_segments=None,
        dsack_bytes=total("received-with-dsack-bytes", "received-with-dsack-bytes-tlp"),
        undos=None,
    )


def _put(counters: dict[str, int], key: str, value: int, n: int) -> None:
    if key in counters:
        raise ValueError(f"line {n}: counter {key} appears twice")
    counters[key] = value


def _flatten(obj: dict[str, Any], prefix: str, out: dict[str, int]) -> None:
    for key, value in obj.items():
        name = "states" if key == _STATES_CONTAINER else key
        path = f"{prefix}{name}"
        if isinstance(value, dict):
            _flatten(value, path + ".", out)
        elif isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[path] = value
        elif isinstance(value, str) and value.isdigit():
            out[path] = int(value)
        else:
            raise ValueError(f"netstat JSON: {path} = {value!r} is not a count")
