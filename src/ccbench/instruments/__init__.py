"""What records during a run, as registered kinds (ccbench.instruments.base says what
one is). A run asks each kind here, in this order, whether it applies (`for_run`), and
then drives those that do; meta.json keeps each one's record under its name. The time
series reads each kind's rows in this order too. Adding an instrument is its module
here, its parser in ccbench.parse, and a line in REGISTRY.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ccbench.errors import CcbenchError
from ccbench.instruments.base import (
    BadRecord,
    Cost,
    Instrument,
    Recording,
    SeriesContext,
    SummaryPart,
)
from ccbench.instruments.bblog import Bblog
from ccbench.instruments.bql import TxQueueLimits
from ccbench.instruments.counters import TcpCounters
from ccbench.instruments.cpu import RouterCpu
from ccbench.instruments.host_cpu import HostCpu
from ccbench.instruments.host_settings import HostSettings
from ccbench.instruments.interfaces import Interfaces
from ccbench.instruments.qdisc import QdiscSampler
from ccbench.instruments.receiver_tcp import ReceiverTcpCounters
from ccbench.instruments.siftr import Siftr
from ccbench.instruments.sockstat import Sockstat
from ccbench.instruments.ss import Ss
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.layout import RawDir
from ccbench.reasons import Reason
from ccbench.spec import Recorded, RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink

# Order: started in this order, stopped in this order, read in this order. The counters
# and the endpoints' and the router's CPU come last, closest to the traffic; the sockstat
# samples end before the CPU is read.
REGISTRY: dict[str, type[Instrument]] = {
    c.name: c
    for c in (
        Ss,
        Siftr,
        Bblog,
        TcpProbe,
        QdiscSampler,
        Sockstat,
        HostSettings,
        TcpCounters,
        ReceiverTcpCounters,
        Interfaces,
        TxQueueLimits,
        HostCpu,
        RouterCpu,
    )
}
# The senders' own cwnd/RTT sample sources, finest first (timeseries_stats).
SENDER_SOURCES = tuple(
    c.name for c in sorted((c for c in REGISTRY.values() if c.sender_rank is not None),
                           key=lambda c: c.sender_rank or 0)
)  # fmt: skip


def record_option(value: Any, where: str = "record") -> tuple[Recorded, ...]:
    """A config's `record:` (optional instruments by name, each alone or as {name:
    {option: value}}, the schema checked its shape) as a spec holds it: every option at
    its value or default. One line naming what is wrong otherwise."""
    out: dict[str, dict[str, Any]] = {}
    for item in value or []:
        name, given = (item, {}) if isinstance(item, str) else next(iter(item.items()))
        cls = REGISTRY.get(name)
        if cls is None or not cls.optional:
            known = ", ".join(n for n, c in REGISTRY.items() if c.optional)
            raise CcbenchError(f"{where}: {name!r} is no optional instrument (there are: {known})")
        if name in out:
            raise CcbenchError(f"{where}: {name} is named twice")
        opts = {k: o.default for k, o in cls.options.items()}
        for k, v in (given or {}).items():
            o = cls.options.get(k)
            if o is None:
                raise CcbenchError(f"{where}: {name} has no option {k!r} "
                                   f"(it has: {', '.join(cls.options) or 'none'})")  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, int | float) or not o.above < v <= o.most:
                raise CcbenchError(f"{where}: {name}.{k}: {v!r} is not a number in "
                                   f"({o.above:g}, {o.most:g}] ({o.description})")  # fmt: skip
            opts[k] = float(v)
        out[name] = opts
    return tuple(Recorded(n, tuple(sorted(o.items()))) for n, o in sorted(out.items()))


def traced_twin(spec: RunSpec) -> RunSpec:
    """A repetition's traced run (`tracing: separate`): what it asks, plus every
    instrument a traced twin records with at its defaults."""
    have = {r.name for r in spec.record}
    extra = [Recorded(c.name, tuple(sorted((k, o.default) for k, o in c.options.items())))
             for c in REGISTRY.values() if c.in_traced_twin and c.name not in have]  # fmt: skip
    record = tuple(sorted((*spec.record, *extra), key=lambda r: r.name))
    return replace(spec, tracing="traced", record=record)


def traced_twin_names() -> list[str]:
    """The instruments a traced twin records with beyond what the config asks."""
    return [c.name for c in REGISTRY.values() if c.in_traced_twin]


def for_run(
    tb: Testbed, spec: RunSpec, registry: Mapping[str, type[Instrument]] = REGISTRY
) -> list[Instrument]:
    """The instruments of `registry` (the package's unless a caller brings its own set)
    a run of `spec` on `tb` records with (an untraced run: none that works per packet)."""
    kinds = [c for c in registry.values()
             if not (spec.tracing == "untraced" and c.cost is Cost.PER_PACKET)]  # fmt: skip
    return [i for c in kinds if (i := c.for_run(tb, spec)) is not None]


def add_rows(rd: RawDir, records: dict[str, Instrument], ctx: SeriesContext, sink: Sink) -> None:
    """Every instrument's rows of a run's time series, in REGISTRY's order."""
    for name, cls in REGISTRY.items():
        cls.add_rows(rd, records.get(name), ctx, sink)


@dataclass(frozen=True)
class SummaryParts:
    """What a run's instruments give its summary (instruments.summary_parts)."""

    parts: dict[str, Any]  # summary key -> value, in REGISTRY's order
    reasons: list[Reason]
    nics: dict[tuple[str, str], dict[str, Any]]  # keys for NIC records (SummaryPart.nics)


def summary_parts(
    rd: RawDir, spec: RunSpec, records: dict[str, Instrument], *, t0: float | None = None,
    before_records: bool = False,
) -> SummaryParts:  # fmt: skip
    """The parts of a run's summary that its instruments give, in REGISTRY's order: of
    those that recorded (`records`), and, for a run from before the records
    (`before_records`), of those that read its files without one (`without_record`).
    `t0`: the wall-clock time its traffic started (None: not known)."""
    out = SummaryParts({}, [], {})
    for name, cls in REGISTRY.items():
        rec = records.get(name)
        if rec is None and before_records:
            rec = cls.without_record(rd, spec)
        if rec is None:
            continue
        part = rec.summary_part(rd, spec, t0=t0)
        if cls.summary_key is not None:
            out.parts[cls.summary_key] = part.value
        out.reasons.extend(part.reasons)
        for nic, keys in part.nics.items():
            out.nics.setdefault(nic, {}).update(keys)
    return out


def leftovers_argv(os: str) -> list[list[str]]:
    """What undoes every instrument's leftovers on a node of `os`."""
    return [argv for c in REGISTRY.values() for argv in c.leftovers_argv(os)]


def node_files() -> list[str]:
    """What every instrument writes on a node (Instrument.node_files), each once: a run
    killed before it fetched them leaves them. Every node's, whatever its OS: each is a
    path of ccbench's own, and an inventory may have named another OS since."""
    return list(dict.fromkeys(f for c in REGISTRY.values() for f in c.node_files))


def remove_local_leftovers(tb_id: str) -> None:
    """Every instrument's leftovers of one-kernel testbed `tb_id` on this machine."""
    for c in REGISTRY.values():
        c.remove_local_leftovers(tb_id)


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


__all__ = [
    "REGISTRY",
    "SENDER_SOURCES",
    "BadRecord",
    "Cost",
    "Instrument",
    "Recording",
    "SeriesContext",
    "SummaryPart",
    "SummaryParts",
    "add_rows",
    "for_run",
    "from_records",
    "leftovers_argv",
    "record_option",
    "remove_local_leftovers",
    "summary_parts",
    "traced_twin",
    "traced_twin_names",
]
