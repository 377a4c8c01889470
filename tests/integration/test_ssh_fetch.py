"""Integration: SshExecutor.get against a real sshd through a tbf-shaped management link.

One node namespace with its own sshd and /var/tmp (bench/sshnode.py), its management
link shaped to 8 Mbit/s. On the node, where a FreeBSD sender keeps it
(instruments.siftr.LOG): a siftr 1.3 log made by bench/streams.py (the seed-scale
benchmark's generator), large enough that the old `get` (`cat` into a string under a
fixed 60 s budget) could not have fetched it over this link: shown with the link's rate
measured here on incompressible bytes. The new get fetches it gzipped, checked, well
inside the budget its size gives it. Then a run's siftr collection (the real
the siftr instrument's collect on a testbed whose s1 is this node, with FreeBSD's driver) is
cut half way (its ssh client killed): the fetch's one line names node, files and bytes
received, nothing is left under the final name, the log stays on the node, and the
run's verdict (summarize, with meta.json as run.py writes it) is invalid for that
reason alone; a rerun's collection fetches the whole file (its sha256 the one computed
on the node) and the verdict is valid.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.sshnode import SshNode, ssh_node
from ccbench import fetch, layout
from ccbench.exec_ssh import SshExecutor
from ccbench.hosts import siftr_plan
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.instruments import Recording
from ccbench.instruments.siftr import LOG as SIFTR_LOG
from ccbench.instruments.siftr import Siftr
from ccbench.layout import load_spec
from ccbench.reasons import Code
from ccbench.spec import RunSpec
from ccbench.summarize import summarize
from tests.conftest import REPO, codes, damaged_files
from tests.integration.conftest import namespaces
from tests.raw_meta import edit_meta

# Its subject is the fetch (whole, checked, refused when cut), not a run's fidelity: it
# runs beside other tests (test.sh).
pytestmark = [pytest.mark.netns, pytest.mark.shares_cpu]

NS = "ccb-itfetch-n1"
RATE_MBIT = 8.0
OLD_BUDGET_S = 60.0  # the old get: the executor's default timeout, whatever the size
RUN = REPO / "tests" / "fixtures" / "results-small" / "runs" / "two-flows-cubic-r1-71654894" / "raw"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SshNode, Path]]:
    d = tmp_path_factory.mktemp("fetch")
    (d / "var-tmp").mkdir()
    (d / "node").mkdir()
    with ssh_node("s1", NS, "198.19.250", d / "ssh-node", var_tmp=d / "var-tmp") as n:
        n.shape(RATE_MBIT)
        # made on the node, streamed to its disk: 40 s of one flow at 500 Mbit/s, ppl 4
        n.ex.run([sys.executable, str(REPO / "bench" / "streams.py"), "siftr", "--out",
                  SIFTR_LOG, "--duration", "40", "--rate-mbit", "1000", "--flows", "2"],
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
    size = (d / "var-tmp" / Path(SIFTR_LOG).name).stat().st_size  # the node's file, seen here
    assert size / rate > 1.25 * OLD_BUDGET_S  # the old `cat` could not have made it
    out = d / "raw"
    out.mkdir()
    got = n.ex.get(SIFTR_LOG, out / "siftr-s1.log")
    assert got.compressed and got.path == out / "siftr-s1.log.gz"
    assert got.node_bytes == size and got.fetched_bytes == got.path.stat().st_size
    assert got.fetched_bytes < size / 4
    assert got.timeout_s == fetch.timeout_for(size) > 4 * OLD_BUDGET_S
    assert got.seconds < OLD_BUDGET_S / 2
    print(f"\nlink {rate / 1e6:.2f} MB/s; {size / 1e6:.1f} MB on the node (old `cat`: "
          f"{size / rate:.0f} s > {OLD_BUDGET_S:.0f} s); fetched {got.fetched_bytes / 1e6:.1f} "
          f"MB gzip in {got.seconds:.1f} s (budget {got.timeout_s:.0f} s)")  # fmt: skip
    with gzip.open(got.path, "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == node_sha256(n, SIFTR_LOG)
    assert sorted(p.name for p in out.iterdir()) == ["siftr-s1.log.gz"]


def node_sha256(n: SshNode, path: str) -> str:
    return n.ex.run(["sha256sum", path]).stdout.split()[0]


class NodeTestbed:
    """What the siftr instrument's collect uses of a testbed: a node's executor (the real SSH
    one) and its host driver (FreeBSD's, as on a seed's sender: its siftr_stop sysctl
    fails on this Linux node, harmlessly, as siftr_collect runs it with check=False)."""

    kind = "ssh"

    def __init__(self, n: SshNode) -> None:
        self.n = n

    def ex(self, node: str) -> SshExecutor:
        assert node == "s1"
        return self.n.ex

    def driver(self, node: str) -> FreeBSDHost:
        return FreeBSDHost()


def a_run(d: Path, name: str) -> tuple[Path, dict[str, dict[str, Any]]]:
    """A real run's raw/ (a valid one of the fixture) and what the siftr instrument's start
    records for its s1 (one flow) when the sender is FreeBSD."""
    raw = d / name / "raw"
    shutil.copytree(RUN, raw)
    spec = RunSpec.from_dict(json.loads((raw / "spec.json").read_text()))
    f = spec.flows[0]
    plan = siftr_plan.choose_ppl([(f.start_s, f.duration_s)], [layout.BASE_PORT + 1],
                                 spec.topology.rate_bps)  # fmt: skip
    return raw, {"s1": {"logger": "siftr", "ppl": plan.ppl, "port_filter": plan.port_filter,
                        "log_bytes_est": plan.log_bytes, "within_budget": plan.within_budget,
                        "resolution": plan.resolution(len(spec.flows))}}  # fmt: skip


def siftr_collect(tb: Any, started: dict[str, dict[str, Any]], raw: Path) -> None:
    """The siftr instrument's collect, as run.py calls it once the probes ended."""
    Siftr(nodes=started).collect(Recording(tb, load_spec(raw), raw))


def verdict(raw: Path, siftr: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """summarize(raw) after run.py wrote meta.json with the siftr loggers' records."""
    edit_meta(raw, {"siftr": siftr})
    return summarize(raw)


def test_an_interrupted_siftr_fetch_makes_the_run_invalid_and_a_rerun_fetches_it_whole(
    node: tuple[SshNode, Path],
) -> None:
    n, d = node
    log = d / "var-tmp" / Path(SIFTR_LOG).name  # the node's /var/tmp/ccbench-siftr.log
    want_gz = len(gzip.compress(log.read_bytes(), 1))
    raw, started = a_run(d, "run-cut")
    assert summarize(raw)["valid"]  # the run itself is fine
    tb = NodeTestbed(n)
    t = threading.Thread(target=siftr_collect, args=(tb, started, raw))  # as run.py calls it
    t.start()
    part = _wait_for_part(raw, want_gz // 2)
    # the fetch's own ssh client (this test's key; the remote gzip's command line)
    pids = subprocess.run(["pgrep", "-f", f"^ssh .*{d}.*gzip -1 -n -c -- {SIFTR_LOG}"],
                          capture_output=True, text=True).stdout.split()  # fmt: skip
    assert len(pids) == 1
    os.kill(int(pids[0]), 15)
    t.join(timeout=60)
    assert not t.is_alive()
    err = started["s1"]["fetch"]["error"]
    assert "\n" not in err
    assert err.startswith(f"s1: fetch of {SIFTR_LOG} to {raw / 'siftr-s1.log.gz'} failed after ")
    got = re.search(r"failed after (\d+) bytes received: exit 255 \(ssh: the connection or the "
                    r"ssh client ended\)$", err)  # fmt: skip
    assert got and part <= int(got[1]) < want_gz, err
    assert not list(raw.glob("*siftr*"))  # neither the part nor a file that looks whole
    assert log.exists()  # left on the node for a look by hand (and the rerun)
    s = verdict(raw, started)
    assert not s["valid"] and damaged_files(s["reasons"]) == ["siftr-s1.log"]
    assert codes(s["reasons"]) == [Code.FILE_DAMAGED]
    assert s["reasons"][0].text.endswith(err)  # the fetch's own account
    print(f"\ninterrupted: {s['reasons'][0].text}")

    sha, size = node_sha256(n, SIFTR_LOG), log.stat().st_size
    raw2, again = a_run(d, "run-again")
    siftr_collect(tb, again, raw2)  # type: ignore[arg-type]
    fetch = again["s1"]["fetch"]
    assert "error" not in fetch and fetch["compressed"] and fetch["node_bytes"] == size
    with gzip.open(raw2 / "siftr-s1.log.gz", "rb") as f:
        assert hashlib.file_digest(f, "sha256").hexdigest() == sha
    assert fetch["fetched_bytes"] == (raw2 / "siftr-s1.log.gz").stat().st_size
    assert not log.exists()  # removed from the node once fetched whole
    s2 = verdict(raw2, again)
    assert s2["valid"], s2["reasons"]
    assert s2["siftr"]["s1"]["fetch_node_bytes"] == size


def _wait_for_part(out: Path, at_least: int) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for p in out.glob(".siftr-s1.log.gz.*.part"):
            size = p.stat().st_size if p.exists() else 0
            if size >= at_least:
                return size
        time.sleep(0.05)
    raise AssertionError(f"the fetch never reached {at_least} bytes")
