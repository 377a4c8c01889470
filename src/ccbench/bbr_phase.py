"""BBR's phase named from the two gains it reports (ss `bbr:(...,pacing_gain:P,cwnd_gain:C)`).

Linux's BBR (net/ipv4/tcp_bbr.c, bbr_update_gains) sets both gains from its mode alone:

| mode       | pacing_gain                          | cwnd_gain           |
|------------|--------------------------------------|---------------------|
| STARTUP    | bbr_high_gain = 2885/1000 + 1/256    | bbr_high_gain       |
| DRAIN      | bbr_drain_gain = 1000/2885           | bbr_high_gain       |
| PROBE_BW   | bbr_pacing_gain[cycle]: 5/4, 3/4, 1  | bbr_cwnd_gain = 2   |
| PROBE_RTT  | 1 (BBR_UNIT)                         | 1 (BBR_UNIT)        |

(PROBE_BW paces at 1 in every phase of its cycle while lt_use_bw, a policer found.)
The gains are fixed-point with BBR_SCALE = 8 bits (BBR_UNIT = 256): 2885/1000 is
739/256 = 2.88672, 1000/2885 is 88/256 = 0.34375; tcp_bbr_info carries them so, and
iproute2's ss prints them divided by 256 with `%g` (six significant digits), as seen
on kernel 6.18 here (tests/captures/ss-bbr-*.txt). So the cwnd gain alone names the
mode, except STARTUP and DRAIN, which share it and differ in pacing.

Before its first bandwidth sample a flow reported `bw:0bps` with gains of 1 and 1 (on
kernel 6.18 here, at a BBR flow's first ss sample; 0.1 s later it reported STARTUP's
gains): with a bandwidth estimate of 0 no phase is named.

Gains of another BBR (Google's BBRv3 out of tree: a startup cwnd gain of 2, a drain
pacing gain of 0.5 ...) name no phase here: None, never a guess.
"""

from __future__ import annotations

from collections.abc import Iterable

STARTUP = "startup"
DRAIN = "drain"
PROBE_BW = "probe_bw"
PROBE_RTT = "probe_rtt"
PHASES = (STARTUP, DRAIN, PROBE_BW, PROBE_RTT)

_UNIT = 256  # BBR_UNIT
HIGH_GAIN = (_UNIT * 2885 // 1000 + 1) / _UNIT  # bbr_high_gain: 2.88672
DRAIN_GAIN = (_UNIT * 1000 // 2885) / _UNIT  # bbr_drain_gain: 0.34375
CWND_GAIN = 2.0  # bbr_cwnd_gain
PROBE_BW_PACING = (1.25, 0.75, 1.0)  # bbr_pacing_gain[]: probe up, drain the probe, cruise
_TOL = 1e-3  # ss's %g keeps six significant digits; the gains differ by far more


def _is(x: float, want: float) -> bool:
    return abs(x - want) <= _TOL


def phase(
    pacing_gain: float | None, cwnd_gain: float | None, bw_bps: float | None = None
) -> str | None:
    """The phase Linux's BBR is in, given the gains it reports (and its bandwidth
    estimate, when known); None when they are missing (NaN: not a BBR flow), when the
    estimate is 0 (no sample yet), or when they are not a pair bbr_update_gains sets."""
    if pacing_gain is None or cwnd_gain is None or (bw_bps is not None and bw_bps <= 0):
        return None
    p, c = float(pacing_gain), float(cwnd_gain)
    if _is(c, HIGH_GAIN):
        return STARTUP if _is(p, HIGH_GAIN) else DRAIN if _is(p, DRAIN_GAIN) else None
    if _is(c, CWND_GAIN):
        return PROBE_BW if any(_is(p, g) for g in PROBE_BW_PACING) else None
    if _is(c, 1.0) and _is(p, 1.0):
        return PROBE_RTT
    return None


def phases(
    pacing_gains: Iterable[float | None],
    cwnd_gains: Iterable[float | None],
    bws_bps: Iterable[float | None] | None = None,
) -> list[str | None]:
    """`phase` of each row (e.g. a flow's ss rows' bbr_pacing_gain, bbr_cwnd_gain,
    bbr_bw_bps)."""
    p, c = list(pacing_gains), list(cwnd_gains)
    bw = [None] * len(p) if bws_bps is None else list(bws_bps)
    return [phase(*row) for row in zip(p, c, bw, strict=True)]
