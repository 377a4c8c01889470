"""Frozen descriptions of what to run: topology, flows, one run.

Everything that affects a measurement is in a RunSpec, and a run's id is a stable
hash of it, so a changed setting always means a new run directory.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ccbench.errors import CcbenchError

ETH_OVERHEAD_BYTES = 14  # what a tbf/pfifo on a veth counts beyond the IP packet
TCP_IP_HEADER_BYTES = 52  # IPv4 (20) + TCP (20) + timestamps option (12): MSS = MTU - 52
QUEUE_KINDS = ("pfifo", "bfifo", "fq_codel", "codel", "pie", "red")
LOSS_MODES = ("none", "nth", "random")
# How far an emulated path's RTT may be from the configured one: calibration's idle
# RTT check and a flow's minimum RTT (validity) both use it.
RTT_TOLERANCE_MS = 1.0
# Bottleneck qdisc sampling period (bench/qdisc_cost.py measured what it costs).
QDISC_INTERVAL_DEFAULT_S = 0.05
# A queue given without limit_pkts or limit_bdp holds the seeds' 48 packets (the run
# schema cannot default one of two exclusive keys, so the default lives here).
QUEUE_LIMIT_DEFAULT_PKTS = 48


@dataclass(frozen=True)
class Topology:
    """The dumbbell: s_i -> rt1 -[shaper+queue]-> delay -> rt2 -> r_i."""

    pairs: int = 2
    rate_mbit: float = 100.0
    rtt_ms: float = 40.0
    queue_kind: str = "pfifo"
    queue_limit_pkts: int = QUEUE_LIMIT_DEFAULT_PKTS
    loss_mode: str = "none"
    loss_rate: float = 0.0
    mtu: int = 1500

    @property
    def rate_bps(self) -> float:
        return self.rate_mbit * 1e6

    @property
    def frame_bytes(self) -> int:
        return self.mtu + ETH_OVERHEAD_BYTES

    @property
    def mss_bytes(self) -> int:
        return self.mtu - TCP_IP_HEADER_BYTES

    @property
    def bdp_pkts(self) -> int:
        return bdp_packets(self.rate_mbit, self.rtt_ms, self.mtu)

    @property
    def full_queue_ms(self) -> float | None:
        """Queueing delay of a full drop-tail bottleneck queue (frames at the shaper's
        rate); None for AQMs, whose standing queue is theirs to decide."""
        if self.queue_kind not in ("pfifo", "bfifo"):
            return None
        return self.queue_limit_pkts * self.frame_bytes * 8 / self.rate_bps * 1e3

    def key(self) -> str:
        """Short stable id of the bottleneck configuration (testbeds are shared by key)."""
        return stable_hash(asdict(self))[:10]


def bdp_packets(rate_mbit: float, rtt_ms: float, mtu: int) -> int:
    return max(2, math.ceil(rate_mbit * 1e6 * rtt_ms / 1e3 / 8 / (mtu + ETH_OVERHEAD_BYTES)))


@dataclass(frozen=True)
class Flow:
    pair: int
    cc: str
    start_s: float = 0.0
    duration_s: float = 10.0
    streams: int = 1


@dataclass(frozen=True)
class Variant:
    """What is compared: a CC, and on testbeds an OS, a TCP stack and a kernel label."""

    label: str
    cc: str
    os: str = "linux"
    stack: str = "default"
    kernel: str = ""
    baseline: bool = False


@dataclass(frozen=True)
class RunSpec:
    topology: Topology
    flows: tuple[Flow, ...]
    interval_s: float = 1.0
    ss_interval_s: float = 0.1
    probe_interval_s: float = 0.1  # RTT probe s1 -> r1 during the flows (latency under load)
    probe_tool: str = "ping"  # ping | irtt | flent (ccbench.probe)
    probe_flent_test: str = "ping"
    # Bottleneck qdisc sampling period on rt1 (0 = off). Specs written before it existed
    # read as the default (their runs have no qdisc file, and their summaries say so).
    qdisc_interval_s: float = QDISC_INTERVAL_DEFAULT_S
    scenario: str = "adhoc"
    variant: str = "adhoc"
    repetition: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        d = self.to_dict()
        # Fields added after results existed hash only when set, so those keep their ids.
        for key, default in (("probe_tool", "ping"), ("probe_flent_test", "ping"),
                             ("qdisc_interval_s", QDISC_INTERVAL_DEFAULT_S)):  # fmt: skip
            if d[key] == default:
                del d[key]
        return f"{self.scenario}-{self.variant}-r{self.repetition}-" + stable_hash(d)[:8]

    @property
    def traffic_s(self) -> float:
        return max((f.start_s + f.duration_s for f in self.flows), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RunSpec:
        # A field a spec written before it existed lacks takes the dataclass default.
        rest = {f.name for f in fields(RunSpec)} - {"topology", "flows"}
        return RunSpec(
            topology=Topology(**d["topology"]),
            flows=tuple(Flow(**f) for f in d["flows"]),
            **{k: v for k, v in d.items() if k in rest},
        )


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def check_topology(t: Topology) -> None:
    """Semantic checks the schema cannot express; one clear line per problem."""
    if t.queue_kind not in QUEUE_KINDS:
        raise CcbenchError(f"topology.queue.kind: unknown queue '{t.queue_kind}'")
    if t.loss_mode not in LOSS_MODES:
        raise CcbenchError(f"topology.loss.mode: must be one of {', '.join(LOSS_MODES)}")
    if t.loss_mode != "none" and not 0 < t.loss_rate < 1:
        raise CcbenchError("topology.loss.rate: must be in (0, 1) when loss is on")
    if t.loss_mode == "nth" and t.loss_rate > 0.5:
        raise CcbenchError("topology.loss.rate: nth mode drops 1 in N packets, so at most 0.5")
    if not 1 <= t.pairs <= 60:
        raise CcbenchError("topology.pairs: must be 1..60")


def check_flows(t: Topology, flows: tuple[Flow, ...]) -> None:
    if not flows:
        raise CcbenchError("run.flows: at least one flow is needed")
    for i, f in enumerate(flows):
        if not 1 <= f.pair <= t.pairs:
            raise CcbenchError(f"run.flows[{i}].pair: {f.pair} is not in 1..{t.pairs}")
