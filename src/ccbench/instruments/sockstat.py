"""FreeBSD senders: one `sockstat -46 -CS -P tcp` per flow while it runs, so each
connection's CC module and TCP stack are read from the kernel. Its part of the summary
(`sockstat`) lists them; a connection on another TCP stack or CC than the variant asked
makes the run invalid (validity.check_sockstat)."""

from __future__ import annotations

import functools
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any, Self

from ccbench import layout, validity
from ccbench.instruments.base import (
    Action,
    Cost,
    Instrument,
    Recording,
    SummaryPart,
    is_int,
    need,
)
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Needs
from ccbench.parse import split_hostport
from ccbench.parse.sockstat import connections_to, parse_sockstat
from ccbench.part import Part, d
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

AFTER_S = 5.0  # sample a flow this long after its start (at most half its length)
GRACE_S = 15.0  # for a sample still running when the flows end


@dataclass
class Sample:
    flow: int
    node: str
    peer: str  # "address:port" of the flow's server
    file: str
    at_s: float | None = None  # seconds into the traffic when taken; None: never taken


class SockstatConnection(Part):
    local: str = d("local address:port")
    stack: str | None = d("TCP stack (sockstat -S)")
    cc: str | None = d("congestion control module (sockstat -C)")


class SockstatFlow(Part):
    flow: int = d("flow number")
    node: str = d("its sender")
    peer: str = d("receiver address:port")
    at_s: float | None = d("when the sample was taken, s from the traffic start")
    raw: str = d("the sample's raw file")
    connections: list[SockstatConnection] = d("the flow's connections")


class SockstatSummary(Part):
    flows: list[SockstatFlow] = d("per flow, its connections while it ran")


@dataclass
class Sockstat(Instrument[SockstatSummary]):
    name = "sockstat"
    description = "sockstat -46 -CS -P tcp on the FreeBSD senders, once per flow"
    raw_files = (RawFile(layout.sockstat, "FreeBSD: flow K's connections as sockstat listed them"),)
    cost = Cost.SNAPSHOT
    oses = ("freebsd",)
    summary_key = "sockstat"
    summary_doc = "FreeBSD senders: each flow's connections (CC, stack)"
    summary_after = "loss_ledger"
    needs = {"freebsd": Needs(("sockstat",))}

    samples: list[Sample] = field(default_factory=list)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        samples = [
            Sample(k, f.sender, f"{tb.address(f.receiver)}:{layout.flow_port(tb.roles, spec, k)}",
                   layout.sockstat(k))
            for k, f in enumerate(spec.flows, start=1)
            if tb.driver(f.sender).sockstat_tcp() is not None
        ]  # fmt: skip
        return cls(samples=samples) if samples else None

    def hosts(self) -> list[str]:
        return list(dict.fromkeys(s.node for s in self.samples))

    def during(self, rec: Recording) -> list[Action]:
        out: list[Action] = []
        for s in self.samples:
            f = rec.spec.flows[s.flow - 1]
            out.append((f.start_s + min(AFTER_S, f.duration_s / 2),
                        functools.partial(self._take, rec, s)))  # fmt: skip
        return sorted(out, key=lambda x: x[0])

    def _take(self, rec: Recording, s: Sample) -> None:
        s.at_s = round(time.time() - (rec.started_unix or time.time()), 3)
        argv = rec.tb.driver(s.node).sockstat_tcp()
        assert argv is not None  # for_run kept only such senders
        self.procs.append(
            rec.tb.ex(s.node).spawn(argv, stdout=rec.raw / s.file,
                                    stderr=rec.raw / layout.stderr_of(s.file))
        )  # fmt: skip

    def stop(self, rec: Recording) -> None:
        for p in self.procs:
            try:
                p.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                p.stop(signal.SIGTERM, grace_s=1.0)

    def record_json(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return [vars(s) for s in self.samples]

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, list) and all(isinstance(e, dict) for e in d),
             "sockstat is not a list of samples")  # fmt: skip
        samples = []
        for e in d:
            k, node, peer, name, at = (e.get(x) for x in ("flow", "node", "peer", "file", "at_s"))
            need(is_int(k) and isinstance(node, str) and isinstance(peer, str)
                 and isinstance(name, str) and (at is None or isinstance(at, (int, float))),
                 f"sockstat sample {e!r} is not a flow's sample")  # fmt: skip
            samples.append(Sample(k, node, peer, name, at))
        return cls(samples=samples)

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """{flows: each flow's connections as its sample (raw/sockstat-<k>.txt) listed
        them}, and a reason for each connection on another stack or CC."""
        flows: list[dict[str, Any]] = []
        reasons: list[Reason] = []
        for e in self.samples:
            k, node, peer, name = e.flow, e.node, e.peer, e.file
            if not 1 <= k <= len(spec.flows):
                rd.problem(layout.META, f"sockstat sample of flow {k}: the run has no such flow")
                continue
            if e.at_s is None:
                reasons.append(Reason.of(Code.STACK_UNVERIFIED,
                                         f"flow {k}: no sockstat sample was taken while it ran",
                                         flow=k))  # fmt: skip
                continue
            text = rd.text(name, required=True)
            if text is None:
                continue
            try:
                conns = connections_to(parse_sockstat(text), *_addr_port(peer))
            except ValueError as err:
                rd.problem(name, str(err))
                continue
            flows.append({
                "flow": k, "node": node, "peer": peer, "at_s": e.at_s, "raw": name,
                "connections": [{"local": c.local, "stack": c.stack, "cc": c.cc} for c in conns],
            })  # fmt: skip
            reasons += validity.check_sockstat(k, node, peer, conns, spec.flows[k - 1].cc,
                                               spec.stack)  # fmt: skip
        return SummaryPart({"flows": flows}, reasons)


def _addr_port(peer: str) -> tuple[str, int]:
    host, port = split_hostport(peer)
    if not port.isdigit():
        raise ValueError(f"sockstat sample peer {peer!r} has no port")
    return host, int(port)
