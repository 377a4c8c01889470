"""Time and peak memory of each streaming parser at 10^5 .. 10^7 records.

    python bench/parse_stream.py [--records 1e5 1e6 1e7] [--parsers siftr ss ...]

Each measurement runs in a fresh interpreter that reads a SYNTHETIC stream of the
parser's format and reduces it the way a caller would (exact srtt/RTT/backlog
statistics from ccbench.parse.counts, the queue statistics): siftr 1.3.0 from
ccbench.parse.siftr_synth (1 Gbit/s, 2 flows, ppl 4); ss, the qdisc sampler, ping and
fping by repeating blocks of the real captures in tests/captures with advancing
timestamps. It prints parse seconds (the stream's own generation timed apart and
subtracted) and the peak RSS above the interpreter's after its imports.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

CAP = Path(__file__).resolve().parents[1] / "tests" / "captures"

CHILD = r"""
import itertools, json, resource, sys, time
from pathlib import Path
from ccbench.parse.counts import ValueCounts
from ccbench.parse import fping, ping, qdisc, siftr_stream, siftr_synth, ss
CAP = Path(sys.argv[3])
name, n, mode = sys.argv[1], int(float(sys.argv[2])), sys.argv[4]

def repeat(lines, per_block, stamp):
    # the block of capture lines again and again, one timestamp further each time
    for i in itertools.count():
        for ln in lines:
            yield stamp(ln, i)

def source():
    if name == "siftr":  # 2 flows sharing 1 Gbit/s at ppl 4: 30,961 records per second
        return siftr_synth.siftr13_log(2, 1e9, n / 30_961, 4, window_s=0.1)
    if name == "ss":  # one TS block of 3 sockets (ss-cubic-5s.txt lines 4-8)
        block = (CAP / "ss-cubic-5s.txt").read_text().splitlines(keepends=True)[3:8]
        gen = repeat(block, 2, lambda ln, i: f"TS {1795308228.0 + i * 0.1:.9f}\n"
                     if ln.startswith("TS ") else ln)
        return itertools.islice(gen, n // 2 * 5)
    if name == "qdisc":  # TS + tc JSON pairs
        block = (CAP / "qdisc/qdisc-rt1-2cubic-100m.txt").read_text().splitlines(True)[:2]
        gen = repeat(block, 1, lambda ln, i: f"TS {1795445065.0 + i * 0.05:.6f}\n"
                     if ln.startswith("TS ") else ln)
        return itertools.islice(gen, 2 * n)
    if name == "ping":
        head = "PING 198.18.251.2 (198.18.251.2) 56(84) bytes of data.\n"
        body = (f"64 bytes from 198.18.251.2: icmp_seq={i} ttl=64 time={40 + i % 97 / 10:.1f} ms\n"
                for i in range(1, n + 1))
        return itertools.chain([head], body)
    if name == "fping":
        return (f"[{1795376097.7 + i / 10:.5f}] 198.18.252.2 : [{i}], 64 bytes, "
                f"{40 + i % 97 / 10:.3f} ms (40.1 avg, 0% loss)\n" for i in range(n))
    raise SystemExit(f"unknown parser {name}")

def consume():
    if name == "siftr":
        rtt = ValueCounts()
        for b in siftr_stream.SiftrReader(source()):
            rtt.add(b.column("srtt_us"))
        return rtt.count
    if name == "ss":
        rtt = ValueCounts()
        for r in ss.SsReader(source()):
            rtt.add_one(r["rtt_us"])
        return rtt.count
    if name == "qdisc":
        acc = qdisc.QueueStats(0.0, 1e12, 0.05, 1514)
        for p in qdisc.iter_queue_points(qdisc.iter_qdisc_samples(source())):
            acc.add(p)
        return acc.result()["samples"]
    if name == "ping":
        return len(ping.read_ping(source()).rtts_us)
    if name == "fping":
        rtt = ValueCounts()
        for p in fping.iter_fping_probes(source(), window=1000):
            rtt.add_one(p.rtt_ms)
        return rtt.count

base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if mode == "gen":
    count = sum(1 for _ in source())
else:
    count = consume()
print(json.dumps({"s": time.perf_counter() - t, "count": count,
                  "rss_mb": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) / 1024}))
"""


def measure(name: str, n: float, mode: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, name, str(n), str(CAP), mode],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return dict(json.loads(out.stdout))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", nargs="+", type=float, default=[1e5, 1e6, 1e7])
    ap.add_argument("--parsers", nargs="+", default=["siftr", "ss", "qdisc", "ping", "fping"])
    args = ap.parse_args()
    print("| parser | records | parse s | µs/record | peak RSS over imports (MB) |")
    print("|---|---|---|---|---|")
    for name in args.parsers:
        for n in args.records:
            run, gen = measure(name, n, "parse"), measure(name, n, "gen")
            s = max(run["s"] - gen["s"], 0.0)
            print(f"| {name} | {int(run['count']):,} | {s:.2f} | {s / run['count'] * 1e6:.2f} "
                  f"| {run['rss_mb']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
