"""The bottleneck queue sampled every `qdisc_interval_s` (ccbench.parse.qdisc reads it):
backlog, drops and sent packets over time, from before the first packet."""

from __future__ import annotations

import contextlib
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from ccbench import layout
from ccbench.instruments.base import Cost, Instrument, Recording, SeriesContext, need
from ccbench.jsonio import is_number
from ccbench.layout import RawDir
from ccbench.needs import Needs
from ccbench.roles import BOTTLENECK_ROUTER
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink

# Over ssh the sampler starts ~0.3 s later: the run waits for its first sample, so the
# queue is seen from the first packet (summary queue.first_s says).
FIRST_SAMPLE_S = 5.0


@dataclass
class QdiscSampler(Instrument):
    name = "qdisc"
    description = "the bottleneck's qdisc counters every interval (tc -s -j)"
    cost = Cost.SAMPLED
    oses = ()  # the bottleneck router's, not a sender's
    needs = {"linux": Needs(("bash", "tc"))}  # hosts.linux qdisc_sampler

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


def _wait_nonempty(path: Path, timeout_s: float) -> None:
    """Until `path` has content or `timeout_s` passed (a sampler that never writes is
    the summary's problem, not a reason to stop the run here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if path.stat().st_size > 0:
                return
        time.sleep(0.01)
