"""A per-ACK trace that lost events says so: a reason on the run (a host stall: its reader
fell behind) and the captions of what is drawn from it, on a real trace_pipe capture
whose reader was stopped through a flow (tests/captures/tracefs/trace_pipe-cubic-lost.txt:
`CPU:1 [LOST 7000 EVENTS]`, `CPU:0 [LOST 21730 EVENTS]`, the instance's own overrun
counts)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ccbench import timeseries, validity
from ccbench.instruments import SENDER_SOURCES, SeriesContext
from ccbench.instruments import tcp_probe as tp
from ccbench.instruments.events import TcpEvents
from ccbench.layout import RawDir
from ccbench.parse.tcp_probe import parse_tcp_trace
from ccbench.reasons import Code, host_stalled_only
from ccbench.timeseries_sink import Sink
from ccbench.timeseries_stats import SeriesStats

LOST = Path(__file__).resolve().parents[1] / "captures" / "tracefs" / "trace_pipe-cubic-lost.txt"
DATA = "10.250.4.1:39466"  # the capture's data connection (the sender's side)
LOST_EVENTS = 7000 + 21730


def _marker_unix() -> float:
    m = re.search(r"ccbench_unix=(\d+\.\d+)", LOST.read_text())
    assert m is not None
    return float(m.group(1))


def _traced(tmp_path: Path) -> dict:
    """The capture read as a run's trace (raw/tcp-probe-host.txt), its traffic taken to
    start at the marker: the congestion events the summary gets."""
    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(LOST, raw / tp.trace_file(tp.HOST))
    sink = Sink(tmp_path / "ts.parquet", "r", timeseries._frame, SeriesStats(SENDER_SOURCES))
    rd = RawDir(raw)
    tp.trace_rows(rd, SeriesContext(_marker_unix(), 2.0, {DATA: 1}, 1448), sink, None)
    series = sink.close()
    assert rd.problems == []
    assert (series.frame()["source"] == "tcp_probe").sum() > 200  # what the buffer kept
    ev = sink.stats.tcp_events
    assert ev is not None
    return ev


def test_the_capture_counts_every_lost_event() -> None:
    t = parse_tcp_trace(LOST.read_text())
    assert t.lost_events == LOST_EVENTS and len(t.probes) == 276


def test_a_trace_that_lost_events_makes_the_run_invalid_as_a_host_stall(tmp_path: Path) -> None:
    ev = _traced(tmp_path)
    assert ev["lost_events"] == LOST_EVENTS and ev["source"] == "tcp_probe"
    reasons = validity.check_trace_lost(ev)
    assert [(r.code, r.evidence) for r in reasons] == [
        (Code.TRACE_LOST, {"lost_events": LOST_EVENTS})
    ]
    assert reasons[0].text.startswith("tcp_probe: ")  # the trace that lost them, named
    # the integration tests take it as they take the other stalls (conftest.assert_judged)
    assert host_stalled_only(reasons)
    assert validity.check_trace_lost({**ev, "lost_events": 0}) == []
    assert validity.check_trace_lost(None) == []


def test_what_is_drawn_from_it_says_how_many_were_lost(tmp_path: Path) -> None:
    """A run judged before the reason existed is still valid and may be drawn: the
    figures' caption of the trace names the loss; a whole trace says every ACK."""
    ev = TcpEvents.model_validate({**_traced(tmp_path), "flows": [], "others": []})

    class Rec:
        tcp_events: TcpEvents | None = ev

    cap = tp.TcpProbe.series_caption([Rec()])
    assert cap.startswith(f"tcp_probe, every ACK but {LOST_EVENTS} events the kernel's trace "
                          "buffer dropped")  # fmt: skip
    Rec.tcp_events = ev.model_copy(update={"lost_events": 0})
    assert tp.TcpProbe.series_caption([Rec()]) == "tcp_probe, every ACK"
