"""flent data files (.flent.gz: gzip'd JSON, flent 2.x): the series a test recorded.

Each series keeps its values (flent's units, e.g. ms for `Ping (ms) ICMP`, Mbit/s for
TCP upload), sample times, and which runner and command made it (SERIES_META), so a
report can say which program measured what.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass
from typing import IO, Any


@dataclass(frozen=True)
class FlentSeries:
    name: str
    runner: str  # e.g. PingRunner (fping/ping), IrttRunner, NetperfDemoRunner
    command: str
    units: str
    times: list[float]  # unix seconds of each sample
    values: list[float]


@dataclass(frozen=True)
class FlentData:
    version: str
    test: str
    series: list[FlentSeries]
    failed_runners: int


def parse_flent(doc: dict[str, Any]) -> FlentData:
    try:
        meta = doc["metadata"]
        raw = doc["raw_values"]
    except (KeyError, TypeError) as e:
        raise ValueError(f"not a flent data file: missing {e}") from e
    smeta = meta.get("SERIES_META") or {}
    series = []
    for name, points in raw.items():
        m = smeta.get(name) or {}
        pts = [p for p in points if isinstance(p.get("val"), int | float)]
        series.append(
            FlentSeries(
                name=name,
                runner=str(m.get("RUNNER", "")),
                command=str(m.get("COMMAND", "")),
                units=str(m.get("UNITS", "")),
                times=[float(p["t"]) for p in pts],
                values=[float(p["val"]) for p in pts],
            )
        )
    return FlentData(
        version=str(meta.get("FLENT_VERSION", doc.get("version", ""))),
        test=str(meta.get("NAME", "")),
        series=series,
        failed_runners=int(meta.get("FAILED_RUNNERS") or 0),
    )


def parse_flent_gz(data: bytes) -> FlentData:
    return read_flent_gz(io.BytesIO(data))


def read_flent_gz(stream: IO[bytes]) -> FlentData:
    """A .flent.gz from an open binary file, decompressed as it is read (its JSON is
    one document, loaded whole: see ccbench.parse.iperf3.read_iperf3)."""
    try:
        with gzip.GzipFile(fileobj=stream) as gz:
            return parse_flent(json.load(gz))
    except (OSError, EOFError) as e:
        raise ValueError(f"not a gzip'd flent data file: {e}") from e
