"""raw/ of one run -> summary.json: per-flow results, bottleneck, validity.

The schema is documented in README.md ("summary.json"). Every number here is computed
from a file in raw/, so `ccbench parse RUN_DIR` reproduces it exactly.

Damaged raw files (the rule): a run is kept and marked invalid, never aborted, when
any of its measurement files is missing, unreadable, not the format its tool writes,
or implausible; each problem is one reason that starts with the file's name (e.g.
`tc-after.json: not valid JSON (...)`), so a comparison still lists the run and says
why it does not count. Only spec.json aborts (CcbenchError, one line naming it): it
says which run this is and what it was asked to do, so without it there is no run to
mark. Files a run always writes (meta.json, tc-before.json, tc-after.json, and the
delay element's statistics when it is ccdelay) make the run invalid when missing,
unless the run already failed (raw/error.txt says why). Optional files (facts.json,
sender-setup.json, cpu-*.txt, probe and sampler files) only count when present.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ccbench import kernel, ledger, metrics, validity
from ccbench.errors import CcbenchError
from ccbench.parse.iperf3 import Iperf3Result, jtype, parse_iperf3
from ccbench.parse.procstat import usage_between
from ccbench.parse.sockstat import connections_to, parse_sockstat, split_addr
from ccbench.parse.tc import parse_tc_qdisc_json
from ccbench.probe import RAW_FILES, read_probe
from ccbench.spec import Flow, RunSpec, Topology

if TYPE_CHECKING:  # pandas only where the time series is built (parse_run_dir)
    import pandas as pd


def _clean(x: Any) -> Any:
    """NaN/inf -> None, so the file is strict JSON."""
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def write_json(path: Path, obj: Any) -> None:
    """Atomic write of strict JSON."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(_clean(obj), indent=2, allow_nan=False))
    tmp.replace(path)


class _NotANumber(ValueError):
    pass


def _reject_constant(name: str) -> Any:
    raise _NotANumber(f"contains {name}, which is not a number")


def _is_num(x: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class RawDir:
    """The files of one run's raw/ directory. Reading one never raises: a file that is
    missing (where the run needs it), not UTF-8, not JSON or not the JSON type its
    writer writes adds one reason naming it to `problems`, and the reader gets None."""

    def __init__(self, raw: Path) -> None:
        self.path = raw
        self.failed = (raw / "error.txt").exists()
        self.problems: list[str] = []

    def problem(self, name: str, what: str) -> None:
        self.problems.append(f"{name}: {what}")

    def exists(self, name: str) -> bool:
        return (self.path / name).exists()

    def text(self, name: str, *, required: bool = False) -> str | None:
        p = self.path / name
        if not p.exists():
            if required and not self.failed:  # a failed run's missing files say nothing new
                self.problem(name, "missing")
            return None
        try:
            return p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            self.problem(name, f"not UTF-8 text (byte {e.start})")
        except OSError as e:
            self.problem(name, f"unreadable ({e.strerror or e})")
        return None

    def json(self, name: str, *, required: bool = False, kind: type = dict) -> Any:
        text = self.text(name, required=required)
        if text is None:
            return None
        if not text.strip():
            self.problem(name, "empty")
            return None
        try:
            doc = json.loads(text, parse_constant=_reject_constant)
        except _NotANumber as e:
            self.problem(name, str(e))
            return None
        except ValueError as e:
            self.problem(name, f"not valid JSON ({e})")
            return None
        if not isinstance(doc, kind):
            want = "a list" if kind is list else "an object"
            self.problem(name, f"a JSON {jtype(doc)} where {want} belongs")
            return None
        return doc


def load_spec(raw: Path) -> RunSpec:
    """raw/spec.json as a RunSpec; CcbenchError (one line naming the file) when it is
    missing, not JSON, or not a run spec (fields missing, or of the wrong type)."""
    path = raw / "spec.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"), parse_constant=_reject_constant)
    except FileNotFoundError:
        raise CcbenchError(f"{path}: missing (not a run directory?)") from None
    except UnicodeDecodeError as e:
        raise CcbenchError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise CcbenchError(f"{path}: unreadable ({e.strerror or e})") from None
    except _NotANumber as e:
        raise CcbenchError(f"{path}: {e}") from None
    except ValueError as e:
        raise CcbenchError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise CcbenchError(f"{path}: a JSON {jtype(doc)} where an object belongs")
    problem = _spec_problem(doc)
    if problem:
        raise CcbenchError(f"{path}: {problem}")
    try:
        return RunSpec.from_dict(doc)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CcbenchError(f"{path}: not a run spec ({e})") from None


def _spec_problem(d: dict[str, Any]) -> str | None:
    """What makes `d` unusable as a run spec (the numbers summaries divide by), or None."""
    topo = d.get("topology")
    if not isinstance(topo, dict):
        return "no 'topology' object"
    for key in ("rate_mbit", "rtt_ms", "queue_limit_pkts", "mtu", "pairs", "loss_rate"):
        if key in topo and not (_is_num(topo[key]) and topo[key] >= 0):
            return f"topology.{key}: {topo[key]!r} is not a non-negative number"
    if "rate_mbit" in topo and not topo["rate_mbit"] > 0:
        return "topology.rate_mbit: must be above 0"
    flows = d.get("flows")
    if not isinstance(flows, list) or not flows:
        return "no 'flows' list"
    for i, f in enumerate(flows):
        if not isinstance(f, dict):
            return f"flows[{i}]: a JSON {jtype(f)} where an object belongs"
        for key in ("start_s", "duration_s", "pair", "streams"):
            if key in f and not (_is_num(f[key]) and f[key] >= 0):
                return f"flows[{i}].{key}: {f[key]!r} is not a non-negative number"
        if not (_is_num(f.get("duration_s", 10.0)) and f.get("duration_s", 10.0) > 0):
            return f"flows[{i}].duration_s: must be above 0"
        if not isinstance(f.get("cc"), str):
            return f"flows[{i}].cc: not a string"
    if not isinstance(d.get("extra", {}), dict):
        return "extra: not an object"
    for key in ("interval_s", "ss_interval_s", "probe_interval_s"):
        if key in d and not (_is_num(d[key]) and d[key] >= 0):
            return f"{key}: {d[key]!r} is not a non-negative number"
    return None


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


def _bottleneck(rd: RawDir) -> dict[str, Any]:
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


def _queue(rd: RawDir, spec: RunSpec, meta: dict[str, Any]) -> dict[str, Any] | None:
    """summary.json's `queue` from raw/qdisc-<node>.txt (parse.qdisc.queue_stats); None
    when sampling was off. A run made before queue sampling existed (no
    `qdisc_sampler` in meta.json) says so; a sampler file that is missing, not the
    sampler's format, or cut short is a problem like any damaged raw file."""
    from ccbench.parse.qdisc import QUEUE_HANDLE, parse_qdisc_samples, queue_points, queue_stats

    qs = meta.get("qdisc_sampler")
    if not isinstance(qs, dict):
        if spec.qdisc_interval_s > 0 and not rd.failed:
            why = "no queue samples: the run was made before ccbench sampled the queue"
            return {"sampled": False, "notes": [why]}
        return None
    name = f"qdisc-{qs.get('node', 'rt1')}.txt"
    text = rd.text(name, required=not rd.failed)
    if text is None:
        return {"sampled": False, "notes": [f"{name}: missing"]}
    try:
        pts = queue_points(parse_qdisc_samples(text))
    except ValueError as e:
        rd.problem(name, f"not qdisc samples ({e})")
        return {"sampled": False, "notes": [f"{name}: unreadable"]}
    t0 = meta.get("started_unix")
    if not pts or not isinstance(t0, (int, float)) or not _is_num(t0):
        if not rd.failed:
            rd.problem(name, "no samples of the bottleneck queue")
        return {"sampled": False, "notes": [f"{name}: no samples"]}
    counters = []
    for f in ("tc-before.json", "tc-after.json"):
        try:
            stats = parse_tc_qdisc_json(rd.text(f) or "")
        except ValueError:
            stats = []  # its own reason comes from _bottleneck
        counters.append(next((q for q in stats if q.handle == QUEUE_HANDLE), None))
    out = queue_stats(pts, float(t0), spec.traffic_s, spec.qdisc_interval_s,
                      spec.topology.frame_bytes, counters[0], counters[1])  # fmt: skip
    out["file"] = name
    if (out["last_s"] or 0) < QDISC_MIN_COVERAGE * spec.traffic_s and not rd.failed:
        rd.problem(name, f"samples end {out['last_s']:.1f} s into {spec.traffic_s:g} s of "
                         "traffic (cut short)")  # fmt: skip
    if not out["drops_check"]["consistent"]:
        rd.problem(name, out["drops_check"]["note"])
    return out


def _delay(rd: RawDir, needed: bool) -> dict[str, Any] | None:
    """The delay element's statistics over the run (after minus before); `needed`:
    the run's delay element writes them (ccdelay), so they must be there."""
    after = rd.json("delay-after.json", required=needed)
    before = rd.json("delay-before.json", required=needed)
    if after is None or (before is None and rd.exists("delay-before.json")):
        return None
    try:
        return _delay_between(before or {}, after)
    except (TypeError, ValueError, AttributeError) as e:
        rd.problem("delay-after.json", f"not ccdelay statistics ({type(e).__name__}: {e})")
        return None


def _delay_between(b: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    la, lb = after.get("lateness", {}), b.get("lateness", {})
    n = la.get("count", 0) - lb.get("count", 0)
    late = la.get("over_threshold", 0) - lb.get("over_threshold", 0)
    kq_a, kq_b = after.get("kernel_queue", {}), b.get("kernel_queue", {})
    cpu_a, cpu_b = after.get("cpu", {}), b.get("cpu", {})
    buckets = [
        x - y
        for x, y in zip(
            la.get("bucket_counts", []),
            lb.get("bucket_counts", [0] * len(la.get("bucket_counts", []))),
            strict=False,
        )
    ]
    if not all(_is_num(v) for v in (n, late, *buckets)):
        raise ValueError("lateness counters are not numbers")
    back = [k for k, v in (("lateness.count", n), ("lateness.over_threshold", late)) if v < 0]
    back += ["lateness.bucket_counts"] if any(v < 0 for v in buckets) else []
    if back:
        raise ValueError(f"{', '.join(back)} went backwards from delay-before.json")
    return {
        "packets": n,
        "late_5ms": late,
        "late_share": late / n if n else None,
        "max_late_ms_since_start": la.get("max_ms"),
        "bucket_edges_ms": la.get("bucket_edges_ms"),
        "bucket_counts": buckets,
        "queue_full_drops": max(
            0, (kq_a.get("queue_full_drops") or 0) - (kq_b.get("queue_full_drops") or 0)
        ),
        # Packets the element never saw (netlink socket overflow) or chose to drop.
        "lost": max(0, (after.get("id_gaps") or 0) - (b.get("id_gaps") or 0))
        + max(0, (after.get("packets_dropped_late") or 0) - (b.get("packets_dropped_late") or 0)),
        "cpu_s": (cpu_a.get("user_s", 0) + cpu_a.get("system_s", 0))
        - (cpu_b.get("user_s", 0) + cpu_b.get("system_s", 0)),
        "clock_source": after.get("clock_source"),
    }


def _ledger(rd: RawDir) -> dict[str, Any] | None:
    """The loss ledger (ccbench.ledger) from drops-before/after.json; None for runs
    recorded before ccbench took these snapshots."""
    if not (rd.exists("drops-before.json") or rd.exists("drops-after.json")):
        return None
    before = rd.json("drops-before.json", required=True)
    after = rd.json("drops-after.json", required=True)
    if before is None or after is None:
        return None
    try:
        return ledger.account(before, after)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        rd.problem("drops-after.json", f"drop counters unreadable ({e})")
        return None


def _ledger_reasons(
    led: dict[str, Any], flows: list[dict[str, Any]], bneck: dict[str, Any],
    delay: dict[str, Any] | None,
) -> list[str]:  # fmt: skip
    retx = [f["retransmits"] for f in flows]
    # tbf/htb count their child queue's drops in their own: the larger is the total.
    parts = [bneck.get(k, {}).get("dropped") for k in ("queue", "shaper") if k in bneck]
    bottleneck = max(parts) if parts and None not in parts else None
    delay_pkts = ((delay or {}).get("queue_full_drops") or 0) + ((delay or {}).get("lost") or 0)
    total_retx = sum(retx) if retx and None not in retx else None
    led["bottleneck_pkts"] = bottleneck
    led["retransmits"] = total_retx
    return ledger.check(led, bottleneck, delay_pkts, total_retx)


# A probe file that is not its tool's output: what its parser may raise.
_PROBE_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, OSError,
                 EOFError, zlib.error)  # fmt: skip


def _last_line(path: Path) -> str:
    """The last non-empty line of a small text file ('' if none or unreadable)."""
    try:
        lines = path.read_text(errors="replace")[-4096:].strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip()[:200] if lines else ""


def probe_record(rd: RawDir) -> dict[str, Any] | None:
    """RTT under load from the concurrent probe (ping, irtt or flent; ccbench.probe)."""
    try:
        p = read_probe(rd.path)
    except _PROBE_ERRORS as e:
        name = next((f for f in RAW_FILES.values() if rd.exists(f)), "probe")
        msg = f"{e}" if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        msg = msg.splitlines()[0] if msg.strip() else type(e).__name__
        err = _last_line(rd.path / "probe.err")
        if err:  # the tool's own words say why (e.g. "sh: 1: flent: not found")
            msg += f"; probe.err: {err}"
        rd.problem(name, f"unreadable ({msg})")
        return {"tool": "unreadable", "samples": 0, "error": f"{name}: {msg}"}
    if p is None:
        return None
    rtts = sorted(p.rtts_us)
    rec: dict[str, Any] = {"tool": p.tool, "what": p.what, "samples": len(rtts),
                           "sent": p.sent, "received": p.received, "raw": p.raw}  # fmt: skip
    # every sample in the order measured: the report's CDF reads them here, not raw/
    rec["samples_us"] = list(p.rtts_us)
    if p.series:
        rec["series"] = p.series
    if p.coverage is not None:
        rec["coverage"] = p.coverage
    if not rtts:
        return rec

    rec.update(rtt_p50_us=metrics.percentile(rtts, 50), rtt_p95_us=metrics.percentile(rtts, 95),
               rtt_p99_us=metrics.percentile(rtts, 99), rtt_max_us=rtts[-1])  # fmt: skip
    return rec


def _router_cpu(rd: RawDir) -> dict[str, Any] | None:
    """CPU use at the bottleneck router over the traffic, from two /proc/stat reads."""
    names = ("cpu-before.txt", "cpu-after.txt")
    if not any(rd.exists(n) for n in names):
        return None
    before, after = (rd.text(n, required=True) for n in names)
    if before is None or after is None:
        return None
    try:
        return usage_between(before, after)
    except ValueError as e:
        rd.problem("cpu-after.txt" if "backwards" in str(e) else "cpu-before.txt/cpu-after.txt",
                   str(e))  # fmt: skip
        return None


def _meta(rd: RawDir, n_flows: int) -> tuple[dict[str, Any], list[int | None]]:
    """meta.json (checked: the fields summaries and time series read have their types)
    and the clients' exit codes, one per flow."""
    meta = rd.json("meta.json", required=True) or {}
    rcs = meta.get("client_rc")
    if rcs is None:
        rcs = [None] * n_flows
    elif not (
        isinstance(rcs, list)
        and len(rcs) == n_flows
        and all(r is None or (isinstance(r, int) and not isinstance(r, bool)) for r in rcs)
    ):
        rd.problem("meta.json", f"client_rc is not a list of {n_flows} exit codes")
        rcs = [None] * n_flows
    t0 = meta.get("started_unix")
    if t0 is not None and not (_is_num(t0) and t0 > 0):
        rd.problem("meta.json", f"started_unix {t0!r} is not a time")
        meta = {**meta, "started_unix": None}
    flows = meta.get("flows", [])
    if not (
        isinstance(flows, list)
        and all(isinstance(m, dict) and _is_num(m.get("started_s")) for m in flows)
    ):
        rd.problem("meta.json", "flows is not a list of {flow, started_s} objects")
        meta = {**meta, "flows": []}
    if not isinstance(meta.get("probe_argv") or [], list):
        rd.problem("meta.json", "probe_argv is not a list")
    return meta, rcs


def _calibration(rd: RawDir) -> dict[str, Any] | None:
    """calibration.json; None when present but unreadable (a reason says so)."""
    if not rd.exists("calibration.json"):
        return {}
    cal = rd.json("calibration.json")
    if cal is None:
        return None
    probs = cal.get("problems", [])
    if not (isinstance(probs, list) and all(isinstance(p, str) for p in probs)):
        rd.problem("calibration.json", "problems is not a list of strings")
        return None
    if not isinstance(cal.get("rate") or {}, dict):
        rd.problem("calibration.json", "rate is not an object")
        return None
    if not isinstance(cal.get("delay_method") or "", str):
        rd.problem("calibration.json", "delay_method is not a string")
        return None
    return cal


def _sender_setup(rd: RawDir) -> list[str]:
    setup = rd.json("sender-setup.json") or {}
    reasons = []
    for node, rec in setup.items():
        if not (
            isinstance(rec, dict)
            and isinstance(rec.get("stack"), str)
            and isinstance(rec.get("problems", []), list)
        ):
            rd.problem("sender-setup.json", f"{node}: not a stack record")
            continue
        reasons += [f"{node}: stack {rec['stack']}: {p}" for p in rec.get("problems", [])]
    return reasons


# NIC record keys (emulab/lib-linux.sh record_nic) that name an offload -> short name.
NIC_OFFLOADS = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
                "generic-receive-offload": "gro", "large-receive-offload": "lro"}  # fmt: skip


def nic_records(nics: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """facts.json `nics` (node -> the records its start-up script wrote, one JSON object
    per line) -> (records, notes, problems). Each record keeps its keys plus `node`
    and `offloads` ({tso: "off", ...}); a note says where a TX ring asked for and the
    one the driver set differ ("rt1 eth5: TX ring 48 asked, 80 set: igb raised it:
    below its minimum")."""
    records: list[dict[str, Any]] = []
    notes: list[str] = []
    problems: list[str] = []
    for node, text in sorted(nics.items()):
        if not isinstance(text, str):
            problems.append(f"nics {node}: not the text of NIC records")
            continue
        for n, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line, parse_constant=_reject_constant)
            except ValueError as e:
                problems.append(f"nics {node}: line {n} is not a NIC record ({e})")
                continue
            if not isinstance(rec, dict) or not isinstance(rec.get("interface"), str):
                problems.append(f"nics {node}: line {n} is not a NIC record (no interface)")
                continue
            rec = {"node": node, **rec}
            rec["offloads"] = {s: rec[k] for k, s in NIC_OFFLOADS.items() if rec.get(k)}
            records.append(rec)
            asked, got = rec.get("tx_ring_asked"), rec.get("tx_ring_set")
            if (
                isinstance(asked, int)
                and not isinstance(asked, bool)
                and asked > 0
                and asked != got
            ):
                why = rec.get("tx_ring_note") or ""
                set_text = f"{got} set" if _is_num(got) else "the driver reports no ring size"
                notes.append(f"{node} {rec['interface']}: TX ring {asked} asked, {set_text}"
                             + (f": {why}" if why and _is_num(got) else ""))  # fmt: skip
    return records, notes, problems


def _nics(rd: RawDir) -> dict[str, Any] | None:
    """The NIC records of an SSH testbed's nodes from facts.json; None where there are
    none (local runs: veths; runs recorded before ccbench read them)."""
    if not rd.exists("facts.json"):
        return None
    facts = rd.json("facts.json")
    if facts is None or "nics" not in facts:
        return None
    if not isinstance(facts["nics"], dict):
        rd.problem("facts.json", "nics is not an object of node -> records")
        return None
    records, notes, problems = nic_records(facts["nics"])
    for p in problems:
        rd.problem("facts.json", p)
    return {"records": records, "notes": notes}


def _sockstat(rd: RawDir, spec: RunSpec, meta: dict[str, Any]) -> dict[str, Any] | None:
    """FreeBSD senders: each flow's connections as `sockstat -46 -CS -P tcp` listed them
    while the flow ran (meta.json `sockstat`, raw/sockstat-<k>.txt) -> {flows, reasons}:
    a connection on another TCP stack or CC than the variant asked makes the run invalid
    (validity.check_sockstat). None when no sample was planned (Linux senders)."""
    entries = meta.get("sockstat")
    if entries is None:
        return None
    variant = spec.extra.get("variant") or {}
    stack = variant.get("stack", "default") if isinstance(variant, dict) else "default"
    out: dict[str, Any] = {"flows": [], "reasons": []}
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        rd.problem("meta.json", "sockstat is not a list of samples")
        return out
    for e in entries:
        k, node, peer, name = e.get("flow"), e.get("node"), e.get("peer"), e.get("file")
        if not (isinstance(k, int) and 1 <= k <= len(spec.flows) and isinstance(node, str)
                and isinstance(peer, str) and isinstance(name, str)):  # fmt: skip
            rd.problem("meta.json", f"sockstat sample {e!r} is not a flow's sample")
            continue
        if e.get("at_s") is None:
            out["reasons"].append(f"flow {k}: no sockstat sample was taken while it ran")
            continue
        text = rd.text(name, required=True)
        if text is None:
            continue
        try:
            conns = connections_to(parse_sockstat(text), *_addr_port(peer))
        except ValueError as err:
            rd.problem(name, str(err))
            continue
        out["flows"].append({
            "flow": k, "node": node, "peer": peer, "at_s": e.get("at_s"), "raw": name,
            "connections": [{"local": c.local, "stack": c.stack, "cc": c.cc} for c in conns],
        })  # fmt: skip
        out["reasons"] += validity.check_sockstat(k, node, peer, conns, spec.flows[k - 1].cc,
                                                  stack)  # fmt: skip
    return out


def _addr_port(peer: str) -> tuple[str, int]:
    host, port = split_addr(peer)
    if not port.isdigit():
        raise ValueError(f"sockstat sample peer {peer!r} has no port")
    return host, int(port)


def _iperf3(rd: RawDir, k: int) -> tuple[Iperf3Result | None, bool]:
    """Flow k's iperf3 result; the flag says the file was there but unreadable (its
    reason is already recorded). An empty file is no output (the client died first)."""
    name = f"iperf3-{k}.json"
    if not rd.exists(name):
        return None, False
    text = rd.text(name)
    if text is None:
        return None, True
    if not text.strip():
        return None, False
    n = len(rd.problems)
    doc = rd.json(name)
    if len(rd.problems) > n:
        return None, True
    try:
        return parse_iperf3(doc), False
    except ValueError as e:
        rd.problem(name, str(e))
        return None, True


def summarize(raw: Path) -> dict[str, Any]:
    """summary.json's content for one raw/ directory (module docstring: the rule for
    damaged files). Raises CcbenchError only for spec.json."""
    spec = load_spec(raw)
    rd = RawDir(raw)
    skipped = _skipped_marker(rd, spec)
    if skipped is not None:
        return skipped
    meta, rcs = _meta(rd, len(spec.flows))
    cal = _calibration(rd)
    reasons = _run_failed(rd)
    delay_method = cal.get("delay_method") if cal else None
    delay = _delay(rd, needed=delay_method == "ccdelay")
    losses = _ledger(rd)
    held_cause = validity.hidden_queue_cause(losses, delay)
    flows, results, flow_reasons = _flows(rd, spec, rcs, held_cause)
    reasons += flow_reasons
    total = _throughput_sum(spec, flows)
    reasons += _sender_setup(rd)
    reasons += _calibration_reasons(rd, cal, delay, delay_method)
    bneck = _bottleneck(rd)
    reasons += validity.check_bottleneck_config(spec, bneck.get("configured"))
    queue = _queue(rd, spec, meta)
    if losses is not None:
        reasons += _ledger_reasons(losses, flows, bneck, delay)
    probe = probe_record(rd)
    if meta.get("probe_argv") and not (probe and probe.get("tool") == "unreadable"):
        reasons += validity.check_probe(probe, spec.probe_tool)
    util = metrics.utilization_pct(total, spec.topology.rate_bps) if total is not None else None
    reasons += validity.check_plausibility(spec, results, util, bneck)
    router_cpu = _router_cpu(rd)
    socks = _sockstat(rd, spec, meta)
    if socks is not None:
        reasons += socks.pop("reasons")
    nics = _nics(rd)  # provenance: facts.json is checked to be an object here
    kern, kern_reasons = _kernel(rd, spec)
    reasons += kern_reasons
    reasons += rd.problems
    return {
        **_header(spec),
        "started_unix": meta.get("started_unix"),
        "recorded": recorded(rd.path),
        "flows": flows,
        "throughput_sum_bps": total,
        "utilization_pct": util,
        "jain": _jain(flows),
        "bottleneck": bneck,
        **({"queue": queue} if queue is not None else {}),
        "delay_element": delay,
        **({"loss_ledger": losses} if losses is not None else {}),
        **({"sockstat": socks} if socks is not None else {}),
        **({"nics": nics["records"], "nic_notes": nics["notes"]} if nics is not None else {}),
        **({"kernel": kern} if kern is not None else {}),
        "probe": probe,
        "router_cpu": router_cpu,
        "calibration": _calibration_record(cal),
        "valid": not reasons,
        "reasons": reasons,
    }


def _skipped_marker(rd: RawDir, spec: RunSpec) -> dict[str, Any] | None:
    """The summary of a run recorded as not run (raw/skipped.json with its reason), else
    None; a skipped.json without a reason string is a problem of a run summarized as run."""
    if not rd.exists("skipped.json"):
        return None
    skipped = rd.json("skipped.json")
    if skipped and isinstance(skipped.get("reason"), str):
        return _skipped(spec, skipped["reason"], skipped.get("waiting"))
    if skipped is not None:
        rd.problem("skipped.json", "no reason string")
    return None


def _run_failed(rd: RawDir) -> list[str]:
    """The run's own failure (raw/error.txt) as its first reason."""
    if not rd.failed:
        return []
    err = (rd.path / "error.txt").read_bytes().decode("utf-8", "replace").strip()
    return [f"run failed: {err}"]


def _flows(
    rd: RawDir, spec: RunSpec, rcs: list[int | None], held_cause: str | None
) -> tuple[list[dict[str, Any]], list[Iperf3Result | None], list[str]]:
    """Each flow's summary record and iperf3 result (None: no usable output), and the
    reasons its checks give (validity.check_flow)."""
    flows: list[dict[str, Any]] = []
    results: list[Iperf3Result | None] = []
    reasons: list[str] = []
    for k, f in enumerate(spec.flows, start=1):
        res, unreadable = _iperf3(rd, k)
        results.append(res)
        if not unreadable:  # else the file's own reason says it
            reasons += validity.check_flow(k, spec, res, rcs[k - 1], _stack_cc(spec, f.cc),
                                           held_cause)  # fmt: skip
        flows.append(_flow_record(k, f, res))
    return flows, results, reasons


def _stack_cc(spec: RunSpec, cc: str) -> bool:
    """The flow's CC is the TCP stack's own (FreeBSD tcp_bbr), not a socket option."""
    variant = spec.extra.get("variant") or {}
    return isinstance(variant, dict) and (
        variant.get("os") == "freebsd" and (cc == "bbr" or variant.get("stack") == "bbr")
    )


def _flow_record(k: int, f: Flow, res: Iperf3Result | None) -> dict[str, Any]:
    return {
        "flow": k,
        "pair": f.pair,
        "cc_requested": f.cc,
        "cc_used": res.cc_sender if res else None,
        "start_s": f.start_s,
        "duration_s": f.duration_s,
        "streams": f.streams,
        "throughput_bps": res.throughput_bps if res and not res.error else None,
        "sender_throughput_bps": res.sender_bps if res else None,
        "bytes_received": res.bytes_received if res else None,
        "retransmits": res.retransmits if res else None,
        "rtt_min_us": res.min_rtt_us if res else None,
        "rtt_mean_us": res.mean_rtt_us if res else None,
        "rtt_max_us": res.max_rtt_us if res else None,
        "max_cwnd_bytes": res.max_snd_cwnd_bytes if res else None,
        "raw": f"iperf3-{k}.json",
    }


def _throughput_sum(spec: RunSpec, flows: list[dict[str, Any]]) -> float | None:
    """The flows' aggregate rate; None unless every flow has its throughput."""
    if not all(f["throughput_bps"] is not None for f in flows):
        return None
    # Aggregate rate = all bytes delivered over the whole traffic window, so staggered
    # flows are not double-counted (summing their mean rates would be).
    window_s = spec.traffic_s - min(f.start_s for f in spec.flows)
    return sum(f["bytes_received"] or 0 for f in flows) * 8 / window_s


def _jain(flows: list[dict[str, Any]]) -> float | None:
    """Jain's index of the flows' throughputs; None unless every flow has one (>= 0)."""
    tputs: list[float | None] = [f["throughput_bps"] for f in flows]
    ok = [t for t in tputs if t is not None]
    complete = all(t is not None for t in tputs)
    return metrics.jain(ok) if complete and min(ok) >= 0 else None


def _calibration_reasons(
    rd: RawDir, cal: dict[str, Any] | None, delay: dict[str, Any] | None, delay_method: str | None
) -> list[str]:
    """The testbed calibration's checks and the delay element's (which needs the
    calibration's delay method)."""
    if cal is None:  # calibration.json's own reason says it
        return []
    reasons = list(validity.check_calibration(cal))
    # Without statistics because a delay file is missing or damaged: its reason says it.
    if delay is not None or not any(r.startswith("delay-") for r in rd.problems):
        reasons += validity.check_delay(delay, delay_method)
    return reasons


def _calibration_record(cal: dict[str, Any] | None) -> dict[str, Any]:
    cal = cal or {}
    return {
        "delay_method": cal.get("delay_method"),
        # where the RTT sat: both ways (RTT/2 each; older calibrations) or reverse
        "delay_direction": cal.get("delay_direction") or "both",
        "idle_rtt": cal.get("idle_rtt"),
        "rate_ratio": (cal.get("rate") or {}).get("ratio"),
    }


def _rtt_excess(raw: Path, df: Any) -> dict[str, Any] | None:
    """Share of RTT samples (sender srtt from ss/siftr, the probe's) above what the
    configured path can give; None for AQM queues (no fixed bound) or no samples."""
    from ccbench.timeseries import SENDER_SOURCES

    spec = load_spec(raw)
    full = spec.topology.full_queue_ms
    if full is None:
        return None
    timed: dict[str, list[tuple[float, float]]] = {}
    if len(df):
        rows = df[df["source"].isin(SENDER_SOURCES)].dropna(subset=["rtt_us"])
        for flow, g in rows.groupby("flow"):
            timed[f"flow {flow}"] = list(zip(g["t_s"], g["rtt_us"], strict=True))
    try:
        pr = read_probe(raw)
    except Exception:  # an unreadable probe is its own reason (summarize)
        pr = None
    untimed = list(pr.rtts_us) if pr else []
    ex = metrics.rtt_excess(spec.topology.rtt_ms + full + validity.HIDDEN_QUEUE_MS, timed,
                            untimed)  # fmt: skip
    return ex if ex["samples"] else None


JAIN_CONVERGED = 0.95  # fairness threshold for convergence_s
JAIN_WINDOW_S = 2.0  # ... held for this long


def run_metrics(s: dict[str, Any], df: pd.DataFrame | None) -> dict[str, Any]:
    """summary.json's `srtt`, `convergence_s` and `mathis` from summary `s` and its time
    series `df` (timeseries.parquet's rows; None: the run has none). The one computation
    of them: parse_run_dir stores them, and aggregate calls this for a summary.json
    written before they existed.

    - srtt: mean, p95 and max of the sender's RTT samples from the finest source
      (timeseries.finest_source); None without samples.
    - convergence_s: seconds from the last flow's start until Jain's index over iperf3
      intervals (timeseries.jain_series) reaches JAIN_CONVERGED and stays there for
      JAIN_WINDOW_S; None with one flow, or never.
    - mathis: the Mathis et al. throughput per flow for the configured MSS, RTT and
      loss, and the measured sum over it times the flows; None without configured loss.
    """
    from ccbench import timeseries

    flows = s["flows"]
    srtt = conv = None
    if df is not None:
        src = timeseries.finest_source(df)
        rtts = df.loc[(df["source"] == src) & df["rtt_us"].notna(), "rtt_us"].tolist()
        if rtts:
            st = metrics.srtt_stats(rtts)
            srtt = {"source": src, "samples": len(rtts), "mean_us": st.mean_us,
                    "p95_us": st.p95_us, "max_us": st.max_us}  # fmt: skip
        if len(flows) > 1:
            times, jains = timeseries.jain_series(df, flows, s["spec"]["interval_s"])
            if times:
                conv = metrics.convergence_time_s(times, jains, JAIN_CONVERGED, JAIN_WINDOW_S)
    tb = s["spec"]["topology"]
    mathis = None
    if tb["loss_mode"] != "none" and tb["loss_rate"] > 0 and tb["rtt_ms"] > 0:
        mss = Topology(**tb).mss_bytes
        per_flow = metrics.mathis_bps(mss, tb["rtt_ms"] / 1e3, tb["loss_rate"]) / 1e6
        total = s["throughput_sum_bps"]
        ratio = None if total is None else float(total) / 1e6 / (per_flow * len(flows))
        mathis = {"mbps_per_flow": per_flow, "ratio": ratio}
    return {"srtt": srtt, "convergence_s": conv, "mathis": mathis}


def recorded(raw: Path) -> dict[str, Any]:
    """What the report's provenance shows, copied from raw/ as the run recorded it (the
    testbed's calibration, the hosts' facts, the qdisc configuration), so the report reads
    only summary.json, a declared output of `parse`. None where a file is missing or not
    JSON; their checks are summarize's (calibration, facts) and the reasons say so."""

    def load(name: str) -> Any:
        try:
            return json.loads((raw / name).read_text())
        except (OSError, ValueError):
            return None

    try:
        qdisc = (raw / "qdisc-config.txt").read_text(errors="replace").splitlines()
    except OSError:
        qdisc = None
    return {"calibration": load("calibration.json"), "facts": load("facts.json"),
            "qdisc_config": qdisc}  # fmt: skip


def judge(raw: Path) -> tuple[dict[str, Any], Any]:
    """The whole verdict on one run's raw/: summarize, then what only the time series
    shows (sampler files cut short or unparsable, RTT samples above what the path can
    give), then the per-run metrics. The one place a run is found valid or not: `ccbench
    run` retries on it and `parse` writes it, so attempts.json and summary.json agree.
    Returns the summary and the time series (a DataFrame)."""
    from ccbench import timeseries

    s = summarize(raw)
    df, problems = timeseries.build_checked(raw)
    if not s.get("skipped"):
        s["rtt_excess"] = _rtt_excess(raw, df)
        problems += validity.check_rtt_excess(s["rtt_excess"])
    # Skipped runs too: the Mathis prediction is the configuration's.
    s.update(run_metrics(s, df))
    new = [p for p in problems if p not in s["reasons"]]
    if new and not s.get("skipped"):
        s["reasons"] = s["reasons"] + new
        s["valid"] = False
    return s, df


def parse_run_dir(run_dir: Path) -> dict[str, Any]:
    """`ccbench parse RUN_DIR`: raw/ -> summary.json and timeseries.parquet; returns the
    summary. Both are written to temporary names and renamed only when both are
    complete, the summary last, so a summary.json never exists without the time series
    it goes with. Problems the time series finds in sampler files (ss, siftr) are
    reasons too. CcbenchError (one line) only when RUN_DIR is not a run directory or
    its raw/spec.json is unusable (see the module docstring)."""
    raw = run_dir / "raw"
    if not (raw / "spec.json").exists():
        raise CcbenchError(f"{run_dir}: not a run directory (no raw/spec.json)")
    s, df = judge(raw)
    att = run_dir / "attempts.json"
    if att.exists():
        try:
            s["attempt"] = len(json.loads(att.read_text())["attempts"])
        except (OSError, ValueError, KeyError, TypeError):
            s["reasons"].append("attempts.json: unreadable (not the run's attempt list)")
            s["valid"] = False
    ts_out, sum_out = run_dir / "timeseries.parquet", run_dir / "summary.json"
    ts_tmp = ts_out.with_name(ts_out.name + ".tmp")
    sum_tmp = sum_out.with_name(sum_out.name + ".tmp")
    try:
        df.to_parquet(ts_tmp, index=False)
        sum_tmp.write_text(json.dumps(_clean(s), indent=2, allow_nan=False))
        ts_tmp.replace(ts_out)
        sum_tmp.replace(sum_out)
    except OSError as e:
        raise CcbenchError(f"{run_dir}: cannot write its outputs ({e.strerror or e})") from None
    finally:
        for tmp in (ts_tmp, sum_tmp):
            tmp.unlink(missing_ok=True)
    return s


def _header(spec: RunSpec) -> dict[str, Any]:
    return {
        "schema": "ccbench.summary/1",
        "run_id": spec.run_id,
        "scenario": spec.scenario,
        "variant": spec.variant,
        "repetition": spec.repetition,
        "spec": spec.to_dict(),
    }


def _kernel(rd: RawDir, spec: RunSpec) -> tuple[dict[str, Any] | None, list[str]]:
    """Every sender's kernel identity (facts.json) and, when the variant names the
    kernel it needs (kernel.json: {label, match}), a reason per sender that does not
    run it. A damaged facts.json is _nics' reason, not repeated here."""
    req = rd.json("kernel.json") if rd.exists("kernel.json") else None
    if req is not None and not (isinstance(req.get("label"), str)
                                and isinstance(req.get("match"), str)):  # fmt: skip
        rd.problem("kernel.json", "not a {label, match} requirement")
        req = None
    try:
        facts = json.loads((rd.path / "facts.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        facts = None
    variant = spec.extra.get("variant") or {}
    label = variant.get("kernel", "") if isinstance(variant, dict) else ""
    try:
        return kernel.summary(facts, req, spec.variant, label if isinstance(label, str) else "")
    except re.error as e:
        rd.problem("kernel.json", f"match is not a regular expression ({e})")
        return None, []


def _skipped(spec: RunSpec, reason: str, waiting: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        **_header(spec),
        "started_unix": None,
        "flows": [
            {
                "flow": k,
                "pair": f.pair,
                "cc_requested": f.cc,
                "cc_used": None,
                "start_s": f.start_s,
                "duration_s": f.duration_s,
                "streams": f.streams,
                "throughput_bps": None,
                "sender_throughput_bps": None,
                "bytes_received": None,
                "retransmits": None,
                "rtt_min_us": None,
                "rtt_mean_us": None,
                "rtt_max_us": None,
                "max_cwnd_bytes": None,
                "raw": None,
            }
            for k, f in enumerate(spec.flows, start=1)
        ],  # fmt: skip
        "throughput_sum_bps": None,
        "utilization_pct": None,
        "jain": None,
        "bottleneck": {"drops": None},
        "delay_element": None,
        "probe": None,
        "calibration": {},
        "valid": False,
        "skipped": True,
        # Waiting for the kernel its variant needs (the senders run another one now).
        **({"waiting": waiting} if isinstance(waiting, dict) else {}),
        "reasons": [f"skipped: {reason}"],
    }
