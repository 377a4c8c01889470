"""Write SYNTHETIC siftr 1.3.0 logs at the seeds' scale, for benchmarks and tests.

Not a measurement: the numbers are made up (a sawtooth cwnd, srtt following it).
The format is siftr 1.3.0's exactly, as sys/netinet/siftr.c (FreeBSD 14) prints it:
the header `enable_time_secs=%jd\\tenable_time_usecs=%06ld\\tsiftrver=%s\\tsysname=%s\\t
sysver=%u\\tipmode=%u`, 27-field records
`%c,%jd.%06ld,%s,%hu,%s,%hu,` + 21 x `%u` (direction, time, laddr, lport, faddr, fport,
ssthresh, cwnd, t_flags2, snd_wnd, rcv_wnd, snd_scale, rcv_scale, state, mss, srtt
(us), sack, t_flags, rto (us), snd_buf_hiwat, snd_buf_cc, rcv_buf_hiwat, rcv_buf_cc,
inflight, t_segqlen, flowid, flowtype), and the footer with the packet counters and
`flow_list=laddr;lport-faddr;fport,` per flow. Logging follows siftr's own sampling:
one counter per flow over its in and out packets, and with ppl > 1 the ppl-th,
2ppl-th, ... packet of each flow is logged.

The sender's packets: data out at the flow's share of `rate_bps` in 1514-byte frames,
one ACK in per two data packets (delayed ACKs: ~82k data and ~41k ACK packets/s at 1 Gbit/s).
Records are formatted by pyarrow's CSV writer, so 10^7 records take seconds, and the
text comes out in pieces (an iterator), never whole.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv

FRAME_BYTES = 1514
MSS = 1448
# o, o, i: two data packets out per ACK in
_PATTERN = np.array([True, True, False])
_CONST = {  # fields a bulk flow keeps constant, as siftr prints them
    "t_flags2": 1024, "snd_wnd": 3145728, "rcv_wnd": 65700, "snd_scale": 7,
    "rcv_scale": 7, "state": 4, "mss": MSS, "sack": 1, "t_flags": 33554596,
    "snd_buf_hiwat": 4194304, "rcv_buf_hiwat": 131072, "rcv_buf_cc": 0, "t_segqlen": 0,
}  # fmt: skip


def packets_per_s(rate_bps: float, acks_per_data: float = 0.5) -> float:
    """In + out packets per second of a sender sending `rate_bps` of full frames."""
    return rate_bps / (8 * FRAME_BYTES) * (1 + acks_per_data)


def siftr13_log(
    flows: int,
    rate_bps: float,
    duration_s: float,
    ppl: int,
    enable_unix: float = 1_795_000_000.0,
    rtt_us: int = 40_000,
    queue_pkts: int = 48,
    window_s: float = 0.5,
) -> Iterator[str]:
    """The log's text in pieces: header, records (flows sharing `rate_bps` equally,
    all running the whole `duration_s`), footer."""
    if flows < 1 or ppl < 1 or duration_s <= 0 or rate_bps <= 0:
        raise ValueError("flows, ppl, duration_s and rate_bps must be positive")
    sec, usec = int(enable_unix), round((enable_unix % 1) * 1e6)
    yield (f"enable_time_secs={sec}\tenable_time_usecs={usec:06d}\tsiftrver=1.3.0\t"
           "sysname=FreeBSD\tsysver=1402000\tipmode=4\n")  # fmt: skip
    pps = packets_per_s(rate_bps / flows)  # per flow, in + out
    ends = [(f"10.1.1.{11 + f}", 50000 + f, f"10.1.3.{21 + f}", 5201 + f) for f in range(flows)]
    t = 0.0
    while t < duration_s:
        hi = min(t + window_s, duration_s)
        yield _window(t, hi, pps, ppl, ends, sec * 1_000_000 + usec, rate_bps / flows,
                      rtt_us, queue_pkts / flows)  # fmt: skip
        t = hi
    total = int(pps * duration_s)
    n_out = int(total * _PATTERN.mean())
    dis = enable_unix + duration_s
    flow_list = "".join(f"{la};{lp}-{fa};{fp}," for la, lp, fa, fp in ends)
    yield (f"disable_time_secs={int(dis)}\tdisable_time_usecs={round((dis % 1) * 1e6):06d}\t"
           f"num_inbound_tcp_pkts={flows * (total - n_out)}\t"
           f"num_outbound_tcp_pkts={flows * n_out}\ttotal_tcp_pkts={flows * total}\t"
           "num_inbound_skipped_pkts_malloc=0\tnum_outbound_skipped_pkts_malloc=0\t"
           "num_inbound_skipped_pkts_tcpcb=0\tnum_outbound_skipped_pkts_tcpcb=0\t"
           "num_inbound_skipped_pkts_inpcb=0\tnum_outbound_skipped_pkts_inpcb=0\t"
           f"total_skipped_tcp_pkts=0\tflow_list={flow_list}\n")  # fmt: skip


def _window(
    lo: float,
    hi: float,
    pps: float,
    ppl: int,
    ends: list[tuple[str, int, str, int]],
    enable_us: int,
    flow_bps: float,
    rtt_us: int,
    queue_pkts: float,
) -> str:
    # Logged packets are the ppl-th, 2ppl-th, ... of each flow (packet j at j / pps).
    cols: dict[str, list[np.ndarray]] = {}
    for f, (la, lp, fa, fp) in enumerate(ends):
        k = np.arange(int(np.ceil((lo * pps + 1) / ppl)), int(np.ceil((hi * pps + 1) / ppl)))
        j = k * ppl - 1
        j = j[j >= 0]
        t = j / pps + f * 1e-7  # flows' packets never share a microsecond stamp
        bdp = flow_bps * rtt_us / 8e6 + queue_pkts * FRAME_BYTES
        phase = (t / 5.0) % 1.0  # a 5 s sawtooth from 0.7 to 1 x the path's capacity
        cwnd = (bdp * (0.7 + 0.3 * phase)).astype(np.int64) // MSS * MSS
        srtt = (rtt_us + phase * queue_pkts * FRAME_BYTES * 8e6 / flow_bps).astype(np.int64)
        add = {
            "t": t, "out": _PATTERN[j % 3], "laddr": np.full(j.size, la, object),
            "lport": np.full(j.size, lp), "faddr": np.full(j.size, fa, object),
            "fport": np.full(j.size, fp), "ssthresh": np.full(j.size, int(bdp * 0.7)),
            "cwnd": cwnd, "srtt": srtt, "rto": np.maximum(srtt + 8000, 201000),
            "snd_buf_cc": np.minimum(cwnd + 65536, 4194304), "inflight": cwnd - MSS * (j % 7),
            "flowid": np.full(j.size, 2780219352 + 7919 * f), "flowtype": np.full(j.size, 2),
        }  # fmt: skip
        for name, arr in add.items():
            cols.setdefault(name, []).append(arr)
    c = {name: np.concatenate(parts) for name, parts in cols.items()}
    order = np.argsort(c["t"], kind="stable")
    c = {name: arr[order] for name, arr in c.items()}
    us = enable_us + np.round(c["t"] * 1e6).astype(np.int64)
    stamp = pc.binary_join_element_wise(
        pa.array(us // 1_000_000).cast(pa.string()),
        pc.utf8_lpad(pa.array(us % 1_000_000).cast(pa.string()), width=6, padding="0"),
        ".",
    )
    n = len(order)
    fields = {
        "dir": pa.array(np.where(c["out"], "o", "i")), "time": stamp,
        "laddr": pa.array(c["laddr"], pa.string()), "lport": c["lport"],
        "faddr": pa.array(c["faddr"], pa.string()), "fport": c["fport"],
        "ssthresh": c["ssthresh"], "cwnd": c["cwnd"], "t_flags2": None, "snd_wnd": None,
        "rcv_wnd": None, "snd_scale": None, "rcv_scale": None, "state": None, "mss": None,
        "srtt": c["srtt"], "sack": None, "t_flags": None, "rto": c["rto"],
        "snd_buf_hiwat": None, "snd_buf_cc": c["snd_buf_cc"], "rcv_buf_hiwat": None,
        "rcv_buf_cc": None, "inflight": c["inflight"], "t_segqlen": None,
        "flowid": c["flowid"], "flowtype": c["flowtype"],
    }  # fmt: skip
    table = pa.table({k: pa.array(np.full(n, _CONST[k])) if v is None else v
                      for k, v in fields.items()})  # fmt: skip
    out = io.BytesIO()
    csv.write_csv(table, out, csv.WriteOptions(include_header=False, quoting_style="none"))
    return out.getvalue().decode()
