"""OS drivers: pure functions of the spec that return command plans (argv lists)."""

from __future__ import annotations

from ccbench.hosts.base import Argv, HostDriver
from ccbench.hosts.linux import LinuxHost


def driver_for(os_name: str) -> HostDriver:
    if os_name == "linux":
        return LinuxHost()
    if os_name == "freebsd":
        from ccbench.hosts.freebsd import FreeBSDHost

        return FreeBSDHost()
    raise ValueError(f"no host driver for OS '{os_name}'")


__all__ = ["Argv", "HostDriver", "LinuxHost", "driver_for"]
