"""`testbed up` on an SSH dumbbell reads its delay node dl (command plans, no hosts):
dl's `sysctl -n kern.hz` and `ipfw pipe show` as FreeBSD prints them (captures written
from sbin/ipfw/dummynet.c's print code, tests/captures/freebsd/) go through
ccbench.delaynode's check; a wrong dl fails `up` with one line naming pipe, value and
expectation, and a dl that cannot be read (a Linux stand-in, no sudo, link-shaping mode)
is recorded as such."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccbench import delaynode
from ccbench.errors import CalibrationFailed
from ccbench.exec import Result
from ccbench.spec import Topology
from tests.ssh_plans import DUMBBELL, ssh_testbed

CAP = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
RIGHT = CAP / "ipfw-pipe-show-dl-right-unlimited-written-from-dummynet-c.txt"
WRONG = CAP / "ipfw-pipe-show-dl-wrong-delay-written-from-dummynet-c.txt"
HZ = CAP / "sysctl-n-kern.hz-10000-written-from-delaysetup.txt"
HZ_1000 = CAP / "sysctl-n-kern.hz-1000-written-from-sysctl.txt"
NIC = '{"interface": "eth5", "driver": "igb", "speed_mbps": 1000, "tx_ring_set": 64}\n'


class Dl:
    """dl's answers: kern.hz, ipfw pipe show (or a failure), and rt1's NIC records."""

    def __init__(self, pipes: str | None, hz: str) -> None:
        self.pipes, self.hz = pipes, hz

    def run(self, argv: Any, **kw: Any) -> Result:
        argv = list(argv)
        if argv == delaynode.READ_COMMANDS["kern_hz"]:
            return Result(tuple(argv), 0, self.hz, "")
        if argv == delaynode.READ_COMMANDS["pipes"]:
            if self.pipes is None:
                return Result(tuple(argv), 1, "", "sudo: ipfw: command not found")
            return Result(tuple(argv), 0, self.pipes, "")
        return Result(tuple(argv), 0, NIC, "")  # rt1's NIC records


def make_testbed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dl: Dl | None) -> Any:
    topo = Topology(pairs=1, rate_mbit=1000, rtt_ms=40)
    nodes = DUMBBELL + (("dl",) if dl else ())
    return ssh_testbed(tmp_path, monkeypatch, "dl1", topo, lambda node: dl or Dl(None, ""), nodes)


def test_a_right_dl_is_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tb = make_testbed(tmp_path, monkeypatch, Dl(RIGHT.read_text(), HZ.read_text()))
    rec = tb._check_delay_node("eth5")
    assert rec["configuration"] == "read" and rec["kern_hz"] == 10000
    assert rec["problems"] == [] and rec["link_mbit"] == 1000.0
    assert [p["delay_ms"] for p in rec["pipes"]] == [20, 20]


def test_a_wrong_delay_fails_up_naming_pipe_value_and_expectation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = make_testbed(tmp_path, monkeypatch, Dl(WRONG.read_text(), HZ.read_text()))
    with pytest.raises(CalibrationFailed) as e:
        tb._check_delay_node("eth5")
    msg = str(e.value)
    assert msg.startswith("testbed dl1: delay node: dl pipe 60") and "\n" not in msg
    assert "expected 20 ms (RTT/2)" in msg
    assert e.value.record["delay_node"]["problems"]


def test_a_slow_clock_fails_up_saying_how_to_recover(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = make_testbed(tmp_path, monkeypatch, Dl(RIGHT.read_text(), HZ_1000.read_text()))
    with pytest.raises(CalibrationFailed) as e:
        tb._check_delay_node("eth5")
    msg = str(e.value)
    assert msg.startswith("testbed dl1: delay node: dl: kern.hz 1000: ") and "\n" not in msg
    assert msg.endswith("put kern.hz=10000 in dl's /boot/loader.conf, reboot dl and run "
                        "`ccbench testbed up` again")  # fmt: skip


def test_a_dl_that_cannot_be_read_is_recorded_not_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = make_testbed(tmp_path, monkeypatch, Dl(None, "10000\n"))
    rec = tb._check_delay_node("eth5")
    assert rec["configuration"] == delaynode.NOT_DUMMYNET
    assert "ipfw pipe show` exited 1" in rec["why"]


def test_link_shaping_mode_has_no_dl_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = make_testbed(tmp_path, monkeypatch, None)
    rec = tb._check_delay_node("eth5")
    assert rec["configuration"] == delaynode.NOT_DUMMYNET and "link-shaping" in rec["why"]
