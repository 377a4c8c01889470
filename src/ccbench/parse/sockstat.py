"""Parse FreeBSD `sockstat -46 -CS -P tcp`: each TCP socket with its congestion-control
module (-C, column CC) and TCP stack (-S, column STACK).

Format (sockstat(1)): one header line, then one line per socket and file descriptor.
Columns, in order: USER, COMMAND, PID, FD, PROTO, LOCAL ADDRESS, FOREIGN ADDRESS, then
only with their options ENCAPS (-U), PATH STATE and CONN STATE (-s), STACK (-S), CC (-C).
Addresses are `address:port` (`*:*` when not connected); no cell holds a space, so rows
split on whitespace and the header says which cell is which. Column widths differ by
version (FreeBSD 14: fixed offsets, usr.bin/sockstat/sockstat.c displaysock(); 15/main:
widths fitted to the cells, usr.bin/sockstat/main.c display_sock()); whitespace
splitting reads both. No real capture was available: the captures were written from
the man page and from both versions' print code (tests/captures/freebsd/README.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from ccbench.parse import split_hostport

# Header names made of two words (sockstat prints them with a single space).
_TWO_WORDS = ("LOCAL ADDRESS", "FOREIGN ADDRESS", "PATH STATE", "CONN STATE")
_BASE = ("USER", "COMMAND", "PID", "FD", "PROTO", "LOCAL ADDRESS", "FOREIGN ADDRESS")


@dataclass(frozen=True)
class Socket:
    user: str
    command: str
    pid: str  # a number, or "?" / "??" for a socket no process holds (see `held`)
    fd: str
    proto: str  # tcp4, tcp6, tcp46
    local: str  # "address:port"
    foreign: str
    stack: str | None  # None: no STACK column or an empty cell
    cc: str | None

    @property
    def held(self) -> bool:
        """Whether a process holds this socket by a file descriptor. For one it does not
        (closed and lingering, e.g. in TIME_WAIT) sockstat prints "?" in USER, COMMAND,
        PID and FD up to FreeBSD 14 (sockstat.c, display()) and "??" from 15 on (main.c,
        display()); a held socket's PID is its number even when COMMAND is "??" (main.c,
        getprocname(): the process exited while sockstat ran)."""
        return self.pid.isdigit()


def _header(line: str) -> list[str]:
    text = " ".join(line.split())
    for name in _TWO_WORDS:
        text = text.replace(name, name.replace(" ", "\0"))
    return [w.replace("\0", " ") for w in text.split()]


def parse_sockstat(text: str) -> list[Socket]:
    """Every socket row; ValueError when there is no header with the columns a CC and
    stack check needs (STACK and CC: sockstat run without -S or -C) or a row does not
    fit the header."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    start = next((i for i, ln in enumerate(lines) if ln.split()[0] == "USER"), None)
    if start is None:
        raise ValueError("no sockstat header line (USER COMMAND PID ...)")
    cols = _header(lines[start])
    if tuple(cols[: len(_BASE)]) != _BASE:
        raise ValueError(f"unexpected sockstat header: {lines[start].strip()!r}")
    missing = [c for c in ("STACK", "CC") if c not in cols]
    if missing:
        raise ValueError(f"sockstat header has no {' or '.join(missing)} column (-S/-C not given?)")
    out = []
    for ln in lines[start + 1 :]:
        cells = ln.split()
        if len(cells) > len(cols) or len(cells) < len(_BASE):
            raise ValueError(f"sockstat row does not fit its header: {ln.strip()!r}")
        # A trailing cell sockstat left empty (no CC for this socket) leaves a short row.
        row = dict(zip(cols, cells + [""] * (len(cols) - len(cells)), strict=True))
        out.append(
            Socket(
                user=row["USER"], command=row["COMMAND"], pid=row["PID"], fd=row["FD"],
                proto=row["PROTO"], local=row["LOCAL ADDRESS"], foreign=row["FOREIGN ADDRESS"],
                stack=row["STACK"] or None, cc=row["CC"] or None,
            )
        )  # fmt: skip
    return out


def connections_to(sockets: list[Socket], address: str, port: int) -> list[Socket]:
    """The TCP connections a process holds whose foreign end is address:port. For one
    iperf3 flow these are its control connection and its data connection(s): all to the
    server's port, told apart by nothing sockstat prints, so a check must hold for all
    of them. Sockets no process holds (`Socket.held`) are left out: the previous run's
    connections to the same port linger in TIME_WAIT after its iperf3 exited, held by
    no process, and must not be read as this run's (they keep their own stack and CC).
    sockstat prints the TCP state only with -s, which is not asked: being held is what
    tells them apart."""
    out = []
    for s in sockets:
        if not s.proto.startswith("tcp") or s.foreign in ("*:*", "") or not s.held:
            continue
        host, p = split_hostport(s.foreign)
        if host == address and p == str(port):
            out.append(s)
    return out
