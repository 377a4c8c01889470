"""The samplers' rows of a run's time series, read as streams (ccbench.timeseries):
the senders' `ss` files (Linux), their siftr logs (FreeBSD) and rt1's queue samples.

Each file is read once, in columnar batches (pyarrow), never as one string or a list
of dicts, so memory follows the rows kept, not the file's size: a siftr log's
incoming packets are dropped batch by batch, and so are sockets that are not a flow's.
A file that does not parse gives no rows and one problem naming it (RawDir.problem).
"""

from __future__ import annotations

import lzma
import zlib
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ccbench import layout
from ccbench.layout import RawDir
from ccbench.parse.qdisc import iter_qdisc_samples, iter_queue_points
from ccbench.parse.siftr_stream import SiftrReader
from ccbench.parse.ss import SsReader

# The sampler runs from before the first flow to after the last: its samples must
# reach this share of the traffic, else the file was cut short.
SS_MIN_COVERAGE = 0.9
# What reading a damaged or truncated stored file may raise (before ValueError: a
# UnicodeDecodeError is one).
_READ_ERRORS = (UnicodeDecodeError, OSError, EOFError, lzma.LZMAError, zlib.error)


def _unreadable(e: BaseException) -> str:
    if isinstance(e, UnicodeDecodeError):
        return "not UTF-8 text"
    return f"unreadable ({type(e).__name__}: {e})"


def _flow_of(local: pa.Array, local_to_flow: dict[str, int]) -> np.ndarray:
    """Each row's flow (0: not a flow's socket) from its local address."""
    if not local_to_flow:
        return np.zeros(len(local), dtype=np.int64)
    keys = pa.array(list(local_to_flow), pa.string())
    idx = pc.index_in(local, value_set=keys).to_numpy(zero_copy_only=False)
    flows = np.array([0, *local_to_flow.values()], dtype=np.int64)
    return flows[np.nan_to_num(idx, nan=-1).astype(np.int64) + 1]


def _float(col: Any) -> np.ndarray:
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def ss_rows(
    rd: RawDir, t0: float | None, traffic_s: float, local_to_flow: dict[str, int]
) -> list[pd.DataFrame]:
    """The ss samplers' rows (Linux senders); every file is checked, even when the
    run's start time is unknown and it gives no rows."""
    frames = []
    for name in rd.glob(layout.SS_GLOB):
        lines = rd.lines(name)
        if lines is None:
            continue
        reader = SsReader(lines)
        parts: list[pd.DataFrame] = []
        try:
            for b in reader.batches():
                flow = _flow_of(b.column("local"), local_to_flow)
                keep = flow > 0
                if t0 is None or not keep.any():
                    continue
                parts.append(pd.DataFrame({
                    "flow": flow[keep],
                    "t_s": _float(b.column("t_s"))[keep] - t0,
                    "throughput_bps": _float(b.column("delivery_rate_bps"))[keep],
                    "cwnd_bytes": _float(b.column("cwnd_bytes"))[keep],
                    "rtt_us": _float(b.column("rtt_us"))[keep],
                }))  # fmt: skip
        except _READ_ERRORS as e:
            rd.problem(name, _unreadable(e))
            continue
        except ValueError as e:
            rd.problem(name, f"not ss samples ({e})")
            continue
        last = reader.last_ts
        if last is None:
            rd.problem(name, "no samples")
            continue
        if t0 is not None and traffic_s > 0 and last - t0 < SS_MIN_COVERAGE * traffic_s:
            rd.problem(name, f"samples end {last - t0:.1f} s into {traffic_s:g} s of traffic "
                             "(cut short)")  # fmt: skip
        frames += [p.assign(source="ss") for p in parts]
    return frames


def siftr_rows(rd: RawDir, t0: float | None, local_to_flow: dict[str, int]) -> list[pd.DataFrame]:
    """The siftr logs' rows (FreeBSD senders: the flows' outgoing packets); every file
    is checked, even when the run's start time is unknown and it gives no rows."""
    frames = []
    for name in rd.glob(layout.SIFTR_GLOB):
        lines = rd.lines(name)
        if lines is None:
            continue
        # (t_s, flow (None: siftr2, whose records name no address), flowid, cwnd, srtt)
        parts: list[tuple[np.ndarray, np.ndarray | None, pa.Array, np.ndarray, np.ndarray]] = []
        try:
            reader = SiftrReader(lines)
            for b in reader.batches():
                b = b.filter(pc.equal(b.column("direction"), "out"))
                if not b.num_rows:
                    continue
                local = b.column("local")
                flow = None if local.null_count == len(local) else _flow_of(local, local_to_flow)
                keep = np.ones(b.num_rows, dtype=bool) if flow is None else flow > 0
                if keep.any():
                    parts.append((_float(b.column("t_s"))[keep],
                                  None if flow is None else flow[keep],
                                  b.column("flowid").filter(pa.array(keep)),
                                  _float(b.column("cwnd_bytes"))[keep],
                                  _float(b.column("srtt_us"))[keep]))  # fmt: skip
            log = reader.log()
        except _READ_ERRORS as e:
            rd.problem(name, _unreadable(e))
            continue
        except ValueError as e:
            rd.problem(name, str(e))
            continue
        if t0 is None:
            continue
        # siftr2: a flow's local address is its footer's.
        flow_of_id = {fid: local_to_flow.get(f.local or "", 0)
                      for fid, f in reader.flows_by_id().items()}  # fmt: skip
        for t_s, flow, fid, cwnd, srtt in parts:
            if flow is None:
                ids = fid.to_pylist()
                flow = np.fromiter((flow_of_id.get(i or "", 0) for i in ids), dtype=np.int64,
                                   count=len(ids))  # fmt: skip
            keep = flow > 0
            if keep.any():
                frames.append(pd.DataFrame({
                    "flow": flow[keep], "t_s": log.enable_time_s + t_s[keep] - t0,
                    "cwnd_bytes": cwnd[keep], "rtt_us": srtt[keep], "source": "siftr",
                }))  # fmt: skip
    return frames


def qdisc_rows(rd: RawDir, meta: dict[str, Any], t0: float) -> list[pd.DataFrame]:
    """The bottleneck queue's rows (flow 0); the file's problems are the summary's."""
    qs = meta.get("qdisc_sampler")
    if not isinstance(qs, dict):
        return []
    lines = rd.lines(layout.qdisc(str(qs.get("node", "rt1"))))
    if lines is None:
        return []
    try:
        pts = list(iter_queue_points(iter_qdisc_samples(lines)))
    except (ValueError, *_READ_ERRORS):
        return []
    if not pts:
        return []
    d0, s0, o0 = pts[0].drops, pts[0].sent_pkts, pts[0].overlimits
    return [pd.DataFrame({
        "flow": 0, "source": "qdisc", "t_s": [p.t_unix - t0 for p in pts],
        "backlog_pkts": [p.backlog_pkts for p in pts],
        "backlog_bytes": [p.backlog_bytes for p in pts],
        "drops": [p.drops - d0 for p in pts],
        "sent_pkts": [p.sent_pkts - s0 for p in pts],
        "overlimits": [None if p.overlimits is None or o0 is None else p.overlimits - o0
                       for p in pts],
    })]  # fmt: skip
