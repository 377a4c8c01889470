"""Golden tests of ccbench.parse.ping on real Linux and FreeBSD ping output."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.parse.ping import parse_ping, parse_ping_runs

CAPTURES = Path(__file__).resolve().parents[1] / "captures"


def read(name: str) -> str:
    return (CAPTURES / name).read_text()


def test_freebsd_seed001() -> None:
    r = parse_ping(read("ping-freebsd-seed001-vm-41ms.txt"))
    assert r.os == "freebsd" and r.target == "Linux"
    assert r.rtts_us == [41053.0, 41005.0, 41011.0, 41168.0]
    assert (r.min_us, r.avg_us, r.max_us, r.mdev_us) == (41005.0, 41059.0, 41168.0, 66.0)
    assert (r.sent, r.received, r.loss, r.duplicates) == (4, 4, 0.0, 0)


def test_linux_seed001() -> None:
    r = parse_ping(read("ping-linux-seed001-vm-41ms.txt"))
    assert r.os == "linux" and r.target == "Linux"
    assert r.rtts_us == [40900.0, 40900.0, 41000.0, 41100.0]
    # the summary has more digits than the replies, and wins
    assert (r.min_us, r.avg_us, r.max_us, r.mdev_us) == (40905.0, 40981.0, 41108.0, 78.0)
    assert (r.sent, r.received, r.loss) == (4, 4, 0.0)


def test_linux_seed001_emulab() -> None:
    r = parse_ping(read("ping-linux-seed001-emulab-s1.txt"))
    assert r.target == "r1-link5"
    assert (r.min_us, r.avg_us, r.max_us, r.mdev_us) == (40039.0, 40070.0, 40120.0, 31.0)


def test_seed000_flattened_two_runs() -> None:
    # Seed 000 lost its line breaks: a FreeBSD and a Linux run on one line.
    bsd, linux = parse_ping_runs(read("ping-seed000-flattened.txt"))
    assert bsd.os == "freebsd" and linux.os == "linux"
    assert bsd.rtts_us == [44003.0, 44837.0, 43978.0, 43513.0, 43631.0]
    assert (bsd.min_us, bsd.avg_us, bsd.max_us, bsd.mdev_us) == (43513.0, 43993.0, 44837.0, 463.0)
    assert linux.rtts_us == [43900.0, 44000.0, 43700.0, 44000.0, 43700.0]
    assert (linux.avg_us, linux.mdev_us) == (43862.0, 130.0)
    assert bsd.sent == linux.sent == 5
    with pytest.raises(ValueError, match="2 ping runs"):
        parse_ping(read("ping-seed000-flattened.txt"))


def test_linux_netns_idle_and_loaded() -> None:
    idle = parse_ping(read("ping-linux-netns-idle.txt"))
    assert idle.target == "198.18.251.2"
    assert idle.rtts_us == [58.0, 59.0, 56.0, 84.0, 60.0]
    assert (idle.min_us, idle.avg_us, idle.max_us, idle.mdev_us) == (56.0, 63.0, 84.0, 10.0)
    loaded = parse_ping(read("ping-linux-netns-loaded.txt"))
    assert len(loaded.rtts_us) == 20
    assert loaded.rtts_us[:3] == [3450.0, 3910.0, 38.0]
    assert (loaded.min_us, loaded.avg_us, loaded.max_us, loaded.mdev_us) == (
        38.0,
        4594.0,
        9961.0,
        2441.0,
    )
    assert loaded.avg_us is not None and idle.avg_us is not None
    assert loaded.avg_us > 50 * idle.avg_us  # the 48-packet queue under two flows


def test_linux_netns_nth4_loss() -> None:
    r = parse_ping(read("ping-linux-netns-nth4-loss.txt"))
    assert (r.sent, r.received) == (20, 15)
    assert r.loss == pytest.approx(0.25)
    assert len(r.rtts_us) == 15
    assert (r.min_us, r.avg_us, r.max_us, r.mdev_us) == (37.0, 51.0, 123.0, 20.0)


def test_written_variants() -> None:
    # Hand-written in iputils' format (not captures): DUP replies, errors, no summary.
    text = (
        "PING h (10.0.0.1) 56(84) bytes of data.\n"
        "64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=10.0 ms\n"
        "64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=12.0 ms (DUP!)\n"
        "64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=20.0 ms\n"
        "\n--- h ping statistics ---\n"
        "3 packets transmitted, 2 received, +1 duplicates, 33.3333% packet loss, time 2003ms\n"
    )
    r = parse_ping(text)
    assert r.rtts_us == [10000.0, 20000.0]  # the DUP is not a separate probe
    assert (r.sent, r.received, r.duplicates) == (3, 2, 1)
    assert r.loss == pytest.approx(1 / 3)
    # no summary line: computed from replies (population deviation, like iputils)
    assert r.os is None
    assert (r.min_us, r.avg_us, r.max_us, r.mdev_us) == (10000.0, 15000.0, 20000.0, 5000.0)
    unreachable = parse_ping(
        "PING h (10.0.0.9) 56(84) bytes of data.\n"
        "From 10.0.0.1 icmp_seq=1 Destination Host Unreachable\n\n"
        "--- h ping statistics ---\n"
        "3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2030ms\n"
    )
    assert unreachable.rtts_us == [] and unreachable.loss == 1.0
    assert unreachable.avg_us is None


def test_not_ping_output() -> None:
    r = parse_ping("hello")
    assert r.sent is None and r.loss is None and r.rtts_us == [] and r.target is None
