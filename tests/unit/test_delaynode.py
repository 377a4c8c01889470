"""ccbench.delaynode: dl's dummynet pipes and clock, read and checked against the run.

The `ipfw pipe show` and `sysctl -n kern.hz` captures were WRITTEN FROM SOURCE (no
FreeBSD delay node here): the printf formats of sbin/ipfw/dummynet.c's list_pipes(),
print_flowset_parms() and list_flow() (FreeBSD 14), with the pipe numbers Emulab gives an
explicit bridge such as profile.py's dl (60111, 60121; libvtop _pipenumber) and kern.hz
as Emulab's delay set-up leaves it (10000) or a stock kernel has it (1000). See
tests/captures/freebsd/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ccbench import delaynode
from ccbench.parse import drops

CAPTURES = Path(__file__).resolve().parents[1] / "captures" / "freebsd"


def cap(name: str) -> str:
    return (CAPTURES / name).read_text()


RIGHT = "ipfw-pipe-show-dl-right-unlimited-written-from-dummynet-c.txt"
IDLE = "ipfw-pipe-show-dl-right-unlimited-idle-written-from-dummynet-c.txt"
WRONG_DELAY = "ipfw-pipe-show-dl-wrong-delay-written-from-dummynet-c.txt"
GBIT_50 = "ipfw-pipe-show-dl-1gbit-pipe-50-slots-written-from-dummynet-c.txt"
HZ_10000 = "sysctl-n-kern.hz-10000-written-from-delaysetup.txt"
HZ_1000 = "sysctl-n-kern.hz-1000-written-from-sysctl.txt"


def reading(pipes: str, hz: str = HZ_10000) -> delaynode.DelayNodeReading:
    return delaynode.read("dl", cap(hz), cap(pipes))


# --------------------------------------------------------------------------- reading


def test_right_dl_reads_as_written_from_dummynet_c() -> None:
    r = reading(RIGHT)
    assert r.kern_hz == 10000 and r.tick_ms == pytest.approx(0.1)
    assert [p.number for p in r.pipes] == [60111, 60121]
    for p in r.pipes:
        assert (p.bandwidth, p.bandwidth_bps, p.delay_ms) == ("unlimited", None, 20)
        assert (p.queue_slots, p.queue_bytes, p.plr) == (50, None, 0.0)
    assert r.pipes[0].tot_pkts == 2447712 and r.pipes[1].tot_bytes == 80777862
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d  # goes into calibration.json as it is
    assert d["configuration"] == "read" and d["kern_hz"] == 10000
    assert d["pipes"][0] == {
        "number": 60111, "delay_ms": 20, "bandwidth": "unlimited", "bandwidth_bps": None,
        "queue_slots": 50, "queue_bytes": None, "plr": 0.0,
    }  # fmt: skip


def test_rate_limited_pipe_reads_bandwidth_in_bits_per_second() -> None:
    r = reading(GBIT_50, HZ_1000)
    assert r.kern_hz == 1000
    assert {p.bandwidth_bps for p in r.pipes} == {10**9}
    assert r.pipes[0].bandwidth == "1.000 Gbit/s" and r.pipes[0].drops == 1873
    assert r.pipes[0].queued_pkts == 31


def test_idle_pipes_without_flow_lines_still_read() -> None:
    r = reading(IDLE)
    assert [(p.number, p.delay_ms, p.tot_pkts) for p in r.pipes] == [(60111, 20, 0), (60121, 20, 0)]


def test_queue_in_bytes_and_loss_rate_as_print_flowset_parms_writes_them() -> None:
    # `ipfw pipe 60111 config bw 100Mbit/s delay 5 queue 1000KB plr 0.01`: qs "%d KB"
    # then "plr %f" right after it, then the flow count.
    text = (
        "60111: 100.000 Mbit/s    5 ms burst 0\n"
        "q191183 1000 KBplr 0.010000 0 flows (1 buckets) sched 125647 weight 0 lmax 0 pri 0 "
        "droptail\n"
        " sched 125647 type FIFO flags 0x0 0 buckets 0 active\n"
    )
    (p,) = drops.dummynet(text).values()
    assert (p.bandwidth_bps, p.queue_slots, p.queue_bytes, p.plr) == (10**8, None, 1024000, 0.01)
    assert drops.dummynet("00001:   7.500 Kbit/s    0 ms burst 0\n")[1].bandwidth_bps == 7500


def test_old_emulab_format_keeps_queue_on_the_pipe_line() -> None:
    old = drops.dummynet((CAPTURES.parent / "drops" /
                          "ipfw-pipe-show-emulab-written-from-docs.txt").read_text())  # fmt: skip
    assert old[60111].bandwidth_bps == 10**8 and old[60111].queue_slots == 50


@pytest.mark.parametrize("bad", ["", "0", "hz", "-1", "kern.hz: 1000"])
def test_kern_hz_that_is_not_a_rate_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="kern.hz"):
        delaynode.parse_hz(bad)


def test_not_a_dummynet_node_is_unread_with_the_reason() -> None:
    out = delaynode.from_outputs("dl", {
        "kern_hz": (1, "", "sysctl: cannot stat /proc/sys/kern/hz: No such file or directory\n"),
        "pipes": (127, "", "bash: line 1: ipfw: command not found\n"),
    })  # fmt: skip
    assert isinstance(out, delaynode.DelayNodeUnread)
    assert out.to_dict() == {
        "node": "dl", "configuration": "not dummynet: configuration not read",
        "why": "`sudo sysctl -n kern.hz` exited 1: sysctl: cannot stat /proc/sys/kern/hz: "
               "No such file or directory",
    }  # fmt: skip
    garbage = delaynode.from_outputs("dl", {"kern_hz": (0, "1000\n", ""),
                                            "pipes": (0, "Flushed all pipes.\n", "")})  # fmt: skip
    assert isinstance(garbage, delaynode.DelayNodeUnread) and "no pipes" in garbage.why
    ok = delaynode.from_outputs("dl", {"kern_hz": (0, cap(HZ_10000), ""),
                                       "pipes": (0, cap(RIGHT), "")})  # fmt: skip
    assert isinstance(ok, delaynode.DelayNodeReading) and len(ok.pipes) == 2


def test_read_commands_are_argv_lists() -> None:
    assert delaynode.READ_COMMANDS == {
        "kern_hz": ["sysctl", "-n", "kern.hz"],
        "pipes": ["ipfw", "pipe", "show"],
    }


# --------------------------------------------------------------------------- the check


def test_right_dl_passes() -> None:
    assert delaynode.check(reading(RIGHT), rtt_ms=40, link_mbit=1000) == []
    # 10 Gb/s links: an unlimited pipe does not queue, whatever the rate
    assert delaynode.check(reading(RIGHT), rtt_ms=40, link_mbit=10000) == []


def test_wrong_delay_names_pipe_value_and_expectation() -> None:
    assert delaynode.check(reading(WRONG_DELAY), rtt_ms=40, link_mbit=1000) == [
        "dl pipe 60121: delay 30 ms, expected 20 ms (RTT/2) within 0.5 ms"
    ]
    # and the right dl is wrong for another RTT
    assert delaynode.check(reading(RIGHT), rtt_ms=60, link_mbit=1000) == [
        "dl pipe 60111: delay 20 ms, expected 30 ms (RTT/2) within 0.5 ms",
        "dl pipe 60121: delay 20 ms, expected 30 ms (RTT/2) within 0.5 ms",
    ]
    # an odd RTT: half a millisecond either way is within
    assert delaynode.check(reading(RIGHT), rtt_ms=41, link_mbit=1000) == []


def test_unlimited_pipe_where_a_bandwidth_was_asked() -> None:
    assert delaynode.check(reading(RIGHT), 40, 1000, expect_bw_bps=10**9) == [
        "dl pipe 60111: bandwidth unlimited, expected 1.000 Gbit/s",
        "dl pipe 60121: bandwidth unlimited, expected 1.000 Gbit/s",
    ]


def test_50_slot_queue_at_1000_hz_overflows_a_1_gbit_pipe() -> None:
    """The issue's case: a 1 Gbit/s pipe releases packets once per 1 ms tick, ~81 full
    frames arrive per tick from a 1 GbE link, and dummynet's default queue is 50 slots."""
    slow_clock = reading(GBIT_50, HZ_1000)
    why = ("(a rate-limited pipe holds a clock tick's arrivals: 81.3 full frames per tick "
           "at 1000 Mbit/s and kern.hz 1000, x2 for a late tick)")  # fmt: skip
    hz_line = ("dl: kern.hz 1000: dummynet releases delayed packets on 1 ms clock ticks, so "
               "each pipe delays up to 1 ms less than set; expected kern.hz >= 2000 "
               "(Emulab's delay set-up uses 10000): put kern.hz=10000 in dl's "
               "/boot/loader.conf, reboot dl and run `ccbench testbed up` again")  # fmt: skip
    assert delaynode.check(slow_clock, 40, 1000, expect_bw_bps=10**9) == [
        f"dl pipe 60111: queue 50 slots, expected >= 163 {why}",
        f"dl pipe 60121: queue 50 slots, expected >= 163 {why}",
        hz_line,
    ]
    # what profile.py asks (unlimited): the bandwidth is wrong too
    lines = delaynode.check(slow_clock, 40, 1000)
    assert lines[0] == ("dl pipe 60111: bandwidth 1.000 Gbit/s, expected unlimited "
                        "(profile.py asks for unlimited pipes: dl only delays)")  # fmt: skip
    assert len(lines) == 5 and lines[-1] == hz_line
    # the same pipes at Emulab's 10000 Hz: 8.1 frames per tick, 50 slots hold them
    assert delaynode.check(reading(GBIT_50, HZ_10000), 40, 1000, expect_bw_bps=10**9) == []
    # an unlimited pipe at 1000 Hz never queues, but its delay is tick-coarse
    assert delaynode.check(reading(RIGHT, HZ_1000), 40, 1000) == [hz_line]


def test_slow_clock_refusal_says_how_to_recover_on_that_node() -> None:
    """kern.hz is a boot-time tunable: the line names the fix Emulab's delay set-up
    applies (clientside/tmcc/freebsd/delaysetup), on the node that needs it."""
    r = delaynode.read("dl-d2", cap(HZ_1000), cap(RIGHT))
    (line,) = delaynode.check(r, 40, 1000)
    assert line.startswith("dl-d2: kern.hz 1000: ") and "\n" not in line
    assert line.endswith("put kern.hz=10000 in dl-d2's /boot/loader.conf, reboot dl-d2 and "
                         "run `ccbench testbed up` again")  # fmt: skip


def test_slots_needed_from_rate_clock_and_wire_frames() -> None:
    # 1 Gb/s of 1538-byte wire frames: 81,274 frames/s
    assert delaynode.frames_per_tick(1000, 1000) == pytest.approx(1e9 / (8 * 1538 * 1000))
    assert delaynode.slots_needed(1000, 1000) == 163  # 2 x 81.3
    assert delaynode.slots_needed(1000, 10000) == 17  # 2 x 8.1
    assert delaynode.slots_needed(100, 1000) == 17
    assert delaynode.slots_needed(10000, 10000) == 163


def test_queue_in_bytes_is_checked_in_full_frames() -> None:
    text = cap(GBIT_50).replace(" 50 sl.", "100 KB")
    r = delaynode.read("dl", cap(HZ_1000), text)
    lines = delaynode.check(r, 40, 1000, expect_bw_bps=10**9)
    assert lines[0].startswith("dl pipe 60111: queue 102400 bytes, expected >= 246782 "
                               "(163 full frames)")  # fmt: skip


def test_missing_and_extra_pipes() -> None:
    none = delaynode.read("dl-d2", cap(HZ_10000), "")
    assert delaynode.check(none, 40, 1000) == [
        "dl-d2: no dummynet pipes (ipfw pipe show lists none): the delay node bridges "
        "without delaying; expected 2 pipes of 20 ms"
    ]
    one = cap(RIGHT).split("60121:")[0]
    assert delaynode.check(delaynode.read("dl", cap(HZ_10000), one), 40, 1000) == [
        "dl: 1 dummynet pipes (60111), expected 2 (one per direction)"
    ]


def test_ipfw_bandwidth_prints_as_dummynet_c() -> None:
    assert [delaynode.ipfw_bandwidth(b) for b in (None, 0, 999, 1500, 10**8, 10**9)] == [
        "unlimited", "unlimited", "999.000 bit/s", "1.500 Kbit/s", "100.000 Mbit/s",
        "1.000 Gbit/s",
    ]  # fmt: skip
