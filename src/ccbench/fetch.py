"""Fetching one file from a node to local disk, streamed, checked, all or nothing.

What every executor's `get` shares: the typed result (`Fetched`), the one error a
failed fetch raises (`FetchFailed`), the timeout rule, and the receiver that streams
a command's stdout to a temporary file, checks it and renames it into place.

Compression: gzip, `-1`. gzip is in FreeBSD's base system and Essential on
Ubuntu/Debian, so every node has it (zstd is in FreeBSD's base too, but on Ubuntu its
command-line tool is an optional package; xz is in both bases but compressed a siftr
log at ~58 MB/s here, slower than a 100 Mbit/s link needs at its ~6.5:1 ratio).
Python reads gzip with the standard library, as do pandas and pyarrow. gzip -1
measured on a siftr 1.3 log on this machine (2026-11-24): 132 MB/s in, 6.5:1.

The check: gzip's trailer holds the CRC-32 and the length (mod 2^32) of the bytes
it read on the node; zlib verifies both while the stream is inflated here (nothing
inflated is kept), and the inflated length must equal the size the node reported
before sending. An uncompressed fetch must deliver exactly that size.

Timeout: FLOOR_S + node bytes / MIN_RATE_BPS (the file's size on the node, whether
or not it is compressed on the way: compression only makes the fetch faster).
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccbench.errors import CcbenchError

COMPRESS_MIN_BYTES = 1 << 20  # smaller files cross uncompressed: not worth a gzip
FLOOR_S = 60.0  # the least any fetch gets: the executor's old fixed budget
# The slowest link a fetch must survive, in bytes of the node's file per second:
# 0.5 MB/s is 4 Mbit/s uncompressed, ~0.6 Mbit/s of gzip for a siftr log.
MIN_RATE_BPS = 500_000.0
GZIP_ARGV = ("gzip", "-1", "-n", "-c", "--")  # -n: no name or time in the header
CHUNK = 1 << 18


@dataclass(frozen=True)
class Fetched:
    """One fetched file: where it landed and what crossed the link."""

    node: str
    remote: str
    path: Path  # the local file; `<local>.gz` when compressed
    node_bytes: int  # the file's size on the node
    fetched_bytes: int  # bytes received (gzip's output when compressed)
    compressed: bool  # gzip; the local file stays compressed
    seconds: float  # wall time of the whole fetch (size query included)
    timeout_s: float  # the budget it had (timeout_for(node_bytes))


class FetchFailed(CcbenchError):
    """A fetch that did not deliver the whole file. The message is one line naming the
    node, the remote file, the local file and the bytes received; nothing is left under
    the local file's final name (nor its temporary name)."""

    def __init__(
        self, node: str, remote: str, local: Path, received: int, reason: str,
        rc: int | None = None,
    ):  # fmt: skip
        self.node, self.remote, self.local = node, remote, local
        self.received, self.reason = received, " ".join(reason.split())
        self.rc = rc  # the sending command's exit status, when it failed (255: ssh's own)
        super().__init__(
            f"{node}: fetch of {remote} to {local} failed after {received} bytes "
            f"received: {self.reason}"
        )


def timeout_for(node_bytes: int) -> float:
    """Seconds a fetch of a file of `node_bytes` may take (module doc: the rule)."""
    return FLOOR_S + node_bytes / MIN_RATE_BPS


def compressed_name(local: Path) -> Path:
    return local.with_name(local.name + ".gz")


def want_compression(node_bytes: int, compress: bool | None) -> bool:
    """`compress` None: compress when the file is at least COMPRESS_MIN_BYTES."""
    return node_bytes >= COMPRESS_MIN_BYTES if compress is None else compress


def clear(local: Path) -> None:
    """Remove an earlier fetch's file (plain or .gz): a failed fetch must not leave an
    older copy that looks like this one."""
    for p in (local, compressed_name(local)):
        p.unlink(missing_ok=True)


def parse_size(out: str) -> int:
    """`wc -c FILE` output (GNU: "123 FILE"; BSD: "     123 FILE") -> 123."""
    first = out.split()[0] if out.split() else ""
    if not first.isdigit():
        raise ValueError(f"unexpected `wc -c` output {out.strip()[:80]!r}")
    return int(first)


def receive(
    argv: Sequence[str],
    *,
    node: str,
    remote: str,
    local: Path,
    node_bytes: int,
    compressed: bool,
    timeout_s: float,
) -> int:
    """Run `argv` (a local command line that writes the file, gzipped if `compressed`,
    to stdout), stream its output to a temporary file beside `local`, check it, and
    rename it to `local`. Returns the bytes received; FetchFailed otherwise (the
    temporary file removed; `.rc` is the command's exit status when it failed)."""
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{local.name}.", suffix=".part", dir=local.parent)
    except OSError as e:
        raise FetchFailed(node, remote, local, 0, f"cannot write here: {e}") from None
    tmp = Path(tmp_name)
    received = 0
    inflater = zlib.decompressobj(wbits=31) if compressed else None  # 31: gzip only
    inflated = 0
    deadline = time.monotonic() + timeout_s
    err = tempfile.TemporaryFile()  # noqa: SIM115 (closed below; a pipe could fill up)
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=err, start_new_session=True)  # fmt: skip
    assert proc.stdout is not None
    out = proc.stdout.fileno()

    def fail(reason: str, rc: int | None = None) -> FetchFailed:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        proc.wait()
        tmp.unlink(missing_ok=True)
        return FetchFailed(node, remote, local, received, reason, rc)

    try:
        with os.fdopen(fd, "wb") as f:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([out], [], [], left)[0]:
                    raise fail(f"timed out after {timeout_s:.0f} s (budget for "
                               f"{node_bytes} bytes: {FLOOR_S:.0f} s + size / "
                               f"{MIN_RATE_BPS / 1e6:g} MB/s)")  # fmt: skip
                chunk = os.read(out, CHUNK)
                if not chunk:
                    break
                f.write(chunk)
                received += len(chunk)
                if inflater is not None:
                    try:
                        inflated += len(inflater.decompress(chunk))
                    except zlib.error as e:
                        raise fail(f"the gzip stream does not check out ({e})") from None
        try:
            rc = proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise fail(
                f"timed out after {timeout_s:.0f} s waiting for the sender to exit"
            ) from None
        if rc != 0:
            err.seek(0)
            lines = err.read().decode(errors="replace").strip().splitlines()
            detail = lines[-1] if lines else ""
            how = f"killed by signal {-rc}" if rc < 0 else f"exit {rc}"
            if rc == 255 and not detail:  # ssh's own status, the client ended or cut off
                how += " (ssh: the connection or the ssh client ended)"
            raise fail(f"{how}{': ' + detail if detail else ''}", rc)
        problem = _check(inflater, inflated, received, node_bytes)
        if problem:
            raise fail(problem)
        os.replace(tmp, local)
        return received
    except OSError as e:  # this machine's side: a full disk, a vanished directory
        raise fail(f"cannot write {tmp}: {e.strerror or e}") from None
    finally:
        err.close()
        proc.stdout.close()
        tmp.unlink(missing_ok=True)


def _check(
    inflater: zlib._Decompress | None, inflated: int, received: int, node_bytes: int
) -> str | None:
    if inflater is None:
        if received != node_bytes:
            return f"{received} bytes arrived, the node's file has {node_bytes}"
        return None
    if not inflater.eof:
        return "the gzip stream ended early (no trailer: cut short)"
    if inflater.unused_data:
        return "bytes after the gzip stream's end"
    if inflated != node_bytes:
        return f"{inflated} bytes inflated, the node's file has {node_bytes} (it changed?)"
    return None


def copy_local(node: str, remote: str, local: Path) -> Fetched:
    """A file of this machine (a namespace node): copied, never compressed, through a
    temporary name; the copy's size must equal the source's."""
    t0 = time.monotonic()
    clear(local)
    try:
        size = os.stat(remote).st_size
    except OSError as e:
        raise FetchFailed(node, remote, local, 0, e.strerror or str(e)) from None
    fd, tmp_name = tempfile.mkstemp(prefix=f".{local.name}.", suffix=".part", dir=local.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        shutil.copyfile(remote, tmp)
        got = tmp.stat().st_size
        if got != size:
            raise FetchFailed(node, remote, local, got, f"copied {got} bytes of {size}")
        os.replace(tmp, local)
    except OSError as e:
        got = tmp.stat().st_size if tmp.exists() else 0
        raise FetchFailed(node, remote, local, got, e.strerror or str(e)) from None
    finally:
        tmp.unlink(missing_ok=True)
    return Fetched(node, remote, local, size, size, False, time.monotonic() - t0,
                   timeout_for(size))  # fmt: skip
