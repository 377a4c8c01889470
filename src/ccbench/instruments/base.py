"""What records during a run, beside its flows: an instrument plans and starts itself for
a run on a testbed, stops and collects, and owns a typed record in the run's meta.json
(`instruments.<name>`). One subclass per instrument (ccbench.instruments registers them).

The run (ccbench.run) only loops: `for_run` for each registered kind, then `start`
before the traffic, `during` actions while it flows, `stop` right after it, `collect`
once the probes ended. Reading loops likewise: the time series asks every kind for its
rows (`add_rows`), the summary for its part (`summary_part`), the report for the caption
of its samples (`series_caption`), a testbed's clean-up for what a crashed run of it
leaves (`leftovers_argv`, `remove_local_leftovers`, `node_files`). An optional
instrument (`optional`) records only when the config's `record:` names it, with the
options it declares (`options`).
"""

from __future__ import annotations

import enum
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Self, TypeVar

from ccbench.exec import Proc
from ccbench.layout import AFTER, BEFORE, RawDir, RawFile
from ccbench.needs import Need, Needs
from ccbench.reasons import Reason
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink


class Cost(enum.StrEnum):
    """What an instrument costs the sender: a read before and after (snapshot), a read
    every interval (sampled), work on every packet or ACK (per_packet: `tracing:
    separate` leaves these out of the repetitions whose throughput is reported)."""

    SNAPSHOT = "snapshot"
    SAMPLED = "sampled"
    PER_PACKET = "per_packet"


class BadRecord(ValueError):
    """An instrument's record in meta.json is not what its instrument writes."""


@dataclass
class Recording:
    """What a run gives its instruments while it records: where, what, and the clock
    (`started_unix` is set when the first flow is released)."""

    tb: Testbed
    spec: RunSpec
    raw: Path
    started_unix: float | None = None


Action = tuple[float, Callable[[], None]]  # (seconds after the traffic starts, what)


@dataclass(frozen=True)
class Option:
    """An option of an optional instrument: `record: [{name: {key: value}}]`."""

    default: float
    description: str
    above: float  # values must be above this
    most: float


@dataclass(frozen=True)
class SeriesContext:
    """What a run's rows are placed by (ccbench.timeseries): the wall-clock time its
    traffic started (None: unknown, samples give no rows), its traffic time, each flow's
    sockets by local address, and the path's MSS."""

    t0: float | None
    traffic_s: float
    local_to_flow: dict[str, int]
    mss_bytes: int


@dataclass(frozen=True)
class SummaryPart:
    """An instrument's part of a run's summary: summary.json's value under its
    `summary_key`, what it found that makes the run invalid, and what it read of a
    NIC: (node, interface) -> keys added to that NIC's record in summary.json `nics`
    (the hosts' NIC records, ccbench.summarize.hosts)."""

    value: Any
    reasons: list[Reason] = field(default_factory=list)
    nics: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


P = TypeVar("P")  # an instrument's part of the run record (summary.json)


@dataclass
class Instrument(Generic[P]):
    """One instrument of one run. Subclasses set the class variables, a `record` of
    their own type, and the steps they need (each a no-op here). One with a part of
    summary.json is generic in its type (`Instrument[ThatPart]`, the type declared in
    its own module or its parser's): that is its `summary_type`."""

    name: ClassVar[str]
    description: ClassVar[str]
    cost: ClassVar[Cost]
    oses: ClassVar[tuple[str, ...]] = ("linux", "freebsd")  # sender OSes it records on
    # Recorded only when the config's `record:` names it, with these options.
    optional: ClassVar[bool] = False
    options: ClassVar[dict[str, Option]] = {}
    # A traced twin (`tracing: separate`) records with it even when `record:` does not
    # name it (the per-packet instrument whose curves that twin is for).
    in_traced_twin: ClassVar[bool] = False
    # Its rows (source = name) are the senders' own cwnd/RTT samples, finest first by
    # this rank (statistics and figures use the finest a run has); None: not such rows.
    sender_rank: ClassVar[int | None] = None
    # Its part of summary.json (`summary_part`) is under this key; None: it has none.
    # ccbench.run_record composes RunRecord of its own fields and, by this key, each
    # part: of `summary_type` (P, set from the class's bases) or null where it did not
    # record, described by `summary_doc`, placed right after the field `summary_after`
    # (None: after all others), so summary.json and its reference read in that order.
    summary_key: ClassVar[str | None] = None
    summary_type: ClassVar[Any] = None
    summary_doc: ClassVar[str] = ""
    summary_after: ClassVar[str | None] = None
    # What it needs on the nodes it runs on (`hosts`), by their OS: the run checks
    # before it starts anything (ccbench.needs).
    needs: ClassVar[dict[str, Needs]] = {}
    # The files and directories it writes on a remote node (absolute paths, each under
    # /var/tmp and named ccbench*: ccbench.leftovers.node_path): a run killed before
    # `collect` leaves them, and a testbed's `down` removes and checks them.
    node_files: ClassVar[tuple[str, ...]] = ()
    # The files it writes in raw/ and what each holds: docs/architecture.md's raw/
    # table (each name written once, here or in ccbench.layout).
    raw_files: ClassVar[tuple[RawFile, ...]] = ()

    procs: list[Proc] = field(default_factory=list, init=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            # Instrument[ThePart] (or BeforeAfter[...]): ThePart; a TypeVar is no part yet
            origin, args = typing.get_origin(base), typing.get_args(base)
            typed = bool(args) and not isinstance(args[0], TypeVar)
            if typed and isinstance(origin, type) and issubclass(origin, Instrument):
                cls.summary_type = args[0]

    @classmethod
    def part_of(cls: type[Instrument[P]], rec: object) -> P | None:
        """Its part of run record `rec` (ccbench.run_record.RunRecord), typed; None where
        it did not record."""
        return getattr(rec, cls.summary_key, None) if cls.summary_key else None

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        """This instrument for a run of `spec` on `tb`; None when it does not apply."""
        raise NotImplementedError

    @classmethod
    def senders_on(cls, tb: Testbed, spec: RunSpec) -> list[str]:
        """The run's senders whose OS this instrument records on."""
        return [n for n in spec.senders if tb.driver(n).os in cls.oses]

    def hosts(self) -> list[str]:
        """The nodes it runs commands on (those whose OS it has `needs` for are asked)."""
        return []

    def wants(self, tb: Testbed) -> list[Need]:
        """What it needs on which node: `needs` by the OS of each of its `hosts`."""
        return [Need(n, tb.ex(n), self.needs[os], self.name)
                for n in self.hosts() if (os := tb.driver(n).os) in self.needs]  # fmt: skip

    def start(self, rec: Recording) -> None:
        """Before the traffic (the clients are spawned and held at their gate)."""

    def during(self, rec: Recording) -> list[Action]:
        """Actions at their time into the traffic."""
        return []

    def stop(self, rec: Recording) -> None:
        """Right after the last flow ended."""

    def collect(self, rec: Recording) -> None:
        """Once every probe ended: fetch what stayed on the nodes."""

    def record_json(self) -> dict[str, Any]:
        """The record meta.json keeps under `instruments.<name>`: the dataclass's fields."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.init}

    @classmethod
    def from_record(cls, d: Any) -> Self:
        """The instrument as a run recorded it (meta.json); BadRecord naming what is
        wrong when `d` is not what record_json writes."""
        raise NotImplementedError

    @classmethod
    def asked(cls, spec: RunSpec) -> dict[str, Any] | None:
        """An optional instrument's options for a run of `spec` (each at its default
        where the spec gives none); None when the run does not ask for it."""
        r = spec.recording(cls.name)
        if r is None:
            return None
        return {k: o.default for k, o in cls.options.items()} | dict(r.options)

    # --- reading a run's raw files (after the run; `record` is None when the run kept
    # none: it may predate the instrument's record, its files are still read) ---------

    @classmethod
    def add_rows(cls, rd: RawDir, record: Self | None, ctx: SeriesContext, sink: Sink) -> None:
        """Its rows of the run's time series into `sink` (timeseries_sink: each file's
        rows once the file read whole; a problem in `rd` naming a file that does not)."""

    @classmethod
    def without_record(cls, rd: RawDir, spec: RunSpec) -> Self | None:
        """For a run of `spec` whose meta.json predates the instruments' records
        (runmeta.RunMeta.before_records) but whose raw files it can still read: the
        instrument that gives its summary part from them; None: it gives none then."""
        return None

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """Its part of the run's summary, read from its record and raw files (`t0`: the
        wall-clock time the traffic started, None: not known); a file that does not read
        is a problem in `rd`. None here: no part."""
        return SummaryPart(None)

    @classmethod
    def series_caption(cls, summaries: Sequence[Any]) -> str:
        """How the figures' cwnd/srtt were sampled when its rows are the finest;
        `summaries`: the runs' records (RunRecord or None), each instrument typing what
        it reads of them (a Protocol in its module)."""
        return f"{cls.name} samples"

    # --- what a crashed run of it may leave --------------------------------------------

    @classmethod
    def leftovers_argv(cls, os: str) -> list[list[str]]:
        """Commands that undo what a run on a node of `os` left running or switched on;
        each prints `logger NAME` when it did something (ccbench.leftovers.parse_sweep)."""
        return []

    @classmethod
    def remove_local_leftovers(cls, tb_id: str) -> None:
        """On this machine (a one-kernel testbed's `down`): what a run left outside the
        testbed's namespaces."""


@dataclass
class BeforeAfter(Instrument[P]):
    """An instrument that reads once right before the traffic and once right after it
    (`snapshots`: (node, argv, raw file) per `when`, layout.BEFORE or AFTER); what a
    read printed, its errors too, is the raw file."""

    cost = Cost.SNAPSHOT

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        raise NotImplementedError

    def _read(self, rec: Recording, when: str) -> None:
        for node, argv, name in self.snapshots(rec, when):
            res = rec.tb.ex(node).run(argv, check=False)
            (rec.raw / name).write_text(res.stdout if res.ok else res.stdout + res.stderr)

    def start(self, rec: Recording) -> None:
        self._read(rec, BEFORE)

    def stop(self, rec: Recording) -> None:
        self._read(rec, AFTER)


@dataclass
class NodeReads(BeforeAfter[P]):
    """A BeforeAfter that runs one command (`read`) on each of its `nodes` and keeps
    what it printed as raw file `raw_name(node, when)`; its record is the node list."""

    read: ClassVar[tuple[str, ...]] = ()

    nodes: list[str] = field(default_factory=list)

    @staticmethod
    def raw_name(node: str, when: str) -> str:
        raise NotImplementedError

    def hosts(self) -> list[str]:
        return list(self.nodes)

    def snapshots(self, rec: Recording, when: str) -> list[tuple[str, list[str], str]]:
        return [(n, list(self.read), self.raw_name(n, when)) for n in self.nodes]

    @classmethod
    def from_record(cls, r: Any) -> Self:
        need(isinstance(r, dict) and isinstance(r.get("nodes"), list)
             and all(isinstance(n, str) for n in r["nodes"]), "not {nodes}")  # fmt: skip
        return cls(nodes=list(r["nodes"]))


def read_pair(rd: RawDir, before: str, after: str) -> tuple[str, str] | None:
    """A snapshot's two reads (raw files `before`, `after`) as text; None when either is
    missing or unreadable (RawDir.text makes that a problem unless the run failed)."""
    texts = [rd.text(n, required=not rd.failed) for n in (before, after)]
    if texts[0] is None or texts[1] is None:
        return None
    return texts[0], texts[1]


def need(cond: bool, what: str) -> None:
    """A record check: BadRecord(`what`) unless `cond`."""
    if not cond:
        raise BadRecord(what)


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
