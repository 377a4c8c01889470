"""ccbench.hosts.siftr_plan: which port siftr filters on and the ppl that keeps a
run's log within its byte budget, checked against a SYNTHETIC siftr 1.3.0 log of the
same run (ccbench.parse.siftr_synth: siftr.c's format and per-flow ppl counter)."""

from __future__ import annotations

import pytest

from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.siftr_plan import (
    DEFAULT_BUDGET_BYTES,
    PPL_MAX,
    RECORD_BYTES,
    choose_ppl,
    port_filter,
)
from ccbench.parse.siftr_synth import siftr13_log


def test_port_filter_one_port_covers_one_flow_only() -> None:
    assert port_filter([5202]) == 5202
    assert port_filter([5202, 5202]) == 5202  # -P streams of one flow share the port
    assert port_filter([5202, 5203]) == 0  # one filter, two server ports: every port
    with pytest.raises(ValueError, match="1..65535"):
        port_filter([70000])


def test_seed001_scale() -> None:
    # Seed 001: each FreeBSD sender carries one flow at up to 1 Gbit/s for 300 s.
    plan = choose_ppl([(0.0, 300.0)], [5202], 1e9)
    assert plan.port_filter == 5202 and plan.budget_bytes == DEFAULT_BUDGET_BYTES == 64 * 2**20
    # 1e9 / (8 * 1514) = 82,562.7 data packets/s + half as many ACKs = 123,844.1/s
    assert plan.packets == 37_153_237
    assert plan.ppl == 97 and plan.within_budget
    assert plan.log_bytes <= plan.budget_bytes
    assert plan.records == 37_153_237 // 97 + 1
    assert plan.record_interval_s == pytest.approx(97 / 123_844.12, rel=1e-7)
    assert plan.resolution(flows_sharing=2) == (
        "siftr logged every 97th packet (in or out) of each flow: at 1 Gbit/s one flow "
        "alone is sampled every 783 µs, each of 2 flows sharing it every 1.6 ms (log "
        "filtered to its flow's port; about 64 MiB for a budget of 64 MiB)"
    )
    # today's fixed ppl 4 would have written 1.5 GiB
    assert 37_153_237 // 4 * RECORD_BYTES["siftr"] > 1.5 * 2**30


def test_flows_of_one_sender_share_the_rate() -> None:
    one = choose_ppl([(0.0, 300.0)], [5202], 1e9)
    two = choose_ppl([(0.0, 300.0), (0.0, 300.0)], [5202, 5203], 1e9)
    assert two.packets == one.packets and two.port_filter == 0
    staggered = choose_ppl([(0.0, 200.0), (100.0, 200.0)], [5202, 5203], 1e9)
    assert staggered.packets == one.packets  # busy 0..300 s
    apart = choose_ppl([(0.0, 10.0), (20.0, 10.0)], [5202, 5203], 1e9)
    assert apart.packets == choose_ppl([(0.0, 20.0)], [5202], 1e9).packets


def test_slow_short_runs_log_every_packet_and_huge_ones_say_so() -> None:
    small = choose_ppl([(0.0, 30.0)], [5202], 1e8)
    assert small.ppl == 1 and small.within_budget
    assert small.resolution().startswith("siftr logged every packet (in or out)")
    huge = choose_ppl([(0.0, 1e6)], [5202], 1e11, budget_bytes=2**20)
    assert huge.ppl == PPL_MAX and not huge.within_budget
    siftr2 = choose_ppl([(0.0, 300.0)], [5202], 1e9, logger="siftr2")
    assert siftr2.ppl < 97  # shorter records
    with pytest.raises(ValueError, match="unknown logger"):
        choose_ppl([(0.0, 1.0)], [5202], 1e9, logger="dtrace")
    with pytest.raises(ValueError, match="needs flows"):
        choose_ppl([], [], 1e9)


def test_the_plan_holds_for_a_log_written_at_its_ppl() -> None:
    budget = 2**20
    plan = choose_ppl([(0.0, 10.0)], [5201], 1e8, budget_bytes=budget)
    assert plan.ppl == 21
    text = "".join(siftr13_log(1, 1e8, 10.0, plan.ppl))
    records = text.count("\n") - 2
    assert records <= plan.records and len(text) <= budget
    assert records > 0.95 * plan.records  # the estimate is tight, not loose


def test_the_plan_drives_siftr_start() -> None:
    plan = choose_ppl([(0.0, 300.0)], [5202], 1e9)
    argv = FreeBSDHost().siftr_start("/var/tmp/ccbench-siftr.log", plan.port_filter,
                                     ppl=plan.ppl)  # fmt: skip
    assert ["sysctl", "net.inet.siftr.ppl=97"] in argv
    assert ["sysctl", "net.inet.siftr.port_filter=5202"] in argv
