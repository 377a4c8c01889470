"""What records during a run, beside its flows: an instrument plans and starts itself for
a run on a testbed, stops and collects, and owns a typed record in the run's meta.json
(`instruments.<name>`). One subclass per instrument (ccbench.instruments registers them).

The run (ccbench.run) only loops: `for_run` for each registered kind, then `start`
before the traffic, `during` actions while it flows, `stop` right after it, `collect`
once the probes ended. What an instrument read is the reader's (summarize, timeseries),
through its record.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, Self

from ccbench.exec import Proc
from ccbench.layout import AFTER, BEFORE
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed


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


@dataclass
class Instrument:
    """One instrument of one run. Subclasses set the class variables, a `record` of
    their own type, and the steps they need (each a no-op here)."""

    name: ClassVar[str]
    description: ClassVar[str]
    cost: ClassVar[Cost]
    oses: ClassVar[tuple[str, ...]] = ("linux", "freebsd")  # sender OSes it records on

    procs: list[Proc] = field(default_factory=list, init=False)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        """This instrument for a run of `spec` on `tb`; None when it does not apply."""
        raise NotImplementedError

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


@dataclass
class BeforeAfter(Instrument):
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


def need(cond: bool, what: str) -> None:
    """A record check: BadRecord(`what`) unless `cond`."""
    if not cond:
        raise BadRecord(what)


def is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)
