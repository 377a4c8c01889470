"""The fast tcp_probe reader (parse.tcp_probe.FastTrace, what the time series uses)
against the plain one (TcpTraceReader) on this machine's real traces
(tests/captures/tracefs), and the congestion events gathered from it in bounded memory
(instruments.tcp_probe)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from ccbench.instruments import tcp_probe
from ccbench.parse.tcp_probe import (
    CongStateChange,
    FastTrace,
    Retransmit,
    TraceRecord,
    parse_tcp_trace,
)
from ccbench.timeseries_stats import SeriesStats

TRACEFS = Path(__file__).resolve().parents[1] / "captures" / "tracefs"
CAPTURES = ["trace_pipe-cubic-2M-noloss.txt", "trace_pipe-cubic-2M-loss5.txt"]


@pytest.mark.parametrize("name", CAPTURES)
@pytest.mark.parametrize("chunk", [1 << 10, 8 << 20])
def test_the_fast_reader_gives_the_plain_readers_numbers(name: str, chunk: int) -> None:
    text = (TRACEFS / name).read_text()
    plain = parse_tcp_trace(text)
    fast = FastTrace(io.StringIO(text), chunk_bytes=chunk)
    batches = list(fast.probe_batches())
    cols = ("t_s", "local", "peer", "cwnd_pkts", "ssthresh_pkts", "srtt_us", "inflight_bytes",
            "snd_wnd_bytes")  # fmt: skip
    got = [row for b in batches
           for row in zip(*(b.column(c).to_pylist() for c in cols), strict=True)]  # fmt: skip
    want = [tuple(getattr(p, c) for c in cols) for p in plain.probes]
    assert got == want and len(got) > 300
    key = lambda r: (r.t_s, type(r).__name__)  # noqa: E731
    assert sorted(fast.others, key=key) == sorted([*plain.cong_states, *plain.retransmits], key=key)
    assert fast.lost_events == plain.lost_events


def test_other_events_go_to_on_other_and_are_not_kept() -> None:
    text = (TRACEFS / "trace_pipe-cubic-2M-loss5.txt").read_text()
    seen: list[TraceRecord] = []
    fast = FastTrace(io.StringIO(text), chunk_bytes=1 << 10, on_other=seen.append)
    for _ in fast.probe_batches():
        pass
    plain = parse_tcp_trace(text)
    assert fast.others == [] and len(seen) == len(plain.cong_states) + len(plain.retransmits)
    assert any(isinstance(r, Retransmit) for r in seen)


class _Sink:
    def __init__(self) -> None:
        self.stats = SeriesStats(("tcp_probe",))


def test_events_are_counted_whole_and_their_times_capped() -> None:
    """A flow with more RTOs than MAX_MARKS: every one counted, the first MAX_MARKS
    times kept; two traces (two senders) merge; another socket's events are not a
    flow's."""
    n = tcp_probe.MAX_MARKS + 25
    ev = tcp_probe._Events({"10.0.0.1:1": 1}, shift=-100.0)
    for i in range(n):
        ev.add(CongStateChange(100.0 + i, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET",
                               "TCP_CA_Loss", 4, "TCP_CA_Loss"))  # fmt: skip
    ev.add(Retransmit(101.0, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET", None, 0, None))
    ev.add(Retransmit(101.0, "10.0.0.9:9", "10.0.0.2:5202", "AF_INET", None, 0, None))
    other = tcp_probe._Events({"10.0.0.3:3": 2}, shift=0.0)
    other.add(CongStateChange(5.0, "10.0.0.3:3", "10.0.0.4:5203", "AF_INET",
                              "TCP_CA_Recovery", 3, "TCP_CA_Open"))  # fmt: skip
    other.add(
        CongStateChange(
            5.5, "10.0.0.3:3", "10.0.0.4:5203", "AF_INET", "TCP_CA_Recovery", 3, "TCP_CA_Recovery"
        )
    )  # the same episode
    sink = _Sink()
    ev.merge_into(sink, 0, None)  # type: ignore[arg-type]
    other.merge_into(sink, 3, None)  # type: ignore[arg-type]
    got = sink.stats.tcp_events
    assert got is not None and got["lost_events"] == 3 and set(got["flows"]) == {1, 2}
    f1, f2 = got["flows"][1], got["flows"][2]
    assert (f1["rtos"], f1["retransmits"], len(f1["rto_s"])) == (n, 1, tcp_probe.MAX_MARKS)
    assert f1["rto_s"][:2] == [0.0, 1.0]
    assert (f2["recoveries"], f2["recovery_s"]) == (1, [5.0])


def test_an_unplaced_trace_keeps_no_events() -> None:
    ev = tcp_probe._Events({"10.0.0.1:1": 1}, shift=None)
    ev.add(Retransmit(1.0, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET", None, 0, None))
    assert ev.flows == {}
