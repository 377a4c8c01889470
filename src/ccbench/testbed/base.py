"""What a run needs from a testbed, local (namespaces) or remote (SSH hosts)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ccbench.exec import Executor
from ccbench.hosts.base import HostDriver
from ccbench.spec import Topology


class Testbed(Protocol):
    id: str
    kind: str
    topo: Topology

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

    def is_up(self) -> bool: ...

    def up(self) -> dict[str, Any]: ...

    def calibration(self) -> dict[str, Any]: ...

    def snapshot_delay(self, dest: Path) -> None:
        """Copy fresh delay-element statistics to `dest` (nothing if none)."""
        ...

    def snapshot_drops(self, dest: Path) -> None:
        """Write every node's drop counters to `dest` (ccbench.ledger.collect)."""
        ...

    def sampler_argv(self, node: str, interval_s: float) -> list[str] | None:
        """Command printing TS blocks of `ss -tinH` to stdout (None: not on this OS)."""
        ...

    def wait_listening(
        self, node: str, port: int, timeout_s: float = 5.0, proto: str = "tcp"
    ) -> None: ...


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Clean-up must finish even if the user presses Ctrl-C again."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
