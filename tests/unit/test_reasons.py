"""Reasons with codes (ccbench.reasons): each class named once, and a summary.json written
before reasons had codes brought forward with the code its words match
(upgrade.OLD_REASONS): every check's reason, as today's code words it, upgrades to its
own code."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

from ccbench import kernel, layout, upgrade, validity
from ccbench.hosts import loader
from ccbench.hosts.firewall import FirewallReading
from ccbench.instruments.host_settings import judge_firewall
from ccbench.instruments.qdisc import super_packet_reasons
from ccbench.parse.iperf3 import Iperf3Result
from ccbench.reasons import Code, Reason, host_stalled_only
from ccbench.run_record import RunRecord
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.unproven import Scope, check_path_rtt
from tests.unit.test_host_settings import cap

ZOOM = Path(__file__).resolve().parents[1] / "captures" / "zoom" / "cubic-traced"
SPEC = RunSpec(topology=Topology(rtt_ms=20.0), flows=(Flow(1, "cubic", duration_s=10.0),))


def _res(**got: object) -> Iperf3Result:
    """An iperf3 result with nothing reported but `got`."""
    none = {f.name: None for f in fields(Iperf3Result) if f.name not in ("streams", "intervals",
                                                                        "cpu")}  # fmt: skip
    return Iperf3Result(**{**none, "reverse": False, "cwnd_trusted": True, **got})  # type: ignore[arg-type]


def _checks() -> list[Reason]:
    """One reason of (nearly) every class, from the checks that make them."""
    res = _res(cc_sender="bbr", duration_s=2.0, throughput_bps=0.0, mean_rtt_us=90_000.0,
               bytes_received=-1)  # fmt: skip
    out = [
        *validity.check_flow(1, SPEC, None, 1),
        *validity.check_flow(1, SPEC, _res(error="refused"), 1),
        *validity.check_flow(1, SPEC, res, 3),
        *validity.check_flow(1, SPEC, _res(duration_s=10.0, throughput_bps=1.0), 0),
        *validity.check_calibration({}), *validity.check_calibration({"problems": ["x"]}),
        *validity.check_probe(None, "ping"),
        *validity.check_probe({"tool": "flent ping", "samples": 3, "coverage": 0.5}, "flent"),
        *validity.check_delay(None, "ccdelay"),
        *validity.check_delay({"packets": 9, "late_share": 0.5, "lost": 1}, "ccdelay"),
        *validity.check_plausibility(SPEC, [res], 300.0, {}),
        *validity.check_rtt_excess({"share": 0.5, "bound_ms": 30.0, "max_excess_ms": 9.0,
                                    "longest_above_s": 0.2}),  # fmt: skip
        *validity.check_steal({"steal_pct": 20.0}),
        *validity.check_trace_lost({"source": "tcp_probe", "lost_events": 4}),
        *validity.check_sockstat(1, "s1", "10.0.0.1:5201", [], "cubic", "rack"),
        *validity.check_ledger({"outside": {"r1 vy rx_dropped": 7}, "outside_pkts": 7,
                       "loss_rules_pkts": 0}, 0, 0, 500),  # fmt: skip
        *check_path_rtt([{"flow": 1, "pair": 1, "min_rtt_us": 1000}], Scope(None, {1: 20.0})),
        *kernel.check({"label": "k", "match": "D1"}, "v", {"s1": "6.1"}),
        *loader.judge("s1", {"net.isr.maxthreads": "-1"}, {}),
        *judge_firewall("r1", FirewallReading("pf", ["Disabled\n", "", cap(
            "freebsd-pfctl-v-s-rules.txt")], [1, 0, 0]), None)[1],  # fmt: skip
        *super_packet_reasons("rt1/to-dl", {"super_packets": True, "limit_pkts": 48,
            "pkt_bytes_max": 9000.0, "pkt_bytes_mean": 4000.0, "samples_over_frame": 3,
            "samples_with_backlog": 4, "frame_bytes": 1514}),  # fmt: skip
        layout.file_problem("tc-after.json", "missing"),
        layout.file_problem("a-before.txt/a-after.txt", "not counters"),
    ]  # fmt: skip
    return out


def test_each_code_is_named_once_with_its_meaning() -> None:
    assert len({c.value for c in Code}) == len(Code)
    assert all(c.meaning and c.value == c.name.lower() for c in Code)
    assert {c for c, _ in upgrade.OLD_REASONS} | {upgrade.UNCLASSIFIED} <= {c.value for c in Code}


def test_every_checks_words_upgrade_to_its_own_code() -> None:
    got = _checks()
    made = {r.code for r in got}
    assert len(made) >= 20, sorted(made)  # most classes, made by their checks
    wrong = [(r.code, upgrade._reason_v4(r.text)["code"], r.text) for r in got
             if upgrade._reason_v4(r.text)["code"] != r.code]  # fmt: skip
    assert not wrong, wrong


def test_an_old_summary_reads_with_typed_reasons() -> None:
    """A version 3 summary (reasons as words) is brought forward in one step: each reason
    keeps its words, gets the code they match (or unclassified), and no evidence."""
    old = json.loads((ZOOM / "summary.json").read_text())
    assert old["schema"] == "ccbench.summary/3"
    words = ["2.5% of RTT samples above the 85.1 ms the path can give (limit 2%; worst "
             "+22.4 ms, longest 0.11 s): the host stalled", "something else entirely"]  # fmt: skip
    rec = RunRecord.from_dict(upgrade.summary({**old, "reasons": words}, ZOOM))
    assert rec.version == upgrade.SUMMARY_SCHEMA
    assert [(r.code, r.text, r.evidence) for r in rec.reasons] == [
        (Code.RTT_EXCESS, words[0], {}), (Code.UNCLASSIFIED, words[1], {})]  # fmt: skip
    assert host_stalled_only(rec.reasons[:1])
    # written back, each reason is an object
    assert rec.to_dict()["reasons"][0] == {"code": "rtt_excess", "text": words[0], "evidence": {}}
