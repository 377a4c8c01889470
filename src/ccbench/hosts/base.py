"""What every OS driver offers. Drivers only *plan*: they return argv lists, and an
Executor runs them, so the plans are exactly testable without the OS at hand."""

from __future__ import annotations

from typing import Protocol

Argv = list[str]

# The seeds' socket-buffer tuning (seed 001): 10 MB maxima, no cached metrics.
SOCKBUF_MAX = 10485760


def iperf3_client_argv(
    dst: str, port: int, cc_args: list[str], duration_s: float, interval_s: float, streams: int
) -> Argv:
    """The seeds' client: -l 1M, JSON, interval reports; `cc_args` is the OS's -C part."""
    argv = ["iperf3", "-c", dst, "-p", str(port), *cc_args, "-l", "1M"]
    argv += ["-t", f"{duration_s:g}", "-i", f"{interval_s:g}", "-J"]
    if streams > 1:
        argv += ["-P", str(streams)]
    return argv


class HostDriver(Protocol):
    os: str

    def tune(self, *, netns_local: bool = False) -> list[Argv]:
        """Seed sysctls for a TCP endpoint."""
        ...

    def set_cc(self, cc: str) -> list[Argv]:
        """Make `cc` the default congestion control (loading what it needs)."""
        ...

    def set_stack(self, stack: str) -> list[Argv]:
        """Make `stack` the default TCP stack ('default' = the OS's own)."""
        ...

    def facts(self) -> dict[str, Argv]:
        """name -> command whose stdout is recorded as provenance."""
        ...

    def iperf3_server(self, port: int) -> Argv: ...

    def iperf3_client(
        self,
        dst: str,
        port: int,
        cc: str,
        duration_s: float,
        interval_s: float,
        streams: int = 1,
    ) -> Argv: ...
