"""Every per-run metric a comparison reports, named once: its runs-table column (the
summary table's stem), label, table header, unit, decimals and direction, and where it
may be used. aggregate computes means, CIs and deltas of exactly these; the report's
tables take their headers and decimals here; the config schema's lists of metrics an
expectation or a reference may name are these (ccbench.config fills them in)."""

from __future__ import annotations

from dataclasses import dataclass

# Decimals per kind of quantity: the report's rounding rules (report.fmt.fmt).
DIGITS = {"mbps": 1, "pct": 1, "jain": 3, "ms": 1, "count": 0, "s": 1, "ratio": 2, "us_per_kb": 2}


@dataclass(frozen=True)
class Metric:
    key: str  # runs-table column; the summary table has key_mean, key_ci95, key_delta_pct ...
    label: str  # what it is called in text ("throughput sum")
    header: str  # table header ("sum")
    unit: str  # "Mbit/s", "ms", "" ...
    digits: int  # decimals shown
    higher_is_better: bool | None  # None: neither (a delay's change is not a verdict)
    in_results: bool = False  # a column of the seed-style results table
    expectable: bool = True  # an expectation may name it (config `expectations`)
    referable: bool = False  # a published reference may name it (config `references`)
    delta: bool = True  # the delta table shows its change vs the baseline


CATALOG: tuple[Metric, ...] = (
    Metric("throughput_sum_mbps", "throughput sum", "sum", "Mbit/s", DIGITS["mbps"], True,
           in_results=True, referable=True),
    Metric("utilization_pct", "utilization", "util.", "%", DIGITS["pct"], True,
           in_results=True, referable=True, delta=False),  # the sum over a fixed rate
    Metric("jain", "Jain", "Jain", "", DIGITS["jain"], True, in_results=True, referable=True),
    Metric("srtt_mean_ms", "srtt mean", "srtt avg", "ms", DIGITS["ms"], False, in_results=True,
           referable=True),
    Metric("srtt_p95_ms", "srtt p95", "srtt p95", "ms", DIGITS["ms"], False, in_results=True,
           referable=True),
    Metric("srtt_max_ms", "srtt max", "srtt max", "ms", DIGITS["ms"], False, in_results=True,
           referable=True),
    Metric("retransmits", "retransmits", "retrans.", "segs", DIGITS["count"], False,
           in_results=True, referable=True),
    Metric("drops_pkts", "bottleneck drops", "drops", "pkts", DIGITS["count"], None,
           in_results=True, referable=True),
    # The bottleneck queue sampled on rt1 (n/a for runs made without sampling).
    Metric("queue_backlog_mean_pkts", "queue backlog mean", "queue avg", "pkts",
           DIGITS["mbps"], False, in_results=True, expectable=False),
    Metric("queue_full_pct", "time queue full", "queue full", "% time", DIGITS["pct"], False,
           in_results=True, expectable=False),
    # RTT under load: the concurrent probe's percentiles (the report names the tool).
    Metric("probe_rtt_p50_ms", "RTT under load p50", "RTT under load p50", "ms", DIGITS["ms"],
           False, referable=True),
    Metric("probe_rtt_p95_ms", "RTT under load p95", "RTT under load p95", "ms", DIGITS["ms"],
           False, referable=True),
    Metric("convergence_s", "convergence time", "convergence", "s", DIGITS["s"], False,
           delta=False),
    Metric("mathis_ratio", "throughput / Mathis", "sum / (n × Mathis)", "", DIGITS["ratio"],
           None, delta=False),
    # The senders' and receivers' CPU over the traffic and their service demand (CPU µs
    # per KB delivered, netperf's), summary `host_cpu`: the hosts' own counters where
    # each host is its own, else (one kernel) the iperf3 processes' CPU.
    Metric("sender_cpu_pct", "sender CPU", "sender CPU", "%", DIGITS["pct"], False,
           referable=True),
    Metric("receiver_cpu_pct", "receiver CPU", "receiver CPU", "%", DIGITS["pct"], False,
           referable=True),
    Metric("sender_sd_us_per_kb", "sender service demand", "sender µs/KB", "µs/KB",
           DIGITS["us_per_kb"], False, referable=True),
    Metric("receiver_sd_us_per_kb", "receiver service demand", "receiver µs/KB", "µs/KB",
           DIGITS["us_per_kb"], False, referable=True),
)  # fmt: skip

BY_KEY = {m.key: m for m in CATALOG}
KEYS = tuple(BY_KEY)
RESULTS = tuple(m for m in CATALOG if m.in_results)
LOAD = (BY_KEY["probe_rtt_p50_ms"], BY_KEY["probe_rtt_p95_ms"])
# The scenario's CPU table and panel (report.cpu), its deltas vs the baseline with them.
CPU = tuple(BY_KEY[k] for k in ("sender_cpu_pct", "receiver_cpu_pct", "sender_sd_us_per_kb",
                                "receiver_sd_us_per_kb"))  # fmt: skip
DELTA = tuple(m for m in CATALOG if m.delta and (m.in_results or m in LOAD))
EXPECTABLE = tuple(m.key for m in CATALOG if m.expectable)
REFERABLE = tuple(m.key for m in CATALOG if m.referable)
# The probe's p99 is shown per run only (too few samples for a mean of tails).
PER_RUN_LOAD = ("probe_rtt_p50_ms", "probe_rtt_p95_ms", "probe_rtt_p99_ms")


def digits(key: str) -> int:
    """Decimals of a runs/summary metric (3 for one the catalogue does not know)."""
    if key in BY_KEY:
        return BY_KEY[key].digits
    if key.startswith("flow") and key.endswith("_mbps"):
        return DIGITS["mbps"]
    return 3
