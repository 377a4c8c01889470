"""What records during a run, as registered kinds (ccbench.instruments.base says what
one is). A run asks each kind here, in this order, whether it applies (`for_run`), and
then drives those that do; meta.json keeps each one's record under its name. Adding an
instrument is its module here, its parser in ccbench.parse, and a line in REGISTRY.
"""

from __future__ import annotations

from typing import Any

from ccbench.instruments.base import BadRecord, Cost, Instrument, Recording
from ccbench.instruments.bblog import Bblog
from ccbench.instruments.bql import TxQueueLimits
from ccbench.instruments.counters import TcpCounters
from ccbench.instruments.cpu import RouterCpu
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.instruments.siftr import Siftr
from ccbench.instruments.sockstat import Sockstat
from ccbench.instruments.ss import Ss
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

# Order: started in this order, stopped in this order. The counters and the router's
# CPU come last, closest to the traffic; the sockstat samples end before the CPU is read.
REGISTRY: dict[str, type[Instrument]] = {
    c.name: c
    for c in (
        Ss,
        QdiscSampler,
        Siftr,
        Bblog,
        TcpProbe,
        Sockstat,
        TcpCounters,
        TxQueueLimits,
        RouterCpu,
    )
}


def for_run(tb: Testbed, spec: RunSpec) -> list[Instrument]:
    """The instruments a run of `spec` on `tb` records with (an untraced run: none that
    works per packet)."""
    kinds = [c for c in REGISTRY.values()
             if not (spec.tracing == "untraced" and c.cost is Cost.PER_PACKET)]  # fmt: skip
    return [i for c in kinds if (i := c.for_run(tb, spec)) is not None]


def from_records(d: dict[str, Any]) -> tuple[dict[str, Instrument], list[str]]:
    """meta.json's `instruments` as the instruments that recorded, and a problem for
    each record that is not its instrument's (or of no instrument known)."""
    out: dict[str, Instrument] = {}
    problems = []
    for name, rec in d.items():
        cls = REGISTRY.get(name)
        if cls is None:
            problems.append(f"instruments: {name!r} is no instrument of this ccbench")
            continue
        try:
            out[name] = cls.from_record(rec)
        except BadRecord as e:
            problems.append(f"instruments.{name}: {e}")
    return out, problems


__all__ = ["REGISTRY", "BadRecord", "Cost", "Instrument", "Recording", "for_run", "from_records"]
