"""FreeBSD senders' BBLog files as fetched (instruments.bblog): summary.json `bblog`,
node -> files, bytes and pcapng blocks, and the files that are not whole. BBLog is a
record for the stack developer, not a source of the report's numbers: a broken file is
a note, the run stays what its numbers say."""

from __future__ import annotations

from typing import Any

from ccbench.instruments.bblog import Bblog


def bblog_record(bblog: Bblog | None) -> dict[str, Any] | None:
    if bblog is None:
        return None
    out: dict[str, Any] = {}
    for node, got in bblog.nodes.items():
        files = got.get("files") or []
        out[node] = {
            "files": [f.get("file") for f in files],
            "node_bytes": sum(f.get("node_bytes") or 0 for f in files),
            "fetched_bytes": sum(f.get("fetched_bytes") or 0 for f in files),
            "blocks": sum(f.get("blocks") or 0 for f in files),
            "notes": [f"{f.get('file')}: {f['problem']}" for f in files if f.get("problem")]
            + ([got["problem"]] if got.get("problem") else []),
        }
    return out
