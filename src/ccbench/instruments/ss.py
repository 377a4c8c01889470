"""`ss -tinH` every `ss_interval_s` on each Linux sender (ccbench.parse.ss reads it): cwnd,
ssthresh, unacked segments, the peer's window, RTT and the kernel's minimum, delivery
rate and a BBR flow's model per socket, sampled (docs/series.md)."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from ccbench import layout
from ccbench.instruments.base import Cost, Instrument, Recording, SeriesContext, need
from ccbench.jsonio import is_number
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Needs
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink


@dataclass
class Ss(Instrument):
    name = "ss"
    description = "ss -tinH on the Linux senders every interval"
    raw_files = (RawFile(layout.ss, "Linux sender NODE's ss samples, one block per interval"),)
    cost = Cost.SAMPLED
    oses = ("linux",)
    sender_rank = 2
    needs = {"linux": Needs(("bash", "ss"), ("bash5",))}  # hosts.linux SS_LOOP: $EPOCHREALTIME

    interval_s: float = 0.1
    nodes: list[str] = field(default_factory=list)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if spec.ss_interval_s <= 0:
            return None
        nodes = [n for n in spec.senders if tb.driver(n).ss_sampler(spec.ss_interval_s)]
        return cls(interval_s=spec.ss_interval_s, nodes=nodes) if nodes else None

    def hosts(self) -> list[str]:
        return list(self.nodes)

    def start(self, rec: Recording) -> None:
        for node in self.nodes:
            argv = rec.tb.driver(node).ss_sampler(self.interval_s)
            assert argv is not None  # for_run kept only nodes with a sampler
            self.procs.append(
                rec.tb.ex(node).spawn(argv, stdout=rec.raw / layout.ss(node),
                                      stderr=rec.raw / layout.stderr_of(layout.ss(node)))
            )  # fmt: skip

    def stop(self, rec: Recording) -> None:
        for p in self.procs:
            p.stop(signal.SIGINT)

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and is_number(d.get("interval_s"))
             and isinstance(d.get("nodes"), list)
             and all(isinstance(n, str) for n in d["nodes"]),
             "not {interval_s, nodes}")  # fmt: skip
        return cls(interval_s=float(d["interval_s"]), nodes=list(d["nodes"]))

    @classmethod
    def add_rows(cls, rd: RawDir, record: Self | None, ctx: SeriesContext, sink: Sink) -> None:
        from ccbench import timeseries_samplers as samplers  # pandas: only to read

        samplers.ss_rows(rd, ctx.t0, ctx.traffic_s, ctx.local_to_flow, sink)
