#!/usr/bin/env python3
"""Seed scale: what one seed-001-sized run's raw data costs to fetch, parse, aggregate
and report.

    sudo .venv/bin/python bench/seed_scale.py [--durations 30,300,3000] [--ppl 4,budget]
                                              [--mgmt-mbit 100] [--quick] [--keep]

For each traffic duration and siftr ppl (`budget`: the ppl ccbench.hosts.siftr_plan's
choose_ppl picks for that rate x duration under the default siftr_budget_mb, as
the siftr instrument's start does; printed) it makes, ON a node behind a real sshd (one
network namespace, bench/sshnode.py, its management link shaped with tbf to
--mgmt-mbit), the raw streams of a run of 2 flows sharing 1 Gbit/s at 40 ms RTT
(bench/streams.py, format-true, written to the node's disk as made): siftr 1.3 per
sender at that ppl, ss every 0.1 s per sender, the bottleneck qdisc every 50 ms,
iperf3 `-i 1` JSON per flow, an fping probe every 0.1 s. Then:
- fetch: every file with SshExecutor.get (streamed, gzip on the node when >= 1 MiB,
  checked), one after another, as the siftr instrument's collect fetches a siftr log;
- parse: `ccbench parse` (a child process: wall time, peak RSS from wait4, address
  space capped at --parse-mem-gb so a parser that does not stream fails instead of
  taking the machine) on a run directory made of a real run's raw/
  (tests/fixtures/results-small, BASE) with spec.json/meta.json for this scale and the
  fetched files as they arrived (.gz read directly); one directory per stream (BASE +
  the iperf3 JSON, which maps sockets to flows, + that stream) and one with everything
  (the run), whose spec is the one `ccbench matrix` gives a seed-scale config;
- aggregate, verdicts, figures, report: the workflow's commands on that run.
Everything of a scale is removed before the next (the node's files as they are fetched).

Targets (issue 20, on this 2-vCPU machine): parse peak RSS of one run <= 400 MB, parse
wall <= 5 % of the traffic time, fetch of the run's raw data over 100 Mbit/s <= 10 %.
It prints first what the parse runs on (bench/backends.py: the interpreter and its
build, pyarrow, pandas, numpy, zlib, the CPU), as a child interpreter sees them.
Takes the machine lock (/tmp/ccbench-ns.lock) itself for each scale, so others get in
between scales (--no-lock when the caller holds it). Run as root.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import backends  # noqa: E402
from bench.sshnode import SshNode, ssh_node  # noqa: E402
from bench.streams import T0, flow_ends, qdisc_stats  # noqa: E402
from ccbench.fetch import Fetched  # noqa: E402
from ccbench.hosts.siftr_plan import RECORD_BYTES, SiftrPlan, choose_ppl  # noqa: E402

BASE = REPO / "tests/fixtures/results-small/runs/two-flows-cubic-r1-71654894/raw"
BASE_FILES = ("delay-after.json", "delay-before.json", "facts.json", "server-1.txt",
              "server-2.txt", "iperf3-1.err", "iperf3-2.err", "ss-s1.err", "ss-s2.err")  # fmt: skip
LOCK = "/tmp/ccbench-ns.lock"
NS = "ccb-seedscale-n1"
RATE_MBIT, FLOWS = 1000.0, 2
TARGET_RSS_MB, TARGET_PARSE_PCT, TARGET_FETCH_PCT = 400.0, 5.0, 10.0
# stream -> the raw files of a run (local name, as the readers look for them), per flow
STREAMS = {
    "iperf3": [(f"iperf3-{k}.json", "iperf3", k) for k in (1, 2)],
    "ss": [(f"ss-s{k}.txt", "ss", k) for k in (1, 2)],
    "qdisc": [("qdisc-rt1.txt", "qdisc", 1)],
    "fping": [("probe-fping.txt", "fping", 1)],
    "siftr": [(f"siftr-s{k}.log", "siftr", k) for k in (1, 2)],
}
# A seed-001-sized comparison of one run (`ccbench matrix` gives its spec and run id).
CONFIG = """title: ccbench seed scale
question: What does one seed-001-sized run cost to fetch, parse, aggregate and report?
report_name: seed-scale
results_dir: results
testbed: {kind: local}
topology: {pairs: 2, rate_mbit: 1000, rtt_ms: 40}
scenarios:
  seed-scale:
    description: 2 flows sharing 1 Gbit/s at 40 ms, a 48-packet pfifo (seed 001)
    flows: 2
    topology: {queue: {kind: pfifo, limit_pkts: 48}}
variants:
  - {label: cubic, cc: cubic, baseline: true}
repetitions: 1
duration_s: %g
interval_s: 1
probe_tool: fping
attempts: 1
seed: 1
"""


@dataclass
class Row:
    stream: str
    node_bytes: int = 0
    fetched_bytes: int = 0
    fetch_s: float = 0.0
    parse_s: float | None = None
    rss_mb: float | None = None
    parse_note: str = ""
    files: list[Fetched] = field(default_factory=list)


def log(msg: str) -> None:
    print(f"seed_scale: {msg}", flush=True)


@contextlib.contextmanager
def machine_lock(take: bool) -> Iterator[None]:
    if not take:
        yield
        return
    with open(LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {LOCK} (another user's test or benchmark)")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def siftr_plan(duration: float, ppl: int | None) -> SiftrPlan:
    """One sender's siftr plan as the siftr instrument's start makes it (its one flow, the
    bottleneck's rate, the default budget); `ppl` given: the same log at that ppl
    (today's 4: run.py's old SIFTR_PPL)."""
    plan = choose_ppl([(0.0, duration)], [flow_ends(1)[3]], RATE_MBIT * 1e6)
    if ppl is None or ppl == plan.ppl:
        return plan
    records = plan.packets // ppl + 1
    size = records * RECORD_BYTES[plan.logger]
    every = plan.record_interval_s * ppl / plan.ppl
    return dataclasses.replace(
        plan,
        ppl=ppl,
        records=records,
        log_bytes=size,
        within_budget=size <= plan.budget_bytes,
        record_interval_s=every,
    )


def stream_argv(kind: str, out: Path, duration: float, k: int, ppl: int) -> list[str]:
    return [sys.executable, str(REPO / "bench" / "streams.py"), kind, "--out", str(out),
            "--duration", f"{duration:g}", "--rate-mbit", f"{RATE_MBIT:g}", "--flows",
            str(FLOWS), "--flow", str(k), "--ppl", str(ppl)]  # fmt: skip


def write_streams(out: Path, duration: float, ppl: int) -> list[str]:
    """Every stream of a run, made here into `out` (tests); their file names."""
    names = []
    for files in STREAMS.values():
        for name, kind, k in files:
            subprocess.run(stream_argv(kind, out / name, duration, k, ppl), check=True,
                           timeout=600)  # fmt: skip
            names.append(name)
    return names


def make_streams(n: SshNode, node_dir: Path, duration: float, ppl: int, kinds: list[str]) -> None:
    """Each file made on the node by bench/streams.py, run there over ssh (two at once)."""
    jobs = [(name, kind, k) for s in kinds for name, kind, k in STREAMS[s]]

    def make(job: tuple[str, str, int]) -> None:
        name, kind, k = job
        n.ex.run(stream_argv(kind, node_dir / name, duration, k, ppl), timeout=3600)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(make, jobs))


def fetch_all(n: SshNode, node_dir: Path, local: Path, kinds: list[str]) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    for s in kinds:
        row = rows[s] = Row(s)
        for name, _, _ in STREAMS[s]:
            got = n.ex.get(str(node_dir / name), local / name)
            row.files.append(got)
            row.node_bytes += got.node_bytes
            row.fetched_bytes += got.fetched_bytes
            row.fetch_s += got.seconds
            (node_dir / name).unlink()
    return rows


def spec_doc(duration: float) -> dict[str, Any]:
    """BASE's spec at this scale (the per-stream run directories, tests)."""
    spec = json.loads((BASE / "spec.json").read_text())
    spec["topology"].update(rate_mbit=RATE_MBIT, rtt_ms=40.0, queue_limit_pkts=48)
    for f in spec["flows"]:
        f["duration_s"] = duration
    spec.update(interval_s=1.0, ss_interval_s=0.1, probe_interval_s=0.1,
                qdisc_interval_s=0.05, scenario="seed-scale", repetition=1)  # fmt: skip
    return spec


def meta_doc(
    duration: float, ppl: int, fetched: dict[str, Fetched] | None = None
) -> dict[str, Any]:
    """meta.json as run.py writes it; the siftr loggers as the siftr instrument records them
    (with each log's fetch, when it was fetched)."""
    d = f"{duration:g}"
    client = [["iperf3", "-c", flow_ends(k)[2], "-p", str(flow_ends(k)[3]), "-C", "cubic",
               "-l", "1M", "-t", d, "-i", "1", "-J"] for k in (1, 2)]  # fmt: skip
    n_probe = str(int(duration * 10) + 1)
    plan = siftr_plan(duration, ppl)
    siftr: dict[str, Any] = {}
    for k in (1, 2):
        node = f"s{k}"
        siftr[node] = {"logger": plan.logger, "ppl": plan.ppl, "port_filter": flow_ends(k)[3],
                       "log_bytes_est": plan.log_bytes, "within_budget": plan.within_budget,
                       "resolution": plan.resolution(FLOWS)}  # fmt: skip
        got = (fetched or {}).get(node)
        if got is not None:
            siftr[node]["fetch"] = {"node_bytes": got.node_bytes, "fetched_bytes":
                                    got.fetched_bytes, "compressed": got.compressed,
                                    "seconds": round(got.seconds, 3)}  # fmt: skip
    return {
        "flows": [{"flow": 1, "started_s": 0.0}, {"flow": 2, "started_s": 0.0}],
        "started_unix": T0, "testbed": "seedscale", "kind": "ssh", "tools": "host",
        "client_argv": client,
        "probe_argv": ["fping", "-D", "-p", "100", "-c", n_probe, flow_ends(1)[2]],
        "traffic_wall_s": duration, "client_rc": [0, 0], "finished_unix": T0 + duration,
        "qdisc_sampler": {"node": "rt1", "dev": "to-dl", "interval_s": 0.05,
                          "argv": ["tc", "-s", "-j", "qdisc", "show", "dev", "to-dl"]},
        "siftr": siftr,
    }  # fmt: skip


def scale_files(raw: Path, duration: float) -> None:
    """BASE's calibration and bottleneck snapshots rewritten for this scale (1 Gbit/s,
    40 ms, pfifo 48), the snapshots the same function of time as the qdisc stream."""
    cal = json.loads((BASE / "calibration.json").read_text())
    cal.update(kind="ssh", rtt_configured_ms=40.0, rate_configured_mbit=RATE_MBIT)
    for pair in cal["idle_rtt"].values():
        pair.update(median_ms=40.3, min_ms=40.1, max_ms=40.9)
    cal["bottleneck"]["shaper"], cal["bottleneck"]["queue"] = qdisc_stats(RATE_MBIT, 0.0)
    cal["rate"]["measured_goodput_bps"] = 0.96 * cal["rate"]["expected_goodput_bps"] * 25
    cal["rate"]["expected_goodput_bps"] *= 25
    (raw / "calibration.json").write_text(json.dumps(cal, indent=2))
    (raw / "tc-before.json").write_text(json.dumps(qdisc_stats(RATE_MBIT, 0.0)))
    (raw / "tc-after.json").write_text(json.dumps(qdisc_stats(RATE_MBIT, duration + 1.0)))
    cfg = (BASE / "qdisc-config.txt").read_text()
    (raw / "qdisc-config.txt").write_text(
        cfg.replace("rate 40Mbit", f"rate {RATE_MBIT / 1000:g}Gbit").replace(
            "limit 67p", "limit 48p"
        )
    )


def run_dir(
    root: Path, src: Path, files: list[str], duration: float, ppl: int,
    spec: dict[str, Any] | None = None, fetched: dict[str, Fetched] | None = None,
) -> Path:  # fmt: skip
    """A run directory: BASE's raw files, this scale's spec (`spec`, else spec_doc)
    and meta, and `files` (local names) linked from `src`, plain or .gz, whichever is
    there."""
    raw = root / "raw"
    raw.mkdir(parents=True)
    for name in BASE_FILES:
        shutil.copyfile(BASE / name, raw / name)
    scale_files(raw, duration)
    (raw / "spec.json").write_text(json.dumps(spec or spec_doc(duration), indent=2))
    (raw / "meta.json").write_text(json.dumps(meta_doc(duration, ppl, fetched), indent=2))
    for name in files:
        f = src / name if (src / name).exists() else src / f"{name}.gz"
        os.link(f, raw / f.name)
    return root


@dataclass
class Child:
    wall_s: float
    rss_mb: float
    rc: int
    last: str  # the last line of stderr


def child(argv: list[str], mem_gb: float, cwd: Path) -> Child:
    """A ccbench command in a child (its address space capped at `mem_gb`): wall time,
    peak RSS (wait4), exit status."""
    cap = int(mem_gb * 2**30)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ccbench.cli", *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            preexec_fn=limit, cwd=cwd)  # fmt: skip
    assert proc.stderr is not None
    err = proc.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    last = (err.strip().splitlines() or [f"exit {rc}"])[-1][:120]
    return Child(time.monotonic() - t0, ru.ru_maxrss / 1024, rc, last)


def parse(root: Path, mem_gb: float, whole: bool) -> tuple[float, float, str]:
    """`ccbench parse ROOT` in a child: (wall s, peak RSS MB, note)."""
    c = child(["parse", str(root)], mem_gb, REPO)
    if c.rc != 0:
        return c.wall_s, c.rss_mb, f"FAILED ({c.last}; address space capped at {mem_gb:g} GiB)"
    if not whole:  # a run dir of one stream lacks the others: its verdict says nothing
        return c.wall_s, c.rss_mb, "parsed"
    s = json.loads((root / "summary.json").read_text())
    note = "valid" if s["valid"] else f"invalid: {s['reasons'][0]['text'][:100]}"
    return c.wall_s, c.rss_mb, note


def comparison(results: Path, duration: float) -> tuple[Path, str, dict[str, Any]]:
    """A results directory with the seed-scale config's matrix (`ccbench matrix`):
    (matrix.json, the run's id, its spec)."""
    results.mkdir(parents=True)
    (results / "config.yaml").write_text(CONFIG % duration)
    out = subprocess.run([sys.executable, "-m", "ccbench.cli", "matrix", "--config",
                          str(results / "config.yaml"), "--json"], cwd=results,
                         capture_output=True, text=True, check=True)  # fmt: skip
    (results / "matrix.json").write_text(out.stdout)
    m = json.loads(out.stdout)
    run_id = m["order"][0]
    return results / "matrix.json", run_id, m["runs"][run_id]["spec"]["run"]


def report_stages(results: Path, matrix: Path, mem_gb: float) -> list[tuple[str, Child]]:
    """The workflow's commands after parse, on the results directory."""
    runs, tables, figs = results / "runs", results / "tables", results / "figures"
    steps = [
        ("aggregate", ["aggregate", "--matrix", str(matrix), "--out", str(tables),
                       *map(str, sorted(runs.glob("*/summary.json")))]),
        ("verdicts", ["verdicts", "--matrix", str(matrix), "--tables", str(tables),
                      "--out", str(tables / "verdicts.csv")]),
        ("figures", ["figures", "--matrix", str(matrix), "--tables", str(tables),
                     "--runs", str(runs), "--out", str(figs)]),
        ("report", ["report", "--matrix", str(matrix), "--tables", str(tables),
                    "--figures", str(figs), "--runs", str(runs),
                    "--pdf", str(results / "report.pdf"), "--html", str(results / "report.html")]),
    ]  # fmt: skip
    done = []
    for name, argv in steps:
        c = child(argv, mem_gb, results)
        done.append((name, c))
        if c.rc != 0:
            break
    return done


def measure(n: SshNode, work: Path, duration: float, ppl: int, a: argparse.Namespace
            ) -> tuple[dict[str, Row], Row, list[tuple[str, Child]]]:  # fmt: skip
    kinds = list(STREAMS)
    node_dir, fetched = work / "node", work / f"fetched-{duration:g}-{ppl}"
    node_dir.mkdir(exist_ok=True)
    fetched.mkdir()
    log(f"{duration:g} s, ppl {ppl}: making the streams on the node")
    make_streams(n, node_dir, duration, ppl, kinds)
    log(f"{duration:g} s, ppl {ppl}: fetching over {a.mgmt_mbit:g} Mbit/s")
    rows = fetch_all(n, node_dir, fetched, kinds)
    total = Row("run (all)")
    for r in rows.values():
        total.node_bytes += r.node_bytes
        total.fetched_bytes += r.fetched_bytes
        total.fetch_s += r.fetch_s
    siftr = {f"s{k}": got for k, got in enumerate(rows["siftr"].files, start=1)}
    log(f"{duration:g} s, ppl {ppl}: parsing (the .gz files as fetched)")
    for s in kinds:
        names = [x[0] for k in {"iperf3", s} for x in STREAMS[k]]
        root = run_dir(work / f"run-{s}", fetched, names, duration, ppl, fetched=siftr)
        rows[s].parse_s, rows[s].rss_mb, rows[s].parse_note = parse(root, a.parse_mem_gb, False)
        shutil.rmtree(root)
    matrix, run_id, spec = comparison(work / "results", duration)
    names = [x[0] for k in kinds for x in STREAMS[k]]
    root = run_dir(work / "results" / "runs" / run_id, fetched, names, duration, ppl, spec,
                   siftr)  # fmt: skip
    total.parse_s, total.rss_mb, total.parse_note = parse(root, a.parse_mem_gb, True)
    log(f"{duration:g} s, ppl {ppl}: aggregate, verdicts, figures, report")
    stages = report_stages(work / "results", matrix, a.stage_mem_gb)
    shutil.rmtree(work / "results")
    shutil.rmtree(fetched)
    return rows, total, stages


def mb(b: float) -> str:
    return f"{b / 1e6:,.1f}"


def print_table(duration: float, ppl: int, rows: dict[str, Row], total: Row,
                stages: list[tuple[str, Child]], mgmt: float) -> None:  # fmt: skip
    plan = siftr_plan(duration, ppl)
    print(f"\n{duration:g} s of traffic, siftr ppl {ppl} (2 flows sharing {RATE_MBIT:g} Mbit/s,"
          f" 40 ms; fetched over {mgmt:g} Mbit/s). {plan.resolution(FLOWS)}.")  # fmt: skip
    head = ("stream", "on node MB", "fetched MB", "gzip", "fetch s", "parse s", "peak RSS MB")
    print("| " + " | ".join(head) + " | parse |")
    print("|" + "---|" * (len(head) + 1))
    for r in [*rows.values(), total]:
        gz = "/".join("y" if f.compressed else "n" for f in r.files) or "-"
        ps = f"{r.parse_s:.1f}" if r.parse_s is not None else "-"
        rss = f"{r.rss_mb:.0f}" if r.rss_mb is not None else "-"
        print(f"| {r.stream} | {mb(r.node_bytes)} | {mb(r.fetched_bytes)} | {gz} | "
              f"{r.fetch_s:.1f} | {ps} | {rss} | {r.parse_note} |")  # fmt: skip
    for name, c in stages:
        note = "ok" if c.rc == 0 else f"FAILED ({c.last})"
        print(f"| then: {name} | | | | | {c.wall_s:.1f} | {c.rss_mb:.0f} | {note} |")
    failed = total.parse_note.startswith("FAILED")  # a failed parse meets no target
    checks = [
        ("parse peak RSS", f"{total.rss_mb:.0f} MB", f"<= {TARGET_RSS_MB:g} MB",
         (total.rss_mb or 1e9) <= TARGET_RSS_MB),
        ("parse wall", f"{total.parse_s:.1f} s = {100 * (total.parse_s or 0) / duration:.1f} %",
         f"<= {TARGET_PARSE_PCT:g} %", (total.parse_s or 1e9) <= duration * TARGET_PARSE_PCT / 100),
        ("fetch (all files)", f"{total.fetch_s:.1f} s = {100 * total.fetch_s / duration:.1f} %",
         f"<= {TARGET_FETCH_PCT:g} %", total.fetch_s <= duration * TARGET_FETCH_PCT / 100),
    ]  # fmt: skip
    for what, got, want, ok in checks:
        met = ok and not (failed and what.startswith("parse"))
        print(f"  {what}: {got} (target {want}): {'met' if met else 'NOT met'}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--durations", default="30,300,3000", help="traffic seconds, comma-separated")
    ap.add_argument("--ppl", default="4,budget",
                    help="siftr ppl values, comma-separated; 'budget': choose_ppl's")  # fmt: skip
    ap.add_argument("--mgmt-mbit", type=float, default=100.0, help="management link (tbf)")
    ap.add_argument("--parse-mem-gb", type=float, default=4.0,
                    help="address-space cap of the parse child (GiB)")  # fmt: skip
    ap.add_argument("--stage-mem-gb", type=float, default=6.0,
                    help="the same for aggregate, verdicts, figures, report (GiB)")  # fmt: skip
    ap.add_argument("--quick", action="store_true", help="smoke test: 5 s, budget ppl")
    ap.add_argument("--workdir", default="/var/tmp/ccb-seed-scale")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--no-lock", action="store_true", help="the caller holds " + LOCK)
    a = ap.parse_args()
    if os.geteuid() != 0:
        ap.error("run as root (network namespaces, sshd)")
    try:
        durations = [float(x) for x in a.durations.split(",")] if not a.quick else [5.0]
        asked = a.ppl.split(",") if not a.quick else ["budget"]
        ppls = [None if x.strip() == "budget" else int(x) for x in asked]
    except ValueError:
        ap.error("--durations takes numbers, --ppl numbers or 'budget', comma-separated")
    if any(d <= 0 for d in durations) or any(p is not None and p < 1 for p in ppls):
        ap.error("durations must be > 0 and ppl >= 1")
    work = Path(a.workdir)
    print(f"seed_scale {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs")
    print(f"backends: {backends.describe(backends.probe())}", flush=True)
    try:
        for d in durations:
            with machine_lock(not a.no_lock):  # one scale at a time: others get in between
                shutil.rmtree(work, ignore_errors=True)
                work.mkdir(parents=True)
                with ssh_node("s1", NS, "198.19.251", work / "ssh") as n:
                    n.shape(a.mgmt_mbit)
                    for p in ppls:
                        ppl = siftr_plan(d, p).ppl
                        if p is None:
                            log(f"{d:g} s: choose_ppl under the default budget picks ppl {ppl}")
                        rows, total, stages = measure(n, work, d, ppl, a)
                        print_table(d, ppl, rows, total, stages, a.mgmt_mbit)
                if not a.keep:
                    shutil.rmtree(work, ignore_errors=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
