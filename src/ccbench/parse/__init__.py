"""Pure parsers for tool output (iperf3, ss, tc, ping): text or dict in, records out.

An endpoint is one "address:port" string everywhere: IPv6 in brackets where ccbench
writes it (`join_hostport`); `split_hostport` also reads the tools' own forms."""

from __future__ import annotations


def join_hostport(host: str, port: int | str) -> str:
    """ "10.1.3.2:5201", or "[fe80::1]:5201" for an IPv6 address (a colon in it)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def split_hostport(text: str) -> tuple[str, str]:
    """(address, port) of an endpoint, split at its last colon; the address without
    brackets. Reads what `join_hostport` writes and FreeBSD sockstat's forms: the
    numeric host, IPv6 bare, then ":port", with "*" for a wildcard address or port 0
    (usr.bin/sockstat sockstat.c printaddr(), main.c formataddr()): "fe80::1:22" and
    "[fe80::1]:22" -> ("fe80::1", "22"), "*:*" -> ("*", "*"). ValueError without a colon."""
    host, sep, port = text.rpartition(":")
    if not sep:
        raise ValueError(f"address without a port: {text!r}")
    return host.removeprefix("[").removesuffix("]"), port
