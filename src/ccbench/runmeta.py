"""raw/meta.json read once into a typed record (what happened when, and each
instrument's record), checked as it is read: a field that is not what ccbench writes
is one problem naming it (RawDir.problem) and reads as not recorded."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from ccbench import instruments, layout
from ccbench.instruments import Instrument
from ccbench.jsonio import is_number
from ccbench.layout import RawDir

Ins = TypeVar("Ins", bound=Instrument)

# meta.json keeps each instrument's record under `instruments.<name>`; runs recorded
# before kept three of them at the top level, under these names.
OLD_INSTRUMENT_KEYS = {"qdisc_sampler": "qdisc", "siftr": "siftr", "sockstat": "sockstat"}


def upgrade(d: Any) -> Any:
    """A meta.json's content in the current layout (a copy; not a mapping: as is, for
    `load` to refuse). The file itself stays as the run wrote it."""
    if not isinstance(d, dict) or "instruments" in d:
        return d
    d = dict(d)
    d["instruments"] = {new: d.pop(old) for old, new in OLD_INSTRUMENT_KEYS.items() if old in d}
    return d


@dataclass(frozen=True)
class RunMeta:
    started_unix: float | None = None  # the first flow's release; None: not known
    flow_starts: dict[int, float] = field(default_factory=dict)  # flow -> seconds into the run
    client_rc: list[int | None] = field(default_factory=list)  # one per flow
    probe_argv: list[str] | None = None
    instruments: dict[str, Instrument] = field(default_factory=dict)

    def instrument(self, cls: type[Ins]) -> Ins | None:
        """The run's record of instrument `cls`; None: it did not record."""
        got = self.instruments.get(cls.name)
        return got if isinstance(got, cls) else None


def _int_or_none(r: Any) -> bool:
    return r is None or (isinstance(r, int) and not isinstance(r, bool))


def load(rd: RawDir, n_flows: int) -> RunMeta:
    """meta.json (required: a run always writes it) as a RunMeta."""
    d = upgrade(rd.json(layout.META, required=True) or {})
    if not isinstance(d, dict):
        rd.problem(layout.META, "not a JSON object")
        d = {}
    rcs = d.get("client_rc")
    if rcs is None:
        rcs = [None] * n_flows
    elif not (isinstance(rcs, list) and len(rcs) == n_flows and all(map(_int_or_none, rcs))):
        rd.problem(layout.META, f"client_rc is not a list of {n_flows} exit codes")
        rcs = [None] * n_flows
    t0 = d.get("started_unix")
    if t0 is not None and not (is_number(t0) and t0 > 0):
        rd.problem(layout.META, f"started_unix {t0!r} is not a time")
        t0 = None
    flows = d.get("flows", [])
    entries = flows if isinstance(flows, list) else []
    # Each whole entry counts (the time series offsets its flows by them).
    starts = {m["flow"]: float(m["started_s"]) for m in entries
              if isinstance(m, dict) and is_number(m.get("started_s"))
              and isinstance(m.get("flow"), int)}  # fmt: skip
    if not isinstance(flows, list) or len(starts) != len(entries):
        rd.problem(layout.META, "flows is not a list of {flow, started_s} objects")
    probe = d.get("probe_argv")
    if probe is not None and not isinstance(probe, list):
        rd.problem(layout.META, "probe_argv is not a list")
        probe = None
    recs = d.get("instruments") or {}
    if not isinstance(recs, dict):
        rd.problem(layout.META, "instruments is not an object of name -> record")
        recs = {}
    found, problems = instruments.from_records(recs)
    for p in problems:
        rd.problem(layout.META, p)
    return RunMeta(float(t0) if t0 is not None else None, starts, list(rcs), probe, found)
