"""FreeBSD senders: the TCP black-box log (BBLog) of every connection, the stack
developer's own trace (sys/netinet/tcp_log_buf.c), written by Netflix's tcplog_dumper
as pcapng files and fetched after the run (gzip'd, each checked whole:
ccbench.parse.pcapng). The sysctls are those the FreeBSD CC maintainers' scripts set
(ccfbsd/research_scripts fbsd_snd.bash); BBLog records are not decoded here.

Its part of the summary (`bblog`): node -> files, bytes and pcapng blocks, and the files
that are not whole. BBLog is a record for the stack developer, not a source of the
report's numbers: a broken file is a note, the run stays what its numbers say."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Self

from ccbench import layout
from ccbench.fetch import FetchFailed
from ccbench.instruments.base import Cost, Instrument, Recording, SummaryPart, need
from ccbench.layout import RawDir, RawFile
from ccbench.needs import Needs
from ccbench.parse.pcapng import check_pcapng_file
from ccbench.part import Part, d
from ccbench.spec import RunSpec
from ccbench.testbed.base import Testbed

DIR = "/var/tmp/ccbench-bblog"
# net.inet.tcp.bb.*: log every new connection (auto_all, auto_mode 4 = all), keep
# every record (auto_ratio 1), verbose records, and room for a long run's sessions.
ON = ("log_auto_ratio=1", "log_session_limit=100000", "log_verbose=1", "log_auto_mode=4",
      "log_auto_all=1")  # fmt: skip
OFF = ("log_auto_all=0",)
# The dumper runs as nobody and writes into DIR: a fresh, empty one per run.
PREPARE = 'rm -rf "$1" && mkdir -p "$1" && chown nobody "$1"'


def sysctls(settings: tuple[str, ...]) -> list[list[str]]:
    return [["sysctl", f"net.inet.tcp.bb.{s}"] for s in settings]


class BblogFiles(Part):
    files: list[str] = d("its BBLog files in raw/ (tcplog_dumper's pcapng, gzip'd)")
    node_bytes: int = d("their size on the node, bytes")
    fetched_bytes: int = d("bytes that crossed the link")
    blocks: int = d("pcapng blocks, all files (each checked whole)")
    notes: list[str] = d("files not fetched or not whole pcapng (BBLog feeds no number)")


@dataclass
class Bblog(Instrument[dict[str, BblogFiles]]):
    name = "bblog"
    description = "tcplog_dumper's BBLog pcapng files on the FreeBSD senders"
    raw_files = (
        RawFile(
            layout.bblog,
            "FreeBSD sender NODE's BBLog pcapng files, and its dumper's log (NAME `dumper`)",
        ),
    )
    cost = Cost.PER_PACKET
    oses = ("freebsd",)
    optional = True
    summary_key = "bblog"
    summary_doc = "FreeBSD senders with bblog: node -> its black-box log files"
    summary_after = "retransmit_causes"
    node_files = (DIR,)
    # tcplog_dumper: a package, not in the base system; the kernel's black box
    # (needs.FEATURES), without which the dumper would record nothing
    needs = {"freebsd": Needs(("tcplog_dumper",), ("tcp_blackbox",))}

    # node -> {"files": [{file, node_bytes, fetched_bytes, blocks, problem}], "problem"}
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def for_run(cls, tb: Testbed, spec: RunSpec) -> Self | None:
        if cls.asked(spec) is None:
            return None
        nodes = cls.senders_on(tb, spec)
        return cls(nodes={n: {"files": [], "problem": None} for n in nodes}) if nodes else None

    def hosts(self) -> list[str]:
        return list(self.nodes)

    def start(self, rec: Recording) -> None:
        for node in self.nodes:
            ex = rec.tb.ex(node)
            ex.run(["sh", "-c", PREPARE, "ccbench-bblog", DIR])
            for argv in sysctls(ON):
                ex.run(argv)
            err = rec.raw / layout.stderr_of(layout.bblog(node, "dumper"))
            self.procs.append(ex.spawn(["tcplog_dumper", "-D", DIR], stderr=err))

    def stop(self, rec: Recording) -> None:
        for node in self.nodes:
            for argv in sysctls(OFF):
                rec.tb.ex(node).run(argv, check=False)
        for p in self.procs:
            p.stop(signal.SIGTERM, grace_s=5.0)  # the dumper writes out what it holds

    def collect(self, rec: Recording) -> None:
        for node, got in self.nodes.items():
            ex = rec.tb.ex(node)
            ls = ex.run(["ls", DIR], check=False)
            if not ls.ok:
                got["problem"] = f"cannot list {DIR}: {ls.stderr.strip()[:120]}"
                continue
            for name in sorted(ls.stdout.split()):
                entry: dict[str, Any] = {"file": layout.bblog(node, name)}
                try:
                    f = ex.get(f"{DIR}/{name}", rec.raw / entry["file"], compress=True)
                except FetchFailed as e:
                    entry["problem"] = str(e)
                    got["files"].append(entry)
                    continue
                entry.update(node_bytes=f.node_bytes, fetched_bytes=f.fetched_bytes)
                try:
                    check = check_pcapng_file(f.path)
                    entry.update(blocks=check.blocks, problem=check.reason)
                except OSError as e:
                    entry.update(blocks=0, problem=f"unreadable ({e.strerror or e})")
                got["files"].append(entry)
            if not any(e.get("problem") for e in got["files"]):
                ex.run(["rm", "-rf", DIR], check=False)

    @classmethod
    def from_record(cls, d: Any) -> Self:
        need(isinstance(d, dict) and all(isinstance(v, dict) and isinstance(v.get("files"), list)
                                         for v in d.values()), "not node -> {files}")  # fmt: skip
        return cls(nodes={str(k): v for k, v in d.items()})

    def record_json(self) -> dict[str, Any]:
        return self.nodes

    def summary_part(self, rd: RawDir, spec: RunSpec, *, t0: float | None = None) -> SummaryPart:
        out: dict[str, Any] = {}
        for node, got in self.nodes.items():
            files = got.get("files") or []
            out[node] = {
                "files": [f.get("file") for f in files],
                "node_bytes": sum(f.get("node_bytes") or 0 for f in files),
                "fetched_bytes": sum(f.get("fetched_bytes") or 0 for f in files),
                "blocks": sum(f.get("blocks") or 0 for f in files),
                "notes": [f"{f.get('file')}: {f['problem']}" for f in files if f.get("problem")]
                + ([got["problem"]] if got.get("problem") else []),
            }
        return SummaryPart(out)
