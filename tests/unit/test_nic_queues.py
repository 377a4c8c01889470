"""rt1's transmit queues (issue 25, item 2): `ethtool -l` channels and each TX queue's
byte queue limits, parsed from captures in ethtool's and sysfs's own formats
(tests/captures/nic/, README there), the plan that reads BQL on the bottleneck, and
what the report says the buffer behind the qdisc was: one TX ring, or one per queue.

A forwarded packet takes the TX queue of its RX queue (net/core/dev.c skb_tx_hash), so
on an 8-queue igb port two flows usually wait in two rings served round-robin."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ccbench import record, record_load
from ccbench.hosts.linux import LinuxHost
from ccbench.report import data, provenance
from ccbench.spec import Flow, Topology
from ccbench.summarize.hosts import (
    BQL_NO_CAP,
    channel_tx_queues,
    nic_records,
    parse_bql,
    parse_channels,
    tx_queues_in_use,
)

REPO = Path(__file__).resolve().parents[2]
CAP = REPO / "tests" / "captures" / "nic"
SMALL = REPO / "tests" / "fixtures" / "results-small" / "runs"
RID = "two-flows-bbr-r1-3c359d7e"


def cap(name: str) -> str:
    return (CAP / name).read_text()


# --- ethtool -l -------------------------------------------------------------------------


def test_igb_with_eight_combined_channels() -> None:
    ch = parse_channels(cap("ethtool-l-igb-8-combined-h-sendai-network-memo.txt"))
    igb = {"rx": None, "tx": None, "other": 1, "combined": 8}
    assert ch == {"max": igb, "current": igb}
    assert channel_tx_queues(ch) == 8


def test_igb_after_combined_1() -> None:
    ch = parse_channels(cap("ethtool-l-igb-combined-1-written-from-source.txt"))
    assert ch["max"]["combined"] == 8 and ch["current"] == {
        "rx": None, "tx": None, "other": 1, "combined": 1}  # fmt: skip
    assert channel_tx_queues(ch) == 1


def test_older_ethtool_prints_zero_where_netlink_prints_na() -> None:
    ch = parse_channels(cap("ethtool-l-igb-ioctl-written-from-ethtool-c.txt"))
    assert ch["current"] == {"rx": 0, "tx": 0, "other": 1, "combined": 8}
    assert channel_tx_queues(ch) == 8


@pytest.mark.parametrize(
    "name, current",
    [
        ("ethtool-l-virtio_net-eth0.txt", {"rx": None, "tx": None, "other": None, "combined": 1}),
        ("ethtool-l-veth-core0.txt", {"rx": 1, "tx": 1, "other": None, "combined": None}),
    ],
)  # fmt: skip
def test_drivers_captured_here(name: str, current: dict[str, Any]) -> None:
    ch = parse_channels(cap(name))
    assert ch["current"] == current and channel_tx_queues(ch) == 1


@pytest.mark.parametrize(
    "text",
    ["", "netlink error: no device matches name (offset 24)\n",
     cap("ethtool-l-igb-8-combined-h-sendai-network-memo.txt").replace("\t8\n", "\teight\n")],
)  # fmt: skip
def test_what_is_not_a_channel_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_channels(text)


# --- byte queue limits ------------------------------------------------------------------


def test_bql_of_32_queues_in_queue_order() -> None:
    per = parse_bql(cap("bql-limit-32-queues-edumazet-netdev-2025-11-10.txt"))
    qs = per["eth1"]
    assert [q["queue"] for q in qs] == list(range(32))  # glob order put tx-10 before tx-2
    assert qs[0] == {"queue": 0, "limit": 116826} and qs[26]["limit"] == 1595568
    assert min(q["limit"] for q in qs) == 60588


def test_bql_of_one_queue_captured_here() -> None:
    per = parse_bql(cap("bql-virtio_net-eth0.txt"))
    assert per == {"eth0": [{"queue": 0, "limit": 2020, "limit_max": BQL_NO_CAP,
                             "inflight": 0}]}  # fmt: skip
    assert parse_bql("") == {}


def test_a_line_of_another_form_is_refused() -> None:
    with pytest.raises(ValueError, match="not a byte_queue_limits line"):
        parse_bql("grep: /sys/class/net/x/queues: No such file or directory\n")


def test_the_bottleneck_bql_plan_reads_sysfs_lines(tmp_path: Path) -> None:
    """LinuxHost.tx_queue_state prints every queue's limit, limit_max and inflight as
    `grep -H` lines; the device is an argument, never pasted into the script."""
    argv = LinuxHost().tx_queue_state("eth5")
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["ccbench-bql", "eth5"]
    assert "eth5" not in argv[2]
    root = tmp_path / "net"
    for q, (limit, inflight) in enumerate([(30280, 1514), (0, 0)]):
        d = root / "eth5" / "queues" / f"tx-{q}" / "byte_queue_limits"
        d.mkdir(parents=True)
        for name, v in (("limit", limit), ("limit_max", BQL_NO_CAP), ("inflight", inflight),
                        ("hold_time", 1000)):  # fmt: skip
            (d / name).write_text(f"{v}\n")
    script = argv[2].replace("/sys/class/net", str(root))
    out = subprocess.run(["sh", "-c", script, "x", "eth5"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    got = parse_bql(out.replace(str(root), "/sys/class/net"))
    assert got == {"eth5": [
        {"queue": 0, "limit": 30280, "limit_max": BQL_NO_CAP, "inflight": 1514},
        {"queue": 1, "limit": 0, "limit_max": BQL_NO_CAP, "inflight": 0}]}  # fmt: skip
    none = subprocess.run(["sh", "-c", script, "x", "veth0"], capture_output=True, text=True)
    assert none.returncode == 0 and none.stdout == ""


# --- NIC records with channels and BQL --------------------------------------------------

BASE = {"interface": "eth5", "node_script": "setup-router", "driver": "igb",
        "speed_mbps": 1000, "tx_ring_asked": 48, "tx_ring_set": 64, "tx_ring_max": 4096,
        "tx_ring_note": "igb raised it: below its minimum"}  # fmt: skip
SETUP_BQL = (
    "/sys/class/net/eth5/queues/tx-0/byte_queue_limits/limit:0\n"
    f"/sys/class/net/eth5/queues/tx-0/byte_queue_limits/limit_max:{BQL_NO_CAP}\n"
    "/sys/class/net/eth5/queues/tx-0/byte_queue_limits/inflight:0"
)


def rt1_record(**over: Any) -> dict[str, Any]:
    return {**BASE, "ethtool_l": cap("ethtool-l-igb-combined-1-written-from-source.txt"),
            "tx_queues": 1, "tx_queues_asked": 1, "tx_queues_note": "", "tx_bql": SETUP_BQL,
            **over}  # fmt: skip


def test_records_carry_channels_and_bql() -> None:
    records, notes, problems = nic_records({"rt1": json.dumps(rt1_record()) + "\n"})
    assert problems == [] and notes == [
        "rt1 eth5: TX ring 48 asked, 64 set: igb raised it: below its minimum"]  # fmt: skip
    (rec,) = records
    assert rec["channels"]["current"]["combined"] == 1 and tx_queues_in_use(rec) == 1
    assert rec["bql"] == [{"queue": 0, "limit": 0, "limit_max": BQL_NO_CAP, "inflight": 0}]


def test_a_refused_queue_count_is_a_note() -> None:
    rec = rt1_record(ethtool_l=cap("ethtool-l-igb-8-combined-h-sendai-network-memo.txt"),
                     tx_queues=8,
                     tx_queues_note="igb refused it: netlink error: Invalid argument")  # fmt: skip
    _, notes, _ = nic_records({"rt1": json.dumps(rec)})
    assert notes[1] == (
        "rt1 eth5: 1 TX queue asked, 8 in use: igb refused it: netlink error: Invalid argument"
    )


def test_without_the_kernel_count_the_channels_tell() -> None:
    rec = rt1_record(ethtool_l=cap("ethtool-l-igb-8-combined-h-sendai-network-memo.txt"))
    del rec["tx_queues"]
    records, notes, _ = nic_records({"rt1": json.dumps(rec)})
    assert tx_queues_in_use(records[0]) == 8 and notes[1] == "rt1 eth5: 1 TX queue asked, 8 in use"


def test_an_unparsable_channel_table_is_said_so_not_guessed() -> None:
    rec = rt1_record(ethtool_l="Cannot get device channel parameters\n")
    del rec["tx_queues"]
    records, notes, problems = nic_records({"rt1": json.dumps(rec)})
    assert problems == [] and "channels" not in records[0]
    assert notes[1].startswith("rt1 eth5: channels unknown, its ethtool -l output does not parse")
    assert notes[2] == "rt1 eth5: 1 TX queue asked, the count in use unknown"


# --- the report: the buffer behind the qdisc --------------------------------------------


def cond(rate: float) -> data.Conditions:
    return data.Conditions(scenario="s", description="", flows=(Flow(1, "cubic"),),
                           topology=Topology(pairs=1, rate_mbit=rate, queue_limit_pkts=48),
                           testbed_id="t", traffic_s=10)  # fmt: skip


def runs_with(tmp_path: Path, nics: list[dict[str, Any]] | None) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(SMALL / RID, runs / RID)
    rec = record_load.load(runs / RID)
    cal = {**(rec.recorded.calibration or {}), "bottleneck": {"node": "rt1", "dev": "eth5"}}
    recorded = rec.recorded.model_copy(update={"calibration": cal}) if rec.recorded else None
    record.write(runs / RID / "summary.json",
                 rec.model_copy(update={"nics": nics, "recorded": recorded}))  # fmt: skip
    return runs


def summarized(**over: Any) -> dict[str, Any]:
    (rec,), _, _ = nic_records({"rt1": json.dumps(rt1_record(**over))})
    return rec


def bql_after(*limits: int) -> list[dict[str, int]]:
    # Made-up limits in the form parse_bql returns (no run on a d430 to read them from).
    return [{"queue": q, "limit": v, "limit_max": BQL_NO_CAP, "inflight": 0}
            for q, v in enumerate(limits)]  # fmt: skip


def test_one_tx_queue_with_bql_read_after_the_run(tmp_path: Path) -> None:
    nic = {**summarized(), "bql_after": bql_after(30280)}
    text = data.bottleneck_text(runs_with(tmp_path, [nic]), [RID], cond(1000))
    assert text == (
        "bottleneck: rt1's NIC at wire rate (1000 Mbit/s carries 984.4 Mbit/s of frames, "
        "below the tbf at 1000 Mbit/s); buffer 48 pkts (pfifo) + TX ring 64 × 1 queue "
        "(BQL limit 30.3 KB after the run: ≈ 21 full frames)"
    )


def test_one_tx_queue_read_at_set_up_only(tmp_path: Path) -> None:
    text = data.bottleneck_text(runs_with(tmp_path, [summarized()]), [RID], cond(1000))
    assert text.endswith(
        "buffer 48 pkts (pfifo) + TX ring 64 × 1 queue (BQL limit not read after the run)"
    )


def test_several_tx_queues_make_a_per_queue_layer_2_buffer(tmp_path: Path) -> None:
    nic = {
        **summarized(
            ethtool_l=cap("ethtool-l-igb-8-combined-h-sendai-network-memo.txt"), tx_queues=8
        ),
        "bql_after": bql_after(30280, 45420, 0, 0, 0, 0, 0, 0),
    }
    text = data.bottleneck_text(runs_with(tmp_path, [nic]), [RID], cond(1000))
    assert text.endswith(
        "buffer 48 pkts (pfifo) + TX ring 64 in each of 8 TX queues (BQL limits 30.3-45.4 KB "
        "in the 2 queues used, after the run: up to ≈ 31 full frames each): the layer-2 "
        "buffer was per queue "
        "(flows spread over the queues, served round-robin)"
    )


def test_at_or_below_the_wire_rate_the_queues_do_not_matter(tmp_path: Path) -> None:
    nic = summarized(tx_queues=8)
    text = data.bottleneck_text(runs_with(tmp_path, [nic]), [RID], cond(984))
    assert text == "bottleneck: tbf at 984 Mbit/s (the wire carries 984.4); buffer 48 pkts"


def test_locally_there_is_no_ring_to_name(tmp_path: Path) -> None:
    text = data.bottleneck_text(runs_with(tmp_path, None), [RID], cond(1000))
    assert text == "bottleneck: tbf at 1000 Mbit/s; buffer 48 pkts"
    assert "ring" not in text and "BQL" not in text


def test_the_nic_table_names_the_tx_queues() -> None:
    row = provenance._nic_row(summarized())
    assert row["tx_ring"] == "48 asked, 64 set; 1 TX queue (combined 1 of 8)"
    veth = summarized(ethtool_l=cap("ethtool-l-veth-core0.txt"), tx_ring_asked=None,
                      tx_ring_set=None, tx_queues_asked=None)  # fmt: skip
    assert provenance._nic_row(veth)["tx_ring"] == "n/a; 1 TX queue (tx 1 of 2)"
    old = {k: v for k, v in summarized().items() if k not in ("tx_queues", "channels")}
    assert provenance._nic_row(old)["tx_ring"] == "48 asked, 64 set"
