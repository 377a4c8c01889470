"""Frozen descriptions of what to run: topology, flows, one run (where it runs is
ccbench.testbed.kinds' TestbedConfig: this module imports no testbed module).

Everything that affects a measurement is in a RunSpec, and a run's id is a stable
hash of it, so a changed setting always means a new run directory.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Protocol

from ccbench import queues, roles
from ccbench.errors import CcbenchError
from ccbench.host_settings import HostSettings

ETH_OVERHEAD_BYTES = 14  # what a tbf/pfifo on a veth counts beyond the IP packet
TCP_IP_HEADER_BYTES = 52  # IPv4 (20) + TCP (20) + timestamps option (12): MSS = MTU - 52
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
    def has_loss(self) -> bool:
        return self.loss_mode != "none" and self.loss_rate > 0

    @property
    def queue(self) -> queues.QueueKind:
        return queues.queue_kind(self.queue_kind)

    @property
    def full_queue_ms(self) -> float | None:
        """Queueing delay of a full drop-tail bottleneck queue (frames at the shaper's
        rate); None for AQMs, whose standing queue is theirs to decide."""
        if not self.queue.drop_tail:
            return None
        return self.queue_limit_pkts * self.frame_bytes * 8 / self.rate_bps * 1e3

    @property
    def rtt_bound_ms(self) -> float | None:
        """The most RTT the path can give: the configured RTT and a full drop-tail queue
        (None for AQMs). Validity, the RTT-excess share and the plots all use it."""
        full = self.full_queue_ms
        return None if full is None else self.rtt_ms + full

    @classmethod
    def from_config(cls, d: dict[str, Any]) -> Topology:
        """A validated config's `topology` section (queue {kind, limit_pkts |
        limit_bdp}, loss {mode, rate}, pairs, rate_mbit, rtt_ms, mtu) as a Topology."""
        q = d.get("queue", {})
        if "limit_pkts" in q:
            limit = int(q["limit_pkts"])
        elif "limit_bdp" in q:
            bdp = bdp_packets(d["rate_mbit"], d["rtt_ms"], d["mtu"])
            limit = max(2, round(q["limit_bdp"] * bdp))
        else:
            limit = QUEUE_LIMIT_DEFAULT_PKTS
        loss = d.get("loss", {})
        t = cls(
            pairs=d["pairs"],
            rate_mbit=float(d["rate_mbit"]),
            rtt_ms=float(d["rtt_ms"]),
            queue_kind=q.get("kind", "pfifo"),
            queue_limit_pkts=limit,
            loss_mode=loss.get("mode", "none"),
            loss_rate=float(loss.get("rate", 0.0)),
            mtu=d["mtu"],
        )
        check_topology(t)
        return t

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

    @property
    def sender(self) -> str:
        """The node it is sent from (pair i: s_i)."""
        return roles.sender(self.pair)

    @property
    def receiver(self) -> str:
        """The node that receives it (pair i: r_i)."""
        return roles.receiver(self.pair)


# How the OSes ccbench drives are written in messages.
OS_TITLES = {"linux": "Linux", "freebsd": "FreeBSD"}


def os_titles(oses: tuple[str, ...] | list[str]) -> str:
    return " or ".join(OS_TITLES.get(o, o) for o in oses)


# The keys a variant has (the config schema's `variant`); `kernel` is the label here,
# the regex the config may give beside it is `kernel_match`.
VARIANT_KEYS = ("label", "cc", "os", "stack", "kernel", "baseline", "dumbbell", "host")


@dataclass(frozen=True)
class Variant:
    """What is compared: a CC, and on testbeds an OS, a TCP stack, a kernel (a label, and
    a regex the senders' kernel identity must match) and a dumbbell it is pinned to.

    The one variant class: the matrix lists them (to_dict: with `kernel_match`) and each
    run's spec carries its own (spec_dict: without the regex, so a changed regex changes
    no run id). `absent`: keys a spec written before they existed lacks (left out again,
    so that spec hashes to its id)."""

    label: str
    cc: str
    os: str = "linux"
    stack: str = "default"
    kernel: str = ""
    kernel_match: str | None = None
    baseline: bool = False
    dumbbell: int | None = None
    # Its host settings beyond the config's top level (ccbench.host_settings).
    host: HostSettings = field(default_factory=HostSettings)
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_config(cls, v: dict[str, Any]) -> Variant:
        """A validated config's variant (kernel a label or {label, match})."""
        k = v.get("kernel", "")
        label, match = (k["label"], k["match"]) if isinstance(k, dict) else (k, None)
        return cls(label=v["label"], cc=v["cc"], os=v.get("os", "linux"),
                   stack=v.get("stack", "default"), kernel=label, kernel_match=match,
                   baseline=bool(v.get("baseline", False)), dumbbell=v.get("dumbbell"),
                   host=HostSettings.from_dict(v.get("host"), f"{v['label']}.host"))  # fmt: skip

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Variant:
        """As matrix.json or a spec holds it (types checked by the reader)."""
        unknown = set(d) - {*VARIANT_KEYS, "kernel_match"}
        if unknown:
            raise ValueError(f"unknown variant keys {', '.join(sorted(unknown))}")
        return cls(label=d["label"], cc=d["cc"], os=d.get("os", "linux"),
                   stack=d.get("stack", "default"), kernel=d.get("kernel", ""),
                   kernel_match=d.get("kernel_match"), baseline=d.get("baseline", False),
                   dumbbell=d.get("dumbbell"), host=HostSettings.from_dict(d.get("host")),
                   absent=frozenset(k for k in VARIANT_KEYS if k not in d))  # fmt: skip

    def spec_dict(self) -> dict[str, Any]:
        """The variant as a run's spec holds it (hashed into the run id)."""
        d = {"label": self.label, "cc": self.cc, "os": self.os, "stack": self.stack,
             "kernel": self.kernel, "baseline": self.baseline,
             **({"dumbbell": self.dumbbell} if self.dumbbell is not None else {}),
             **({"host": self.host.to_dict()} if not self.host.empty else {})}  # fmt: skip
        return {k: v for k, v in d.items() if k not in self.absent}

    def to_dict(self) -> dict[str, Any]:
        """The variant as matrix.json lists it."""
        match = {"kernel_match": self.kernel_match} if self.kernel_match is not None else {}
        return {**self.spec_dict(), **match}

    @property
    def kernel_requirement(self) -> dict[str, str] | None:
        """{label, match} when the variant needs a kernel the senders must run."""
        if self.kernel_match is None:
            return None
        return {"label": self.kernel, "match": self.kernel_match}

    @property
    def stack_cc(self) -> bool:
        """Its CC is the TCP stack's own (FreeBSD tcp_bbr), not a socket option."""
        return self.os == "freebsd" and (self.cc == "bbr" or self.stack == "bbr")


# RunSpec fields added after results existed, with the defaults runs were made with
# before: a spec without one reads as that default (from_dict), and a field at it is
# left out of the hash (run_id), so every run made before keeps its id.
FIELDS_ADDED: dict[str, Any] = {
    "probe_tool": "ping",
    "probe_flent_test": "ping",
    "qdisc_interval_s": 0.05,
    "siftr_budget_mb": 64.0,
    "tracing": "inline",
    "record": {},
    "host": {},
}
# Optional instruments a spec of 2026-11-25 asked for by keys of its own, now `record:
# {name: options}`: key -> (instrument, {its old option key: option}).
OLD_RECORD_KEYS: dict[str, tuple[str, dict[str, str]]] = {
    "tcp_probe": ("tcp_probe", {"tcp_probe_budget_mb": "budget_mb"}),
    "bblog": ("bblog", {}),
}


def _record_keys_upgraded(d: dict[str, Any]) -> dict[str, Any]:
    """A spec mapping with the old keys as `record` (a copy when it changed). Its run id
    is the one the current layout hashes: a run asked with the old keys is made again."""
    old = [k for k in d if k in OLD_RECORD_KEYS or any(k in o for _, o in OLD_RECORD_KEYS.values())]
    if not old:
        return d
    record = dict(d.get("record") or {})
    for key, (name, opts) in OLD_RECORD_KEYS.items():
        if d.get(key) is True:
            record[name] = {new: d[k] for k, new in opts.items() if k in d}
    return {**{k: v for k, v in d.items() if k not in old}, "record": record}


# What a run records per packet (`tracing: separate` in a comparison config makes each
# repetition twice: untraced, whose numbers are reported, and traced, whose curves are
# plotted; instruments.for_run leaves the per-packet ones out of an untraced run).
TRACING = ("inline", "untraced", "traced")


@dataclass(frozen=True)
class Recorded:
    """An optional instrument a run records with (config `record:`), by its registered
    name, and its options (every one the instrument declares, sorted by name)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, key: str) -> Any:
        return dict(self.options)[key]


@dataclass(frozen=True)
class RunSpec:
    topology: Topology
    flows: tuple[Flow, ...]
    interval_s: float = 1.0
    ss_interval_s: float = 0.1
    probe_interval_s: float = 0.1  # RTT probe s1 -> r1 during the flows (latency under load)
    probe_tool: str = "ping"  # a tool of ccbench.probes: ping | fping | irtt | flent
    probe_flent_test: str = "ping"
    # Bottleneck qdisc sampling period on rt1 (0 = off). Specs written before it existed
    # read as the default (their runs have no qdisc file, and their summaries say so).
    qdisc_interval_s: float = QDISC_INTERVAL_DEFAULT_S
    # FreeBSD senders: the most a run's siftr log may hold per sender, MB (siftr logs
    # every Nth packet to stay under it: hosts.siftr_plan).
    siftr_budget_mb: float = 64.0
    tracing: str = "inline"  # TRACING
    # The optional instruments asked for, with their options (ccbench.instruments).
    record: tuple[Recorded, ...] = ()
    # The endpoints' settings asked beyond ccbench's baseline: the config's top level with
    # the variant's in place (its MTU is the topology's: `host.mtu` is always None here).
    host: HostSettings = field(default_factory=HostSettings)
    scenario: str = "adhoc"
    variant: str = "adhoc"  # the variant's label
    repetition: int = 1
    # The compared variant in full (None: a single run from a run config, a Linux
    # variant of its flows' CC); on disk under "extra", where the id hashes it.
    variant_def: Variant | None = None

    @property
    def os(self) -> str:
        return self.variant_def.os if self.variant_def else "linux"

    def recording(self, name: str) -> Recorded | None:
        """The optional instrument `name` as this run asks for it; None: not asked."""
        return next((r for r in self.record if r.name == name), None)

    @property
    def stack(self) -> str:
        return self.variant_def.stack if self.variant_def else "default"

    @property
    def kernel_label(self) -> str:
        return self.variant_def.kernel if self.variant_def else ""

    @property
    def stack_cc(self) -> bool:
        """The flows' CC is the TCP stack's own (FreeBSD tcp_bbr), not a socket option."""
        return self.variant_def.stack_cc if self.variant_def else False

    @property
    def senders(self) -> list[str]:
        """The sender nodes the flows use, sorted."""
        return sorted({f.sender for f in self.flows})

    @property
    def first_start_s(self) -> float:
        return min((f.start_s for f in self.flows), default=0.0)

    @property
    def window_s(self) -> float:
        """The traffic window: from the first flow's start to the last flow's end."""
        return self.traffic_s - self.first_start_s

    @property
    def run_id(self) -> str:
        d = self.to_dict()
        # Fields added after results existed hash only when set, so those keep their ids.
        for key, default in FIELDS_ADDED.items():
            if d[key] == default:
                del d[key]
        return f"{self.scenario}-{self.variant}-r{self.repetition}-" + stable_hash(d)[:8]

    @property
    def traffic_s(self) -> float:
        return max((f.start_s + f.duration_s for f in self.flows), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["variant_def"]
        d["flows"] = [asdict(f) for f in self.flows]
        d["record"] = {r.name: dict(r.options) for r in self.record}
        d["host"] = self.host.to_dict()
        d["extra"] = {"variant": self.variant_def.spec_dict()} if self.variant_def else {}
        return d

    @staticmethod
    def from_dict(d: dict[str, Any]) -> RunSpec:
        # A field a spec written before it existed lacks takes the dataclass default.
        d = _record_keys_upgraded(d)
        typed = {"topology", "flows", "variant_def", "record", "host"}
        rest = {f.name for f in fields(RunSpec)} - typed
        v = (d.get("extra") or {}).get("variant")
        return RunSpec(
            topology=Topology(**d["topology"]),
            flows=tuple(Flow(**f) for f in d["flows"]),
            variant_def=Variant.from_dict(v) if v else None,
            record=recorded(d.get("record") or {}),
            host=HostSettings.from_dict(d.get("host"), "spec.json host"),
            **{k: v for k, v in d.items() if k in rest},
        )


class Named(Protocol):
    """What names a run: a RunSpec, or a record of its run."""

    @property
    def run_id(self) -> str: ...
    @property
    def scenario(self) -> str: ...
    @property
    def variant(self) -> str: ...
    @property
    def repetition(self) -> int: ...


def run_identity(run: Named) -> dict[str, Any]:
    """The fields that name a run, in the order summary.json and the runs and flows tables
    lead with them."""
    return {
        "run_id": run.run_id,
        "scenario": run.scenario,
        "variant": run.variant,
        "repetition": run.repetition,
    }


def recorded(d: dict[str, dict[str, Any]]) -> tuple[Recorded, ...]:
    """spec.json's `record` ({name: {option: value}}) as the spec holds it: by name."""
    return tuple(Recorded(n, tuple(sorted(o.items()))) for n, o in sorted(d.items()))


def spec_dict_problem(d: dict[str, Any]) -> str | None:
    """What makes `d` unusable as a run spec (the numbers summaries divide by), or None."""
    from ccbench.jsonio import is_number as num

    topo = d.get("topology")
    if not isinstance(topo, dict):
        return "no 'topology' object"
    for key in ("rate_mbit", "rtt_ms", "queue_limit_pkts", "mtu", "pairs", "loss_rate"):
        if key in topo and not (num(topo[key]) and topo[key] >= 0):
            return f"topology.{key}: {topo[key]!r} is not a non-negative number"
    if "rate_mbit" in topo and not topo["rate_mbit"] > 0:
        return "topology.rate_mbit: must be above 0"
    flows = d.get("flows")
    if not isinstance(flows, list) or not flows:
        return "no 'flows' list"
    for i, f in enumerate(flows):
        if not isinstance(f, dict):
            from ccbench.jsonio import jtype

            return f"flows[{i}]: a JSON {jtype(f)} where an object belongs"
        for key in ("start_s", "duration_s", "pair", "streams"):
            if key in f and not (num(f[key]) and f[key] >= 0):
                return f"flows[{i}].{key}: {f[key]!r} is not a non-negative number"
        if not (num(f.get("duration_s", 10.0)) and f.get("duration_s", 10.0) > 0):
            return f"flows[{i}].duration_s: must be above 0"
        if not isinstance(f.get("cc"), str):
            return f"flows[{i}].cc: not a string"
    extra = d.get("extra", {})
    if not isinstance(extra, dict):
        return "extra: not an object"
    if extra.get("variant") is not None and not isinstance(extra["variant"], dict):
        return "extra.variant: not an object"
    for key in ("interval_s", "ss_interval_s", "probe_interval_s"):
        if key in d and not (num(d[key]) and d[key] >= 0):
            return f"{key}: {d[key]!r} is not a non-negative number"
    rec = d.get("record", {})
    if not (isinstance(rec, dict) and all(isinstance(o, dict) for o in rec.values())):
        return "record: not an object of instrument name -> options object"
    return None


def stable_hash(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def check_topology(t: Topology) -> None:
    """Semantic checks the schema cannot express; one clear line per problem."""
    queues.queue_kind(t.queue_kind)
    if t.loss_mode not in LOSS_MODES:
        raise CcbenchError(f"topology.loss.mode: must be one of {', '.join(LOSS_MODES)}")
    if t.loss_mode != "none" and not 0 < t.loss_rate < 1:
        raise CcbenchError("topology.loss.rate: must be in (0, 1) when loss is on")
    if t.loss_mode == "nth" and t.loss_rate > 0.5:
        raise CcbenchError("topology.loss.rate: nth mode drops 1 in N packets, so at most 0.5")
    if not 1 <= t.pairs <= 60:
        raise CcbenchError("topology.pairs: must be 1..60")


def flows_from_config(
    spec: int | list[dict[str, Any]], variant_cc: str, duration_s: float
) -> tuple[Flow, ...]:
    """A config's flows: N (pairs 1..N, the variant's CC, the whole duration) or a list
    of {pair (default: its position), cc ("variant" = the variant's), start_s,
    duration_s, streams}. The one place config flows become Flow objects."""
    if isinstance(spec, int):
        return tuple(Flow(pair=i, cc=variant_cc, duration_s=duration_s) for i in range(1, spec + 1))
    out = []
    for i, f in enumerate(spec, start=1):
        cc = f.get("cc", "variant")
        out.append(
            Flow(
                pair=f.get("pair", i),
                cc=variant_cc if cc == "variant" else cc,
                start_s=float(f.get("start_s", 0)),
                duration_s=float(f.get("duration_s", duration_s)),
                streams=int(f.get("streams", 1)),
            )
        )
    return tuple(out)


def check_flows(t: Topology, flows: tuple[Flow, ...]) -> None:
    if not flows:
        raise CcbenchError("run.flows: at least one flow is needed")
    for i, f in enumerate(flows):
        if not 1 <= f.pair <= t.pairs:
            raise CcbenchError(f"run.flows[{i}].pair: {f.pair} is not in 1..{t.pairs}")
