"""The bottleneck queue sampled every `qdisc_interval_s` (ccbench.parse.qdisc reads it):
backlog, drops and sent packets over time, from before the first packet. Its part of
summary.json is `queue` (QueueSummary)."""

from __future__ import annotations

import contextlib
import gzip
import lzma
import signal
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ccbench import layout
from ccbench.instruments.base import (
    Cost,
    Instrument,
    Recording,
    SeriesContext,
    SummaryPart,
    need,
)
from ccbench.jsonio import is_number
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile, open_text, stored
from ccbench.needs import Needs
from ccbench.part import Part, d
from ccbench.reasons import Code, Reason
from ccbench.roles import BOTTLENECK_ROUTER
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink

# Over ssh the sampler starts ~0.3 s later: the run waits for its first sample, so the
# queue is seen from the first packet (summary queue.first_s says).
FIRST_SAMPLE_S = 5.0
QDISC_MIN_COVERAGE = 0.9  # like the ss sampler: samples must reach this share of the traffic
# In the words of a run's reason whose bottleneck queue held super-packets
# (queue.super_packets; Code.SUPER_PACKETS).
SUPER_PACKETS = "offloads (TSO/GSO/GRO/LRO) made super-packets"
# What reading a stored file may raise besides ValueError (a UnicodeDecodeError is one).
_READ_ERRORS = (UnicodeDecodeError, OSError, EOFError, zlib.error, lzma.LZMAError,
                gzip.BadGzipFile)  # fmt: skip


class DropsCheck(Part):
    series: int | None = d("drops summed from the queue samples")
    counters: int | None = d("tc-before/after's difference")
    equal: bool | None = d("series == counters")
    before_first_sample: int | None = d("drops before the first sample")
    after_last_sample: int | None = d("drops after the last sample")
    consistent: bool = d("false only when the counters went backwards (qdisc replaced)")
    note: str | None = d("why series and counters differ")


class QueueSummary(Part):
    sampled: bool = d("whether rt1's queue was sampled (false: see notes)")
    notes: list[str] = d("an interval not kept, drops outside the sampled span, ...")
    file: str | None = d("the samples' raw file", None)
    samples: int | None = d("samples taken", None)
    samples_in_traffic: int | None = d("samples while the flows ran", None)
    interval_s: float | None = d("sampling interval asked, s", None)
    interval_achieved_s: float | None = d("mean step while the flows ran, s", None)
    max_gap_s: float | None = d("longest step while the flows ran, s", None)
    first_s: float | None = d("first sample, s from the traffic start", None)
    last_s: float | None = d("last sample, s from the traffic start", None)
    limit_pkts: int | None = d("the queue's limit in packets", None)
    limit_bytes: int | None = d("the queue's limit in bytes", None)
    backlog_mean_pkts: float | None = d("mean backlog while the flows ran, packets", None)
    backlog_p95_pkts: float | None = d("95th percentile backlog (nearest rank), packets", None)
    backlog_max_pkts: int | None = d("largest backlog, packets", None)
    backlog_mean_bytes: float | None = d("mean backlog, bytes", None)
    full_share: float | None = d("share of samples with backlog >= limit - 1", None)
    drop_intervals: int | None = d("sampling intervals in which the queue dropped", None)
    drop_burst_max: int | None = d("most drops in one interval", None)
    drops_in_traffic: int | None = d("drops while the flows ran (from the samples)", None)
    drops_check: DropsCheck | None = d("the series' drops against the counters", None)
    frame_bytes: int | None = d("one frame of the path: MTU + 14, what a queued packet should be",
                                None)  # fmt: skip
    samples_with_backlog: int | None = d("samples while the flows ran with a packet queued", None)
    pkt_bytes_max: float | None = d(
        "the largest backlog bytes / packets of those samples, bytes (a sample can be off by a "
        "few packets: the kernel reads the two unlocked, one after the other)",
        None,
    )
    pkt_bytes_mean: float | None = d(
        "bytes per queued packet over those samples (bytes summed / packets summed)", None
    )
    samples_over_frame: int | None = d(
        "of those samples, the ones holding more bytes than their packets can as frames", None
    )
    super_packets: bool | None = d(
        "the queue held super-packets (GSO/TSO skbs, GRO/LRO aggregates), and the run is "
        "invalid: more of the samples with a backlog over a frame than a sample's race "
        "explains (docs/fidelity.md, Super-packets at the bottleneck); null: none had one",
        None,
    )


@dataclass
class QdiscSampler(Instrument[QueueSummary]):
    name = "qdisc"
    description = "the bottleneck's qdisc counters every interval (tc -s -j)"
    raw_files = (
        RawFile(layout.qdisc, "the bottleneck router NODE's qdisc counters every interval"),
    )
    cost = Cost.SAMPLED
    oses = ()  # the bottleneck router's, not a sender's
    summary_key = "queue"
    summary_doc = "rt1's queue sampled every qdisc_interval_s (0: off)"
    summary_after = "bottleneck"
    needs = {"linux": Needs(("bash", "tc"), ("bash5",))}  # hosts.linux QDISC_LOOP: $EPOCHREALTIME

    node: str = ""
    dev: str = ""
    interval_s: float = 0.0
    # The sampler's arguments (its script is the driver's constant, not recorded).
    argv: list[str] = field(default_factory=list)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if spec.qdisc_interval_s <= 0 or tb.roles.bottleneck is None:
            return None  # off, or no queue of ccbench's to sample (a lab's own network)
        node, dev = tb.bottleneck
        argv = tb.driver(node).qdisc_sampler(dev, spec.qdisc_interval_s)
        return cls(node=node, dev=dev, interval_s=spec.qdisc_interval_s, argv=argv[3:])

    def hosts(self) -> list[str]:
        return [self.node]

    @property
    def file(self) -> str:
        return layout.qdisc(self.node)

    def start(self, rec: Recording) -> None:
        argv = rec.tb.driver(self.node).qdisc_sampler(self.dev, self.interval_s)
        self.procs.append(
            rec.tb.ex(self.node).spawn(argv, stdout=rec.raw / self.file,
                                       stderr=rec.raw / layout.stderr_of(self.file))
        )  # fmt: skip
        _wait_nonempty(rec.raw / self.file, FIRST_SAMPLE_S)

    def stop(self, rec: Recording) -> None:
        for p in self.procs:
            p.stop(signal.SIGINT)

    @classmethod
    def from_record(cls, d: Any) -> Self:
        # A record without a node is from when the bottleneck was always rt1.
        need(isinstance(d, dict) and isinstance(d.get("node", BOTTLENECK_ROUTER), str),
             "not {node, dev, interval_s}")  # fmt: skip
        iv = d.get("interval_s")
        return cls(node=d.get("node", BOTTLENECK_ROUTER), dev=str(d.get("dev", "")),
                   interval_s=float(iv) if is_number(iv) else 0.0,
                   argv=[str(a) for a in d.get("argv") or []])  # fmt: skip

    @classmethod
    def add_rows(cls, rd: RawDir, record: Self | None, ctx: SeriesContext, sink: Sink) -> None:
        from ccbench import timeseries_samplers as samplers  # pandas: only to read

        if record is not None and ctx.t0 is not None:
            samplers.qdisc_rows(rd, record.file, ctx.t0, sink)

    @classmethod
    def without_record(cls, rd: RawDir, spec: RunSpec) -> Self | None:
        # Asked for, but the run predates the sampler: a sampler of no node says so.
        return cls() if spec.qdisc_interval_s > 0 and not rd.failed else None

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """summary.json's `queue` from raw/qdisc-<node>.txt (read as a stream by
        parse.qdisc.QueueStats). A run made before queue sampling existed (no sampler's
        record, `without_record`) says so; a sampler file that is missing, not the
        sampler's format, or cut short is a problem like any damaged raw file."""
        if not self.node:
            why = "no queue samples: the run was made before ccbench sampled the queue"
            return SummaryPart({"sampled": False, "notes": [why]})
        out = _queue(rd, spec, self.file, t0)
        return SummaryPart(out, super_packet_reasons(f"{self.node}/{self.dev}", out))


def super_packet_reasons(where: str, q: dict[str, Any]) -> list[Reason]:
    """Why a run is invalid when its bottleneck queue (`q`: summary.json `queue`) held
    super-packets: its limit and its drops were then not of wire packets."""
    if not q.get("super_packets"):
        return []
    limit = q.get("limit_pkts")
    meant = (f"the queue's limit of {limit} packets is not {limit} wire packets"
             if limit is not None else "the queue held and dropped them whole, not as "
             "wire packets")  # fmt: skip
    text = (f"bottleneck {where}: the queue held packets of up to {q['pkt_bytes_max']:.0f} bytes "
            f"(mean {q['pkt_bytes_mean']:.0f} B; {q['samples_over_frame']} of "
            f"{q['samples_with_backlog']} samples over a frame) where a frame is at most "
            f"{q['frame_bytes']}: an endpoint's {SUPER_PACKETS}, so {meant}")  # fmt: skip
    return [Reason.of(Code.SUPER_PACKETS, text, where=where, pkt_bytes_max=q["pkt_bytes_max"],
                      frame_bytes=q["frame_bytes"], samples_over_frame=q["samples_over_frame"],
                      samples_with_backlog=q["samples_with_backlog"])]  # fmt: skip


def _queue(rd: RawDir, spec: RunSpec, name: str, t0_s: float | None) -> dict[str, Any]:
    from ccbench.parse.qdisc import (
        QUEUE_HANDLE,
        QueueStats,
        iter_qdisc_samples,
        iter_queue_points,
    )
    from ccbench.parse.tc import parse_tc_qdisc_json

    path = stored(rd.path, name)
    acc = QueueStats(t0_s or 0.0, spec.traffic_s, spec.qdisc_interval_s,
                     spec.topology.frame_bytes)  # fmt: skip
    try:
        if path is None:
            raise FileNotFoundError(name)
        with open_text(path) as lines:
            for p in iter_queue_points(iter_qdisc_samples(lines)):
                acc.add(p)
    except _READ_ERRORS:
        # What is wrong with it in the words of a whole-file read (RawDir.text).
        if rd.text(name, required=not rd.failed) is None:
            return {"sampled": False, "notes": [f"{name}: missing"]}
        rd.problem(name, "unreadable (it changed while read)")
        return {"sampled": False, "notes": [f"{name}: unreadable"]}
    except ValueError as e:
        rd.problem(name, f"not qdisc samples ({e})")
        return {"sampled": False, "notes": [f"{name}: unreadable"]}
    if not acc.n or t0_s is None:
        if not rd.failed:
            rd.problem(name, "no samples of the bottleneck queue")
        return {"sampled": False, "notes": [f"{name}: no samples"]}
    counters = []
    for f in (layout.tc(BEFORE), layout.tc(AFTER)):
        try:
            stats = parse_tc_qdisc_json(rd.text(f) or "")
        except ValueError:
            stats = []  # its own reason comes from summarize.bottleneck
        counters.append(next((q for q in stats if q.handle == QUEUE_HANDLE), None))
    out = acc.result(counters[0], counters[1])
    out["file"] = name
    if (out["last_s"] or 0) < QDISC_MIN_COVERAGE * spec.traffic_s and not rd.failed:
        rd.problem(name, f"samples end {out['last_s']:.1f} s into {spec.traffic_s:g} s of "
                         "traffic (cut short)")  # fmt: skip
    if not out["drops_check"]["consistent"]:
        rd.problem(name, out["drops_check"]["note"])
    return out


def _wait_nonempty(path: Path, timeout_s: float) -> None:
    """Until `path` has content or `timeout_s` passed (a sampler that never writes is
    the summary's problem, not a reason to stop the run here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 0:
                return
        time.sleep(0.01)
