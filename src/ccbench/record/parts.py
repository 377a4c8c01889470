"""The pieces of a run record (summary.json), each typed and described. The descriptions
are the summary.json reference (docs/summary-reference.md is generated from them)."""

from __future__ import annotations

from typing import Any

from ccbench.part import Part, d


class FlowResult(Part):
    flow: int = d("flow number, 1..N, in the order of the spec's flows")
    pair: int = d("sender/receiver pair s_i -> r_i it ran on")
    cc_requested: str = d("the CC the spec asked for")
    cc_used: str | None = d("the CC iperf3 reported (end.sender_tcp_congestion)")
    start_s: float = d("start offset, s")
    duration_s: float = d("length asked, s")
    streams: int = d("parallel TCP connections (iperf3 -P)")
    server_port: int | None = d(
        "the port its iperf3 server listened on, as the client connected to it "
        "(start.connected[].remote_port; layout.flow_port decides it)",
        None,
    )
    throughput_bps: float | None = d("receiver-side goodput, iperf3 end.sum_received")
    sender_throughput_bps: float | None = d("sender-side rate, iperf3 end.sum_sent")
    bytes_received: int | None = d("bytes the receiver got")
    retransmits: int | None = d("segments the sender retransmitted")
    srtt_min_us: float | None = d(
        "iperf3's smallest smoothed RTT (tcpi_rtt, sampled once per interval), µs "
        "(end.streams[].sender.min_rtt): above the kernel's minimum while a queue stands"
    )
    srtt_mean_us: float | None = d("iperf3's mean of those smoothed RTT samples, µs")
    srtt_max_us: float | None = d("iperf3's largest of those smoothed RTT samples, µs")
    min_rtt_us: float | None = d(
        "the kernel's minimum RTT of the connection, µs: Linux tcpi_min_rtt (ss `minrtt`, "
        "its smallest over the run's samples); FreeBSD, which exports no minimum, the "
        "smallest srtt siftr logged (an upper bound); null where neither was sampled",
        None,
    )
    min_rtt_source: str | None = d("where min_rtt_us comes from (null: not sampled)", None)
    rwnd_limited_share: float | None = d(
        "share of the sender's samples with bytes in flight within 2 segments of the "
        "receiver's advertised window (above 0.2 the run is invalid: it measured the "
        "receive buffer); null where no source gave both",
        None,
    )
    rwnd_source: str | None = d("the samples rwnd_limited_share counts: tcp_probe, ss, siftr",
                                None)  # fmt: skip
    max_cwnd_bytes: int | None = d("largest congestion window, bytes")
    raw: str | None = d("the raw file it came from (raw/iperf3-K.json)")


class QdiscCounters(Part):
    kind: str = d("qdisc kind")
    sent_pkts: int = d("packets sent during the run (after minus before)")
    sent_bytes: int = d("bytes sent during the run")
    dropped: int = d("packets dropped during the run")
    overlimits: int = d("overlimit events during the run")


class QueueConfigured(Part):
    queue_kind: str | None = d("rt1's child queue kind when the run started (tc-before.json)")
    queue_limit_pkts: int | None = d("its limit in packets, where it counts packets")
    queue_limit_bytes: int | None = d("its limit in bytes, where it counts bytes")
    shaper_rate_bps: float | None = d("the shaper's rate, bit/s")


class Bottleneck(Part):
    configured: QueueConfigured | None = d("rt1's queue and shaper as the run found them", None)
    queue: QdiscCounters | None = d("counters of the child queue (handle 10:)", None)
    shaper: QdiscCounters | None = d("counters of the shaper (handle 1:)", None)
    drops: int | None = d("the queue's drops during the run")
    not_controlled: str | None = d(
        "a lab's own network: the bottleneck ccbench does not control, named", None)  # fmt: skip


class RttExcess(Part):
    bound_ms: float = d("RTT + a full drop-tail queue + 5 ms: the most the path can give")
    samples: int = d("RTT samples (senders' srtt from ss/siftr, the probe's)")
    above: int = d("samples above the bound")
    share: float | None = d("above / samples (invalid above 2 %)")
    max_excess_ms: float = d("the worst sample's excess over its bound, ms")
    longest_above_s: float = d("the longest stretch one flow's srtt stayed above, s")
    delayed_ack_max_ms: float | None = d(
        "the most a sender's sample's bound grows while its window is below the BDP: "
        "the receiver's delayed ACK, min(40 ms, RTT x (1 - cwnd/BDP))",
        None,
    )


class DelayElement(Part):
    packets: int = d("packets the native element released during the run")
    late_5ms: int = d("of them, released > 5 ms late")
    late_share: float | None = d("late_5ms / packets (invalid above 1 %)")
    max_late_ms_since_start: float | None = d("latest release since the element started, ms")
    bucket_edges_ms: list[float] | None = d("lateness histogram bucket edges, ms")
    bucket_counts: list[int] = d("lateness histogram counts during the run")
    queue_full_drops: int = d("packets the kernel queue to the element dropped")
    lost: int | None = d("packets the element never saw or dropped (null: not counted by the "
                         "version that parsed the run)", None)  # fmt: skip
    cpu_s: float = d("the element's CPU seconds during the run")
    clock_source: str | None = d("the clock it stamped packets with")


class LossLedger(Part):
    bottleneck_pkts: int | None = d("drops of rt1's queue and shaper", None)
    loss_rules_pkts: int = d("drops of the configured iptables loss rules")
    outside: dict[str, int] = d("drops anywhere else, by place (an invalid run)")
    outside_pkts: int = d("sum of outside")
    retransmits: int | None = d("all flows' retransmitted segments", None)
    spurious_retransmits: int | None = d(
        "retransmitted segments the receivers reported as received twice (DSACK, ss "
        "dsack_dups): no loss behind them; null without ss samples", None)  # fmt: skip
    softnet_backlog_pkts: int = d("the kernels' receive backlog drops (softnet_stat)")
    softnet_time_squeeze: int = d("times receive processing ran out of budget")
    unread: list[str] = d("counters that could not be read (node and what)")


class SenderKernel(Part):
    identity: str = d("the line a variant's kernel.match is searched in")
    short: str = d("the few words tables show")


class KernelRecord(Part):
    label: str = d("the variant's kernel label")
    match: str | None = d("the variant's kernel regex (null for a plain label)")
    senders: dict[str, SenderKernel] = d("node -> the kernel it ran")


class ProbeRecord(Part):
    tool: str = d("probe tool as summaries name it ('unreadable' when its file was not)")
    what: str | None = d("which program measured what", None)
    samples: int = d("RTT samples taken while the flows ran")
    sent: int | None = d("probes sent", None)
    received: int | None = d("replies received", None)
    raw: str | None = d("its raw file", None)
    samples_us: list[float] = d("every sample in the order measured, µs", [])
    series: list[dict[str, Any]] | None = d("flent: every series of the test", None)
    coverage: float | None = d("share of the traffic the samples span (flent)", None)
    first_sample_s: float | None = d(
        "s from the traffic's start to the probe's first sample, < 0 before it (flent)", None
    )
    rtt_p50_us: float | None = d("median RTT under load (nearest rank), µs", None)
    rtt_p95_us: float | None = d("95th percentile, µs", None)
    rtt_p99_us: float | None = d("99th percentile, µs", None)
    rtt_max_us: float | None = d("largest sample, µs", None)
    error: str | None = d("why the probe's file could not be read", None)


class Srtt(Part):
    source: str = d("finest source of the senders' RTT: ss, siftr, else iperf3")
    samples: int = d("samples")
    mean_us: float = d("mean, µs")
    p95_us: float = d("95th percentile (nearest rank), µs")
    max_us: float = d("largest, µs")


class Mathis(Part):
    mbps_per_flow: float = d("Mathis et al. throughput per flow for the configured MSS, RTT, loss")
    ratio: float | None = d("measured sum / (mbps_per_flow x flows)")


class CalibrationSummary(Part):
    delay_method: str | None = d("netem, ccdelay, or the Emulab delay node", None)
    delay_direction: str = d("both (RTT/2 each way) or reverse (the whole RTT on r -> s)", "both")
    idle_rtt: dict[str, dict[str, Any]] | None = d("per pair: the idle ping series", None)
    rate_ratio: float | None = d("measured / expected shaper goodput", None)


class Recorded(Part):
    """Copies of raw files as the run recorded them (a damaged one as it is: its own
    reason says so)."""

    calibration: Any = d("raw/calibration.json as recorded (null: missing or not JSON)")
    facts: Any = d("raw/facts.json as recorded (null: missing or not JSON)")
    qdisc_config: list[str] | None = d("raw/qdisc-config.txt, by line")


class LoaderWait(Part):
    role: str = d("senders or receivers: the role whose `loader` settings these are")
    asked: dict[str, str] = d("boot tunable -> the value asked")
    found: dict[str, str | None] = d("boot tunable -> what the loader passed (kenv; null: "
                                     "nothing)")  # fmt: skip
    wrote: bool = d("ccbench wrote its lines into /boot/loader.conf at this check (false: "
                    "they were there already, waiting for the reboot)")  # fmt: skip


class Waiting(Part):
    label: str = d("the kernel the variant waits for ('': it waits for boot tunables only)",
                   "")  # fmt: skip
    match: str = d("its regex", "")
    senders: dict[str, str] = d("node -> the kernel it ran when checked")
    checked_unix: float = d("when it was checked")
    loader: dict[str, LoaderWait] = d("node -> the FreeBSD boot tunables (hosts.loader) it "
                                      "did not report as asked", {})  # fmt: skip
