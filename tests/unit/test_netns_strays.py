"""Processes left in a namespace that was deleted (issue 32): `ip netns delete` only
unmounts the name, the namespace lives on with its processes, and `ip netns pids` can no
longer find them. The tag NetnsExecutor gives what it starts (exec.tagged) still does;
`down` ends them. A real namespace and a real process: needs root."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from ccbench import exec as ex
from ccbench.testbed import local

pytestmark = pytest.mark.netns

# Testbed ids of this test alone (another suite on this machine, or its other xdist
# worker, may use ccb- namespaces meanwhile): a stray's, another testbed's, a third.
_TAG = uuid.uuid4().hex[:5]
STRAY, OTHER_ID, THIRD = f"us{_TAG}", f"uo{_TAG}", f"ut{_TAG}"
NS = f"ccb-{STRAY}-s1"
OTHER = f"ccb-{OTHER_ID}-s1"


def _in_namespace(proc: ex.LocalProc, ns: str) -> None:
    """Wait until `ip netns exec` has entered `ns` (its pid then runs the command)."""
    deadline = time.monotonic() + 10
    while proc.pid not in ex.pids_in_any([ns]):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)


@pytest.fixture
def namespaces() -> Iterator[None]:
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    for ns in (NS, OTHER):
        subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        yield
    finally:
        for ns in (NS, OTHER):
            subprocess.run(["ip", "netns", "delete", ns], capture_output=True)


def test_a_process_in_a_deleted_namespace_is_found_by_its_tag_and_ended(namespaces: None) -> None:
    stray = ex.NetnsExecutor(NS).spawn(["sleep", "60"])
    kept = ex.NetnsExecutor(OTHER).spawn(["sleep", "60"])
    # The same tag on a process of the host's own namespace is only an inherited
    # environment: never taken for a process in a namespace.
    host = subprocess.Popen(["sleep", "60"], env={**os.environ, ex.NETNS_TAG: NS})
    try:
        # what runs there carries the tag too, and passes it on (sh -> its child)
        said = ex.NetnsExecutor(NS).run(["sh", "-c", f'sh -c "echo ${ex.NETNS_TAG}"'])
        assert said.stdout.strip() == NS
        _in_namespace(stray, NS)
        _in_namespace(kept, OTHER)
        subprocess.run(["ip", "netns", "delete", NS], check=True)
        # what went wrong before: the process runs on, and its namespace has no name
        assert stray.poll() is None
        gone = subprocess.run(["ip", "netns", "pids", NS], capture_output=True, text=True)
        assert gone.returncode != 0 and gone.stdout == ""

        found = {t.pid: t for t in ex.tagged(local.NS_ROOT)}
        assert found[stray.pid] == ex.Tagged(stray.pid, NS, mounted=False)
        assert found[kept.pid] == ex.Tagged(kept.pid, OTHER, mounted=True)
        assert host.pid not in found
        # its own testbed's, and an orphan for any other testbed; a process in another
        # testbed's live namespace is that testbed's
        assert local.strays(STRAY, orphans=False) == [stray.pid]
        assert {kept.pid, stray.pid} <= set(local.strays(OTHER_ID))
        third = local.strays(THIRD)
        assert stray.pid in third and kept.pid not in third
        assert local.strays(THIRD, orphans=False) == []
        assert STRAY in local.all_ids()  # `down --all` finds it with no namespace

        local.down(STRAY)
        assert stray.wait(5) is not None
        assert kept.poll() is None  # another testbed's process is left alone
        assert host.poll() is None
        assert local.strays(STRAY) == []
    finally:
        for p in (stray, kept):
            p.stop(grace_s=1)
        host.kill()
        host.wait()
