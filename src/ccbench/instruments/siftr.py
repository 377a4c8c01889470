"""FreeBSD senders' kernel logger, siftr2 where the kernel has it, else siftr(4): cwnd
and srtt per packet (their `ss`), filtered to the flows' port where one port covers
them and every Nth packet so the log stays within spec.siftr_budget_mb
(hosts.siftr_plan); the log is fetched after the run (streamed, checked). Its part of
the summary (`siftr`) says how each node's log was taken."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

from ccbench import layout
from ccbench.fetch import FetchFailed
from ccbench.hosts import siftr_plan
from ccbench.instruments.base import (
    Cost,
    Instrument,
    Recording,
    SeriesContext,
    SummaryPart,
    need,
)
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Needs
from ccbench.part import Part, d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

if TYPE_CHECKING:
    from ccbench.timeseries_sink import Sink

LOG = "/var/tmp/ccbench-siftr.log"
# A node's record: what was started and, after the run, what its fetch moved.
NODE_KEYS = ("logger", "ppl", "port_filter", "log_bytes_est", "within_budget", "resolution")
FETCH_KEYS = ("node_bytes", "fetched_bytes", "seconds")
# A logger still enabled (its run never got to siftr_stop) is turned off.
SIFTR_OFF = (
    "for m in siftr siftr2; do "
    'if [ "$(sysctl -n net.inet.$m.enabled 2>/dev/null)" = 1 ]; then '
    'sysctl net.inet.$m.enabled=0 >/dev/null && echo "logger $m"; fi; done'
)


class SiftrLogging(Part):
    logger: str = d("siftr or siftr2")
    ppl: int | None = d("every ppl-th packet of a flow logged (null: not recorded)", None)
    port_filter: int | None = d("the one port logged (0: every port)", None)
    log_bytes_est: int | None = d("the log's size as planned, bytes", None)
    within_budget: bool | None = d("false: even the largest ppl overran siftr_budget_mb", None)
    resolution: str | None = d("how finely the cwnd/srtt series are sampled, for the report",
                               None)  # fmt: skip
    fetch_node_bytes: int | None = d("the log's size on the node, bytes", None)
    fetch_fetched_bytes: int | None = d("bytes that crossed the link (gzip -1 when large)",
                                        None)  # fmt: skip
    fetch_seconds: float | None = d("wall time of the fetch, s", None)


@dataclass
class Siftr(Instrument[dict[str, SiftrLogging]]):
    name = "siftr"
    description = "siftr2 or siftr(4) on the FreeBSD senders, every Nth packet"
    raw_files = (RawFile(layout.siftr, "FreeBSD sender NODE's siftr log"),)
    cost = Cost.PER_PACKET
    oses = ("freebsd",)
    sender_rank = 3
    summary_key = "siftr"
    summary_doc = "FreeBSD senders: node -> how its siftr log was taken"
    summary_after = "kernel"
    node_files = (LOG,)
    needs = {"freebsd": Needs(features=("siftr",))}  # a logger there (needs.FEATURES)

    # node -> {logger, ppl, port_filter, log_bytes_est, within_budget, resolution,
    #          fetch: {node_bytes, fetched_bytes, compressed, seconds} | {error}}
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        nodes = cls.senders_on(tb, spec)
        return cls(nodes={n: {} for n in nodes}) if nodes else None

    def start(self, rec: Recording) -> None:
        spec = rec.spec
        for node in list(self.nodes):
            drv, ex = rec.tb.driver(node), rec.tb.ex(node)
            steps = drv.siftr2_probe_plan()
            ok = any(ex.run(s.argv, check=not s.allow_fail).ok for s in steps)
            logger = "siftr2" if ok else "siftr"
            mine = [(k, f) for k, f in enumerate(spec.flows, start=1) if f.sender == node]
            plan = siftr_plan.choose_ppl(
                [(f.start_s, f.duration_s) for _, f in mine],
                [layout.flow_port(rec.tb.roles, spec, k) for k, _ in mine],
                spec.topology.rate_bps, logger=logger,
                budget_bytes=int(spec.siftr_budget_mb * 2**20),
                frame_bytes=spec.topology.frame_bytes,
            )  # fmt: skip
            ex.run(["rm", "-f", LOG])
            for argv in drv.siftr_start(LOG, plan.port_filter, logger=logger, ppl=plan.ppl):
                ex.run(argv)
            self.nodes[node] = {"logger": logger, "ppl": plan.ppl,
                                "port_filter": plan.port_filter,
                                "log_bytes_est": plan.log_bytes,
                                "within_budget": plan.within_budget,
                                "resolution": plan.resolution(len(spec.flows))}  # fmt: skip

    def collect(self, rec: Recording) -> None:
        """Stop each node's logger and fetch its log (large logs arrive gzip-compressed).
        `fetch` records what crossed the link or, when the fetch failed, its one-line
        error: the verdict makes that run invalid, and the log stays on the node."""
        for node, started in self.nodes.items():
            ex = rec.tb.ex(node)
            for argv in rec.tb.driver(node).siftr_stop(started["logger"]):
                ex.run(argv, check=False)
            try:
                got = ex.get(LOG, rec.raw / layout.siftr(node))
            except FetchFailed as e:
                started["fetch"] = {"error": str(e)}
                continue
            started["fetch"] = {
                "node_bytes": got.node_bytes,
                "fetched_bytes": got.fetched_bytes,
                "compressed": got.compressed,
                "seconds": round(got.seconds, 3),
            }
            ex.run(["rm", "-f", LOG], check=False)

    def record_json(self) -> dict[str, Any]:
        return self.nodes

    @classmethod
    def from_record(cls, d: Any) -> Self:
        """Runs recorded before the plan name only each node's logger."""
        need(isinstance(d, dict), "siftr is not an object of node -> logging")
        nodes: dict[str, dict[str, Any]] = {}
        for node, v in d.items():
            if isinstance(v, str):
                v = {"logger": v}
            need(isinstance(v, dict) and isinstance(v.get("logger"), str),
                 f"siftr {node}: not a logger record")  # fmt: skip
            fetch = v.get("fetch")
            need(fetch is None or isinstance(fetch, dict), f"siftr {node}: fetch is not an object")
            nodes[str(node)] = {**{k: v.get(k) for k in NODE_KEYS},
                                **({"fetch": fetch} if fetch is not None else {})}  # fmt: skip
        return cls(nodes=nodes)

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        """How each node's log was taken; a log that was not fetched is its problem."""
        out: dict[str, dict[str, Any]] = {}
        for node, v in self.nodes.items():
            out[node] = {k: v.get(k) for k in NODE_KEYS}
            fetch = v.get("fetch")  # an object or None (from_record checked it)
            if fetch is not None and fetch.get("error"):
                rd.problem(layout.siftr(node), f"not fetched: {fetch['error']}")
            elif fetch is not None:
                for k in FETCH_KEYS:
                    out[node][f"fetch_{k}"] = fetch.get(k)
        return SummaryPart(out)

    @classmethod
    def add_rows(cls, rd: RawDir, record: Self | None, ctx: SeriesContext, sink: Sink) -> None:
        from ccbench import timeseries_samplers as samplers  # pandas: only to read

        samplers.siftr_rows(rd, ctx.t0, ctx.local_to_flow, sink)

    @classmethod
    def series_caption(cls, summaries: Sequence[Any]) -> str:
        """How finely each FreeBSD sender's log was taken (its every Nth packet)."""
        how: list[str] = []
        for rec in summaries:
            for node, lg in sorted((cls.part_of(rec) or {}).items()):
                if lg.resolution and f"{node}: {lg.resolution}" not in how:
                    how.append(f"{node}: {lg.resolution}")
        return "siftr samples" + (f" ({'; '.join(how)})" if how else "")

    @classmethod
    def leftovers_argv(cls, os: str) -> list[list[str]]:
        return [["sh", "-c", SIFTR_OFF]] if os == "freebsd" else []
