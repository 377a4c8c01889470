"""Integration: SshExecutor.get against a real sshd through a tbf-shaped management link.

One node namespace with its own sshd (bench/sshnode.py), its management link shaped to
8 Mbit/s. On the node: a siftr 1.3 log made by bench/streams.py (the seed-scale
benchmark's generator), large enough that the old `get` (`cat` into a string under a
fixed 60 s budget) could not have fetched it over this link: shown with the link's
rate measured here on incompressible bytes. The new get fetches it gzipped, checked,
well inside the budget its size gives it. Then one fetch is killed half way (its ssh
client): one line naming node, files and bytes received, nothing left under the final
name; the next fetch gets the whole file, whose sha256 matches one computed on the node.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.sshnode import SshNode, ssh_node
from ccbench import fetch
from ccbench.fetch import FetchFailed
from tests.conftest import REPO
from tests.integration.conftest import namespaces

pytestmark = pytest.mark.netns

NS = "ccb-itfetch-n1"
RATE_MBIT = 8.0
OLD_BUDGET_S = 60.0  # the old get: the executor's default timeout, whatever the size


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SshNode, Path]]:
    d = tmp_path_factory.mktemp("fetch")
    with ssh_node("s1", NS, "198.19.250", d / "ssh-node") as n:
        n.shape(RATE_MBIT)
        # made on the node, streamed to its disk: 40 s of one flow at 500 Mbit/s, ppl 4
        siftr = d / "node" / "ccbench-siftr.log"
        siftr.parent.mkdir()
        n.ex.run([sys.executable, str(REPO / "bench" / "streams.py"), "siftr", "--out",
                  str(siftr), "--duration", "40", "--rate-mbit", "1000", "--flows", "2"],
                 timeout=120)  # fmt: skip
        yield n, d
    assert namespaces(NS) == []
    left = subprocess.run(["pgrep", "-f", f"ssh.*{d}"], capture_output=True, text=True)
    assert left.stdout == "", "ssh processes left behind"


def link_rate_bps(n: SshNode, d: Path) -> float:
    """Bytes/s the shaped link moves, measured on 3 MB of random bytes sent as they are."""
    rnd = d / "node" / "random.bin"
    rnd.write_bytes(os.urandom(3_000_000))
    got = n.ex.get(str(rnd), d / "random.bin", compress=False)
    assert got.path.read_bytes() == rnd.read_bytes()
    return got.fetched_bytes / got.seconds


def test_a_file_past_the_old_budget_arrives_whole_over_the_shaped_link(
    node: tuple[SshNode, Path],
) -> None:
    n, d = node
    rate = link_rate_bps(n, d)
    assert 0.7e6 < rate < 1.05e6  # the 8 Mbit/s tbf holds (1 MB/s)
    siftr = d / "node" / "ccbench-siftr.log"
    size = siftr.stat().st_size
    assert size / rate > 1.25 * OLD_BUDGET_S  # the old `cat` could not have made it
    out = d / "raw"
    out.mkdir()
    got = n.ex.get(str(siftr), out / "siftr-s1.log")
    assert got.compressed and got.path == out / "siftr-s1.log.gz"
    assert got.node_bytes == size and got.fetched_bytes == got.path.stat().st_size
    assert got.fetched_bytes < size / 4
    assert got.timeout_s == fetch.timeout_for(size) > 4 * OLD_BUDGET_S
    assert got.seconds < OLD_BUDGET_S / 2
    print(f"\nlink {rate / 1e6:.2f} MB/s; {size / 1e6:.1f} MB on the node (old `cat`: "
          f"{size / rate:.0f} s > {OLD_BUDGET_S:.0f} s); fetched {got.fetched_bytes / 1e6:.1f} "
          f"MB gzip in {got.seconds:.1f} s (budget {got.timeout_s:.0f} s)")  # fmt: skip
    with gzip.open(got.path, "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == node_sha256(n, siftr)
    assert sorted(p.name for p in out.iterdir()) == ["siftr-s1.log.gz"]


def node_sha256(n: SshNode, path: Path) -> str:
    return n.ex.run(["sha256sum", str(path)]).stdout.split()[0]


def test_an_interrupted_fetch_is_one_line_and_a_rerun_gets_it_whole(
    node: tuple[SshNode, Path],
) -> None:
    n, d = node
    siftr = d / "node" / "ccbench-siftr.log"
    want_gz = len(gzip.compress(siftr.read_bytes(), 1))
    out = d / "raw-cut"
    out.mkdir()
    (out / "siftr-s1.log.gz").write_bytes(b"an earlier attempt's copy")
    caught: list[BaseException] = []

    def fetch_it() -> None:
        try:
            n.ex.get(str(siftr), out / "siftr-s1.log")
        except BaseException as e:  # noqa: BLE001 (handed to the test thread)
            caught.append(e)

    t = threading.Thread(target=fetch_it)
    t.start()
    part = _wait_for_part(out, want_gz // 2)
    # the fetch's own ssh client (the remote gzip's command line starts with the shell)
    pids = subprocess.run(["pgrep", "-f", f"^ssh .*gzip -1 -n -c -- {siftr}"],
                          capture_output=True, text=True).stdout.split()  # fmt: skip
    assert len(pids) == 1
    os.kill(int(pids[0]), 15)
    t.join(timeout=60)
    assert not t.is_alive() and len(caught) == 1 and isinstance(caught[0], FetchFailed)
    e = caught[0]
    msg = str(e)
    assert "\n" not in msg
    assert msg.startswith(f"s1: fetch of {siftr} to {out / 'siftr-s1.log.gz'} failed after ")
    # ssh exits 255 on SIGTERM
    assert msg.endswith(f"after {e.received} bytes received: exit 255 (ssh: the connection "
                        "or the ssh client ended)")  # fmt: skip
    assert part <= e.received < want_gz
    assert list(out.iterdir()) == []  # neither a partial file nor the earlier copy

    print(f"\ninterrupted: {msg}")
    got = n.ex.get(str(siftr), out / "siftr-s1.log")
    assert got.fetched_bytes == got.path.stat().st_size
    with gzip.open(got.path, "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == node_sha256(n, siftr)


def _wait_for_part(out: Path, at_least: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in out.glob(".siftr-s1.log.gz.*.part"):
            size = p.stat().st_size if p.exists() else 0
            if size >= at_least:
                return size
        time.sleep(0.05)
    raise AssertionError(f"the fetch never reached {at_least} bytes")
