#!/usr/bin/env python3
"""Format-true raw streams of one run at a given scale, written to disk as they are made.

bench/seed_scale.py runs this ON the node (over ssh), one stream per call:

    python bench/streams.py siftr --out F --duration 300 --rate-mbit 1000 --flows 2 --ppl 4 --flow 1
    python bench/streams.py {ss,qdisc,iperf3,fping} --out F --duration 300 ... --flow K

Each layout is the one ccbench's parsers read and its captures show, with invented but
consistent numbers (one flow per sender sharing `rate_mbit`, 40 ms RTT, MSS 1448):
- siftr: siftr(4) 1.3.0 as FreeBSD 14 writes it (27 fields per record, header and footer
  as tests/captures/freebsd/siftr-1.3.0-written-from-docs.log); one record per `ppl`
  packets in (ACKs: one per two data segments) and out (data) of the flow, plus a few of
  iperf3's control connection (siftr logs every port: run.py sets no port_filter).
- ss: ccbench.sampler's file, `TS <unix s>` then `ss -tinH` lines (control and data
  socket), every 0.1 s, as tests/captures/run-local-2cubic/ss-s1.txt.
- qdisc: the bottleneck sampler's file, `TS <unix s>` then one `tc -s -j qdisc show`
  line (tbf 1: + pfifo 10:), every 50 ms, as tests/captures/qdisc/.
- iperf3: `iperf3 -c ... -i 1 -J` of one flow (iperf 3.12 layout, as
  tests/captures/run-local-2cubic/iperf3-1.json), one interval per second.
- fping: `fping -D -p 100` lines, every 0.1 s (tests/captures/probe/fping-*.txt).
Numbers are a deterministic function of the arguments (seeded), never random per run.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import numpy as np

FRAME = 1514  # bytes on the wire per full segment (what a shaper counts)
MSS = 1448
RTT_US = 40_000
T0 = 1_795_000_000.0  # when the run's traffic starts (unix s)
HOSTS = {1: ("198.18.1.2", "198.18.4.2"), 2: ("198.18.1.6", "198.18.4.6")}


def flow_ends(k: int) -> tuple[str, int, str, int, int]:
    """Flow k's sender address, data port, receiver address, server port, control port."""
    src, dst = HOSTS[k]
    return src, 43636 + 2 * k, dst, 5201 + k, 43635 + 2 * k


def sawtooth(t: np.ndarray, period_s: float = 8.0) -> np.ndarray:
    """0..1: a cubic-like window cycle (fast rise, plateau, then a loss)."""
    return np.cbrt((t % period_s) / period_s)


def data_pps(rate_mbit: float, flows: int) -> float:
    return rate_mbit * 1e6 / flows / 8 / FRAME


# --- siftr 1.3 --------------------------------------------------------------------
SIFTR_FMT = (
    "%s,%d.%06d,%s,%d,%s,%d,%d,%d,1024,3145728,65700,7,7,4,1448,%d,1,33554596,%d,"
    "4194304,%d,131072,0,%d,0,%d,2\n"
)


def siftr(f: IO[str], a: argparse.Namespace) -> None:
    src, lport, dst, pport, cport = flow_ends(a.flow)
    rng = np.random.default_rng(a.flow)
    pps = 1.5 * data_pps(a.rate_mbit, a.flows)  # data out + one ACK in per two segments
    rec_per_s = pps / a.ppl
    wmax = a.rate_mbit * 1e6 / a.flows / 8 * RTT_US / 1e6 * 1.2  # 1.2 x the flow's BDP
    enable = T0 - 1.0
    f.write(f"enable_time_secs={int(enable)}\tenable_time_usecs={0:06d}\tsiftrver=1.3.0\t"
            "sysname=FreeBSD\tsysver=1402000\tipmode=4\n")  # fmt: skip
    flowid, ctl_id = 2780219352 + a.flow, 1190338001 + a.flow
    ctl = [(T0 - 0.5 + i * 0.01, "o" if i % 2 else "i") for i in range(8)]
    for tc, d in ctl:  # iperf3's control connection: parameters exchanged before the test
        us = round(tc * 1e6)
        f.write(SIFTR_FMT % (d, us // 1_000_000, us % 1_000_000, src, cport, dst, pport,
                             1073725440, 14480, 40250, 241000, 0, 0, ctl_id))  # fmt: skip
    n_out = n_in = 0
    for sec in range(int(a.duration)):
        n = int(rec_per_s * (sec + 1)) - int(rec_per_s * sec)
        t = sec + (np.arange(n) + rng.random(n) * 0.5) / n
        cyc = sawtooth(t)
        cwnd = ((0.7 + 0.3 * cyc) * wmax / MSS).astype(np.int64) * MSS
        srtt = (RTT_US + 500 * cyc**2 + rng.integers(0, 100, n)).astype(np.int64)
        inflight = cwnd - rng.integers(0, 8, n) * MSS
        sndbuf = np.minimum(4194304, cwnd + rng.integers(200_000, 1_500_000, n))
        ssth = np.full(n, int(0.7 * wmax) // MSS * MSS) if sec >= 8 else np.full(n, 1073725440)
        incoming = (np.arange(n) + sec) % 3 == 2
        n_in += int(incoming.sum())
        n_out += n - int(incoming.sum())
        stamps = np.round((T0 + t) * 1e6).astype(np.int64)
        f.write("".join([
            SIFTR_FMT % ("i" if i else "o", u // 1_000_000, u % 1_000_000, src, lport, dst,
                         pport, s, c, r, r + 200_000, b, fl, flowid)
            for i, u, s, c, r, b, fl in zip(incoming.tolist(), stamps.tolist(), ssth.tolist(),
                                            cwnd.tolist(), srtt.tolist(), sndbuf.tolist(),
                                            inflight.tolist(), strict=True)
        ]))  # fmt: skip
    for tc, d in ctl:  # the results exchanged after it
        us = round((tc + a.duration + 0.6) * 1e6)
        f.write(SIFTR_FMT % (d, us // 1_000_000, us % 1_000_000, src, cport, dst, pport,
                             1073725440, 14480, 40250, 241000, 0, 0, ctl_id))  # fmt: skip
    end = T0 + a.duration + 1.0
    pkts_out, pkts_in = (n_out + 4) * a.ppl, (n_in + 4) * a.ppl
    f.write(f"disable_time_secs={int(end)}\tdisable_time_usecs={0:06d}\t"
            f"num_inbound_tcp_pkts={pkts_in}\tnum_outbound_tcp_pkts={pkts_out}\t"
            f"total_tcp_pkts={pkts_in + pkts_out}\tnum_inbound_skipped_pkts_malloc=0\t"
            "num_outbound_skipped_pkts_malloc=0\tnum_inbound_skipped_pkts_tcpcb=0\t"
            "num_outbound_skipped_pkts_tcpcb=0\tnum_inbound_skipped_pkts_inpcb=0\t"
            "num_outbound_skipped_pkts_inpcb=0\ttotal_skipped_tcp_pkts=0\t"
            f"flow_list={src};{cport}-{dst};{pport},{src};{lport}-{dst};{pport},\n")  # fmt: skip


# --- ss (Linux sender sampler) -----------------------------------------------------
SS_CTL = (
    "0      0      {src}:{cport} {dst}:{pport}\n\t cubic wscale:8,8 rto:244 rtt:40.376/5.739 "
    "ato:40 mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:10 bytes_sent:186 "
    "bytes_acked:187 bytes_received:4 segs_out:9 segs_in:7 data_segs_out:3 data_segs_in:4 "
    "send 2869364bps lastsnd:{ms} lastrcv:{ms} lastack:{ms} pacing_rate 5738728bps "
    "delivery_rate 1138304bps delivered:4 app_limited busy:44ms rcv_space:14480 "
    "rcv_ssthresh:64088 minrtt:40.315 snd_wnd:65280\n"
)
SS_DATA = (
    "0      {sendq} {src}:{lport} {dst}:{pport}\n\t cubic wscale:8,8 rto:{rto} "
    "rtt:{rtt:.3f}/{rttvar:.3f} mss:1448 pmtu:1500 rcvmss:536 advmss:1448 cwnd:{cwnd} "
    "ssthresh:{ssth} bytes_sent:{sent} bytes_retrans:{retr} bytes_acked:{acked} "
    "segs_out:{segs} segs_in:{segsin} data_segs_out:{segs} send {send}bps lastrcv:{ms} "
    "pacing_rate {pacing}bps delivery_rate {deliv}bps delivered:{dlv} busy:{ms}ms "
    "unacked:{unacked} retrans:0/{rtx} lost:{lost} rcv_space:14480 rcv_ssthresh:64088 "
    "notsent:{notsent} minrtt:40.012 snd_wnd:3145728\n"
)


def ticks(duration: float, every: float) -> Iterator[tuple[int, float]]:
    for i in range(int(round(duration / every)) + 1):
        yield i, i * every


def ss(f: IO[str], a: argparse.Namespace) -> None:
    src, lport, dst, pport, cport = flow_ends(a.flow)
    bps = a.rate_mbit * 1e6 / a.flows * MSS / FRAME
    wmax = bps / 8 * RTT_US / 1e6 * 1.2
    for i, t in ticks(a.duration, 0.1):
        cyc = float(sawtooth(np.array([t]))[0])
        cwnd = int((0.7 + 0.3 * cyc) * wmax / MSS)
        rtt = RTT_US / 1000 + 0.5 * cyc**2 + (i % 7) * 0.01
        sent = int(bps / 8 * t)
        segs = sent // MSS
        rtx = i // 40
        f.write(f"TS {T0 + t:.6f}\n")
        f.write(SS_CTL.format(src=src, cport=cport, dst=dst, pport=pport, ms=int(t * 1000)))
        f.write(SS_DATA.format(
            sendq=cwnd * MSS, src=src, lport=lport, dst=dst, pport=pport, rto=int(rtt) + 204,
            rtt=rtt, rttvar=1 + (i % 5) * 0.3, cwnd=cwnd, ssth=int(0.7 * wmax / MSS),
            sent=sent, retr=rtx * MSS, acked=max(0, sent - cwnd * MSS), segs=segs,
            segsin=segs // 2, send=int(cwnd * MSS * 8 / rtt * 1000), ms=i % 50,
            pacing=int(cwnd * MSS * 8 / rtt * 1200), deliv=int(bps * (0.9 + 0.1 * cyc)),
            dlv=segs - cwnd, unacked=cwnd, rtx=rtx, lost=rtx, notsent=2_000_000,
        ))  # fmt: skip


# --- the bottleneck qdisc sampler --------------------------------------------------
def qdisc_stats(rate_mbit: float, t: float) -> list[dict[str, object]]:
    """`tc -s -j qdisc show` of the bottleneck `t` s after the sampler's start."""
    rate = int(rate_mbit * 1e6 / 8)
    i = round(t / 0.05)
    pkts = int(data_pps(rate_mbit, 1) * t)
    drops, backlog = i // 20, (i * 7) % 48
    q = {"bytes": pkts * FRAME, "packets": pkts, "drops": drops, "overlimits": 0,
         "requeues": 0, "backlog": backlog * FRAME, "qlen": backlog}  # fmt: skip
    return [{"kind": "tbf", "handle": "1:", "root": True, "refcnt": 3,
             "options": {"rate": rate, "burst": max(15140, rate // 1000), "lat": 1000000},
             **q, "overlimits": pkts // 3},
            {"kind": "pfifo", "handle": "10:", "parent": "1:1", "options": {"limit": 48},
             **q}]  # fmt: skip


def qdisc(f: IO[str], a: argparse.Namespace) -> None:
    for _, t in ticks(a.duration + 1.0, 0.05):
        stats = json.dumps(qdisc_stats(a.rate_mbit, t), separators=(",", ":"))
        f.write(f"TS {T0 - 0.5 + t:.6f}\n{stats}\n")


# --- iperf3 -J -i 1 ----------------------------------------------------------------
def iperf3(f: IO[str], a: argparse.Namespace) -> None:
    src, lport, dst, pport, _ = flow_ends(a.flow)
    bps = a.rate_mbit * 1e6 / a.flows * MSS / FRAME
    start = {
        "connected": [{"socket": 5, "local_host": src, "local_port": lport,
                       "remote_host": dst, "remote_port": pport}],
        "version": "iperf 3.12",
        "system_info": "Linux s1 6.8.0-51-generic #52-Ubuntu SMP x86_64",
        "timestamp": {"time": "Thu, 19 Nov 2026 09:46:40 GMT", "timesecs": int(T0)},
        "connecting_to": {"host": dst, "port": pport},
        "cookie": "seedscalebenchseedscalebenchseedsc", "tcp_mss_default": MSS,
        "target_bitrate": 0, "sock_bufsize": 0, "sndbuf_actual": 16384,
        "rcvbuf_actual": 131072,
        "test_start": {"protocol": "TCP", "num_streams": 1, "blksize": 1048576, "omit": 0,
                       "duration": int(a.duration), "bytes": 0, "blocks": 0, "reverse": 0,
                       "tos": 0, "target_bitrate": 0},
    }  # fmt: skip
    f.write('{\n"start": ' + json.dumps(start) + ',\n"intervals": [')
    total = retr = 0
    for i in range(int(a.duration)):
        cyc = float(sawtooth(np.array([i + 0.5]))[0])
        b = int(bps / 8 * (0.92 + 0.08 * cyc))
        r = 12 if i % 8 == 7 else 0
        total, retr = total + b, retr + r
        s = {"socket": 5, "start": i, "end": i + 1, "seconds": 1.0, "bytes": b,
             "bits_per_second": b * 8.0, "retransmits": r,
             "snd_cwnd": int((0.7 + 0.3 * cyc) * bps / 8 * 0.048), "snd_wnd": 3145728,
             "rtt": int(RTT_US + 500 * cyc**2), "rttvar": 900, "pmtu": 1500,
             "omitted": False, "sender": True}  # fmt: skip
        summ = {k: s[k] for k in ("start", "end", "seconds", "bytes", "bits_per_second",
                                  "retransmits", "omitted", "sender")}  # fmt: skip
        f.write(("," if i else "") + "\n" + json.dumps({"streams": [s], "sum": summ}))
    d = float(int(a.duration))
    sent = {"start": 0, "end": d, "seconds": d, "bytes": total,
            "bits_per_second": total * 8 / d, "retransmits": retr, "sender": True}  # fmt: skip
    recv = {"start": 0, "end": d + 0.04, "seconds": d, "bytes": total - 2_000_000,
            "bits_per_second": (total - 2_000_000) * 8 / d, "sender": True}  # fmt: skip
    end = {
        "streams": [{"sender": {**sent, "socket": 5, "max_snd_cwnd": int(bps / 8 * 0.048),
                                "max_snd_wnd": 3145728, "max_rtt": RTT_US + 600,
                                "min_rtt": RTT_US, "mean_rtt": RTT_US + 250},
                     "receiver": {**recv, "socket": 5}}],
        "sum_sent": sent, "sum_received": recv,
        "cpu_utilization_percent": {"host_total": 30.1, "host_user": 1.2,
                                    "host_system": 28.9, "remote_total": 25.5,
                                    "remote_user": 1.0, "remote_system": 24.5},
        "sender_tcp_congestion": "cubic", "receiver_tcp_congestion": "cubic",
    }  # fmt: skip
    f.write('\n],\n"end": ' + json.dumps(end) + "\n}\n")


# --- fping -D -p 100 ---------------------------------------------------------------
def fping(f: IO[str], a: argparse.Namespace) -> None:
    dst = flow_ends(a.flow)[2]
    got, total = 0, 0.0
    for i, t in ticks(a.duration, 0.1):
        lost = i % 97 == 50
        if not lost:
            ms = RTT_US / 1000 + 0.5 * float(sawtooth(np.array([t]))[0]) ** 2 + (i % 9) * 0.011
            got, total = got + 1, total + ms
        avg = f"{total / got:.3f}" if got else "NaN"
        loss = round(100 * (i + 1 - got) / (i + 1))
        stamp = f"[{T0 + t:.5f}] {dst} : [{i}], "
        f.write(stamp + (f"timed out ({avg} avg, {loss}% loss)\n" if lost
                         else f"64 bytes, {ms:.3f} ms ({avg} avg, {loss}% loss)\n"))  # fmt: skip


KINDS = {"siftr": siftr, "ss": ss, "qdisc": qdisc, "iperf3": iperf3, "fping": fping}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=sorted(KINDS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=float, required=True, help="traffic seconds")
    ap.add_argument("--rate-mbit", type=float, default=1000.0, help="bottleneck rate")
    ap.add_argument("--flows", type=int, default=2, help="flows sharing it, one per sender")
    ap.add_argument("--flow", type=int, default=1, choices=sorted(HOSTS))
    ap.add_argument("--ppl", type=int, default=4, help="siftr: log every ppl-th packet")
    a = ap.parse_args()
    if not math.isfinite(a.duration) or a.duration <= 0:
        ap.error("--duration must be > 0")
    with open(Path(a.out), "w", buffering=1 << 20) as f:  # lines are written as made
        KINDS[a.kind](f, a)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
