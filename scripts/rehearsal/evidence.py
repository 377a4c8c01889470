"""The rehearsal's evidence: what each run asked and had, and what the delay nodes did."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from ccbench import runmeta
from ccbench.layout import RawDir


def delay_drops(before: dict[str, Any], after: dict[str, Any]) -> dict[str, int]:
    """Packets the delay node dropped between two counter reads, by place."""
    out = {}
    for ifname, a in after["links"].items():
        b = before["links"].get(ifname, {})
        if ifname == "lo" or ifname == "eth0":  # loopback, management network
            continue
        for key in ("rx_dropped", "tx_dropped", "rx_errors", "tx_errors"):
            n = a[key] - b.get(key, 0)
            if n:
                out[f"{ifname} {key}"] = n
    for key in ("packets_dropped_late", "queue_full_drops", "user_drops", "id_gaps"):
        n = (after["ccdelay"].get(key) or 0) - (before["ccdelay"].get(key) or 0)
        if n:
            out[f"ccdelay {key}"] = n
    return out


# --------------------------------------------------------------------------- the user's steps


def rt1_queue(raw: Path) -> dict[str, Any]:
    """The bottleneck queue a run asked for (raw/spec.json) and the one rt1 had when the
    run started (raw/tc-before.json: the child qdisc 10: under the shaper)."""
    out: dict[str, Any] = {"asked": None, "had": None}
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        topo = json.loads((raw / "spec.json").read_text())["topology"]
        out["asked"] = f"{topo['queue_kind']} {topo.get('queue_limit_pkts')}"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, StopIteration):
        tc = json.loads((raw / "tc-before.json").read_text())
        q = next(x for x in tc if x.get("handle") == "10:")
        out["had"] = f"{q['kind']} {q['options'].get('limit')}"
    return out


def traffic_window(raw: Path) -> tuple[float | None, float | None]:
    """When the run's traffic started and finished (raw/meta.json, ccbench run's clock)."""
    meta = runmeta.load(RawDir(raw))  # never raises: a bad file reads as not recorded
    return meta.started_unix, meta.finished_unix


def dumbbells(results: Path) -> dict[str, int]:
    """run id -> the dumbbell the matrix put it on (results/matrix.json)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError, AttributeError):
        m = json.loads((results / "matrix.json").read_text())
        return {rid: int(m["testbeds"][r["testbed_id"]]["dumbbell"])
                for rid, r in m["runs"].items()}  # fmt: skip
    return {}


def runs_evidence(results: Path) -> list[dict[str, Any]]:
    out = []
    on = dumbbells(results)
    for f in sorted(results.glob("runs/*/summary.json")):
        s = json.loads(f.read_text())
        bn = s.get("bottleneck") or {}
        led = s.get("loss_ledger") or {}
        queue = rt1_queue(f.parent / "raw")
        started, finished = traffic_window(f.parent / "raw")
        out.append({
            "run_id": s.get("run_id"), "scenario": s.get("scenario"),
            "variant": s.get("variant"), "valid": s.get("valid"),
            "dumbbell": on.get(str(s.get("run_id"))),
            "traffic_started_unix": started, "traffic_finished_unix": finished,
            "reasons": [r["text"] for r in s.get("reasons", [])],
            "started_unix": s.get("started_unix"),
            "utilization_pct": s.get("utilization_pct"),
            "cc_used": [fl.get("cc_used") for fl in s.get("flows", [])],
            "rt1_queue_asked": queue["asked"], "rt1_queue_had": queue["had"],
            "rt1_queue_drops": bn.get("drops"),
            "rt1_shaper_dropped": (bn.get("shaper") or {}).get("dropped"),
            "retransmits": led.get("retransmits"),
            "ledger_outside": led.get("outside"),
            "ledger_unread": led.get("unread"),
        })  # fmt: skip
    return out


def overlaps(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of runs on different dumbbells whose traffic overlapped in time, and by how
    long: the evidence that the dumbbells ran side by side."""
    out = []
    timed = [r for r in runs if r["traffic_started_unix"] and r["traffic_finished_unix"]]
    for i, a in enumerate(timed):
        for b in timed[i + 1 :]:
            if a["dumbbell"] == b["dumbbell"]:
                continue
            start = max(a["traffic_started_unix"], b["traffic_started_unix"])
            end = min(a["traffic_finished_unix"], b["traffic_finished_unix"])
            if end > start:
                out.append({
                    "runs": [a["run_id"], b["run_id"]],
                    "dumbbells": [a["dumbbell"], b["dumbbell"]],
                    "queues": [a["rt1_queue_had"], b["rt1_queue_had"]],
                    "overlap_s": round(end - start, 2),
                })  # fmt: skip
    return out
