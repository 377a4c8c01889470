"""Bottleneck queue kinds, as classes registered by name: how each is asked of tc, read
back, and what a full queue means. Adding a qdisc is one class here.

Standard library only (ccbench.spec, which everything reads, uses it).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from ccbench.errors import CcbenchError


class QueueKind:
    """One qdisc kind as rt1's child queue (handle 10:) under the shaper."""

    name: ClassVar[str]
    # A drop-tail queue holds at most its limit: RTT + a full queue bounds what the path
    # gives (validity's hidden-queue and RTT-excess checks). An AQM sizes its own
    # standing queue: no such bound.
    drop_tail: ClassVar[bool] = False
    # "pkts" or "bytes": what tc's limit counts (a config always gives packets).
    limit_unit: ClassVar[str] = "pkts"

    def limit(self, limit_pkts: int, frame_bytes: int) -> int:
        """The limit as tc takes it, in limit_unit."""
        return limit_pkts * frame_bytes if self.limit_unit == "bytes" else limit_pkts

    def tc_args(self, limit_pkts: int, frame_bytes: int, rate_bps: float) -> list[str]:
        return [self.name, "limit", str(self.limit(limit_pkts, frame_bytes))]

    def readback_problem(
        self, options: dict[str, Any], limit_pkts: int, frame_bytes: int
    ) -> str | None:
        """What is wrong with the qdisc as tc -j reads it back (its `options`), or None."""
        return None

    def as_configured(
        self, have: str, have_pkts: Any, have_bytes: Any, limit_pkts: int, frame_bytes: int
    ) -> tuple[bool, str, str]:
        """(limit wrong, what rt1 had, what was asked) for rt1's queue of kind `have` as
        tc-before.json recorded it, when this kind was asked."""
        got = f"{have} {have_pkts if have_pkts is not None else have_bytes}"
        return False, got, f"{self.name} {limit_pkts}"


class _Pfifo(QueueKind):
    name = "pfifo"
    drop_tail = True

    def readback_problem(
        self, options: dict[str, Any], limit_pkts: int, frame_bytes: int
    ) -> str | None:
        got = options.get("limit")
        return None if got == limit_pkts else f"pfifo limit read back as {got}"

    def as_configured(
        self, have: str, have_pkts: Any, have_bytes: Any, limit_pkts: int, frame_bytes: int
    ) -> tuple[bool, str, str]:
        got = f"{have} {have_pkts if have_pkts is not None else have_bytes}"
        return have_pkts != limit_pkts, got, f"pfifo {limit_pkts}"


class _Bfifo(QueueKind):
    name = "bfifo"
    drop_tail = True
    limit_unit = "bytes"

    def as_configured(
        self, have: str, have_pkts: Any, have_bytes: Any, limit_pkts: int, frame_bytes: int
    ) -> tuple[bool, str, str]:
        want = limit_pkts * frame_bytes
        return have_bytes != want, f"{have} {have_bytes} B", f"bfifo {want} B"


class _Aqm(QueueKind):
    """fq_codel, codel, pie: a packet limit, the rest the AQM's own defaults."""


class _FqCodel(_Aqm):
    name = "fq_codel"


class _Codel(_Aqm):
    name = "codel"


class _Pie(_Aqm):
    name = "pie"


class _Red(QueueKind):
    name = "red"
    limit_unit = "bytes"

    def tc_args(self, limit_pkts: int, frame_bytes: int, rate_bps: float) -> list[str]:
        # RED thresholds in bytes: min at 1/4 of the limit, max at 3/4 (RFC 7567 spirit).
        limit = limit_pkts * frame_bytes
        lo, hi = max(frame_bytes, limit // 4), max(2 * frame_bytes, 3 * limit // 4)
        burst = max(1, math.ceil((2 * lo + hi) / (3 * frame_bytes)))
        return ["red", "limit", str(limit), "min", str(lo), "max", str(hi),
                "avpkt", str(frame_bytes), "burst", str(burst),
                "bandwidth", f"{int(rate_bps)}bit", "probability", "0.1"]  # fmt: skip


REGISTRY: dict[str, QueueKind] = {
    q.name: q for q in (_Pfifo(), _Bfifo(), _FqCodel(), _Codel(), _Pie(), _Red())
}
NAMES = tuple(REGISTRY)


def queue_kind(name: str) -> QueueKind:
    try:
        return REGISTRY[name]
    except KeyError:
        raise CcbenchError(f"topology.queue.kind: unknown queue '{name}'") from None
