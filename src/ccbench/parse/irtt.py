"""irtt client JSON (`irtt client -o -`, json_format 1): round trips in order.

Times in the JSON are nanoseconds; records here are µs. A round trip whose `lost` is
anything but "false" (true, true_down, true_up) has no RTT and is not a sample.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any


@dataclass(frozen=True)
class IrttResult:
    version: str
    sent: int
    received: int
    rtts_us: list[float]  # per received round trip, in send order
    send_delay_us: list[float]  # one-way, client -> server (clocks as synchronised as they are)
    receive_delay_us: list[float]  # one-way, server -> client


def read_irtt(stream: IO[str]) -> IrttResult:
    """parse_irtt of an open irtt JSON file: one document, about 0.3 kB per round trip
    (json.load, as for iperf3: ccbench.parse.iperf3.read_iperf3 says why)."""
    return parse_irtt(json.load(stream))


def parse_irtt(doc: dict[str, Any]) -> IrttResult:
    try:
        fmt = doc["version"]["json_format"]
        trips = doc["round_trips"]
        stats = doc["stats"]
    except (KeyError, TypeError) as e:
        raise ValueError(f"not irtt client JSON: missing {e}") from e
    if fmt != 1:
        raise ValueError(f"irtt json_format {fmt} is not supported (1 is)")
    rtts, up, down = [], [], []
    for t in trips:
        if t.get("lost") != "false":
            continue
        d = t.get("delay") or {}
        if "rtt" in d:
            rtts.append(d["rtt"] / 1e3)
        if "send" in d:
            up.append(d["send"] / 1e3)
        if "receive" in d:
            down.append(d["receive"] / 1e3)
    return IrttResult(
        version=str(doc["version"].get("irtt", "")),
        sent=int(stats.get("packets_sent", len(trips))),
        received=int(stats.get("packets_received", len(rtts))),
        rtts_us=rtts,
        send_delay_us=up,
        receive_delay_us=down,
    )
