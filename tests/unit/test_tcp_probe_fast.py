"""The fast tcp_probe reader (parse.tcp_probe.FastTrace, what the time series uses)
against the plain one (TcpTraceReader) on this machine's real traces
(tests/captures/tracefs), and the congestion events gathered from it in bounded memory
(instruments.events)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ccbench.instruments import events
from ccbench.parse import split_hostport
from ccbench.parse.iperf3 import parse_iperf3
from ccbench.parse.nstat import counter_delta, linux_retransmit_causes, parse_nstat
from ccbench.parse.tcp_probe import (
    CongStateChange,
    FastTrace,
    Retransmit,
    TraceRecord,
    parse_tcp_trace,
)
from ccbench.report.causes import traced_cell

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


def test_events_are_counted_whole_and_their_times_capped() -> None:
    """A flow with more RTOs than MAX_MARKS: every one counted, the first MAX_MARKS
    times kept; two traces (two senders) merge; another socket's events are not a
    flow's."""
    n = events.MAX_MARKS + 25
    ev = events.EventCounter({"10.0.0.1:1": 1}, shift=-100.0)
    for i in range(n):
        ev.add(CongStateChange(100.0 + i, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET",
                               "TCP_CA_Loss", 4, "TCP_CA_Loss"))  # fmt: skip
    ev.add(Retransmit(101.0, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET", None, 0, None))
    ev.add(Retransmit(101.0, "10.0.0.9:9", "10.0.0.2:5202", "AF_INET", None, 0, None))
    other = events.EventCounter({"10.0.0.3:3": 2}, shift=0.0)
    other.add(CongStateChange(5.0, "10.0.0.3:3", "10.0.0.4:5203", "AF_INET",
                              "TCP_CA_Recovery", 3, "TCP_CA_Open"))  # fmt: skip
    other.add(
        CongStateChange(
            5.5, "10.0.0.3:3", "10.0.0.4:5203", "AF_INET", "TCP_CA_Recovery", 3, "TCP_CA_Recovery"
        )
    )  # the same episode
    got = other.merged(ev.merged(None, "tcp_probe", 0, None), "tcp_probe", 3, None)
    assert got is not None and got["lost_events"] == 3 and set(got["flows"]) == {1, 2}
    f1, f2 = got["flows"][1], got["flows"][2]
    assert (f1["rtos"], f1["retransmits"], len(f1["rto_s"])) == (n, 1, events.MAX_MARKS)
    assert f1["rto_s"][:2] == [0.0, 1.0]
    assert (f2["recoveries"], f2["recovery_s"]) == (1, [5.0])
    assert got["others"] == {"10.0.0.9": {"local": "10.0.0.9", "recoveries": 0, "rtos": 0,
                                          "retransmits": 1}}  # fmt: skip


def test_an_unplaced_trace_keeps_no_events() -> None:
    ev = events.EventCounter({"10.0.0.1:1": 1}, shift=None)
    ev.add(Retransmit(1.0, "10.0.0.1:1", "10.0.0.2:5202", "AF_INET", None, 0, None))
    assert ev.flows == {}


RUN_EVENTS = Path(__file__).resolve().parents[1] / "captures" / "run-local-traced-q48-events"


def test_a_senders_counters_are_its_flows_and_its_other_sockets() -> None:
    """A CI run's trace (tests/captures/README.md): s1's iperf3 control connection lost
    its results message in the full queue and recovered by SACK. nstat counts that
    recovery in s1's namespace beside its flow's 21: the trace names it under `others`,
    by local address, so per sender the two agree exactly."""
    local_to_flow = {}
    for k in (1, 2):
        res = parse_iperf3(json.loads((RUN_EVENTS / f"iperf3-{k}.json").read_text()))
        local_to_flow.update({s.local: k for s in res.streams if s.local})
    ev = events.EventCounter(local_to_flow, shift=0.0)
    with (RUN_EVENTS / "tcp-probe-host.txt").open() as fh:
        trace = FastTrace(fh, on_other=ev.add)
        for _ in trace.probe_batches():
            pass
    got = ev.merged(None, "tcp_probe", trace.lost_events, None)
    assert got is not None and got["lost_events"] == 0
    others = got["others"]
    # the control connection 198.18.1.2:41492: one recovery, one retransmission
    assert others["198.18.1.2"] == {"local": "198.18.1.2", "recoveries": 1, "rtos": 0,
                                    "retransmits": 1}  # fmt: skip
    for k, node in ((1, "s1"), (2, "s2")):
        before, after = (
            parse_nstat((RUN_EVENTS / f"tcp-counters-{node}-{w}.json").read_text()).counters
            for w in ("before", "after")
        )
        counted = linux_retransmit_causes(counter_delta(before, after))
        addr = split_hostport(next(a for a, f in local_to_flow.items() if f == k))[0]
        other = others.get(addr, {"recoveries": 0})["recoveries"]
        assert got["flows"][k]["recoveries"] + other == counted.recovery_episodes
    assert (got["flows"][1]["recoveries"], got["flows"][2]["recoveries"]) == (21, 28)
    # the report's causes table says so beside the counters' 50
    rec = events.TcpEvents.model_validate({**got, "flows": [got["flows"][k] for k in (1, 2)],
                                    "others": list(others.values())})  # fmt: skip
    assert traced_cell(rec) == "1: 21/0, 2: 28/0; 198.18.1.2: 1/0"
