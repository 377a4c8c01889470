"""OS drivers: pure functions of the spec that return command plans (argv lists)."""

from __future__ import annotations

from ccbench.hosts.base import Argv, HostDriver, NodeDriver
from ccbench.hosts.linux import LinuxHost


def driver_for(os_name: str) -> HostDriver:
    """The driver of an endpoint or router OS (linux, freebsd)."""
    if os_name == "linux":
        return LinuxHost()
    if os_name == "freebsd":
        from ccbench.hosts.freebsd import FreeBSDHost

        return FreeBSDHost()
    raise ValueError(f"no host driver for OS '{os_name}'")


def node_driver(os_name: str) -> NodeDriver:
    """The driver of any node, the delay node (dummynet) included."""
    if os_name == "dummynet":
        from ccbench.hosts.dummynet import DummynetNode

        return DummynetNode()
    return driver_for(os_name)


__all__ = ["Argv", "HostDriver", "LinuxHost", "NodeDriver", "driver_for", "node_driver"]
