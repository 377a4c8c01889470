"""raw/meta.json: what happened when during a run, as one typed record (RunMeta). The run
writes it (`write`, ccbench.run) and every reader reads it back through `load`, once,
checked as it is read: a field that is not what ccbench writes is one problem naming it
(RawDir.problem) and reads as not recorded.

Compatibility lives in one step, `upgrade`: a meta.json of an older layout is brought
to this one before it is read (the instruments' records were top-level keys once). Keys
an older ccbench wrote that nothing reads (`testbed`, `kind`) are ignored; a key a run
did not write reads as not recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ccbench import instruments, jsonio, layout
from ccbench.instruments import Instrument
from ccbench.jsonio import is_number
from ccbench.layout import RawDir
from ccbench.probes.base import ProbeRun

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
    """meta.json's content. Its keys are these fields' names, except `flow_starts`
    (`flows`: [{flow, started_s}] in the order the flows were released)."""

    started_unix: float | None = None  # the first flow's release; None: not known
    flow_starts: dict[int, float] = field(default_factory=dict)  # flow -> seconds into the run
    client_rc: list[int | None] = field(default_factory=list)  # one per flow
    probe_argv: list[str] | None = None  # the probe's client as run; None: no probe
    instruments: dict[str, Instrument] = field(default_factory=dict)
    # What ran, where and how long each part took: tests/integration, bench/pipeline.py
    # and scripts/rehearsal/evidence.py read these; no verdict does, so a malformed one
    # reads as None.
    client_argv: list[list[str]] | None = None  # each flow's iperf3 client as run
    tools: str | None = None  # where the tools ran: "host" or "container"
    traffic_wall_s: float | None = None  # the first flow's release to the last client's end
    finished_unix: float | None = None  # when the run's last snapshot was taken
    phases_s: dict[str, float] | None = None  # the run's own time: prepare, start, end
    # meta.json predates the instruments' records (upgrade): an instrument without one
    # may still read its files (Instrument.without_record). Not a key of the file.
    before_records: bool = False

    def instrument(self, cls: type[Ins]) -> Ins | None:
        """The run's record of instrument `cls`; None: it did not record."""
        got = self.instruments.get(cls.name)
        return got if isinstance(got, cls) else None

    def probe_run(self, traffic_s: float | None) -> ProbeRun:
        """What reading the run's probe file needs: the traffic's wall-clock window
        (its start and `traffic_s`, the spec's; None: not known) and the probe's argv."""
        t0 = self.started_unix
        window = None if t0 is None or traffic_s is None else (t0, t0 + traffic_s)
        return ProbeRun(window, self.probe_argv)

    def to_json(self) -> dict[str, Any]:
        """meta.json's content, as `load` reads it back."""
        return {
            "started_unix": self.started_unix,
            "flows": [{"flow": k, "started_s": s} for k, s in self.flow_starts.items()],
            "client_rc": self.client_rc,
            "probe_argv": self.probe_argv,
            "instruments": {n: i.record_json() for n, i in self.instruments.items()},
            "client_argv": self.client_argv,
            "tools": self.tools,
            "traffic_wall_s": self.traffic_wall_s,
            "finished_unix": self.finished_unix,
            "phases_s": self.phases_s,
        }


def write(raw: Path, meta: RunMeta) -> None:
    jsonio.write_json(raw / layout.META, meta.to_json())


def _int_or_none(r: Any) -> bool:
    return r is None or (isinstance(r, int) and not isinstance(r, bool))


def _strs(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(a, str) for a in x)


def _num(x: Any) -> float | None:
    return float(x) if is_number(x) else None


def _phases(x: Any) -> dict[str, float] | None:
    if not isinstance(x, dict) or not all(is_number(v) for v in x.values()):
        return None
    return {str(k): float(v) for k, v in x.items()}


def load(rd: RawDir, n_flows: int | None = None) -> RunMeta:
    """meta.json (required: a run always writes it) as a RunMeta; `n_flows`: how many
    exit codes client_rc must hold (None: a reader that does not judge them)."""
    d = rd.json(layout.META, required=True) or {}
    # no `instruments` (or no file): a run from before the records, or one that says
    # nothing; either way an instrument may read what files it finds
    before_records = "instruments" not in d
    d = upgrade(d)
    if not isinstance(d, dict):
        rd.problem(layout.META, "not a JSON object")
        d = {}
    rcs = d.get("client_rc")
    want = n_flows if n_flows is not None else len(rcs) if isinstance(rcs, list) else 0
    if rcs is None:
        rcs = [None] * want
    elif not (isinstance(rcs, list) and len(rcs) == want and all(map(_int_or_none, rcs))):
        rd.problem(layout.META, f"client_rc is not a list of {want} exit codes")
        rcs = [None] * want
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
    if probe is not None and not _strs(probe):
        rd.problem(layout.META, "probe_argv is not a list of strings")
        probe = None
    recs = d.get("instruments") or {}
    if not isinstance(recs, dict):
        rd.problem(layout.META, "instruments is not an object of name -> record")
        recs = {}
    found, problems = instruments.from_records(recs)
    for p in problems:
        rd.problem(layout.META, p)
    argv = d.get("client_argv")
    return RunMeta(
        started_unix=float(t0) if t0 is not None else None,
        flow_starts=starts,
        client_rc=list(rcs),
        probe_argv=probe,
        instruments=found,
        before_records=before_records,
        # what no verdict reads: as written, or None (no problem: see RunMeta)
        client_argv=argv if isinstance(argv, list) and all(map(_strs, argv)) else None,
        tools=tools if isinstance(tools := d.get("tools"), str) else None,
        traffic_wall_s=_num(d.get("traffic_wall_s")),
        finished_unix=_num(d.get("finished_unix")),
        phases_s=_phases(d.get("phases_s")),
    )
