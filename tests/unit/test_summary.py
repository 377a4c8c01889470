"""summary.json from a real run's raw files (captured here: tests/captures/run-local-2cubic,
two cubic flows, 50 Mbit/s x 20 ms, 1-BDP pfifo, native delay element, 3 s)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccbench import validity
from ccbench.reasons import Code
from ccbench.summarize import summarize
from ccbench.timeseries import build
from tests.conftest import codes, texts_of
from tests.raw_meta import edit_meta

RAW = Path(__file__).resolve().parents[1] / "captures" / "run-local-2cubic"


def test_flows_come_from_the_iperf3_json() -> None:
    s = summarize(RAW)
    for k in (1, 2):
        doc = json.loads((RAW / f"iperf3-{k}.json").read_text())
        f = s["flows"][k - 1]
        assert f["throughput_bps"] == doc["end"]["sum_received"]["bits_per_second"]
        assert f["bytes_received"] == doc["end"]["sum_received"]["bytes"]
        assert f["retransmits"] == doc["end"]["sum_sent"]["retransmits"]
        assert f["cc_used"] == doc["end"]["sender_tcp_congestion"] == "cubic"
        assert f["srtt_max_us"] == doc["end"]["streams"][0]["sender"]["max_rtt"]


def test_aggregates_bottleneck_and_validity() -> None:
    s = summarize(RAW)
    total_bytes = sum(f["bytes_received"] for f in s["flows"])
    assert s["throughput_sum_bps"] == pytest.approx(total_bytes * 8 / 3.0)
    assert s["utilization_pct"] == pytest.approx(s["throughput_sum_bps"] / 50e6 * 100)
    t1, t2 = (f["throughput_bps"] for f in s["flows"])
    assert s["jain"] == pytest.approx((t1 + t2) ** 2 / (2 * (t1 * t1 + t2 * t2)))
    before = {q["handle"]: q for q in json.loads((RAW / "tc-before.json").read_text())}
    after = {q["handle"]: q for q in json.loads((RAW / "tc-after.json").read_text())}
    assert s["bottleneck"]["drops"] == after["10:"]["drops"] - before["10:"]["drops"] == 206
    d_after = json.loads((RAW / "delay-after.json").read_text())["lateness"]
    d_before = json.loads((RAW / "delay-before.json").read_text())["lateness"]
    assert s["delay_element"]["packets"] == d_after["count"] - d_before["count"]
    assert s["valid"] and s["reasons"] == []


def test_a_wrong_cc_makes_the_run_invalid(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    spec = json.loads((raw / "spec.json").read_text())
    spec["flows"][1]["cc"] = "bbr"  # asked for bbr, the capture used cubic
    (raw / "spec.json").write_text(json.dumps(spec))
    s = summarize(raw)
    assert not s["valid"]
    assert [(r.code, r.evidence) for r in s["reasons"]] == [
        (Code.CC_MISMATCH, {"flow": 2, "used": "cubic", "asked": "bbr"})
    ]


def test_a_tool_error_makes_the_run_invalid(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    err = Path(__file__).resolve().parents[1] / "captures" / "iperf3.12-error-refused.json"
    shutil.copy(err, raw / "iperf3-1.json")
    s = summarize(raw)
    assert not s["valid"]
    assert s["flows"][0]["throughput_bps"] is None
    assert s["throughput_sum_bps"] is None
    [error] = [r for r in s["reasons"] if r.code == Code.FLOW_ERROR]
    assert error.evidence == {"flow": 1} and "unable to connect" in error.text  # iperf3's own


def test_late_delay_element_makes_the_run_invalid(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    after = json.loads((raw / "delay-after.json").read_text())
    before = json.loads((raw / "delay-before.json").read_text())
    n = after["lateness"]["count"] - before["lateness"]["count"]
    after["lateness"]["over_threshold"] = before["lateness"]["over_threshold"] + n // 50
    (raw / "delay-after.json").write_text(json.dumps(after))
    s = summarize(raw)
    [late] = [r.evidence for r in s["reasons"] if r.code == Code.DELAY_LATE]
    assert late["late_share"] == pytest.approx(0.02, abs=1e-3)
    assert late["limit"] == validity.LATE_SHARE_MAX


def test_timeseries_has_both_sources_per_flow() -> None:
    df = build(RAW)
    assert set(df["flow"]) == {1, 2}
    ip = df[df["source"] == "iperf3"]
    assert len(ip[ip["flow"] == 1]) == 6  # 3 s at 0.5 s intervals
    doc = json.loads((RAW / "iperf3-1.json").read_text())
    first = doc["intervals"][0]["streams"][0]
    row = ip[ip["flow"] == 1].iloc[0]
    # the sender's bits_per_second is what its application wrote, not what crossed the
    # wire: its own column (docs/series.md)
    assert row["app_written_bps"] == first["bits_per_second"]
    assert ip["throughput_bps"].isna().all()
    assert row["cwnd_bytes"] == first["snd_cwnd"]
    ss = df[df["source"] == "ss"]
    assert len(ss) > 20 and ss["rtt_us"].min() >= 20_000


def test_a_failed_attempt_is_reported_not_lost(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    (raw / "iperf3-2.json").unlink()
    (raw / "error.txt").write_text("adhoc/adhoc rep 1: iperf3 clients still running after 3s\n")
    s = summarize(raw)
    assert not s["valid"]
    assert codes(s["reasons"])[0] == Code.RUN_FAILED  # first, and naming what error.txt says
    assert s["reasons"][0].text.endswith(
        ": adhoc/adhoc rep 1: iperf3 clients still running after 3s"
    )
    assert {"flow": 2, "exit": 0} in [
        r.evidence for r in s["reasons"] if r.code == Code.FLOW_NO_OUTPUT
    ]


def test_a_probe_that_missed_the_traffic_makes_the_run_invalid(tmp_path: Path) -> None:
    """The run started flent (meta.json's probe_argv) but its samples all came after the
    flows (a real stall, tests/captures/README.md): latency under load was not measured."""
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    cap = RAW.parent / "probe" / "flent-2.3.0-tcp_1up-ssh-dns-stall"
    shutil.copy(f"{cap}.flent.gz", raw / "probe.flent.gz")
    stalled = json.loads(Path(f"{cap}.meta.json").read_text())
    edit_meta(raw, probe_argv=stalled["probe_argv"], started_unix=stalled["started_unix"])
    s = summarize(raw)
    assert s["probe"]["samples"] == 0 and s["probe"]["coverage"] == 0.0
    assert [(r.code, r.evidence) for r in s["reasons"]] == [
        (Code.PROBE_FAILED, {"tool": "flent tcp_1up", "samples": 0})
    ]
    assert not s["valid"]


def test_a_started_probe_without_data_makes_the_run_invalid(tmp_path: Path) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    edit_meta(raw, probe_argv=["ping", "-D", "-i", "0.1", "198.18.4.2"])
    s = summarize(raw)
    assert [(r.code, r.evidence) for r in s["reasons"]] == [(Code.PROBE_FAILED, {"tool": "ping"})]


def test_a_queue_outside_the_bottleneck_makes_the_run_invalid(tmp_path: Path) -> None:
    """The capture's flows saw a mean RTT of 34.6/35.6 ms through 83 packets at 50 Mbit/s
    x 20 ms (at most 40.1 ms). Told the queue held 8 packets (at most 21.9 ms), the same
    RTTs can only come from packets held somewhere else."""
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    spec = json.loads((raw / "spec.json").read_text())
    spec["topology"]["queue_limit_pkts"] = 8
    (raw / "spec.json").write_text(json.dumps(spec))
    s = summarize(raw)
    # and tc-before.json shows rt1 had another queue than the (edited) spec asks
    assert codes(s["reasons"]) == [Code.HIDDEN_QUEUE, Code.HIDDEN_QUEUE, Code.BOTTLENECK_CONFIG]
    held = [r.evidence for r in s["reasons"][:2]]
    assert [(e["flow"], round(e["mean_rtt_ms"], 1), round(e["bound_ms"], 1)) for e in held] == [
        (1, 34.6, 21.9), (2, 35.6, 21.9)]  # fmt: skip
    spec["topology"]["queue_limit_pkts"] = 40  # 29.7 ms + 5 ms of slack: 34.6 passes
    (raw / "spec.json").write_text(json.dumps(spec))
    again = summarize(raw)["reasons"]
    assert codes(again) == [Code.HIDDEN_QUEUE, Code.BOTTLENECK_CONFIG]
    assert again[0].evidence["flow"] == 2


def test_a_run_on_another_testbeds_queue_or_rate_is_invalid(tmp_path: Path) -> None:
    """The Emulab rehearsal found runs of a 48-packet scenario on the 331-packet queue a
    1-BDP scenario's `up` had left on a shared rt1: the queue rt1 had is checked."""
    raw = tmp_path / "raw"
    shutil.copytree(RAW, raw)
    tc = json.loads((raw / "tc-before.json").read_text())
    tc[1]["options"]["limit"] = 331
    tc[0]["options"]["rate"] = 125_000_000  # 1 Gbit/s in bytes per second
    (raw / "tc-before.json").write_text(json.dumps(tc))
    s = summarize(raw)
    assert [r.evidence for r in s["reasons"] if r.code == Code.BOTTLENECK_CONFIG] == [
        {"queue": "pfifo 331", "asked": "pfifo 83"},
        {"rate_bps": 1e9, "asked_bps": 50e6},
    ]
    assert not s["valid"]


def test_a_hidden_queue_reason_names_what_the_counters_saw(tmp_path: Path) -> None:
    """A real run with a ledger, told its queue held 4 packets: its flows' RTT says
    packets were held elsewhere, and the reason says what the host's counters saw."""
    raw = tmp_path / "raw"
    shutil.copytree(RAW.parent / "run-local-2cubic-ledger", raw)
    spec = json.loads((raw / "spec.json").read_text())
    spec["topology"]["queue_limit_pkts"] = 4
    (raw / "spec.json").write_text(json.dumps(spec))
    first = texts_of(summarize(raw)["reasons"], Code.HIDDEN_QUEUE)[0]  # its words: the subject
    assert first == (
        "flow 1: mean RTT 27.2 ms above the 21.0 ms the path can give (RTT + a full queue): "
        "packets were held outside the bottleneck (seen: no softnet squeeze, backlog drop "
        "or late release counted)"
    )
    led = {"softnet_time_squeeze": 31, "softnet_backlog_pkts": 2}
    assert validity.hidden_queue_cause(led, {"late_share": 0.012}) == (
        "seen: 31 softnet time squeezes (the kernel's receive processing ran out "
        "of budget); 2 softnet backlog drops; the delay element released 1.20% of packets "
        "> 5 ms late"
    )
    assert validity.hidden_queue_cause(None, None) is None  # no ledger: nothing is said
