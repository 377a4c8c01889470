"""A run's loss episodes for the report's event zooms: when each began (and, where the
run recorded its congestion states, ended), found at the finest resolution the run
has, and the run's rows around it, read in bounded memory.

A traced run (summary.json `tcp_events`, from the kernel's tcp:tcp_cong_state_set) gives
each flow's entries into fast recovery and its RTOs, per ACK; an episode ends where the
flow's congestion state is Open again and stays so (time-series rows of source
"ca_state", where the run has them): a return to Open that the same ACK's processing
leaves again (Open, then Recovery 2 µs later: the slow-start overshoot does this in
every traced run here) is not its end, and the caption names it. Without a trace,
episodes are found in the senders' own samples (ss, siftr): where a flow's ssthresh is
first set, or set below its cwnd of the sample before (a multiplicative decrease), or,
where no ssthresh was recorded, where its cwnd fell by CWND_FALL or more between two
samples; their time is then known to one sampling interval. A first ssthresh with no
retransmission since the sample before (ss counts them) is slow start ended by HyStart,
not a cut: CUBIC's hystart_update (net/ipv4/tcp_cubic.c) sets snd_ssthresh to the cwnd
and reduces nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ccbench.instruments import SENDER_SOURCES
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.run_record import RunRecord

MAX_EPISODES = 3  # zoomed per run
BEFORE_RTTS = 3.0  # window before an episode's start, in RTTs
AFTER_RTTS = 3.0  # after its end (known) ...
AFTER_UNKNOWN_RTTS = 6.0  # ... or after its start (end unknown)
MAX_AFTER_RTTS = 40.0  # the longest a window reaches past the start (a long Loss state)
RTO_MIN_S = 0.2  # TCP_RTO_MIN (include/net/tcp.h): an RTO's window shows the stall before it
MIN_STEPS = 4  # sampled sources: at least this many samples either side of the start
CWND_FALL = 0.2  # no ssthresh: a cwnd cut is a fall by this share between two samples
EVENTS_PER_FLOW = 50  # sample-found events kept per flow (only the first few are zoomed)
PAD_S = 0.25  # rows read beyond the window, so lines and drop counts reach its edges
ROUND_S = 1e-4  # tcp_events times are rounded to 0.1 ms (instruments.tcp_probe)
INFINITE_SSTHRESH = 0x7FFFFFFF  # TCP_INFINITE_SSTHRESH: slow start, no ssthresh set
OPEN = 0  # enum tcp_ca_state (include/net/tcp.h): TCP_CA_Open
# A return to Open left again within this is no end: the same ACK's processing exits
# Recovery and enters it again (tcp_fastretrans_alert; 1-2 µs apart in the traces here,
# tests/captures/zoom), far less than the time between two ACKs.
REENTRY_S = 1e-4
# What a zoom draws, where the run has it (the others' columns the file may lack).
COLUMNS = [
    "flow",
    "source",
    "t_s",
    "cwnd_bytes",
    "rtt_us",
    "ssthresh_bytes",
    "inflight_bytes",
    "rwnd_bytes",
    "min_rtt_us",
    "bbr_bw_bps",
    "bbr_min_rtt_us",
    "bbr_pacing_gain",
    "bbr_cwnd_gain",
    "ca_state",
    "backlog_pkts",
    "drops",
]
CA_SOURCE = "ca_state"
QUEUE_SOURCE = "qdisc"


@dataclass(frozen=True)
class Event:
    flow: int
    what: str  # "recovery", "RTO", or "cwnd cut" (found in samples)
    t_s: float  # s from the traffic start
    after_s: float | None = None  # found in samples: it happened after this sample


@dataclass(frozen=True)
class Found:
    """A run's episodes and where they came from."""

    events: list[Event]  # by time
    source: str  # the time series' source whose rows show them (tcp_probe, ss, siftr)
    per_ack: bool  # from a per-ACK trace
    how: str  # how they were found, for the caption
    step_s: float = 0.0  # the source's sampling step (0: per ACK)


@dataclass(frozen=True)
class Zoom:
    """One episode: its first event, those that began in its window, the window and the
    rows in it (PAD_S beyond)."""

    event: Event
    lo: float
    hi: float
    end_s: float | None  # the first event's flow Open again and staying; None: not recorded
    rows: pd.DataFrame
    others: list[Event] = field(default_factory=list)
    # returns to Open before end_s that were left again within REENTRY_S: (time, the
    # state code entered)
    brief_opens: tuple[tuple[float, int], ...] = ()

    @property
    def t0(self) -> float:
        return self.event.t_s


def find(rec: RunRecord | None, path: Path) -> Found | None:
    """The run's episodes: its trace's events, else those its sender samples show; None
    when it has neither (no trace, no ss/siftr rows)."""
    ev = TcpProbe.part_of(rec)
    if ev is not None:
        out = [
            Event(f.flow, what, t)
            for f in ev.flows
            for what, ts in (("recovery", f.recovery_s), ("RTO", f.rto_s))
            for t in ts
        ]
        how = (
            f"summary.json tcp_events (entries into Recovery and Loss, "
            f"{ev.source}'s tcp:tcp_cong_state_set, per ACK)"
        )
        return Found(sorted(out, key=lambda e: (e.t_s, e.flow)), ev.source, True, how)
    return _from_samples(path)


def _from_samples(path: Path) -> Found | None:
    """Cuts seen in the finest sender source the file has, read a row group at a time."""
    pf = pq.ParquetFile(path)
    have = set(pf.schema_arrow.names)
    cols = [
        c
        for c in ("flow", "source", "t_s", "cwnd_bytes", "ssthresh_bytes", "retransmits")
        if c in have
    ]
    state: dict[tuple[str, int], _Cuts] = {}
    for tab in _groups(pf, cols, -math.inf, math.inf, SENDER_SOURCES):
        df = tab.to_pandas()
        for (src, k), g in df.groupby(["source", "flow"], sort=False):
            state.setdefault((str(src), int(k)), _Cuts()).add(g.sort_values("t_s"))
    src = next((s for s in SENDER_SOURCES if any(key[0] == s for key in state)), None)
    if src is None:
        return None
    mine = {k: c for (s, k), c in state.items() if s == src}
    by_ssthresh = any(c.saw_ssthresh for c in mine.values())
    events = [
        Event(k, "cwnd cut", t, prev)
        for k, c in mine.items()
        for t, prev in (c.by_ssthresh if by_ssthresh else c.by_cwnd)
    ]
    steps = [s for c in mine.values() if math.isfinite(s := c.step())]
    step = float(np.median(steps)) if steps else math.nan
    rule = (
        "ssthresh is first set (with a retransmission since the sample before, where the "
        "samples count them: else HyStart ended slow start), or set below its cwnd of the "
        "sample before"
        if by_ssthresh
        else f"cwnd is {round(CWND_FALL * 100)} % or more below the sample before (no "
        "ssthresh recorded; a BBR ProbeRTT shows so too)"
    )
    how = f"{src}'s samples: where a flow's {rule}"
    return Found(sorted(events, key=lambda e: (e.t_s, e.flow)), src, False, how, step)


class _Cuts:
    """One flow's multiplicative decreases as its samples stream past."""

    def __init__(self) -> None:
        self.last_t = math.nan
        self.last_cwnd = math.nan
        self.last_ssthresh = math.nan
        self.saw_ssthresh = False
        self.by_ssthresh: list[tuple[float, float]] = []  # (time, the sample before's)
        self.by_cwnd: list[tuple[float, float]] = []
        self.n = 0
        self.first_t = math.nan

    def add(self, g: pd.DataFrame) -> None:
        t = g["t_s"].to_numpy(float)
        cwnd = g["cwnd_bytes"].to_numpy(float) if "cwnd_bytes" in g else np.full(len(t), np.nan)
        ss = (
            ssthresh_values(g["ssthresh_bytes"].to_numpy(float))
            if "ssthresh_bytes" in g
            else np.full(len(t), np.nan)
        )
        if not len(t):
            return
        if self.n == 0:
            self.first_t = float(t[0])
        self.n += len(t)
        pt = np.concatenate([[self.last_t], t[:-1]])
        pc_ = np.concatenate([[self.last_cwnd], cwnd[:-1]])
        ps = np.concatenate([[self.last_ssthresh], ss[:-1]])
        # retransmitted since the sample before: ss rows count them, other sources NaN
        rx = g["retransmits"].to_numpy(float) if "retransmits" in g else np.full(len(t), np.nan)
        self.saw_ssthresh |= bool(np.isfinite(ss).any())
        # ssthresh set: first set after samples without one (unless nothing was
        # retransmitted: HyStart's end of slow start), or changed to below the cwnd before
        # (a cut; an undo restores a larger one; a flow's first sample may carry one
        # cached from an earlier connection, tcp_metrics)
        first = np.isnan(ps) & (rx != 0)
        set_ = np.isfinite(ss) & (ss != ps) & np.isfinite(pt) & (first | (ss < pc_))
        fell = cwnd <= (1 - CWND_FALL) * pc_
        for m, out in ((set_, self.by_ssthresh), (fell, self.by_cwnd)):
            for i in np.flatnonzero(m)[: max(0, EVENTS_PER_FLOW - len(out))]:
                out.append((float(t[i]), float(pt[i])))
        self.last_t, self.last_cwnd, self.last_ssthresh = float(t[-1]), cwnd[-1], ss[-1]

    def step(self) -> float:
        """The mean sampling step."""
        if self.n < 2:
            return math.nan
        return (self.last_t - self.first_t) / (self.n - 1)


def ssthresh_values(x: np.ndarray) -> np.ndarray:
    """ssthresh in bytes, NaN where none is set (slow start's TCP_INFINITE_SSTHRESH, in
    segments or bytes)."""
    x = np.asarray(x, dtype=float)
    return np.where(x >= INFINITE_SSTHRESH, np.nan, x)


def _groups(
    pf: pq.ParquetFile, cols: list[str], lo: float, hi: float, sources: Sequence[str] | None
) -> Iterator[pa.Table]:
    """The rows with lo <= t_s <= hi (of `sources`; None: all), a row group at a time,
    skipping the groups whose statistics say they hold none (as report.thinned reads)."""
    ti = pf.schema_arrow.get_field_index("t_s")
    for g in range(pf.metadata.num_row_groups):
        st = pf.metadata.row_group(g).column(ti).statistics
        if st is not None and st.has_min_max and (st.max < lo or st.min > hi):
            continue
        tab = pf.read_row_group(g, columns=cols, use_threads=False)
        t = tab.column("t_s")
        m = pc.and_(pc.greater_equal(t, lo), pc.less_equal(t, hi))
        if sources is not None:
            m = pc.and_(m, pc.is_in(tab.column("source"), pa.array(list(sources), pa.string())))
        tab = tab.filter(m)
        if tab.num_rows:
            yield tab


def read_window(path: Path, lo: float, hi: float) -> pd.DataFrame:
    """The rows a zoom draws with lo <= t_s <= hi (all but iperf3's intervals), only the
    columns of COLUMNS the file has: memory follows the window, not the run."""
    pf = pq.ParquetFile(path)
    cols = [c for c in COLUMNS if c in set(pf.schema_arrow.names)]
    keep = [*SENDER_SOURCES, CA_SOURCE, QUEUE_SOURCE]
    parts = [tab.to_pandas() for tab in _groups(pf, cols, lo, hi, keep)]
    if not parts:
        return pd.DataFrame(columns=cols)
    df = pd.concat(parts, ignore_index=True)
    df["source"] = df["source"].astype(str)
    return df.sort_values(["source", "flow", "t_s"], kind="stable", ignore_index=True)


def episode_end(
    path: Path, ev: Event, until: float
) -> tuple[float | None, tuple[tuple[float, int], ...]]:
    """When the event's flow was Open again and stayed so: its first "ca_state" row with
    state Open after the event, up to `until` (only those rows read), that is not left
    within REENTRY_S (None: the run recorded no states, or not that far); and the
    returns to Open before it that were (time, the state entered)."""
    pf = pq.ParquetFile(path)
    if "ca_state" not in pf.schema_arrow.names or ev.what == "cwnd cut":
        return None, ()
    cols = ["flow", "source", "t_s", "ca_state"]
    brief: list[tuple[float, int]] = []
    opened: float | None = None  # a return to Open not yet known to last
    for tab in _groups(pf, cols, ev.t_s + ROUND_S, until + REENTRY_S, [CA_SOURCE]):
        s = tab.to_pandas()
        s = s[s["flow"] == ev.flow].sort_values("t_s", kind="stable")
        for t, state in zip(s["t_s"].to_numpy(float), s["ca_state"].to_numpy(float), strict=True):
            if opened is not None:
                if t - opened > REENTRY_S or state == OPEN:
                    return opened, tuple(brief)
                brief.append((opened, int(state)))
                opened = None
            elif state == OPEN and t <= until:
                opened = t
    return opened, tuple(brief)


def zooms(found: Found, path: Path, rtt_s: float, n: int = MAX_EPISODES) -> list[Zoom]:
    """The first `n` episodes: an event whose window would overlap the window of the
    episode before it (its least: from its start to AFTER_UNKNOWN_RTTS later) is part of
    that episode; when none of the first `n` has an RTO and the run had one, the first
    RTO's episode takes the last place."""
    groups: list[list[Event]] = []
    for e in found.events:
        reach = _after_unknown(found, rtt_s) + _before(e, found, rtt_s)
        if groups and e.t_s <= groups[-1][0].t_s + reach:
            groups[-1].append(e)
        else:
            groups.append([e])
    chosen = groups[:n]
    if n and not any(e.what == "RTO" for g in chosen for e in g):
        rto = next((g for g in groups if any(e.what == "RTO" for e in g)), None)
        if rto is not None:
            chosen = [*chosen[: n - 1], rto]
    return [_zoom(g[0], found, path, rtt_s) for g in chosen]


def _before(ev: Event, found: Found, rtt_s: float) -> float:
    b = BEFORE_RTTS * rtt_s + (RTO_MIN_S if ev.what == "RTO" else 0.0)
    return max(b, MIN_STEPS * found.step_s) if found.step_s > 0 else b


def _after_unknown(found: Found, rtt_s: float) -> float:
    a = AFTER_UNKNOWN_RTTS * rtt_s
    return max(a, MIN_STEPS * found.step_s) if found.step_s > 0 else a


def _zoom(ev: Event, found: Found, path: Path, rtt_s: float) -> Zoom:
    lo = max(0.0, ev.t_s - _before(ev, found, rtt_s))  # nothing of the flows before 0
    far = ev.t_s + max(MAX_AFTER_RTTS * rtt_s, _after_unknown(found, rtt_s))
    end, brief = episode_end(path, ev, far)
    hi = (end + AFTER_RTTS * rtt_s) if end is not None else ev.t_s + _after_unknown(found, rtt_s)
    hi = min(max(hi, ev.t_s + _after_unknown(found, rtt_s)), far)
    rows = read_window(path, lo - PAD_S, hi + PAD_S)
    others = [e for e in found.events if lo <= e.t_s <= hi and e != ev]
    return Zoom(ev, lo, hi, end, rows, others, brief)
