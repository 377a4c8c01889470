"""rt1's bottleneck during a run: its queue and shaper counters (tc before/after) and its
queue sampled over time (summary.json `bottleneck`, `queue`)."""

from __future__ import annotations

import gzip
import json
import lzma
import zlib
from typing import Any

from ccbench.instruments.qdisc import QdiscSampler
from ccbench.layout import RawDir, open_text, stored
from ccbench.parse.tc import parse_tc_qdisc_json
from ccbench.spec import RunSpec


def _configured(qdiscs: list[Any]) -> dict[str, Any]:
    """rt1's queue and shaper as the kernel had them when the run started."""
    q = next((x for x in qdiscs if x.handle == "10:"), None)
    shaper = next((x for x in qdiscs if x.handle == "1:"), None)
    return {
        "queue_kind": q.kind if q else None,
        "queue_limit_pkts": q.limit_pkts if q else None,
        "queue_limit_bytes": q.limit_bytes if q else None,
        "shaper_rate_bps": shaper.rate_bps if shaper else None,
    }


def bottleneck_of(rd: RawDir) -> dict[str, Any]:
    """Counters of the child queue (handle 10:) and the shaper, after minus before."""
    out: dict[str, Any] = {}
    stats = []
    for name in ("tc-before.json", "tc-after.json"):
        text = rd.text(name, required=True)
        if text is None:
            return {"drops": None}
        try:
            stats.append(parse_tc_qdisc_json(text))
        except json.JSONDecodeError as e:
            rd.problem(name, f"not valid JSON ({e})")
        except ValueError as e:
            rd.problem(name, str(e))
    if len(stats) < 2:
        return {"drops": None}
    before, after = stats
    out["configured"] = _configured(before)
    by_handle = {q.handle: q for q in before}
    for q in after:
        b = by_handle.get(q.handle)
        if b is None:
            continue
        name = {"10:": "queue", "1:": "shaper"}.get(q.handle, q.handle)
        out[name] = {
            "kind": q.kind,
            "sent_pkts": (q.sent_pkts or 0) - (b.sent_pkts or 0),
            "sent_bytes": (q.sent_bytes or 0) - (b.sent_bytes or 0),
            "dropped": (q.dropped or 0) - (b.dropped or 0),
            "overlimits": (q.overlimits or 0) - (b.overlimits or 0),
        }
    if "queue" not in out:
        rd.problem("tc-after.json", "no bottleneck queue (handle 10:) in both snapshots")
    out["drops"] = out.get("queue", {}).get("dropped")
    return out


QDISC_MIN_COVERAGE = 0.9  # like the ss sampler: samples must reach this share of the traffic
# What reading a stored file may raise besides ValueError (a UnicodeDecodeError is one).
_READ_ERRORS = (UnicodeDecodeError, OSError, EOFError, zlib.error, lzma.LZMAError,
                gzip.BadGzipFile)  # fmt: skip


def queue_of(
    rd: RawDir, spec: RunSpec, qs: QdiscSampler | None, t0_s: float | None
) -> dict[str, Any] | None:
    """summary.json's `queue` from raw/qdisc-<node>.txt (parse.qdisc.QueueStats, the file
    read as a stream); None when sampling was off. A run made before queue sampling
    existed (no qdisc instrument in meta.json) says so; a sampler file that is missing,
    not the sampler's format, or cut short is a problem like any damaged raw file."""
    from ccbench.parse.qdisc import (
        QUEUE_HANDLE,
        QueueStats,
        iter_qdisc_samples,
        iter_queue_points,
    )

    if qs is None:
        if spec.qdisc_interval_s > 0 and not rd.failed:
            why = "no queue samples: the run was made before ccbench sampled the queue"
            return {"sampled": False, "notes": [why]}
        return None
    name = qs.file
    path = stored(rd.path, name)
    acc = QueueStats(t0_s or 0.0, spec.traffic_s, spec.qdisc_interval_s,
                     spec.topology.frame_bytes)  # fmt: skip
    try:
        if path is None:
            raise FileNotFoundError(name)
        with open_text(path) as lines:
            for p in iter_queue_points(iter_qdisc_samples(lines)):
                acc.add(p)
    except _READ_ERRORS:
        # What is wrong with it in the words of a whole-file read (RawDir.text).
        if rd.text(name, required=not rd.failed) is None:
            return {"sampled": False, "notes": [f"{name}: missing"]}
        rd.problem(name, "unreadable (it changed while read)")
        return {"sampled": False, "notes": [f"{name}: unreadable"]}
    except ValueError as e:
        rd.problem(name, f"not qdisc samples ({e})")
        return {"sampled": False, "notes": [f"{name}: unreadable"]}
    if not acc.n or t0_s is None:
        if not rd.failed:
            rd.problem(name, "no samples of the bottleneck queue")
        return {"sampled": False, "notes": [f"{name}: no samples"]}
    counters = []
    for f in ("tc-before.json", "tc-after.json"):
        try:
            stats = parse_tc_qdisc_json(rd.text(f) or "")
        except ValueError:
            stats = []  # its own reason comes from bottleneck
        counters.append(next((q for q in stats if q.handle == QUEUE_HANDLE), None))
    out = acc.result(counters[0], counters[1])
    out["file"] = name
    if (out["last_s"] or 0) < QDISC_MIN_COVERAGE * spec.traffic_s and not rd.failed:
        rd.problem(name, f"samples end {out['last_s']:.1f} s into {spec.traffic_s:g} s of "
                         "traffic (cut short)")  # fmt: skip
    if not out["drops_check"]["consistent"]:
        rd.problem(name, out["drops_check"]["note"])
    return out
