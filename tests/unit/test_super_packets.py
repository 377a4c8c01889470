"""Super-packets at the bottleneck: the queue's bytes per queued packet (summary.json
`queue`) and the reason that makes a run invalid, golden on two real runs of the same
dumbbell, sender offloads off and sender TSO/GSO on (tests/captures/qdisc/, see the
captures README), with the expected numbers computed here from the sampler's raw lines."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from ccbench.instruments.qdisc import SUPER_PACKETS, super_packet_reasons
from ccbench.parse.qdisc import (
    SUPER_MIN_SAMPLES,
    SUPER_SHARE,
    QueuePoint,
    iter_qdisc_samples,
    iter_queue_points,
    queue_stats,
)
from ccbench.parse.tc import QdiscStats, parse_tc_qdisc_json
from ccbench.reasons import Code, texts
from ccbench.summarize import summarize
from tests.raw_meta import edit_meta

TESTS = Path(__file__).resolve().parents[1]
CAP = TESTS / "captures" / "qdisc"
FIX_RUN = TESTS / "fixtures" / "results-small" / "runs" / "two-flows-cubic-r1-71654894"
FRAME = 1514  # MTU 1500 + 14
# Each run's meta.json started_unix; both: 2 cubic flows of 5 s, samples every 10 ms.
RUNS = {
    "offloads-off": 1795931335.2199526,
    "tso-gso-on": 1795931342.3871627,
}
TRAFFIC_S, INTERVAL_S = 5.0, 0.01


def _lines(run: str) -> list[str]:
    with gzip.open(CAP / f"qdisc-rt1-2cubic-100m-{run}.txt.gz", "rt") as f:
        return f.readlines()


def _raw_backlogs(run: str, traffic_s: float = TRAFFIC_S) -> list[tuple[int, int]]:
    """(bytes, packets) of the pfifo (handle 10:) in every sample inside the traffic
    window that held a packet, read straight from the sampler's TS/JSON line pairs."""
    lines, t0, out = _lines(run), RUNS[run], []
    for ts, answer in zip(lines[::2], lines[1::2], strict=False):
        t = float(ts.split()[1])
        if not answer.endswith("\n") or not t0 <= t <= t0 + traffic_s:
            continue
        [q] = [q for q in json.loads(answer) if q["handle"] == "10:"]
        if q["qlen"] > 0:
            out.append((q["backlog"], q["qlen"]))
    return out


def _counters(run: str, when: str) -> QdiscStats:
    stats = parse_tc_qdisc_json((CAP / f"tc-{when}-2cubic-100m-{run}.json").read_text())
    return next(q for q in stats if q.handle == "10:")


def _stats(run: str) -> dict:
    pts = iter_queue_points(iter_qdisc_samples(_lines(run)))
    return queue_stats(pts, RUNS[run], TRAFFIC_S, INTERVAL_S, FRAME,
                       _counters(run, "before"), _counters(run, "after"))  # fmt: skip


@pytest.mark.parametrize("run", RUNS)
def test_bytes_per_queued_packet_golden(run: str) -> None:
    raw = _raw_backlogs(run)
    st = _stats(run)
    assert st["frame_bytes"] == FRAME
    assert st["samples_with_backlog"] == len(raw) > 200
    assert st["pkt_bytes_max"] == round(max(b / n for b, n in raw), 1)
    assert st["pkt_bytes_mean"] == round(sum(b for b, _ in raw) / sum(n for _, n in raw), 1)
    assert st["samples_over_frame"] == sum(b > n * FRAME for b, n in raw)


def test_offloads_off_holds_frames() -> None:
    st = _stats("offloads-off")
    # One sample of 4 frames' bytes for 3 packets (2018.7 B each): the unlocked dump's
    # race. It alone does not make super-packets; the mean stays at most one frame
    # (pings and the iperf3 control connection's small packets pull it below).
    assert (st["samples_over_frame"], st["pkt_bytes_max"]) == (1, 2018.7)
    assert st["pkt_bytes_mean"] <= FRAME
    assert st["super_packets"] is False
    assert super_packet_reasons("rt1/to-dl", st) == []


def test_sender_tso_gso_on_fills_the_queue_with_super_packets() -> None:
    st = _stats("tso-gso-on")
    assert st["samples_over_frame"] == st["samples_with_backlog"]  # every sample
    assert st["pkt_bytes_max"] > 8 * FRAME and st["pkt_bytes_mean"] > 3 * FRAME
    assert st["super_packets"] is True
    [reason] = super_packet_reasons("rt1/to-dl", st)
    assert reason.code == Code.SUPER_PACKETS and reason.evidence == {
        "where": "rt1/to-dl", "pkt_bytes_max": st["pkt_bytes_max"], "frame_bytes": 1514,
        "samples_over_frame": st["samples_over_frame"],
        "samples_with_backlog": st["samples_with_backlog"]}  # fmt: skip
    # its words: what was held, against what, and what the limit then meant
    why = reason.text
    assert SUPER_PACKETS in why and why.startswith("bottleneck rt1/to-dl: ")
    assert f"up to {st['pkt_bytes_max']:.0f} bytes (mean {st['pkt_bytes_mean']:.0f} B" in why
    assert "at most 1514" in why and "limit of 48 packets is not 48 wire packets" in why


@pytest.mark.parametrize("run", RUNS)
def test_sent_counters_count_segments_not_skbs(run: str) -> None:
    # tc's sent counters add a GSO skb's segments (bstats_update): a packet there is a
    # wire packet in both runs, so only the backlog shows the super-packets.
    before, after = _counters(run, "before"), _counters(run, "after")
    assert after.sent_bytes is not None and before.sent_bytes is not None
    assert after.sent_pkts is not None and before.sent_pkts is not None
    per_pkt = (after.sent_bytes - before.sent_bytes) / (after.sent_pkts - before.sent_pkts)
    assert 1500 < per_pkt <= FRAME


def _pts(sizes: list[tuple[int, int]]) -> list[QueuePoint]:
    return [QueuePoint(100.0 + k * 0.05, n, b, 0, 0, None, 48, None)
            for k, (b, n) in enumerate(sizes)]  # fmt: skip


@pytest.mark.parametrize(
    "over, frames, flagged",
    [
        (SUPER_MIN_SAMPLES - 1, 0, False),  # too few over a frame, however large a share
        (SUPER_MIN_SAMPLES, 1000, False),  # a share no larger than SUPER_SHARE: races
        (SUPER_MIN_SAMPLES, 10, True),
        (0, 0, None),  # no sample with a backlog: nothing to judge
    ],
)
def test_threshold(over: int, frames: int, flagged: bool | None) -> None:
    # `over` samples holding 3 packets of 4 frames' bytes (the race's size), `frames`
    # of 10 packets of frames; an empty sample beside them counts for nothing.
    n = over + frames
    sizes = [(4 * FRAME, 3)] * over + [(10 * FRAME, 10)] * frames + [(0, 0)]
    if flagged is False and over == SUPER_MIN_SAMPLES:
        assert over <= SUPER_SHARE * n
    st = queue_stats(_pts(sizes), 99.0, 1000.0, 0.05, FRAME)
    assert st["super_packets"] is flagged
    assert st["samples_with_backlog"] == n and st["samples_over_frame"] == over


def test_jumbo_frames_are_the_expected_size() -> None:
    jumbo = 9014
    sizes = [(5 * jumbo, 5)] * 20
    st = queue_stats(_pts(sizes), 99.0, 1000.0, 0.05, jumbo)
    assert (st["pkt_bytes_max"], st["frame_bytes"], st["super_packets"]) == (jumbo, jumbo, False)
    assert queue_stats(_pts(sizes), 99.0, 1000.0, 0.05, FRAME)["super_packets"] is True


def test_byte_limited_queue_reason() -> None:
    st = {**_stats("tso-gso-on"), "limit_pkts": None, "limit_bytes": 72_000}
    [why] = texts(super_packet_reasons("rt1/to-dl", st))
    assert "held and dropped them whole, not as wire packets" in why


@pytest.fixture(params=list(RUNS))
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path]:
    """A fixture run's raw/ with a capture's sampler file put in, as a run with queue
    sampling writes it (the fixture's 3 s of traffic: the window is the first 3 s)."""
    run = request.param
    raw = tmp_path / "run" / "raw"
    shutil.copytree(FIX_RUN / "raw", raw)
    shutil.copy(CAP / f"qdisc-rt1-2cubic-100m-{run}.txt.gz", raw / "qdisc-rt1.txt.gz")
    for when in ("before", "after"):
        shutil.copy(CAP / f"tc-{when}-2cubic-100m-{run}.json", raw / f"tc-{when}.json")
    edit_meta(raw, {"qdisc": {"node": "rt1", "dev": "to-dl", "interval_s": INTERVAL_S,
                              "argv": ["ccbench-qdisc", "10000", "to-dl"]}},
              started_unix=RUNS[run])  # fmt: skip
    return run, raw


def test_summary_says_it(run_dir: tuple[str, Path]) -> None:
    run, raw = run_dir
    s = summarize(raw)
    q = s["queue"]
    expected = _raw_backlogs(run, traffic_s=3.0)
    assert q["samples_with_backlog"] == len(expected)
    assert q["pkt_bytes_max"] == round(max(b / n for b, n in expected), 1)
    mine = [r for r in s["reasons"] if r.code == Code.SUPER_PACKETS]
    if run == "tso-gso-on":
        assert q["super_packets"] is True and not s["valid"]
        assert mine == super_packet_reasons("rt1/to-dl", q)
    else:
        assert q["super_packets"] is False and mine == []
