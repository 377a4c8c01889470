"""Each flow's server port, decided once (layout.flow_port) from the testbed's roles: a
lab sender's pinned `server_port`, else BASE_PORT + k. The server, the client, the
instruments that filter by port, the lab's loss rule and delay element, and the summary
all use it (plan tests here; run for real in tests/integration/test_lab_rehearsal.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from ccbench import layout, run
from ccbench.errors import CcbenchError
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments.tcp_probe import TcpProbe
from ccbench.roles import Bottleneck, NoDelay, dumbbell
from ccbench.spec import Flow, Recorded, RunSpec, Topology
from ccbench.summarize import summarize
from ccbench.testbed import base, kinds
from ccbench.testbed import lab_plans as plans
from ccbench.testbed.lab import LabTestbed

RAW = Path(__file__).resolve().parents[1] / "captures" / "run-local-2cubic"
TOPO = Topology(pairs=2, rate_mbit=100, rtt_ms=40, loss_mode="nth", loss_rate=0.01)


def spec(*pairs: int) -> RunSpec:
    return RunSpec(topology=TOPO, flows=tuple(Flow(pair=p, cc="cubic") for p in pairs),
                   record=(Recorded("tcp_probe", (("budget_mb", 64.0),)),))  # fmt: skip


def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **pins: int) -> LabTestbed:
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path / "state")
    senders = {s: {"host": f"{s}.lan", "address": f"10.0.0.{i}", "receiver": "r1"}
               for i, s in enumerate(("s1", "s2"), 1)}  # fmt: skip
    for s, port in pins.items():
        senders[s]["server_port"] = port
    inv = {"senders": senders, "receivers": {"r1": {"host": "r1.lan", "address": "10.0.0.9"}},
           "emulation": {"delay": "ccdelay", "loss": "iptables"}}  # fmt: skip
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inv))
    cfg = kinds.TestbedConfig(kind="lab", id="p1", inventory=str(tmp_path / "lab.yaml"))
    return LabTestbed(cfg, TOPO)


def ports(tb: Any, s: RunSpec) -> list[int]:
    return [layout.flow_port(tb.roles, s, k) for k in range(1, len(s.flows) + 1)]


def test_flow_k_is_served_on_base_port_plus_k_unless_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    emulab = dumbbell(2, Bottleneck("rt1", "eth5"), NoDelay())
    assert [layout.flow_port(emulab, spec(1, 2, 1), k) for k in (1, 2, 3)] == [5202, 5203, 5204]
    tb = lab(tmp_path, monkeypatch, s2=5210)
    assert tb.roles.pinned_ports == ((2, 5210),)
    assert ports(tb, spec(1, 2)) == [5202, 5210]
    seed001 = lab(tmp_path, monkeypatch, s1=5201, s2=5202)  # seed 001's tri-point
    assert ports(seed001, spec(1, 2)) == [5201, 5202]


@pytest.mark.parametrize(
    ("pins", "pairs", "says"),
    [({"s2": 5210}, (1, 2, 2), "flows 2 and 3 would both be served on port 5210 (s2 pins it)"),
     ({"s2": 5204}, (1, 1, 1, 2), "flows 3 and 4 would both be served on port 5204 (s2 pins "
      "it)")],
)  # fmt: skip
def test_two_flows_on_one_port_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pins: dict[str, int],
    pairs: tuple[int, ...], says: str,
) -> None:  # fmt: skip
    tb = lab(tmp_path, monkeypatch, **pins)
    with pytest.raises(CcbenchError, match=rf"^{said(says)}: a sender that pins") as e:
        ports(tb, spec(*pairs))
    assert "\n" not in str(e.value) and "remove server_port" in str(e.value)


def said(text: str) -> str:
    return text.replace("(", r"\(").replace(")", r"\)")


def test_a_pinned_port_is_covered_by_the_loss_rule_and_the_delay_element(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tb = lab(tmp_path, monkeypatch, s1=5201)
    assert tb._ports() == (5201, 6201)
    assert plans.loss_tool("iptables").add(TOPO, tb._ports())[0][7] == "5201:6201"
    assert plans.loss_tool("nftables").add(TOPO, tb._ports())[2][8] == "5201-6201"
    el = tb.delay_plan()
    assert isinstance(el, plans.CcdelayAtReceiver)
    assert el.rules()[0][7] == "5201:6201"  # its ACKs, from the server ports
    plain = lab(tmp_path, monkeypatch)
    assert plain._ports() == (5202, 6201)  # flow k on 5201 + k


class Spawning:
    def __init__(self) -> None:
        self.spawned: list[list[str]] = []

    def spawn(self, argv: list[str], **kw: Any) -> None:
        self.spawned.append(list(argv))


class PinnedTestbed:
    """What run.py and the instruments ask of a testbed, s2 pinned to 5210."""

    id, kind = "p1", "lab"
    roles = replace(dumbbell(2, None, NoDelay()), pinned_ports=((2, 5210),))

    def __init__(self) -> None:
        self.exs: dict[str, Spawning] = {}
        self.listened: list[tuple[str, int]] = []

    def ex(self, node: str) -> Spawning:
        return self.exs.setdefault(node, Spawning())

    def driver(self, node: str) -> LinuxHost:
        return LinuxHost()

    def address(self, node: str) -> str:
        return "10.0.0.9"

    def wait_listening(self, node: str, port: int, **kw: Any) -> None:
        self.listened.append((node, port))


def test_server_client_and_instruments_use_the_flows_port(tmp_path: Path) -> None:
    tb, s = PinnedTestbed(), spec(1, 2)
    procs = run.RunProcs()
    run._start_servers(tb, s, procs, tmp_path)  # type: ignore[arg-type]
    run._start_clients(tb, s, procs, tmp_path)  # type: ignore[arg-type]
    servers = tb.exs["r1"].spawned + tb.exs["r2"].spawned
    assert [a[a.index("-p") + 1] for a in servers] == ["5202", "5210"]
    assert tb.listened == [("r1", 5202), ("r2", 5210)]
    clients = tb.exs["s1"].spawned + tb.exs["s2"].spawned
    assert [a[a.index("-p") + 1] for a in clients] == ["5202", "5210"]
    probe = TcpProbe.for_run(tb, s)  # type: ignore[arg-type]
    assert probe is not None and probe.ports == [5202, 5210]


def test_the_summary_records_each_flows_port_as_iperf3_connected() -> None:
    """From the client's own JSON (start.connected[].remote_port), not from the plan."""
    s = summarize(RAW)
    assert [f["server_port"] for f in s["flows"]] == [5202, 5203]
