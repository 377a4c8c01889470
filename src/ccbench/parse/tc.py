"""Parse `tc -s qdisc show` output, JSON (`-j`) or classic text, into QdiscStats.

Units differ between the two iproute2 formats and are normalised here:
- JSON tbf `rate` is bytes/s (x8 -> rate_bps), `burst` bytes, `lat` microseconds;
  `backlog` bytes, `qlen` packets; `limit` is bytes for bfifo and tbf, packets for
  the others (pfifo, netem, fq_codel, ...).
- Text rates are bits/s with 1000-based prefixes (`100Mbit`; `Kibit` with -iec) or,
  with a `bps` suffix, bytes/s; sizes (`15137b`, `58Kb`, `2Mb`) use 1024-based
  prefixes and, above 1 KiB, are rounded by tc itself; `limit 48p` is packets, a
  size is bytes, a bare number (netem) packets.

iproute2 <= 4.20 prints some qdiscs' options as plain text inside `tc -j` output, which
then is not JSON: tbf's (tc/q_tbf.c, tbf_print_opt(): fprintf "rate %s burst %s lat %s"),
between the `"options":{` and `}` that tc_qdisc.c print_qdisc() writes around
print_qopt. parse_tc_qdisc_json reads such an object's words as the text format's.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

_BYTE_LIMIT_KINDS = {"bfifo", "tbf"}
_HEADER_WORDS = {"dev", "parent", "refcnt", "limit", "rate", "burst", "lat"}
_SENT = re.compile(
    r"Sent (\d+) bytes (\d+) pkts? \(dropped (\d+), overlimits (\d+) requeues (\d+)\)"
)
_BACKLOG = re.compile(r"backlog (\S+) (\d+)p")
_RATE = re.compile(r"^([0-9.]+)([KMGT]i?)?(bit|bps)$")
_SIZE = re.compile(r"^([0-9.]+)([KMG]?)b$")
_TIME = re.compile(r"^([0-9.]+)(us|ms|s)$")
_SI = {None: 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_IEC = {"Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3, "Ti": 1024.0**4}
_SIZE_PREFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_TIME_US = {"us": 1.0, "ms": 1e3, "s": 1e6}


@dataclass(frozen=True)
class QdiscStats:
    kind: str
    handle: str  # "1:"
    parent: str  # "root" or the parent class id, e.g. "1:1"
    dev: str | None  # only shown when tc was not given `dev X`
    sent_bytes: int | None
    sent_pkts: int | None
    dropped: int | None
    overlimits: int | None
    requeues: int | None
    backlog_bytes: int | None
    backlog_pkts: int | None
    limit_pkts: int | None = None
    limit_bytes: int | None = None
    rate_bps: float | None = None  # tbf only
    burst_bytes: int | None = None  # tbf only
    latency_us: float | None = None  # tbf only


def parse_tc_qdisc_json(text: str) -> list[QdiscStats]:
    """Parse `tc -s -j qdisc show [dev X]` output.

    Output of an iproute2 that wrote some options as text inside the JSON (<= 4.20) is
    read with those options taken from the text; classic text output (a tc that
    ignored -j) is read by parse_tc_qdisc_text. Raises ValueError (json.JSONDecodeError
    for text that is neither) with a message naming the entry and field for JSON that
    is not tc's: a list where an object belongs, a string, NaN or a negative number
    where a counter belongs.
    """
    try:
        data = json.loads(text) if text.strip() else []
    except json.JSONDecodeError:
        if text.lstrip().startswith("qdisc "):
            return parse_tc_qdisc_text(text)
        repaired = _text_options_as_json(text)
        if repaired is None:
            raise
        data = json.loads(repaired)
    if not isinstance(data, list):
        raise ValueError("tc -j output is not a JSON list")
    return [_from_json(q, i) for i, q in enumerate(data)]


def parse_tc_qdisc_text(text: str) -> list[QdiscStats]:
    """Parse classic `tc [-s] qdisc show [dev X]` text; counters are None without -s."""
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("qdisc "):
            blocks.append([line])
        elif blocks and line[:1].isspace():
            blocks[-1].append(line)
    return [_from_text(b) for b in blocks]


def parse_tc_rate_bps(token: str) -> float:
    """tc rate text -> bits/s: '100Mbit' -> 1e8, '1Kibit' -> 1024, '1Mbps' -> 8e6."""
    m = _RATE.match(token)
    if not m:
        raise ValueError(f"not a tc rate: {token!r}")
    value, prefix, unit = float(m.group(1)), m.group(2), m.group(3)
    scale = _IEC[prefix] if prefix and prefix.endswith("i") else _SI[prefix]
    return value * scale * (8.0 if unit == "bps" else 1.0)


def parse_tc_size_bytes(token: str) -> int:
    """tc size text -> bytes: '15137b' -> 15137, '58Kb' -> 59392, '2Mb' -> 2097152."""
    m = _SIZE.match(token)
    if not m:
        raise ValueError(f"not a tc size: {token!r}")
    return round(float(m.group(1)) * _SIZE_PREFIX[m.group(2)])


# Qdiscs whose own options carry rate, burst and latency (htb keeps them in its class).
_RATE_OPTION_KINDS = frozenset({"tbf"})


def _from_json(q: Any, i: int) -> QdiscStats:
    at = f"qdisc [{i}]"
    if not isinstance(q, dict):
        raise ValueError(f"{at}: a JSON {type(q).__name__} where an object belongs")
    if not isinstance(q.get("kind"), str):
        raise ValueError(f"{at}: no 'kind'")
    kind = q["kind"]
    opts = q.get("options") or {}
    if not isinstance(opts, dict):
        raise ValueError(f"{at} ({kind}): options is not an object")
    limit = opts.get("limit")
    is_tbf = kind in _RATE_OPTION_KINDS
    rate = _num(opts.get("rate"), f"{at} ({kind}) rate") if is_tbf else None
    lat = _num(opts.get("lat"), f"{at} ({kind}) lat") if is_tbf else None

    def c(key: str) -> int | None:
        return _int(q.get(key), f"{at} ({kind}) {key}")

    return QdiscStats(
        kind=kind,
        handle=str(q.get("handle", "")),
        parent="root" if q.get("root") else str(q.get("parent", "")),
        dev=q.get("dev"),
        sent_bytes=c("bytes"),
        sent_pkts=c("packets"),
        dropped=c("drops"),
        overlimits=c("overlimits"),
        requeues=c("requeues"),
        backlog_bytes=c("backlog"),
        backlog_pkts=c("qlen"),
        limit_pkts=_int(limit, f"{at} ({kind}) limit") if kind not in _BYTE_LIMIT_KINDS else None,
        limit_bytes=_int(limit, f"{at} ({kind}) limit") if kind in _BYTE_LIMIT_KINDS else None,
        rate_bps=float(rate) * 8.0 if rate is not None else None,
        burst_bytes=_int(opts.get("burst"), f"{at} ({kind}) burst") if is_tbf else None,
        latency_us=float(lat) if lat is not None else None,
    )


def _from_text(block: list[str]) -> QdiscStats:
    head = block[0].split()
    kind, handle = head[1], head[2]
    opts = _header_options(head[3:])
    body = " ".join(block[1:])
    sent = _SENT.search(body)
    backlog = _BACKLOG.search(body)
    limit_pkts, limit_bytes = _text_limit(opts.get("limit"))
    is_tbf = kind in _RATE_OPTION_KINDS
    lat = _TIME.match(opts.get("lat", "")) if is_tbf else None
    return QdiscStats(
        kind=kind,
        handle=handle,
        parent=opts.get("parent", "root"),
        dev=opts.get("dev"),
        sent_bytes=int(sent.group(1)) if sent else None,
        sent_pkts=int(sent.group(2)) if sent else None,
        dropped=int(sent.group(3)) if sent else None,
        overlimits=int(sent.group(4)) if sent else None,
        requeues=int(sent.group(5)) if sent else None,
        backlog_bytes=parse_tc_size_bytes(backlog.group(1)) if backlog else None,
        backlog_pkts=int(backlog.group(2)) if backlog else None,
        limit_pkts=limit_pkts,
        limit_bytes=limit_bytes,
        rate_bps=parse_tc_rate_bps(opts["rate"]) if is_tbf and "rate" in opts else None,
        burst_bytes=parse_tc_size_bytes(opts["burst"]) if is_tbf and "burst" in opts else None,
        latency_us=float(lat.group(1)) * _TIME_US[lat.group(2)] if lat else None,
    )


_OPTIONS_OPEN = '"options":{'


def _text_options_as_json(text: str) -> str | None:
    """`text` with every `"options":{...}` that holds text words (iproute2 <= 4.20)
    turned into the JSON tc prints for them today; None: no such object, so the text
    is broken some other way."""
    out: list[str] = []
    i = changed = 0
    while (start := text.find(_OPTIONS_OPEN, i)) >= 0:
        body_start = start + len(_OPTIONS_OPEN)
        end = text.find("}", body_start)
        if end < 0:
            return None
        body = text[body_start:end]
        out.append(text[i:body_start])
        if '"' in body or "{" in body or not body.strip():  # JSON: json.loads reads it
            out.append(body)
        else:
            out.append(json.dumps(_text_option_values(body))[1:-1])
            changed += 1
        i = end
    out.append(text[i:])
    return "".join(out) if changed else None


def _text_option_values(body: str) -> dict[str, float | int]:
    """Text option words in the units of tc's JSON: 'rate 100Mbit burst 15137b lat
    50.0ms' -> {'rate': 12500000.0 (bytes/s), 'burst': 15137, 'lat': 50000.0 (us)};
    'limit 48p' -> {'limit': 48}. Words not read here are left out."""
    opts = _header_options(body.split())
    values: dict[str, float | int] = {}
    if "rate" in opts:
        values["rate"] = parse_tc_rate_bps(opts["rate"]) / 8.0
    if "burst" in opts:
        values["burst"] = parse_tc_size_bytes(opts["burst"].split("/")[0])
    lat = _TIME.match(opts.get("lat", ""))
    if lat:
        values["lat"] = float(lat.group(1)) * _TIME_US[lat.group(2)]
    pkts, nbytes = _text_limit(opts.get("limit"))
    limit = pkts if pkts is not None else nbytes
    if limit is not None:
        values["limit"] = limit
    return values


def _text_limit(token: str | None) -> tuple[int | None, int | None]:
    """A text `limit` as (packets, bytes): '48p' packets, a size ('60000b') bytes, a
    bare number (netem) packets."""
    if token is None:
        return None, None
    if token.endswith("p"):
        return int(token[:-1]), None
    if token.endswith("b"):
        return None, parse_tc_size_bytes(token)
    return int(token), None


def _header_options(tokens: list[str]) -> dict[str, str]:
    """'dev X root refcnt 2 limit 48p' -> {'dev': 'X', 'refcnt': '2', 'limit': '48p'}.

    Only the words read here are kept, each at its first occurrence.
    """
    opts: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        if tokens[i] in _HEADER_WORDS and i + 1 < len(tokens):
            opts.setdefault(tokens[i], tokens[i + 1])
            i += 2
        else:
            i += 1
    return opts


def _num(x: Any, where: str) -> float | int | None:
    """A non-negative JSON number (tc's counters and options are unsigned), or None."""
    if x is None:
        return None
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise ValueError(f"{where}: {x!r} is not a number")
    if not math.isfinite(x) or x < 0:
        raise ValueError(f"{where}: {x!r} is not a count")
    return x


def _int(x: Any, where: str) -> int | None:
    v = _num(x, where)
    return None if v is None else int(v)
