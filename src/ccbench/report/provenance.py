"""The appendix: where every number came from.

Testbed calibration and the bottleneck as read back, host facts and tool versions,
the matrix hash, the planned and executed run order and each run's raw directory.
All of it is read from the runs' raw/ files, not from the config.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from ccbench import topology
from ccbench.errors import CcbenchError
from ccbench.model import Matrix
from ccbench.report import data
from ccbench.report.fmt import as_float, fmt
from ccbench.roles import DELAY_NODE
from ccbench.summarize.hosts import tx_queues_in_use

# Facts that change on every run by nature; grouping them per variant says nothing.
VOLATILE_HOST_FACTS = {"loadavg"}


def matrix_sha256(matrix: Matrix) -> str:
    """sha256 of the matrix as canonical JSON (sorted keys, no whitespace), so the
    same matrix hashes the same whatever indentation the file on disk has."""
    canon = json.dumps(matrix.to_dict(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canon.encode()).hexdigest()


def utc(ts: object) -> str:
    t = as_float(ts)
    if t is None or t != t:  # NaN
        return "n/a"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def raw_dir(runs_dir: Path, run_id: str) -> Path:
    return runs_dir / run_id / "raw"


def _qdisc_text(q: dict[str, Any]) -> str:
    opts = q.get("options") or {}
    parts = []
    for k, v in opts.items():
        # tc's JSON gives rates in bytes/s: say it in the unit of the config too.
        parts.append(
            f"{k} {v} B/s (= {fmt(float(v) * 8 / 1e6)} Mbit/s)" if k == "rate" else f"{k} {v}"
        )
    where = "root" if q.get("root") else f"parent {q.get('parent', '?')}"
    return f"{q.get('kind', '?')} {q.get('handle', '')} ({where}): {', '.join(parts)}"


def _offloads_text(off: dict[str, dict[str, str]]) -> str:
    if not off:
        return "not recorded"
    vals = Counter(f"{k} {v}" for dev in off.values() for k, v in sorted(dev.items()))
    per_dev = len(off)
    if all(n == per_dev for n in vals.values()):
        return f"{', '.join(sorted(vals))} on all {per_dev} interfaces"
    return "; ".join(
        f"{d}: " + ", ".join(f"{k} {v}" for k, v in sorted(o.items())) for d, o in off.items()
    )


def _calibration(cal: dict[str, Any], n_runs: int) -> dict[str, Any]:
    rate = cal.get("rate") or {}
    idle = [
        {
            "pair": p,
            "median": fmt(r.get("median_ms"), 3),
            "min": fmt(r.get("min_ms"), 3),
            "max": fmt(r.get("max_ms"), 3),
            "recv": f"{r.get('received', '?')}/{r.get('sent', '?')}",
        }
        for p, r in sorted((cal.get("idle_rtt") or {}).items())
    ]
    bn = cal.get("bottleneck") or {}
    return {
        "time": utc(cal.get("time")),
        "n_runs": n_runs,
        "delay_method": cal.get("delay_method", "n/a"),
        # where the RTT sat (testbed.delay_direction; calibrations before it: both ways)
        "delay_where": (
            "the whole RTT on the path r → s (ACKs), none on the data path"
            if cal.get("delay_direction") == "reverse"
            else "RTT/2 on each direction"
        ),
        "layout": _layout_text(cal),
        "rtt_configured": fmt(cal.get("rtt_configured_ms")),
        "idle_rtt": idle,
        "rate_ratio": fmt(rate.get("ratio", cal.get("rate_ratio")), 3),
        "rate_measured": fmt((rate.get("measured_goodput_bps") or float("nan")) / 1e6),
        "rate_expected": fmt((rate.get("expected_goodput_bps") or float("nan")) / 1e6),
        "bottleneck": [_qdisc_text(q) for q in bn.values() if isinstance(q, dict)],
        "offloads": _offloads_text(cal.get("offloads") or {}),
        "delay_node": _delay_node_text(cal.get("delay_node")),
        "problems": list(cal.get("problems") or []),
    }


def _layout_text(cal: dict[str, Any]) -> str:
    """The local dumbbell's layout as built; "" where the calibration names none (SSH
    testbeds, local ones calibrated before layouts existed)."""
    name = cal.get("layout")
    if not isinstance(name, str):
        return ""
    try:
        return f"{name}: {topology.layout(name).description}"
    except CcbenchError:
        return name


def _delay_node_text(dl: Any) -> str:
    """What `testbed up` read on the SSH testbed's delay node (ccbench.delaynode); ""
    where there is none (local testbeds)."""
    if not isinstance(dl, dict):
        return ""
    if dl.get("configuration") != "read":
        return (f"{dl.get('node', DELAY_NODE)}: {dl.get('configuration')} ({dl.get('why', '')}); "
                "its dummynet counters could not be read for these runs either")  # fmt: skip
    pipes = ", ".join(f"pipe {p.get('number')} {p.get('bandwidth')} {p.get('delay_ms')} ms"
                      for p in dl.get("pipes") or [] if isinstance(p, dict))  # fmt: skip
    return f"{dl.get('node', DELAY_NODE)}: kern.hz {dl.get('kern_hz')}, {pipes}: as asked"


def _nic_row(rec: dict[str, Any]) -> dict[str, str]:
    asked, got = rec.get("tx_ring_asked"), rec.get("tx_ring_set")
    ring = "n/a" if got is None else str(got)
    if asked:
        ring = f"{asked} asked, {ring} set"
    elif got is not None:
        ring += " (driver default)"
    ring += _queues_text(rec)
    off = rec.get("offloads") or {}
    speed = rec.get("speed_mbps")
    return {
        "node": str(rec.get("node", "?")),
        "interface": str(rec.get("interface", "?")),
        # FreeBSD records name the media instead of a speed (emulab/setup-freebsd-sender.sh).
        "driver": " ".join(str(rec[k]) for k in ("driver", "driver_version") if rec.get(k))
        or "n/a",
        "speed": f"{speed} Mbit/s" if speed is not None else str(rec.get("media") or "n/a"),
        "tx_ring": ring,
        "offloads": ", ".join(f"{k} {v}" for k, v in off.items())
        or str(rec.get("options") or "n/a"),
    }


def _queues_text(rec: dict[str, Any]) -> str:
    """ "; 1 TX queue (combined 1 of 8)": the transmit queues the interface used and the
    channel counts behind them; "" for records made before they were recorded."""
    n = tx_queues_in_use(rec)
    if n is None:
        return ""
    text = f"; {n} TX queue{'s' if n != 1 else ''}"
    ch = rec.get("channels")
    if isinstance(ch, dict):
        cur, top = ch.get("current") or {}, ch.get("max") or {}
        parts = [f"{k} {cur[k]} of {top.get(k)}" for k in ("combined", "tx") if cur.get(k)]
        text += f" ({', '.join(parts)})" if parts else ""
    return text


def nics(kind: str, rids: list[str], runs_dir: Path) -> dict[str, Any]:
    """A testbed's NICs as its runs' summary.json recorded them (SSH testbeds: the
    start-up scripts' records, read each run): the first run's records, and every note
    where a TX ring asked for and the one set differ, with how many runs said so.
    A kind without NICs (local namespaces: veths) says so and nothing is invented."""
    from ccbench.testbed.kinds import kind as testbed_kind

    k = testbed_kind(kind)
    if not k.caps.nic_records:
        return {"text": f"{k.description}: veths, no NICs, nothing to record",
                "rows": [], "notes": []}  # fmt: skip
    rows: list[dict[str, str]] = []
    notes: Counter[str] = Counter()
    n = 0
    for rid in rids:
        s = data.run_summary(runs_dir, rid)
        if s is None or s.nics is None:
            continue
        n += 1
        if not rows:
            rows = [_nic_row(r) for r in s.nics]
        notes.update(s.nic_notes or [])
    shown = [t if c == n else f"{t} (in {c} of {n} runs)" for t, c in notes.items()]
    text = "" if n else "not recorded (no run recorded NIC records)"
    return {"text": text, "rows": rows, "notes": shown}


def testbeds(matrix: Matrix, runs: pd.DataFrame, runs_dir: Path) -> list[dict[str, Any]]:
    """Per testbed: its config, the scenarios on it and each distinct calibration its
    runs recorded (normally one; a rebuilt testbed shows up as a second)."""
    out = []
    by_tb: dict[str, list[str]] = {}
    for rid in runs.sort_values("order")["run_id"]:
        planned = matrix.runs.get(rid)
        by_tb.setdefault(planned.testbed_id if planned else "?", []).append(str(rid))
    for tb_id, tb in matrix.testbeds.items():
        rids = by_tb.get(tb_id, [])
        cals: dict[str, tuple[dict[str, Any], int]] = {}
        for rid in rids:
            rec = data.recorded(runs_dir, rid)
            cal = rec.calibration if rec else None
            if isinstance(cal, dict):
                key = json.dumps(cal, sort_keys=True)
                c, n = cals.get(key, (cal, 0))
                cals[key] = (c, n + 1)
        qdisc = []
        if rids:
            rec = data.recorded(runs_dir, rids[0])
            lines = (rec.qdisc_config if rec else None) or []
            qdisc = [ln for ln in lines if ln and "noqueue" not in ln]
        t = tb.topology_config
        q = t.get("queue", {})
        qtxt = " ".join(f"{k} {v}" for k, v in q.items())
        loss = t.get("loss", {})
        scen = sorted({r.scenario for r in matrix.runs_of_testbed(tb_id)})
        cfg = tb.testbed.to_dict()
        out.append(
            {
                "id": tb_id,
                "config": ", ".join(f"{k} {cfg[k]}" for k in sorted(cfg) if k != "id"),
                "topology": (
                    f"{t.get('pairs', '?')} pairs, {t.get('rate_mbit', '?')} Mbit/s, "
                    f"RTT {t.get('rtt_ms', '?')} ms, MTU {t.get('mtu', '?')}, queue {qtxt}, "
                    f"loss {loss.get('mode', 'none')} {loss.get('rate', 0)}"
                ),
                "scenarios": ", ".join(scen),
                "n_runs": len(rids),
                "calibrations": [_calibration(c, n) for c, n in cals.values()],
                "qdisc_config": qdisc,
                "nics": nics(tb.kind, rids, runs_dir),
            }
        )
    return out


def _flatten(role: str, obj: dict[str, Any], out: dict[str, Any]) -> None:
    # facts.json nests roles (host, senders -> s1, ...): "senders s1" becomes one role.
    for k, v in obj.items():
        if isinstance(v, dict):
            _flatten(f"{role} {k}".strip(), v, out)
        else:
            out[f"{role or 'general'}\0{k}"] = v


def _facts_by_run(runs: pd.DataFrame, runs_dir: Path) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for _, r in runs.sort_values("order").iterrows():
        rec = data.recorded(runs_dir, str(r["run_id"]))
        f = rec.facts if rec else None
        if isinstance(f, dict):
            f.pop("nics", None)  # NIC records: their own table (testbeds(), nics())
            flat: dict[str, Any] = {}
            _flatten("", f, flat)
            out.append((str(r["run_id"]), str(r["variant"]), flat))
    return out


def facts(runs: pd.DataFrame, runs_dir: Path) -> list[dict[str, Any]]:
    """Host and sender facts (uname, sysctls, tool versions) per role. A value the same
    in every run is shown once; one that differs only between variants is shown per
    variant; anything else says how many values there were."""
    per_run = _facts_by_run(runs, runs_dir)
    keys: list[str] = []
    for _, _, f in per_run:
        keys += [k for k in f if k not in keys]
    roles: dict[str, list[dict[str, Any]]] = {}
    for key in keys:
        role, name = key.split("\0", 1)
        vals = [(var, str(f.get(key, "(not recorded)"))) for _, var, f in per_run]
        distinct = sorted({v for _, v in vals})
        by_var: dict[str, set[str]] = {}
        for var, v in vals:
            by_var.setdefault(var, set()).add(v)
        if len(distinct) == 1:
            lines = [distinct[0]]
        elif name not in VOLATILE_HOST_FACTS and all(len(s) == 1 for s in by_var.values()):
            lines = [f"{var}: {next(iter(s))}" for var, s in by_var.items()]
        else:
            lines = [f"varies between runs ({len(distinct)} values; see each run's raw/facts.json)"]
        roles.setdefault(role, []).append({"key": name, "lines": lines})
    return [{"role": r, "items": items} for r, items in roles.items()]


def tool_versions(runs: pd.DataFrame, runs_dir: Path) -> list[tuple[str, str]]:
    """Kernel and tool versions per role (first line of each), most common value first."""
    per_run = _facts_by_run(runs, runs_dir)
    wanted = {"uname": "kernel", "iperf3": "iperf3", "tc": "tc", "ss": "ss", "python": "python"}
    found: dict[tuple[str, str], Counter[str]] = {}
    for _, _, f in per_run:
        for key, v in f.items():
            role, name = key.split("\0", 1)
            if name in wanted and v:
                found.setdefault((role, name), Counter())[str(v).splitlines()[0]] += 1
    out = []
    for (role, name), vals in found.items():
        v, n = vals.most_common(1)[0]
        label = f"{wanted[name]} ({role})" if role != "general" else wanted[name]
        extra = "" if n == len(per_run) else f" (in {n} of {len(per_run)} runs)"
        out.append((label, v + extra))
    return out


def run_order(matrix: Matrix, runs: pd.DataFrame, runs_dir: Path) -> list[dict[str, str]]:
    """Every planned run in planned (seeded random) order with its executed position,
    start time, status and raw directory; runs that never produced a result say so."""
    done = runs.set_index("run_id")
    kernel_waits = data.waits_for_kernel(done)
    planned = list(matrix.order)
    extra = [r for r in runs.sort_values("order")["run_id"] if r not in set(planned)]
    rows = []
    for i, rid in enumerate(planned + extra, 1):
        spec = matrix.runs.get(rid)
        row = {
            "planned": str(i) if rid in planned else "-",
            "run_id": rid,
            "scenario": spec.scenario if spec else "",
            "variant": spec.variant if spec else "",
            "executed": "-",
            "started": "-",
            "attempt": "-",
            "status": "missing",
            # Relative to the results directory: the report says nothing about where the
            # measuring machine kept it (a results set is carried and extended elsewhere).
            "raw": f"runs/{rid}/raw",
        }
        if rid in done.index:
            r = done.loc[rid]
            skipped = bool(r.get("skipped", False))
            status = "not run" if skipped else "valid" if r["valid"] else "invalid"
            if rid in kernel_waits.index:
                status = "waiting for kernel" if kernel_waits[rid] else "waiting for boot tunables"
            row.update(
                executed="-" if skipped else str(r["order"]),
                started=utc(r["started_unix"]),
                attempt="-" if skipped else str(r["attempt"]),
                status=status,
                scenario=str(r["scenario"]),
                variant=str(r["variant"]),
            )
        rows.append(row)
    return rows
