"""Fetching a node's file (ccbench.fetch, SshExecutor.get, NetnsExecutor.get).

No sshd here (tests/integration/test_ssh_fetch.py has the real one): `OnThisHost` is an
SshExecutor whose ssh is replaced by what sshd does with the command line ccbench
builds, `sh -c '<the quoted string>'`, so the quoting, the size query, gzip, the
streaming, the checks and the renaming all run for real on this machine's files.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest

from ccbench import fetch
from ccbench.exec import NetnsExecutor
from ccbench.exec_ssh import SshExecutor, SshTarget
from ccbench.fetch import Fetched, FetchFailed, receive


class OnThisHost(SshExecutor):
    """sshd's part played by sh: the remote string ccbench quoted, run by a shell."""

    def command(self, argv: Sequence[str]) -> list[str]:
        return ["sh", "-c", super().command(argv)[-1]]


def on_this_host(tmp_path: Path) -> OnThisHost:
    return OnThisHost("s1", SshTarget("pc1.emulab.net"), control_dir=tmp_path, retries=0)


def text_file(path: Path, lines: int = 60_000) -> bytes:
    """A siftr-like text file (compresses like one: ~6:1)."""
    body = "".join(
        f"o,{1745600000 + i // 1000}.{i % 1000 * 997 % 1000000:06d},10.1.1.11,54321,"
        f"10.1.3.21,5202,{1000000 + i * 7 % 90000},{1500000 + i * 13 % 700000},1024\n"
        for i in range(lines)
    ).encode()
    path.write_bytes(body)
    return body


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.endswith(".part"))


def test_timeout_grows_with_size_from_a_floor() -> None:
    assert fetch.timeout_for(0) == fetch.FLOOR_S == 60
    # a 300 s seed-scale siftr log (~810 MB): 60 s + 1620 s; the old get had 60 s in all
    assert fetch.timeout_for(810_000_000) == pytest.approx(60 + 1620)


def test_compression_is_chosen_by_size_unless_asked() -> None:
    assert not fetch.want_compression(fetch.COMPRESS_MIN_BYTES - 1, None)
    assert fetch.want_compression(fetch.COMPRESS_MIN_BYTES, None)
    assert fetch.want_compression(10, True) and not fetch.want_compression(1 << 30, False)


def test_size_is_read_from_gnu_and_bsd_wc() -> None:
    assert fetch.parse_size("123 /var/tmp/x\n") == 123
    assert fetch.parse_size("     123 /var/tmp/x\n") == 123  # FreeBSD pads
    with pytest.raises(ValueError, match="wc -c"):
        fetch.parse_size("wc: x: No such file\n")


def test_a_large_file_arrives_gzipped_and_whole(tmp_path: Path) -> None:
    node, out = tmp_path / "node", tmp_path / "raw"
    node.mkdir(), out.mkdir()
    body = text_file(node / "ccbench-siftr.log")
    got = on_this_host(tmp_path).get(str(node / "ccbench-siftr.log"), out / "siftr-s1.log")
    assert isinstance(got, Fetched)
    assert got.path == out / "siftr-s1.log.gz" and got.compressed
    assert not (out / "siftr-s1.log").exists()
    assert got.node_bytes == len(body) > fetch.COMPRESS_MIN_BYTES
    assert got.fetched_bytes == got.path.stat().st_size < len(body) / 4
    assert gzip.decompress(got.path.read_bytes()) == body
    assert got.timeout_s == fetch.timeout_for(len(body)) and got.seconds > 0
    assert leftovers(out) == []


def test_a_small_file_arrives_as_is_and_odd_names_stay_one_argument(tmp_path: Path) -> None:
    node, out = tmp_path / "node", tmp_path / "raw"
    node.mkdir(), out.mkdir()
    remote = node / "it's a $(file) name; rm -rf x"
    remote.write_bytes(b"TS 1.0\n[]\n")
    got = on_this_host(tmp_path).get(str(remote), out / "qdisc-rt1.txt")
    assert (got.compressed, got.node_bytes, got.fetched_bytes) == (False, 10, 10)
    assert (out / "qdisc-rt1.txt").read_bytes() == b"TS 1.0\n[]\n"


def test_compression_can_be_forced_either_way(tmp_path: Path) -> None:
    node, out = tmp_path / "node", tmp_path / "raw"
    node.mkdir(), out.mkdir()
    body = text_file(node / "big", lines=40_000)
    ex = on_this_host(tmp_path)
    assert ex.get(str(node / "big"), out / "big", compress=False).path.read_bytes() == body
    (node / "small").write_bytes(b"x" * 100)
    small = ex.get(str(node / "small"), out / "small", compress=True)
    assert small.path.name == "small.gz" and gzip.decompress(small.path.read_bytes()) == b"x" * 100


def test_the_remote_command_is_an_argv_quoted_element_by_element(tmp_path: Path) -> None:
    ex = SshExecutor("s1", SshTarget("pc1.emulab.net"), control_dir=tmp_path)
    remote = "/var/tmp/a b'c"
    cmd = ex.command([*fetch.GZIP_ARGV, remote])
    assert shlex.split(cmd[-1]) == ["gzip", "-1", "-n", "-c", "--", remote]


def test_a_missing_file_is_one_line_naming_node_and_files(tmp_path: Path) -> None:
    out = tmp_path / "raw"
    out.mkdir()
    with pytest.raises(FetchFailed) as e:
        on_this_host(tmp_path).get("/nonexistent/siftr.log", out / "siftr-s1.log")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("s1: fetch of /nonexistent/siftr.log to ")
    assert str(out / "siftr-s1.log") in msg and "after 0 bytes received" in msg
    assert "No such file" in msg and e.value.received == 0
    assert list(out.iterdir()) == []


def test_a_failed_fetch_removes_an_earlier_copy(tmp_path: Path) -> None:
    out = tmp_path / "raw"
    out.mkdir()
    (out / "siftr-s1.log.gz").write_bytes(b"an earlier attempt's file")
    with pytest.raises(FetchFailed):
        on_this_host(tmp_path).get("/nonexistent/siftr.log", out / "siftr-s1.log")
    assert list(out.iterdir()) == []


def _receive(tmp_path: Path, argv: list[str], *, compressed: bool, node_bytes: int,
             timeout_s: float = 30) -> int:  # fmt: skip
    return receive(argv, node="s1", remote="/var/tmp/f", local=tmp_path / "out" / "f",
                   node_bytes=node_bytes, compressed=compressed, timeout_s=timeout_s)  # fmt: skip


@pytest.fixture
def src(tmp_path: Path) -> tuple[Path, bytes]:
    (tmp_path / "out").mkdir()
    body = text_file(tmp_path / "f")
    return tmp_path / "f", body


def test_a_gzip_stream_cut_short_is_caught_and_nothing_is_left(
    tmp_path: Path, src: tuple[Path, bytes]
) -> None:
    path, body = src
    cut = ["sh", "-c", 'gzip -1 -c "$1" | head -c 20000', "cut", str(path)]
    with pytest.raises(FetchFailed, match="after 20000 bytes received: the gzip stream ended"):
        _receive(tmp_path, cut, compressed=True, node_bytes=len(body))
    assert list((tmp_path / "out").iterdir()) == []


def test_a_plain_stream_of_the_wrong_size_is_caught(
    tmp_path: Path, src: tuple[Path, bytes]
) -> None:
    path, body = src
    with pytest.raises(FetchFailed, match=f"the node's file has {len(body) + 1}"):
        _receive(tmp_path, ["cat", str(path)], compressed=False, node_bytes=len(body) + 1)
    assert list((tmp_path / "out").iterdir()) == []


def test_a_changed_file_or_a_corrupt_byte_fails_the_gzip_check(
    tmp_path: Path, src: tuple[Path, bytes]
) -> None:
    path, body = src
    gz = tmp_path / "f.gz"
    gz.write_bytes(gzip.compress(body, 1))
    with pytest.raises(FetchFailed, match="inflated, the node's file has"):
        _receive(tmp_path, ["cat", str(gz)], compressed=True, node_bytes=len(body) - 5)
    data = bytearray(gz.read_bytes())
    data[-8] ^= 0xFF  # the trailer's CRC-32 (of the node's bytes)
    gz.write_bytes(bytes(data))
    with pytest.raises(FetchFailed, match="does not check out"):
        _receive(tmp_path, ["cat", str(gz)], compressed=True, node_bytes=len(body))
    assert list((tmp_path / "out").iterdir()) == []


def test_a_stalled_sender_times_out_and_is_killed(tmp_path: Path, src: tuple[Path, bytes]) -> None:
    path, body = src
    pidfile = tmp_path / "pid"
    stall = ["sh", "-c", 'echo $$ > "$2"; cat "$1"; exec sleep 30', "stall", str(path),
             str(pidfile)]  # fmt: skip
    with pytest.raises(FetchFailed, match=r"timed out after 1 s \(budget for"):
        _receive(tmp_path, stall, compressed=False, node_bytes=len(body), timeout_s=1)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)
    assert list((tmp_path / "out").iterdir()) == []


def test_the_senders_own_error_is_the_reason(tmp_path: Path, src: tuple[Path, bytes]) -> None:
    path, body = src
    boom = ["sh", "-c", 'head -c 1000 "$1"; echo "gzip: read error" >&2; exit 3', "b", str(path)]
    with pytest.raises(FetchFailed) as e:
        _receive(tmp_path, boom, compressed=False, node_bytes=len(body))
    assert str(e.value).endswith("after 1000 bytes received: exit 3: gzip: read error")
    assert e.value.rc == 3 and e.value.received == 1000
    killed = ["sh", "-c", 'head -c 5000 "$1"; kill -9 $$', "k", str(path)]
    with pytest.raises(FetchFailed, match="5000 bytes received: killed by signal 9"):
        _receive(tmp_path, killed, compressed=False, node_bytes=len(body))


def test_ssh_failing_to_connect_is_retried(tmp_path: Path) -> None:
    node, out = tmp_path / "node", tmp_path / "raw"
    node.mkdir(), out.mkdir()
    (node / "f").write_bytes(b"abc")
    tries = tmp_path / "tries"

    class Flaky(OnThisHost):
        def command(self, argv: Sequence[str]) -> list[str]:
            inner = super().command(argv)
            if argv[0] == "wc":
                return inner
            # the first stream attempt fails as ssh does when it cannot connect
            return ["sh", "-c", 'if [ ! -e "$1" ]; then : > "$1"; exit 255; fi; shift; exec "$@"',
                    "flaky", str(tries), *inner]  # fmt: skip

    ex = Flaky("s1", SshTarget("pc1.emulab.net"), control_dir=tmp_path, retries=1)
    assert ex.get(str(node / "f"), out / "f").path.read_bytes() == b"abc"


def test_the_local_executor_copies_and_never_compresses(tmp_path: Path) -> None:
    body = text_file(tmp_path / "siftr.log")
    got = NetnsExecutor(None).get(str(tmp_path / "siftr.log"), tmp_path / "copy.log")
    assert (got.compressed, got.node_bytes, got.fetched_bytes) == (False, len(body), len(body))
    assert hashlib.sha256(got.path.read_bytes()).digest() == hashlib.sha256(body).digest()
    with pytest.raises(FetchFailed, match=r"^host: fetch of /nonexistent to .* after 0 bytes"):
        NetnsExecutor(None).get("/nonexistent", tmp_path / "x")
    assert leftovers(tmp_path) == [] and not (tmp_path / "x").exists()


def test_a_local_write_error_is_the_same_one_error(tmp_path: Path, src: tuple[Path, bytes]) -> None:
    path, body = src
    with pytest.raises(FetchFailed, match="after 0 bytes received: cannot write here"):
        receive(["cat", str(path)], node="s1", remote="/var/tmp/f",
                local=tmp_path / "missing" / "f", node_bytes=len(body), compressed=False,
                timeout_s=10)  # fmt: skip
    gone = tmp_path / "gone"
    gone.mkdir()
    vanish = ["sh", "-c", 'cat "$1"; rm -r "$2"', "v", str(path), str(gone)]
    with pytest.raises(FetchFailed, match=r"cannot write .*\.part: No such file"):
        receive(vanish, node="s1", remote="/var/tmp/f", local=gone / "f",
                node_bytes=len(body), compressed=False, timeout_s=10)  # fmt: skip
