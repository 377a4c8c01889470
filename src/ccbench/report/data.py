"""Loading what the report shows: the aggregated tables, per-run time series and the
conditions of each scenario (from the matrix, i.e. what was asked for)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench import layout, record_load, upgrade
from ccbench.errors import CcbenchError
from ccbench.model import Matrix
from ccbench.record.parts import Recorded
from ccbench.report import thinned
from ccbench.report.fmt import as_float, fmt
from ccbench.roles import BOTTLENECK_ROUTER
from ccbench.run_record import RunRecord
from ccbench.spec import Flow, Topology
from ccbench.summarize.hosts import BQL_NO_CAP, tx_queues_in_use

VERDICT_COLUMNS = [
    "expectation",
    "scenario",
    "variant",
    "metric",
    "check",
    "measured",
    "target",
    "passed",
    "gate",
    "note",
]
SKIP_PREFIX = "skipped: "
# Where srtt comes from (the TCP sender's own estimate), for captions and notes.
SRTT_TOOLS = "ss on Linux, siftr on FreeBSD, iperf3 TCP_INFO"


@dataclass(frozen=True)
class Tables:
    runs: pd.DataFrame
    flows: pd.DataFrame
    summary: pd.DataFrame
    verdicts: pd.DataFrame  # no rows: no expectations configured (or no verdicts.csv)
    absent: frozenset[str] = frozenset()  # runs-table columns the results set predates
    # `tracing: separate`: the traced twins (their curves are plotted, their numbers only
    # in the observer table) apart from `runs`, and that table (no rows: inline)
    traced: pd.DataFrame = field(default_factory=pd.DataFrame)
    observer: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def all_runs(self) -> pd.DataFrame:
        """Every run, traced twins too, in executed order (the appendices)."""
        if self.traced.empty:
            return self.runs
        return pd.concat([self.runs, self.traced]).sort_values("order")


def _bool(x: object) -> bool:
    # CSV reads booleans as True/False, "True"/"False" or NaN (empty cell).
    if isinstance(x, str):
        return x.strip().lower() == "true"
    return bool(x) if x is not None and x == x else False


def read_table(tables_dir: Path, name: str) -> pd.DataFrame:
    # Parquet keeps dtypes (bools, empty strings); CSV is the fallback.
    pq = tables_dir / f"{name}.parquet"
    df = pd.read_parquet(pq) if pq.exists() else pd.read_csv(tables_dir / f"{name}.csv")
    for col in ("valid", "skipped", "host_stalled"):
        if col in df.columns:
            df[col] = df[col].map(_bool).astype(bool)
    if "reasons" in df.columns:
        df["reasons"] = df["reasons"].fillna("").astype(str)
    return df


def read_verdicts(tables_dir: Path) -> pd.DataFrame:
    """tables_dir/verdicts.csv (rule `verdicts`); absent or empty -> no rows."""
    p = tables_dir / "verdicts.csv"
    try:
        df = pd.read_csv(p)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        df = pd.DataFrame(columns=VERDICT_COLUMNS)
    for col in VERDICT_COLUMNS:
        if col not in df.columns:
            df[col] = math.nan
    for col in ("passed", "gate"):
        df[col] = df[col].map(_bool).astype(bool)
    for col in ("expectation", "scenario", "variant", "metric", "check", "note"):
        df[col] = df[col].map(lambda x: "" if pd.isna(x) else str(x))
    return df


def load_tables(tables_dir: Path) -> Tables:
    runs, flows, summary = (read_table(tables_dir, n) for n in ("runs", "flows", "summary"))
    runs, absent = upgrade.runs_table(runs)
    summary = upgrade.summary_table(summary)
    traced = runs[runs["tracing"] == "traced"]
    observer = read_table(tables_dir, "observer") if not traced.empty else pd.DataFrame()
    return Tables(runs[runs["tracing"] != "traced"], flows, summary, read_verdicts(tables_dir),
                  absent, traced, observer)  # fmt: skip


def is_invalid(runs: pd.DataFrame) -> pd.Series:
    """Runs that ran and failed a validity check (a skipped run never ran)."""
    return ~runs["valid"] & ~runs["skipped"]


def waits_for_kernel(runs: pd.DataFrame) -> pd.Series:
    """Of the runs waiting to run (status `waiting`): whether each waits for its
    variant's kernel (runs.csv `waiting_kernel` names it), not only for the FreeBSD boot
    tunables ccbench wrote, which a reboot applies (hosts.loader: `waiting_kernel`
    empty). Tables from before that column: every wait was a kernel's."""
    if "status" not in runs:
        return pd.Series(dtype=bool)
    waiting = runs[runs["status"] == "waiting"]
    if "waiting_kernel" not in waiting:
        return pd.Series(True, index=waiting.index, dtype=bool)
    return waiting["waiting_kernel"].fillna("").astype(str) != ""


def skip_reasons(runs: pd.DataFrame) -> list[str]:
    """The distinct reasons of the skipped runs, without the "skipped: " prefix. A
    skipped run has one reason, which may itself contain "; "."""
    out: list[str] = []
    for r in runs.loc[runs["skipped"], "reasons"].astype(str):
        r = r[len(SKIP_PREFIX) :] if r.startswith(SKIP_PREFIX) else r
        r = r or "(no reason recorded)"
        if r not in out:
            out.append(r)
    return out


def delta_unpaired(x: object) -> bool:
    """True when a summary `{metric}_delta_paired` cell says the delta is unpaired
    (False); None/NaN/empty (no delta) is not "unpaired"."""
    if x is None:
        return False
    if isinstance(x, str):
        return x.strip().lower() == "false"
    return as_float(x) == 0.0  # False, np.False_; NaN and non-numbers are not


def scenario_names(matrix: Matrix, runs: pd.DataFrame) -> list[str]:
    """The matrix's scenarios (matrix.json: by name), then any other the runs table has."""
    names = matrix.scenario_names
    return names + [s for s in runs["scenario"].drop_duplicates() if s not in names]


@dataclass(frozen=True)
class Conditions:
    """The asked-for conditions of a scenario, from the first of its runs' specs: the
    path (a spec.Topology, which owns the path's derived quantities) and what ran on it."""

    scenario: str
    description: str
    topology: Topology
    flows: tuple[Flow, ...]
    testbed_id: str
    traffic_s: float
    interval_s: float = math.nan
    probe_interval_s: float = math.nan

    @property
    def has_loss(self) -> bool:
        return self.topology.loss_mode != "none" and self.topology.loss_rate > 0

    @property
    def n_flows(self) -> int:
        return len(self.flows)

    @property
    def bdp_bytes(self) -> float:
        return self.topology.rate_bps * self.topology.rtt_ms / 1e3 / 8

    @property
    def full_queue_ms(self) -> float:
        """Topology.full_queue_ms (the value validity uses) as a number to plot: NaN
        where not defined (an AQM, or no queue limit)."""
        v = self.topology.full_queue_ms
        return math.nan if v is None or not self.topology.queue_limit_pkts else v

    @property
    def rtt_bound_ms(self) -> float:
        """Topology.rtt_bound_ms (RTT + a full drop-tail queue) as a number to plot: NaN
        where not defined."""
        return self.topology.rtt_ms + self.full_queue_ms

    @property
    def queue_bytes(self) -> float:
        t = self.topology
        if not (t.queue.drop_tail and t.queue.limit_unit == "pkts") or not t.queue_limit_pkts:
            return math.nan
        return float(t.queue_limit_pkts * t.mtu)

    def queue_text(self) -> str:
        t = self.topology
        if not t.queue_limit_pkts:
            return t.queue_kind
        bdp = t.queue_limit_pkts * t.mtu / self.bdp_bytes
        return f"{t.queue_kind} {t.queue_limit_pkts} pkts ({fmt(bdp, 2)} BDP)"

    def loss_text(self) -> str:
        t = self.topology
        return "none" if t.loss_mode == "none" else f"{t.loss_mode} {fmt(t.loss_rate, None)}"

    def flows_text(self) -> str:
        durs = sorted({f.duration_s for f in self.flows})
        starts = [f.start_s for f in self.flows]
        s = f"{self.n_flows} × {'/'.join(fmt(d, None) for d in durs)} s"
        streams = sorted({f.streams for f in self.flows})
        if streams != [1]:  # iperf3 -P k: k TCP connections per flow
            s += f", {'/'.join(map(str, streams))} streams each"
        if any(starts):
            s += f", starts {'/'.join(fmt(x, None) for x in starts)} s"
        return s


def conditions(matrix: Matrix, scenario: str) -> Conditions | None:
    runs = matrix.runs_of_scenario(scenario)
    if not runs:
        return None
    r = runs[0]
    s = matrix.scenario(scenario)
    return Conditions(
        scenario=scenario,
        description=s.description if s else "",
        topology=r.spec.topology,
        flows=r.flows,
        testbed_id=r.testbed_id,
        traffic_s=float(r.traffic_s),
        interval_s=r.spec.interval_s,
        probe_interval_s=r.spec.probe_interval_s or math.nan,
    )


def representative(valid_runs: pd.DataFrame) -> str | None:
    """The valid repetition closest to the median throughput sum (ties: the lower
    repetition), so the time series shown is a typical run, not the best one."""
    g = valid_runs.dropna(subset=["throughput_sum_mbps"])
    if g.empty:
        return None
    med = g["throughput_sum_mbps"].median()
    g = g.assign(_d=(g["throughput_sum_mbps"] - med).abs()).sort_values(["_d", "repetition"])
    return str(g.iloc[0]["run_id"])


def load_timeseries(runs_dir: Path, run_id: str) -> pd.DataFrame | None:
    p = runs_dir / run_id / layout.TIMESERIES
    return thinned.load(p) if p.exists() else None


def group(df: pd.DataFrame, scenario: str, variant: str | None = None) -> pd.DataFrame:
    if df.empty:
        return df
    m = df["scenario"] == scenario
    if variant is not None:
        m &= df["variant"] == variant
    return df[m]


def run_flows(matrix: Matrix, run_id: str) -> tuple[Flow, ...]:
    r = matrix.runs.get(run_id)
    return r.flows if r else ()


def run_summary(runs_dir: Path, run_id: str) -> RunRecord | None:
    """A run's record (summary.json, through ccbench.record), None if missing or not a
    record. The report reads per-run data only here: summary.json is a declared output
    of `parse` and input of the rules that build figures and the report, so Snakemake
    knows when what they show changed."""
    try:
        return record_load.load(runs_dir / run_id)
    except CcbenchError:
        return None


def recorded(runs_dir: Path, run_id: str) -> Recorded | None:
    """summary.json `recorded` (calibration, facts, qdisc_config as the run recorded
    them)."""
    s = run_summary(runs_dir, run_id)
    return s.recorded if s else None


def probe_rtts_ms(runs_dir: Path, run_id: str) -> list[float]:
    """Every RTT-under-load sample of a run (summary.json probe.samples_us, in the order
    measured), ms."""
    s = run_summary(runs_dir, run_id)
    return [x / 1e3 for x in s.probe.samples_us] if s and s.probe else []


def probe_tools(runs_dir: Path, run_ids: list[str]) -> tuple[list[str], list[str]]:
    """What measured the runs' RTT under load (summary.json `probe.what`, else `tool`)
    and the raw files it wrote (`probe.raw`), each in first-seen order."""
    tools: list[str] = []
    raws: list[str] = []
    for rid in run_ids:
        s = run_summary(runs_dir, rid)
        pr = s.probe if s else None
        if pr is None:
            continue
        tool = pr.what or pr.tool
        if tool and tool not in tools:
            tools.append(tool)
        if pr.raw and f"raw/{pr.raw}" not in raws:
            raws.append(f"raw/{pr.raw}")
    return tools, raws


def probe_what(sources: tuple[list[str], list[str]], cond: Conditions) -> str:
    """Which tool measured RTT under load, how, and where its samples are (for captions
    and notes); `sources` as probe_tools returns them."""
    tools, raws = sources
    how = "; ".join(tools) or "ping (ICMP echo)"
    hz = 1 / cond.probe_interval_s if cond.probe_interval_s > 0 else math.nan
    rate = f", {fmt(hz, None)} Hz" if math.isfinite(hz) else ""
    where = f" ({', '.join(raws)} of each run)" if raws else ""
    return f"{how} from s1 to r1{rate}, through the same bottleneck queue as the flows{where}"


def loss_groups(matrix: Matrix, runs: pd.DataFrame) -> list[list[Conditions]]:
    """Scenarios that differ only in their loss (same rate, RTT, MTU, queue and flows),
    at least two of them and one with loss, ordered by loss rate: each such group is
    one throughput-vs-loss figure. Scenarios whose runs were all skipped are left out."""
    groups: dict[tuple[Any, ...], list[Conditions]] = {}
    for scen in scenario_names(matrix, runs):
        g = group(runs, scen)
        if g.empty or g["skipped"].all():
            continue
        c = conditions(matrix, scen)
        if c is None:
            continue
        starts = tuple(f.start_s for f in c.flows)
        t = c.topology
        key = (t.rate_mbit, t.rtt_ms, t.mtu, t.queue_kind, t.queue_limit_pkts, starts)
        groups.setdefault(key, []).append(c)
    out = []
    for cs in groups.values():
        if len(cs) >= 2 and any(c.has_loss for c in cs):
            out.append(sorted(cs, key=_by_loss))
    return out


def _by_loss(c: Conditions) -> tuple[float, str]:
    """Loss-free first, then by loss rate (the loss mode breaks ties)."""
    return (c.topology.loss_rate if c.has_loss else 0.0, c.topology.loss_mode)


# What a full frame takes on Ethernet's wire beyond the 1514 bytes tbf counts: preamble
# and start delimiter (8), frame check (4), inter-frame gap (12).
WIRE_OVERHEAD_BYTES = 24


def bottleneck_text(runs_dir: Path, run_ids: list[str], cond: Conditions) -> str:
    """Which element paces the bottleneck and the buffer in front of it, from the first
    run that recorded rt1's NIC (SSH testbeds): tbf, or the NIC when the tbf rate in
    1514-byte frames is above what the wire carries (1538 bytes a frame: at 1000 Mbit/s
    on 1 GbE the NIC is the slower element, and its TX ring(s) queue too: _nic_buffer).
    Local veths have no wire: tbf. A lab's own network (no router of ccbench's) is
    named as its runs recorded it, not described."""
    t = cond.topology
    theirs = _uncontrolled(runs_dir, run_ids)
    if theirs is not None:
        return f"bottleneck: {theirs} (not ccbench's: its queue is not checkable)"
    shaper = f"tbf at {fmt(t.rate_mbit, None)} Mbit/s"
    qtext = f"{t.queue_limit_pkts} pkts" if t.queue.drop_tail else f"{t.queue_kind}'s own"
    nic = _bottleneck_nic(runs_dir, run_ids)
    if nic is None:
        return f"bottleneck: {shaper}; buffer {qtext}"
    speed = nic.get("speed_mbps")
    if not isinstance(speed, (int, float)) or speed <= 0:
        return f"bottleneck: {shaper} (rt1's NIC speed not recorded); buffer {qtext}"
    wire = speed * t.frame_bytes / (t.frame_bytes + WIRE_OVERHEAD_BYTES)
    if t.rate_mbit <= wire:
        return f"bottleneck: {shaper} (the wire carries {fmt(wire, 1)}); buffer {qtext}"
    return (
        f"bottleneck: rt1's NIC at wire rate ({fmt(speed, None)} Mbit/s carries "
        f"{fmt(wire, 1)} Mbit/s of frames, below the {shaper}); "
        f"buffer {_nic_buffer(nic, t, qtext)}"
    )


def _nic_buffer(nic: dict[str, Any], t: Topology, qtext: str) -> str:
    """The qdisc's limit plus the layer-2 buffer behind it as rt1's NIC record says: the
    TX ring, how many transmit queues shared the flows and their BQL limits. With one
    queue the ring is one FIFO for all flows; with several, a forwarded packet takes the
    TX queue of its RX queue (net/core/dev.c skb_tx_hash) and the NIC serves the rings
    round-robin, so each flow mostly has a layer-2 buffer of its own."""
    ring = nic.get("tx_ring_set")
    queues = tx_queues_in_use(nic)
    if queues is None:  # a record from before channels were recorded
        if isinstance(ring, int) and t.queue.drop_tail:
            return f"{t.queue_limit_pkts} + {ring} TX ring = {t.queue_limit_pkts + ring} pkts"
        return f"{qtext} + the TX ring"
    qdisc = f"{qtext} ({t.queue_kind})" if t.queue.drop_tail else qtext
    ring_text = f"TX ring {ring}" if isinstance(ring, int) else "a TX ring of unreported size"
    bql = _bql_text(nic, ring if isinstance(ring, int) else None, t.frame_bytes)
    if queues == 1:
        return f"{qdisc} + {ring_text} × 1 queue{bql}"
    return (f"{qdisc} + {ring_text} in each of {queues} TX queues{bql}: the layer-2 buffer "
            "was per queue (flows spread over the queues, served round-robin)")  # fmt: skip


def _bql_text(nic: dict[str, Any], ring: int | None, frame: int) -> str:
    """ " (BQL limit 30.3 KB after the run: ≈ 21 full frames)" from the run's own reading of
    the bottleneck's byte queue limits; what the set-up record can tell otherwise (BQL's
    limit starts at 0 there and grows with the traffic)."""
    after = nic.get("bql_after")
    if isinstance(after, list) and after:
        limits = sorted(x["limit"] for x in after if isinstance(x.get("limit"), int))
        if len(limits) > 1:  # a queue no flow used keeps the limit of 0 it started with
            limits = [x for x in limits if x > 0] or limits
        if limits:
            lo, hi = limits[0], limits[-1]
            kb = f"{fmt(lo / 1000, 1)}" + (f"-{fmt(hi / 1000, 1)}" if hi != lo else "")
            # A queue stops once its bytes in flight exceed the limit (netdevice.h
            # netdev_tx_sent_queue): one frame more than the limit holds.
            frames = hi // frame + 1
            if ring is not None:
                frames = min(frames, ring)
            full = f"≈ {frames} full frame{'s' if frames != 1 else ''}"
            if len(after) == 1:
                return f" (BQL limit {kb} KB after the run: {full})"
            used = f"{len(limits)} queue{'s' if len(limits) != 1 else ''}"
            return f" (BQL limits {kb} KB in the {used} used, after the run: up to {full} each)"
    setup = nic.get("bql")
    if isinstance(setup, list) and not setup:
        return " (no BQL)"
    caps = [x["limit_max"] for x in setup or [] if isinstance(x.get("limit_max"), int)
            and x["limit_max"] < BQL_NO_CAP]  # fmt: skip
    if caps:
        return f" (BQL capped at {fmt(max(caps) / 1000, 1)} KB)"
    return " (BQL limit not read after the run)" if setup else ""


def _uncontrolled(runs_dir: Path, run_ids: list[str]) -> str | None:
    """A lab's bottleneck ccbench does not control, as its runs named it (ccbench.unproven)."""
    for rid in run_ids:
        s = run_summary(runs_dir, rid)
        if s is not None and s.bottleneck.not_controlled:
            return s.bottleneck.not_controlled
    return None


def not_checkable(runs_dir: Path, run_ids: list[str]) -> list[str]:
    """What the runs could not prove (a lab's bottleneck ccbench does not control), as
    the first run that says so recorded it (summary.json `not_checkable`)."""
    for rid in run_ids:
        s = run_summary(runs_dir, rid)
        if s is not None and s.not_checkable:
            return list(s.not_checkable)
    return []


def _bottleneck_nic(runs_dir: Path, run_ids: list[str]) -> dict[str, Any] | None:
    """The bottleneck router's NIC record on the bottleneck interface (the calibration
    read both back; a calibration without them: rt1's, on any interface)."""
    for rid in run_ids:
        s = run_summary(runs_dir, rid)
        if s is None or not s.nics:
            continue
        cal = (s.recorded.calibration if s.recorded else None) or {}
        where = (cal.get("bottleneck") or {}) if isinstance(cal, dict) else {}
        node, dev = where.get("node", BOTTLENECK_ROUTER), where.get("dev")
        for rec in s.nics:
            if rec.get("node") == node and (dev is None or rec.get("interface") == dev):
                return rec
    return None
