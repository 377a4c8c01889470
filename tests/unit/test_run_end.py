"""The end of a run's traffic waits for what ends by itself (iperf3's servers, the
probe), not for the probe's servers, which never do (irtt, netserver): the run stops
those with the rest, at once (each wait was 3 s of every irtt or flent run)."""

from __future__ import annotations

import subprocess
import time
from types import SimpleNamespace
from typing import Any

from ccbench.run import RunProcs, _end_traffic


class Proc:
    """A stand-in for exec.Proc that ends after `ends_s` (None: never, until stopped)."""

    def __init__(self, ends_s: float | None) -> None:
        self.ends_at = None if ends_s is None else time.monotonic() + ends_s
        self.waited: list[float | None] = []

    def wait(self, timeout: float | None = None) -> int:
        self.waited.append(timeout)
        if self.ends_at is None:
            time.sleep(timeout or 0)
            raise subprocess.TimeoutExpired("server", timeout or 0)
        time.sleep(max(0.0, self.ends_at - time.monotonic()))
        return 0


def test_the_end_of_traffic_does_not_wait_for_the_probes_servers() -> None:
    iperf3_server, probe, irtt_server = Proc(0.05), Proc(0.1), Proc(None)
    procs = RunProcs(servers=[iperf3_server], probes=[probe], probe_servers=[irtt_server])
    spec: Any = SimpleNamespace(probe_tool="irtt")
    t0 = time.monotonic()
    _end_traffic(spec, procs, "s/v rep 1", rec=None)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 1.0
    assert irtt_server.waited == [] and iperf3_server.waited and probe.waited
    assert irtt_server in procs.all()  # stopped with the rest (stop_all)
