"""Golden tests of ccbench.parse.qdisc on a real capture of the bottleneck sampler
(tests/captures/qdisc/, see the captures README), and the sampler's plan."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench.hosts.linux import QDISC_LOOP, LinuxHost
from ccbench.parse.qdisc import parse_qdisc_samples, queue_points, queue_stats
from ccbench.parse.tc import parse_tc_qdisc_json

CAP = Path(__file__).resolve().parents[1] / "captures" / "qdisc"
TEXT = (CAP / "qdisc-rt1-2cubic-100m.txt").read_text()
# meta.json of that run: started_unix; 12 s of traffic (flow 2 starts 2 s in).
T0 = 1795445065.5215516
TRAFFIC_S = 12.0


def _counters(name: str):  # type: ignore[no-untyped-def]
    qs = parse_tc_qdisc_json((CAP / name).read_text())
    return next(q for q in qs if q.handle == "10:")


def test_capture_parses_whole() -> None:
    samples = parse_qdisc_samples(TEXT)
    assert len(samples) == 250 == TEXT.count("TS ")
    first = samples[0]
    assert first.t_unix == 1795445065.507863
    assert [q.kind for q in first.qdiscs] == ["tbf", "pfifo"]
    q = first.get("10:")
    assert q is not None and q.limit_pkts == 48
    assert (q.dropped, q.sent_pkts, q.backlog_pkts) == (2347, 17412, 0)  # an earlier run's
    steps = [b.t_unix - a.t_unix for a, b in zip(samples, samples[1:], strict=False)]
    assert 0.045 < sum(steps) / len(steps) < 0.055


def test_series_drops_equal_before_after_counters() -> None:
    pts = queue_points(parse_qdisc_samples(TEXT))
    before, after = _counters("tc-before-2cubic-100m.json"), _counters("tc-after-2cubic-100m.json")
    assert pts[-1].drops - pts[0].drops == after.dropped - before.dropped == 318
    assert all(b.drops >= a.drops for a, b in zip(pts, pts[1:], strict=False))
    assert max(p.backlog_pkts for p in pts) == 48


def test_queue_stats_golden() -> None:
    pts = queue_points(parse_qdisc_samples(TEXT))
    before, after = _counters("tc-before-2cubic-100m.json"), _counters("tc-after-2cubic-100m.json")
    st = queue_stats(pts, T0, TRAFFIC_S, 0.05, 1514, before, after)
    # Checked independently with jq + awk over the file (README: 240 samples in the
    # traffic, mean qlen 11.75, one sample at >= 47 packets).
    assert st["samples"] == 250 and st["samples_in_traffic"] == 240
    assert st["backlog_mean_pkts"] == 11.75
    assert st["backlog_p95_pkts"] == 39.0 and st["backlog_max_pkts"] == 48
    assert st["full_share"] == round(1 / 240, 4)
    assert (st["drop_intervals"], st["drop_burst_max"], st["drops_in_traffic"]) == (8, 142, 318)
    assert st["interval_achieved_s"] == pytest.approx(0.05, abs=0.001)
    assert st["drops_check"] == {
        "series": 318, "counters": 318, "equal": True, "before_first_sample": 0,
        "after_last_sample": 0, "consistent": True, "note": None,
    }  # fmt: skip
    assert st["notes"] == []


def test_cut_inside_the_last_sample_drops_only_it() -> None:
    cut = TEXT[: TEXT.rfind("TS ") + 40]  # TS line plus part of tc's answer
    assert len(parse_qdisc_samples(cut)) == 249
    ts_only = TEXT[: TEXT.rfind("TS ")] + "TS 1795445077.955986\n"
    assert len(parse_qdisc_samples(ts_only)) == 249
    assert parse_qdisc_samples("") == []


@pytest.mark.parametrize(
    "text, msg",
    [
        ("hello\n[]\n", "line 1: expected 'TS"),
        ("TS nan\n[]\n", "bad timestamp"),
        ("TS 10.0\nnot json\n", "line 2: not tc"),
        ("TS 10.0\n[]\nTS 9.0\n[]\n", "backwards"),
    ],
)
def test_not_sampler_output_is_refused(text: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        parse_qdisc_samples(text)


def test_drops_before_first_sample_are_explained() -> None:
    pts = queue_points(parse_qdisc_samples(TEXT))
    before = dataclasses.replace(_counters("tc-before-2cubic-100m.json"), dropped=2340)
    st = queue_stats(pts, T0, TRAFFIC_S, 0.05, 1514, before, _counters("tc-after-2cubic-100m.json"))
    chk = st["drops_check"]
    assert (chk["series"], chk["counters"], chk["equal"]) == (318, 325, False)
    assert chk["consistent"] and chk["before_first_sample"] == 7
    assert "7 before the first sample" in chk["note"]


def test_counter_going_backwards_is_inconsistent() -> None:
    pts = queue_points(parse_qdisc_samples(TEXT))
    pts[100] = dataclasses.replace(pts[100], drops=0)
    st = queue_stats(pts, T0, TRAFFIC_S, 0.05, 1514, _counters("tc-before-2cubic-100m.json"),
                     _counters("tc-after-2cubic-100m.json"))  # fmt: skip
    assert st["drops_check"]["consistent"] is False


def test_interval_not_kept_is_noted() -> None:
    pts = queue_points(parse_qdisc_samples(TEXT))[::4]  # as if every 0.2 s
    st = queue_stats(pts, T0, TRAFFIC_S, 0.05, 1514)
    assert st["interval_achieved_s"] == pytest.approx(0.2, abs=0.01)
    assert any("not every 50 ms" in n for n in st["notes"])
    assert "not cross-checked" in st["drops_check"]["note"]


def test_sampler_plan_is_a_constant_script() -> None:
    argv = LinuxHost().qdisc_sampler("eth5", 0.05)
    assert argv == ["bash", "-c", QDISC_LOOP, "ccbench-qdisc", "50000", "eth5"]
    other = LinuxHost().qdisc_sampler("to-dl; rm -rf /", 0.013)
    assert other[2] == QDISC_LOOP and other[4:] == ["13000", "to-dl; rm -rf /"]
    assert "eth5" not in QDISC_LOOP and "50000" not in QDISC_LOOP


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_sampler_script_syntax() -> None:
    subprocess.run(["bash", "-n", "-c", QDISC_LOOP], check=True)


def test_capture_meta_matches_test_constants() -> None:
    # The tc snapshots bracket the samples (tc-before first, tc-after last).
    b = json.loads((CAP / "tc-before-2cubic-100m.json").read_text())
    a = json.loads((CAP / "tc-after-2cubic-100m.json").read_text())
    assert b[1]["drops"] == 2347 and a[1]["drops"] == 2665


def test_sampler_lines_from_iproute2_4_20_are_read() -> None:
    # iproute2 <= 4.20 writes tbf's options as text inside its -j line (written from
    # its print code, tests/captures/README.md): the sampler's samples still parse.
    line = (CAP.parent / "tc-tbf-pfifo48-after-iproute2-4.20-written-from-q_tbf-c.json").read_text()
    samples = parse_qdisc_samples(f"TS 1795445065.5\n{line}TS 1795445065.55\n{line}")
    assert len(samples) == 2
    tbf, fifo = samples[0].qdiscs
    assert (tbf.kind, tbf.rate_bps, tbf.burst_bytes, tbf.latency_us) == ("tbf", 1e8, 15137, 5e4)
    (pt, _) = queue_points(samples)
    assert (pt.drops, pt.sent_pkts, pt.overlimits, pt.limit_pkts) == (6643, 186642, 300070, 48)
