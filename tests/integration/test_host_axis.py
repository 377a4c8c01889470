"""The host as an axis on real namespaces: a run's endpoint settings (sysctls, offloads,
an nftables ruleset counting the flow on the receiver) set, read back into its record and
put back; a path MTU of 9000 carried end to end (MSS 8948 in ss); a setting the namespace
refuses changes nothing and is not retried, nor does a ruleset nft does not take.

Their subject is what the hosts were set to, not fidelity: a run the host stalled is
accepted as judged (run_judged), so they share the CPU (shares_cpu)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import layout
from ccbench.reasons import Code
from tests.conftest import ccbench, codes, texts_of
from tests.integration.conftest import run_judged, write_config
from tests.integration.conftest import testbed_up as built

pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]

FIVE_MB = 5242880  # seed 001's tri-point lab: sendbuf_max/recvbuf_max and tcp_rmem's max
# The body of ccbench's table inet ccbench on the receiver: flow 1's packets counted
COUNT_FLOW = f"""chain input {{
    type filter hook input priority filter; policy accept;
    tcp dport {layout.BASE_PORT + 1} counter
}}
"""
ASKED = {
    "senders": {"sysctl": {"net.ipv4.tcp_wmem": f"4096 16384 {FIVE_MB}"},
                "offloads": {"gso": "on"}},
    "receivers": {"sysctl": {"net.ipv4.tcp_rmem": f"4096 131072 {FIVE_MB}"},
                  "offloads": {"gro": "on"},
                  "firewall": {"kind": "nftables", "rules": COUNT_FLOW}},
}  # fmt: skip


def _config(path: Path, tb_id: str, host: dict[str, Any], **topo: object) -> Path:
    cfg = write_config(path, tb_id, **{"pairs": 1, **topo})
    d = yaml.safe_load(cfg.read_text())
    d["run"].update({"duration_s": 3, "attempts": 1, "host": host})
    cfg.write_text(yaml.safe_dump(d))
    return cfg


def _in(ns: str, *argv: str) -> str:
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip


def _node_state(tb_id: str, node: str, dev: str) -> tuple[str, str, str]:
    ns = f"ccb-{tb_id}-{node}"
    feats = _in(ns, "ethtool", "-k", dev)
    pick = {k: v for k, _, v in (ln.partition(": ") for ln in feats.splitlines())}
    wmem = _in(ns, "sysctl", "-n", "net.ipv4.tcp_wmem").split()[-1]
    rmem = _in(ns, "sysctl", "-n", "net.ipv4.tcp_rmem").split()[-1]
    return (
        f"gso {pick['generic-segmentation-offload']}, gro {pick['generic-receive-offload']}",
        wmem,
        rmem,
    )


def test_settings_are_set_read_back_and_put_back(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "tb.yaml", "ihost", ASKED)
    with built(cfg, "ihost"):
        s = run_judged(cfg, tmp_path / "out")
        hs = s["host_settings"]
        s1, r1 = hs["s1"], hs["r1"]
        # read back right before the traffic, per host and interface
        assert (s1["role"], r1["role"]) == ("senders", "receivers")
        assert s1["offloads"]["gso"] == "on" and s1["offloads"]["tso"] == "off"
        assert r1["offloads"]["gro"] == "on" and r1["offloads"]["gso"] == "off"
        assert s1["sysctl"]["net.ipv4.tcp_wmem"].split() == ["4096", "16384", str(FIVE_MB)]
        assert r1["sysctl"]["net.ipv4.tcp_rmem"].split() == ["4096", "131072", str(FIVE_MB)]
        assert s1["mtu"] == r1["mtu"] == 1500
        assert not {Code.HOST_SETTING, Code.HOST_SETTING_UNREAD} & set(codes(s["reasons"]))
        # the ruleset as r1 listed it before the traffic, its counter after: the flow's
        # bytes at IP level, at least the payload iperf3 says r1 received
        fw = r1["firewall"]
        assert fw["kind"] == "nftables" and fw["loaded"] and "table inet ccbench" in fw["rules"]
        [counted] = fw["counters"]
        assert counted["rule"] == f"input: tcp dport {layout.BASE_PORT + 1} counter"
        raw = tmp_path / "out" / "raw"
        got = json.loads((raw / "iperf3-1.json").read_text())["end"]["sum_received"]["bytes"]
        assert counted["packets"] > 0 and got <= counted["bytes"] <= 1.1 * got
        q = json.loads((raw / "host-changes.json").read_text())
        assert [c["setting"].split(" on ")[0] for c in q["changes"]] == [
            "sysctl net.ipv4.tcp_wmem", "offload gso",
            "sysctl net.ipv4.tcp_rmem", "offload gro",
            "firewall nftables table inet ccbench"]  # fmt: skip
        assert [p["differs"] for p in q["put_back"]] == [None] * 5
        assert q["put_back"][0]["argv"] == ["nft", "delete", "table", "inet", "ccbench"]
        # put back: the testbed is as `up` left it, r1's own nftables tables untouched
        up = ("gso off, gro off", "10485760", "10485760")
        assert _node_state("ihost", "s1", s1["interface"]) == up
        assert _node_state("ihost", "r1", r1["interface"]) == up
        assert "ccbench" not in _in("ccb-ihost-r1", "nft", "list", "tables")

        # A knob the namespace refuses (net.core.* is the host's; procps exits 0): s1's
        # change, made first, is put back, the run says why and is not tried again.
        asked = {"senders": {"sysctl": {"net.ipv4.tcp_wmem": f"4096 16384 {FIVE_MB}"}},
                 "receivers": {"sysctl": {"net.core.rmem_max": str(FIVE_MB)}}}  # fmt: skip
        bad = _config(tmp_path / "bad.yaml", "ihost", asked)
        ccbench("run", "--config", str(bad), "--out", str(tmp_path / "bad"), "--attempts", "2")
        rec = json.loads((tmp_path / "bad" / "summary.json").read_text())
        assert not rec["valid"]
        [failed] = texts_of(rec["reasons"], Code.RUN_FAILED)  # refused before the traffic
        assert "r1: sysctl net.core.rmem_max = 5242880 refused" in failed  # host and knob named
        tries = json.loads((tmp_path / "bad" / "attempts.json").read_text())["attempts"]
        assert len(tries) == 1
        assert _node_state("ihost", "s1", s1["interface"])[1] == "10485760"

        # A ruleset nft does not take is refused before anything changes (s1's sysctl
        # included), in one line with nft's own word; no table is left.
        misspelt = COUNT_FLOW.replace("counter", "countr")
        typo = {"senders": ASKED["senders"],
                "receivers": {"firewall": {"kind": "nftables", "rules": misspelt}}}  # fmt: skip
        bad = _config(tmp_path / "typo.yaml", "ihost", typo)
        ccbench("run", "--config", str(bad), "--out", str(tmp_path / "typo"), "--attempts", "2")
        rec = json.loads((tmp_path / "typo" / "summary.json").read_text())
        assert not rec["valid"]
        [failed] = texts_of(rec["reasons"], Code.RUN_FAILED)  # refused before anything changed
        assert "r1 (receivers): the nftables ruleset does not load: /dev/stdin:4:" in failed
        assert len(json.loads((tmp_path / "typo" / "attempts.json").read_text())["attempts"]) == 1
        assert _node_state("ihost", "s1", s1["interface"]) == up
        assert "ccbench" not in _in("ccb-ihost-r1", "nft", "list", "tables")


def test_a_jumbo_path_carries_mss_8948(tmp_path: Path) -> None:
    cfg = _config(tmp_path / "tb.yaml", "ijumbo", {}, mtu=9000)
    with built(cfg, "ijumbo"):
        s = run_judged(cfg, tmp_path / "out")
    assert s["host_settings"]["s1"]["mtu"] == s["host_settings"]["r1"]["mtu"] == 9000
    raw = tmp_path / "out" / "raw"
    # every socket of the flow's sender, its iperf3 control connection too, says 8948
    assert set(re.findall(r"\bmss:(\d+)", (raw / "ss-s1.txt").read_text())) == {"8948"}
    assert json.loads((raw / "iperf3-1.json").read_text())["start"]["tcp_mss_default"] == 8948
