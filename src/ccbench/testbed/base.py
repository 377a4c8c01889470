"""What a run needs from a testbed, local (namespaces) or remote (SSH hosts)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ccbench import jsonio, safe
from ccbench.errors import CcbenchError
from ccbench.exec import Executor
from ccbench.hosts.base import HostDriver
from ccbench.roles import Roles
from ccbench.spec import Topology

if TYPE_CHECKING:
    from ccbench.testbed.kinds import TestbedConfig

# Testbed state: root's under /run (gone at reboot, like the namespaces); a lab user
# driving SSH testbeds keeps it in their cache.
STATE_ROOT = Path(
    os.environ.get("CCBENCH_STATE")
    or ("/run/ccbench/testbeds" if os.geteuid() == 0 else Path.home() / ".cache/ccbench/testbeds")
)


class Testbed(Protocol):
    id: str
    kind: str
    topo: Topology

    @property
    def tools(self) -> str:
        """Where tools run: "host" or "container" (the linux-node image)."""
        ...

    def node_os(self) -> dict[str, str]:
        """Every node of the dumbbell -> its OS (linux, freebsd; dummynet: Emulab's
        delay node, which ccbench only reads counters from)."""
        ...

    def prepare_run(self) -> None:
        """Make the hosts this testbed's again before a run (the SSH testbed: another
        testbed on the same dumbbell may have set rt1's queue and loss rules since)."""
        ...

    def ex(self, node: str) -> Executor:
        """Where commands for `node` (s1, rt1, dl, rt2, r1, ...) run."""
        ...

    def driver(self, node: str) -> HostDriver:
        """The OS driver that plans commands for `node`."""
        ...

    def address(self, node: str) -> str:
        """The experiment-network address of a sender or receiver."""
        ...

    @property
    def bottleneck(self) -> tuple[str, str]:
        """(node, interface) carrying the shaper and queue."""
        ...

    @property
    def roles(self) -> Roles:
        """Which nodes send and receive (the pairs of this topology), the bottleneck,
        the delay element and where loss is applied (ccbench.roles)."""
        ...

    def is_up(self) -> bool: ...

    def up(self) -> dict[str, Any]: ...

    def calibration(self) -> dict[str, Any]: ...

    def snapshot_delay(self, dest: Path) -> None:
        """Copy fresh delay-element statistics to `dest` (nothing if none)."""
        ...

    def snapshot_drops(self, dest: Path) -> None:
        """Write every node's drop counters to `dest` (ccbench.ledger.collect)."""
        ...

    def wait_listening(
        self, node: str, port: int, timeout_s: float | None = None, proto: str = "tcp"
    ) -> None: ...


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Clean-up must finish even if the user presses Ctrl-C again."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class TestbedBase:
    """What the local and the SSH testbed share: the state file (written atomically),
    calibration read back from it, waiting for a server to listen, removing the state.
    Subclasses provide `ex(node)` and their own build/teardown."""

    kind = "base"
    listen_poll_s = 0.01  # how often wait_listening asks (remote: one ssh round trip)
    listen_timeout_s = 5.0

    def __init__(self, cfg: TestbedConfig, topo: Topology):
        self.cfg = cfg
        self.topo = topo
        self.id = safe.testbed_id(cfg.id, "testbed.id")
        self.state_dir = STATE_ROOT / self.id

    def ex(self, node: str) -> Executor:
        raise NotImplementedError

    def driver(self, node: str) -> HostDriver:
        raise NotImplementedError

    @property
    def tools(self) -> str:
        return self.cfg.tools

    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def read_state(self) -> dict[str, Any] | None:
        try:
            st = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None
        return st if isinstance(st, dict) else None

    def write_state(self, st: dict[str, Any]) -> None:
        jsonio.write_json(self.state_file, st)

    def remove_state(self) -> None:
        safe.remove_tree(self.state_dir, STATE_ROOT)

    def calibration(self) -> dict[str, Any]:
        return dict((self.read_state() or {}).get("calibration", {}))

    def prepare_run(self) -> None:
        return None  # nothing shared by default (local testbeds: own namespaces)

    def wait_listening(
        self, node: str, port: int, timeout_s: float | None = None, proto: str = "tcp"
    ) -> None:
        deadline = time.monotonic() + (timeout_s or self.listen_timeout_s)
        while time.monotonic() < deadline:
            if self.ex(node).run(self.driver(node).listening(port, proto)).stdout.strip():
                return
            time.sleep(self.listen_poll_s)
        raise CcbenchError(f"{node}: no server listened on {proto} port {port}")
