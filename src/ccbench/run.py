"""One run: N concurrent iperf3 flows through a testbed, raw files to DIR/raw/.

Raw files are written to a temporary directory and renamed when complete, so a
`raw/` directory always holds a whole run. A run that fails its validity checks is
retried up to `attempts` times; earlier attempts are kept under `invalid-attempts/`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ccbench.errors import CcbenchError
from ccbench.exec import LocalProc, NetnsExecutor
from ccbench.progress import console, info
from ccbench.spec import RunSpec
from ccbench.testbed.local import LocalTestbed, _wait_listening, signals_deferred

BASE_PORT = 5201
CLIENT_GRACE_S = 20.0


@dataclass
class RunProcs:
    servers: list[LocalProc] = field(default_factory=list)
    clients: list[LocalProc | None] = field(default_factory=list)
    samplers: list[LocalProc] = field(default_factory=list)

    def all(self) -> list[LocalProc]:
        return [*self.servers, *[c for c in self.clients if c], *self.samplers]

    def stop_all(self) -> None:
        for p in self.all():
            p.stop(signal.SIGTERM, grace_s=2.0)


def _snapshot_delay(tb: LocalTestbed, dest: Path) -> None:
    """Ask the delay element for fresh stats (SIGUSR1) and copy them."""
    st = tb.read_state() or {}
    pid, path = st.get("ccdelay_pid"), st.get("ccdelay_stats")
    if not pid or not path:
        return
    p = Path(path)
    before = p.stat().st_mtime_ns if p.exists() else 0
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGUSR1)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        if p.exists() and p.stat().st_mtime_ns != before:
            break
        time.sleep(0.01)
    if p.exists():
        shutil.copyfile(p, dest)


def _record(ex: NetnsExecutor, argv: list[str], dest: Path) -> None:
    res = ex.run(argv, check=False)
    dest.write_text(res.stdout if res.ok else res.stdout + res.stderr)


def _facts(tb: LocalTestbed, raw: Path) -> None:
    facts: dict[str, Any] = {"host": {}, "sender": {}}
    host = NetnsExecutor(None)
    for name, argv in {
        "uname": ["uname", "-a"],
        "cpus": ["nproc"],
        "iperf3": ["iperf3", "--version"],
        "tc": ["tc", "-V"],
        "ss": ["ss", "-V"],
        "loadavg": ["cat", "/proc/loadavg"],
    }.items():
        facts["host"][name] = host.run(argv, check=False).stdout.strip()
    for name, argv in tb.host.facts().items():
        facts["sender"][name] = tb.ex("s1").run(argv, check=False).stdout.strip()
    facts["python"] = sys.version.split()[0]
    (raw / "facts.json").write_text(json.dumps(facts, indent=2))
    _record(tb.ex("rt1"), ["tc", "qdisc", "show"], raw / "qdisc-config.txt")


def run_once(tb: LocalTestbed, spec: RunSpec, raw: Path) -> dict[str, Any]:
    """Do the run; write every raw file into `raw` (which must exist)."""
    host = tb.host
    (raw / "spec.json").write_text(json.dumps(spec.to_dict(), indent=2))
    st = tb.read_state() or {}
    (raw / "calibration.json").write_text(json.dumps(st.get("calibration", {}), indent=2))
    _facts(tb, raw)
    rt1, dev = tb.ex("rt1"), "to-dl"
    _record(rt1, host.qdisc_stats(dev), raw / "tc-before.json")
    _snapshot_delay(tb, raw / "delay-before.json")

    procs = RunProcs()
    meta: dict[str, Any] = {"flows": [], "started_unix": None}
    try:
        for k, f in enumerate(spec.flows, start=1):
            port = BASE_PORT + k
            procs.servers.append(
                tb.ex(f"r{f.pair}").spawn(
                    host.iperf3_server(port), stdout=raw / f"server-{k}.txt",
                    stderr=raw / f"server-{k}.err",
                )
            )  # fmt: skip
        for k, f in enumerate(spec.flows, start=1):
            _wait_listening(tb.ex(f"r{f.pair}"), BASE_PORT + k)
        if spec.ss_interval_s > 0:
            for s in sorted({f.pair for f in spec.flows}):
                procs.samplers.append(
                    tb.ex(f"s{s}").spawn(
                        [sys.executable, "-m", "ccbench.sampler", "--interval",
                         str(spec.ss_interval_s), "--out", str(raw / f"ss-s{s}.txt")],
                        stderr=raw / f"ss-s{s}.err",
                    )
                )  # fmt: skip
        order = sorted(range(len(spec.flows)), key=lambda i: spec.flows[i].start_s)
        procs.clients = [None] * len(spec.flows)
        argvs: list[list[str]] = [[] for _ in spec.flows]
        t0 = time.monotonic()
        meta["started_unix"] = time.time()
        total = spec.traffic_s
        deadline = t0 + total + CLIENT_GRACE_S
        label = f"{spec.scenario}/{spec.variant} rep {spec.repetition}"
        show = console.is_terminal
        last_line = 0.0
        if not show:
            info(f"{label}: {len(spec.flows)} flow(s), {total:g}s of traffic")
        while True:
            now = time.monotonic()
            for i in order:
                f = spec.flows[i]
                if procs.clients[i] is None and now - t0 >= f.start_s:
                    argv = host.iperf3_client(
                        tb.address(f"r{f.pair}"), BASE_PORT + i + 1, f.cc, f.duration_s,
                        spec.interval_s, f.streams,
                    )  # fmt: skip
                    argvs[i] = argv
                    procs.clients[i] = tb.ex(f"s{f.pair}").spawn(
                        argv, stdout=raw / f"iperf3-{i + 1}.json",
                        stderr=raw / f"iperf3-{i + 1}.err",
                    )  # fmt: skip
                    meta["flows"].append({"flow": i + 1, "started_s": round(now - t0, 4)})
            running = [c for c in procs.clients if c is None or c.poll() is None]
            if not running:
                break
            if now > deadline:
                raise CcbenchError(f"{label}: iperf3 clients still running after {total:g}s")
            elapsed = now - t0
            if show and now - last_line >= 0.5:
                eta = max(0.0, total - elapsed)
                console.print(f"  {label}: {elapsed:5.1f}/{total:g}s  ETA {eta:4.1f}s",
                              end="\r")  # fmt: skip
                last_line = now
            time.sleep(0.02)
        meta["traffic_wall_s"] = round(time.monotonic() - t0, 3)
        meta["client_rc"] = [c.wait() if c else None for c in procs.clients]
        meta["client_argv"] = argvs
        for p in procs.samplers:
            p.stop()
        for p in procs.servers:
            with contextlib.suppress(Exception):
                p.wait(timeout=3)
    finally:
        with signals_deferred():
            procs.stop_all()
    _record(rt1, host.qdisc_stats(dev), raw / "tc-after.json")
    _snapshot_delay(tb, raw / "delay-after.json")
    meta["finished_unix"] = time.time()
    (raw / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def execute(
    tb: LocalTestbed, spec: RunSpec, out: Path, attempts: int = 1, write_summary: bool = True
) -> dict[str, Any]:
    """Run, retrying invalid results; writes out/attempts.json (and out/summary.json)."""
    from ccbench.summary import summarize, write_json

    out.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {}
    tried: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        tmp = out / f".raw.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            run_once(tb, spec, tmp)
        except BaseException:
            with signals_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
            raise
        raw = out / "raw"
        if raw.exists():
            shutil.rmtree(raw)
        tmp.rename(raw)
        summary = summarize(raw)
        summary["attempt"] = attempt
        tried.append({"attempt": attempt, "valid": summary["valid"],
                      "reasons": summary["reasons"]})  # fmt: skip
        if summary["valid"] or attempt == attempts:
            break
        info(f"attempt {attempt} invalid ({'; '.join(summary['reasons'])}); retrying")
        keep = out / "invalid-attempts" / str(attempt)
        keep.parent.mkdir(exist_ok=True)
        shutil.rmtree(keep, ignore_errors=True)
        raw.rename(keep)
    if write_summary:
        write_json(out / "summary.json", summary)
    write_json(out / "attempts.json", {"run_id": spec.run_id, "attempts": tried})
    return summary
