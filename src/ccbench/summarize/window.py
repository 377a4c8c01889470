"""Receive-window limitation (summary.json flows[].rwnd_limited_share): a flow whose
bytes in flight sit at the window its peer advertises is held back by the receiver's
buffer, not by its congestion control, and the run then measures that buffer. The share
comes from the finest sender source with both in-flight bytes and the peer's window
(timeseries_stats.SeriesStats.window_limited: tcp_probe per ACK, ss per sample, siftr
per packet); above RWND_LIMITED_SHARE it is a reason, naming the receiver's buffer
limits as facts.json recorded them."""

from __future__ import annotations

from typing import Any

from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.timeseries_stats import RWND_LIMITED_SHARE, RWND_SLACK_MSS, SeriesStats


def with_window_share(flows: list[dict[str, Any]], st: SeriesStats) -> list[dict[str, Any]]:
    """The flow records with rwnd_limited_share and rwnd_source filled from `st`."""
    got = st.window_limited()
    out = []
    for f in flows:
        share = got.get(int(f["flow"]))
        out.append({**f, "rwnd_limited_share": round(share[0], 4) if share else None,
                    "rwnd_source": share[2] if share else None})  # fmt: skip
    return out


def reasons(spec: RunSpec, flows: list[dict[str, Any]], buffers: dict[str, str]) -> list[Reason]:
    """One reason per flow held at its peer's window for more than RWND_LIMITED_SHARE of
    its samples, naming its receiver's buffer limits (`buffers`: hosts.receiver_buffers)."""
    out = []
    for f in flows:
        share = f.get("rwnd_limited_share")
        if share is None or share <= RWND_LIMITED_SHARE:
            continue
        node = spec.flows[int(f["flow"]) - 1].receiver
        out.append(Reason.of(Code.RWND_LIMITED,
            f"flow {f['flow']}: bytes in flight within {RWND_SLACK_MSS} segments of the "
            f"receiver's advertised window in {share:.0%} of its {f['rwnd_source']} samples: "
            f"the result measures {node}'s receive buffer ({buffers[node]}), not the CC",
            flow=f["flow"], share=share, limit=RWND_LIMITED_SHARE, receiver=node,
        ))  # fmt: skip
    return out
