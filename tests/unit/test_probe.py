"""The latency-under-load probe: exact command plans for ping, irtt and flent, and
golden tests of the irtt and flent parsers on captures made on this machine
(tests/captures/probe/, see tests/captures/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ccbench import probes
from ccbench.errors import CcbenchError
from ccbench.parse.flent import parse_flent_gz
from ccbench.parse.irtt import parse_irtt
from ccbench.probes.base import ProbeRun, ProbeSettings
from ccbench.probes.flent import FLENT_SH, _coverage
from ccbench.reasons import Code
from ccbench.summarize.probe import read_probe
from ccbench.validity import check_probe
from tests.raw_meta import write_meta

CAP = Path(__file__).resolve().parents[1] / "captures" / "probe"
FLENT_PING = "flent-2.3.0-ping-netns-2cubic"


def test_ping_plan_is_stopped_after_the_flows() -> None:
    pl = probes.plan("ping", ProbeSettings("198.18.4.2", 0.1, 30, testbed="t1"), "linux")
    assert pl.client == ["ping", "-n", "-D", "-i", "0.1", "198.18.4.2"]
    assert pl.servers == [] and pl.out == "probe-ping.txt" and not pl.ends_by_itself


def test_irtt_plan_runs_as_long_as_the_traffic() -> None:
    pl = probes.plan("irtt", ProbeSettings("198.18.4.2", 0.05, 30, testbed="t1"), "linux")
    assert pl.servers == [["irtt", "server", "-b", "198.18.4.2:2112"]]
    assert pl.client == ["irtt", "client", "-Q", "-o", "-", "--fill=rand", "-i", "50ms",
                         "-d", "30s", "198.18.4.2:2112"]  # fmt: skip
    assert pl.out == "probe-irtt.json" and pl.ends_by_itself


def test_flent_ping_plan_prints_its_data_file() -> None:
    """flent's plan: its wrapper script with /var/tmp and the testbed's own directory as
    arguments (flent's data directories are per testbed: tests/unit/test_flent_dir.py
    runs the script), then the flent command."""
    pl = probes.plan("flent", ProbeSettings("198.18.4.2", 0.2, 30, testbed="t1"), "linux")
    assert pl.servers == [["irtt", "server", "-b", "198.18.4.2:2112"]]
    assert pl.client == ["sh", "-c", FLENT_SH, "ccbench-flent", "/var/tmp",
                         "/var/tmp/ccbench/flent/t1", "flent", "ping", "-H", "198.18.4.2",
                         "-l", "33", "-s", "0.2", "-t", "ccbench"]  # fmt: skip
    # released 1.5 s before the flows: flent samples from ~0.4 s before them
    assert pl.out == "probe.flent.gz" and pl.lead_s == 1.5
    with pytest.raises(CcbenchError, match="'../x' is not a testbed id"):
        probes.plan("flent", ProbeSettings("198.18.4.2", 0.2, 30, testbed="../x"), "linux")


def test_flent_netperf_tests_start_netserver() -> None:
    pl = probes.plan(
        "flent", ProbeSettings("198.18.4.2", 0.1, 10, "tcp_1up", testbed="t1"), "linux"
    )
    assert pl.servers[1] == ["netserver", "-D", "-p", "12865"]
    assert probes.tool("flent").needs_netperf("tcp_1up")
    assert not probes.tool("flent").needs_netperf("ping")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("traceroute", "x", 0.1, 5), "probe_tool: unknown tool 'traceroute'"),
        (("flent", "x", 0.1, 5, "rrul_torrent"), "unknown flent test 'rrul_torrent'"),
        (("irtt", "x", 0.1, 5, "ping", "freebsd"), "needs a Linux sender (s1 runs freebsd)"),
    ],
)
def test_bad_probe_choices_name_the_problem(args: tuple, needle: str) -> None:
    name, dst, interval, length, *rest = args
    test, os_name = [*rest, "ping", "linux"][0], [*rest, "linux", "linux"][1]
    with pytest.raises(CcbenchError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        probes.plan(name, ProbeSettings(dst, interval, length, test, testbed="t1"), os_name)


def test_irtt_capture_under_two_cubic_flows() -> None:
    r = parse_irtt(json.loads((CAP / "irtt-0.9.0-netns-2cubic.json").read_text()))
    assert (r.version, r.sent, r.received, len(r.rtts_us)) == ("0.9.0", 50, 50, 50)
    assert r.rtts_us[:3] == [40435.136, 45812.926, 40441.251]
    assert sorted(r.rtts_us)[25] == 40389.956  # irtt's own stats.rtt.median
    assert max(r.rtts_us) == 45812.926  # stats.rtt.max
    # one-way delays add up to the round trip (less the server's turnaround)
    assert abs(r.send_delay_us[0] + r.receive_delay_us[0] - r.rtts_us[0]) < 100


def test_irtt_lost_round_trips_are_not_samples() -> None:
    doc = {"version": {"irtt": "0.9.0", "json_format": 1},
           "stats": {"packets_sent": 3, "packets_received": 1},
           "round_trips": [{"lost": "true"}, {"lost": "false", "delay": {"rtt": 41_000_000}},
                           {"lost": "true_down"}]}  # fmt: skip
    r = parse_irtt(doc)
    assert (r.sent, r.received, r.rtts_us) == (3, 1, [41000.0])
    with pytest.raises(ValueError, match="not irtt client JSON"):
        parse_irtt({"round_trips": []})


def test_flent_ping_capture_names_its_runners() -> None:
    f = parse_flent_gz((CAP / f"{FLENT_PING}.flent.gz").read_bytes())
    assert (f.version, f.test, f.failed_runners) == ("2.3.0", "ping", 0)
    icmp, udp = f.series
    assert (icmp.name, icmp.runner, icmp.units) == ("Ping (ms) ICMP", "PingRunner", "ms")
    assert icmp.command.startswith("/usr/bin/fping ")
    assert (udp.name, udp.runner) == ("Ping (ms) UDP", "IrttRunner")
    assert len(icmp.values) == 70 and icmp.values[0] == 44.8
    assert icmp.times[0] == 1795319588.01273


def test_flent_tcp_1up_capture_from_the_container_has_netperf() -> None:
    f = parse_flent_gz((CAP / "flent-2.3.0-tcp_1up-container.flent.gz").read_bytes())
    assert f.test == "tcp_1up"
    assert [(s.name, s.runner, len(s.values)) for s in f.series] == [
        ("Ping (ms) ICMP", "PingRunner", 169), ("TCP upload", "NetperfDemoRunner", 46)]  # fmt: skip


def test_flent_not_gzip_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a gzip'd flent data file"):
        parse_flent_gz(b"{}")


def test_read_probe_keeps_flent_samples_taken_while_the_flows_ran(tmp_path: Path) -> None:
    shutil.copy(CAP / f"{FLENT_PING}.flent.gz", tmp_path / "probe.flent.gz")
    shutil.copy(CAP / f"{FLENT_PING}.meta.json", tmp_path / "meta.json")
    shutil.copy(CAP / f"{FLENT_PING}.spec.json", tmp_path / "spec.json")
    p = read_probe(tmp_path)
    assert p is not None and p.tool == "flent ping"
    # flent ran 7 s from 1.08 s after the flows started: 40 of its 70 ICMP samples fall
    # inside the 5 s of traffic
    assert len(p.rtts_us) == 40
    assert sorted(p.rtts_us)[20] == pytest.approx(40300.0) and max(p.rtts_us) == 44900.0
    assert p.what == ("flent 2.3.0 ping test (RTT: its 'Ping (ms) ICMP' series, measured by "
                      "fping; only samples taken while the flows ran)")  # fmt: skip
    assert p.raw == "probe.flent.gz"
    assert [s["name"] for s in p.series] == ["Ping (ms) ICMP", "Ping (ms) UDP"]
    # 40 samples 0.1 s apart span 4.0 s of the 5 s: the run says it (validity), and why
    assert p.coverage == pytest.approx(0.8, abs=0.01)
    assert p.first_sample_s == pytest.approx(1.08, abs=0.05)
    [reason] = check_probe({"tool": p.tool, "samples": len(p.rtts_us), "coverage": p.coverage,
                            "first_sample_s": p.first_sample_s}, "flent")  # fmt: skip
    assert (reason.code, reason.evidence) == (Code.PROBE_SHORT, {
        "tool": "flent ping", "coverage": p.coverage, "limit": 0.9,
        "first_sample_s": p.first_sample_s})  # fmt: skip
    # why, in words: a start after the traffic (not gaps)
    assert f"its first sample came {p.first_sample_s:.2f} s after" in reason.text


def _flent_run(tmp_path: Path, name: str) -> Path:
    for suffix in ("flent.gz", "meta.json", "spec.json"):
        target = "probe.flent.gz" if suffix == "flent.gz" else suffix
        shutil.copy(CAP / f"{name}.{suffix}", tmp_path / target)
    return tmp_path


def test_flent_that_started_after_the_traffic_has_no_samples(tmp_path: Path) -> None:
    """A real stall (captures/README.md): flent's own name lookup held it 5 s."""
    p = read_probe(_flent_run(tmp_path, "flent-2.3.0-tcp_1up-ssh-dns-stall"))
    assert p is not None and p.rtts_us == [] and p.coverage == 0.0
    assert p.series[0]["samples"] == 169  # it measured, only not while the flows ran
    assert p.first_sample_s is not None and p.first_sample_s > 4  # after the traffic


def test_flent_coverage_counts_one_step_per_sample() -> None:
    assert _coverage([], 0.0, 5.0) == 0.0
    assert _coverage([1.0], 0.0, 5.0) == 0.0
    assert _coverage([0.05 + 0.1 * k for k in range(50)], 0.0, 5.0) == 1.0
    assert _coverage([2.5 + 0.5 * k for k in range(6)], 0.0, 5.0) == 0.6


def test_flent_netperf_test_says_it_ran_its_own_flow(tmp_path: Path) -> None:
    shutil.copy(CAP / "flent-2.3.0-tcp_1up-container.flent.gz", tmp_path / "probe.flent.gz")
    p = read_probe(tmp_path)  # no meta.json: every sample counts
    assert p is not None and p.tool == "flent tcp_1up" and len(p.rtts_us) == 169
    assert p.what.endswith("the test also ran its own 'TCP upload' (netperf))")


def test_read_probe_without_probe_is_none(tmp_path: Path) -> None:
    assert read_probe(tmp_path) is None


def test_fping_plan_counts_probes_for_the_traffic() -> None:
    pl = probes.plan("fping", ProbeSettings("198.18.4.2", 0.1, 30, testbed="t1"), "freebsd")
    assert pl.client == ["fping", "-D", "-p", "100", "-c", "300", "198.18.4.2"]
    assert pl.out == "probe-fping.txt" and pl.servers == [] and pl.ends_by_itself


def test_fping_capture_with_every_5th_echo_dropped() -> None:
    """`fping -D -p 100 -c 20` between two namespaces here, the receiver dropping every
    5th ICMP packet (iptables statistic nth 5): 20 probes, 16 replies."""
    from ccbench.parse.fping import parse_fping

    r = parse_fping((CAP / "fping-5.1-netns-nth5-loss.txt").read_text())
    assert (r.target, r.sent, r.received) == ("198.18.252.2", 20, 16)
    assert r.rtts_us[:3] == [88.0, 41.0, 62.0]
    assert r.times[0] == 1795376097.70269
    assert min(r.rtts_us) == 41.0 and max(r.rtts_us) == 88.0  # fping's min/max: 0.041/0.088


def test_fping_two_targets_is_an_error() -> None:
    from ccbench.parse.fping import parse_fping

    text = ("[1.0] 10.0.0.1 : [0], 64 bytes, 1.0 ms (1.0 avg, 0% loss)\n"
            "[1.1] 10.0.0.2 : [0], 64 bytes, 1.0 ms (1.0 avg, 0% loss)\n")  # fmt: skip
    with pytest.raises(ValueError, match="two targets"):
        parse_fping(text)


FPING_4 = "fping-4-loss-written-from-fping-4-source.txt"


def test_fping_4_counts_lost_probes_from_the_count_asked() -> None:
    """fping < 5.0 prints no line for a lost probe (written from fping 4.x's print code,
    tests/captures/README.md): `-c 20` with probes 5, 11, 12, 17 and 19 lost."""
    from ccbench.parse.fping import parse_fping

    text = (CAP / FPING_4).read_text()
    r = parse_fping(text, asked=20)
    assert (r.target, r.sent, r.received) == ("198.18.4.2", 20, 15)
    assert r.rtts_us[:2] == [41200.0, 41800.0] and r.times[0] == 1795376097.741387
    # Not knowing the count, the gaps still show (all but the lost last probe).
    assert (parse_fping(text).sent, parse_fping(text).received) == (19, 15)
    # fping 5.x prints every probe: the count asked changes nothing there.
    r5 = parse_fping((CAP / "fping-5.1-netns-nth5-loss.txt").read_text(), asked=20)
    assert (r5.sent, r5.received) == (20, 16)


def test_fping_reader_takes_the_count_from_the_runs_probe_argv(tmp_path: Path) -> None:
    shutil.copy(CAP / FPING_4, tmp_path / "probe-fping.txt")
    argv = probes.plan("fping", ProbeSettings("198.18.4.2", 0.1, 2, testbed="t1"), "linux").client
    assert argv[argv.index("-c") + 1] == "20"
    write_meta(tmp_path, probe_argv=argv)
    p = read_probe(tmp_path)
    assert p is not None and (p.tool, p.sent, p.received) == ("fping", 20, 15)
    (tmp_path / "meta.json").unlink()  # a run that did not record it: the gaps only
    p = read_probe(tmp_path)
    assert p is not None and (p.sent, p.received) == (19, 15)
    # the reader takes the argv as runmeta read it, nothing else
    p = probes.read(tmp_path, ProbeRun(argv=argv))
    assert p is not None and (p.sent, p.received) == (20, 15)


@pytest.mark.parametrize(
    ("argv", "count"),
    [
        (["fping", "-D", "-p", "100", "-c", "300", "h"], 300),
        (["fping", "-c20", "h"], 20),
        (["fping", "--count=7", "h"], 7),
        (["fping", "--count", "9", "h"], 9),
        (["fping", "-D", "h"], None),
        (["fping", "-c", "x", "h"], None),
    ],
)
def test_fping_count_asked(argv: list[str], count: int | None) -> None:
    from ccbench.parse.fping import count_asked

    assert count_asked(argv) == count
