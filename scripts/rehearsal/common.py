"""What the rehearsal's parts share: names, the management network, running commands."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PREFIX = "ccb-rh-"  # every namespace this makes: ccb-rh-<node>, ccb-rh-ctl
CTL = PREFIX + "ctl"
MGMT = ipaddress.ip_network("198.19.254.0/24")  # management ("control") network
MGMT_GW = "198.19.254.1"  # the control namespace, each node's default route
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class Failed(Exception):
    """A step failed: one line for the user."""


def log(msg: str) -> None:
    print(f"rehearsal: {msg}", flush=True)


def run(*argv: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if cp.returncode != 0:
        raise Failed(f"`{' '.join(argv)}` exited {cp.returncode}: {cp.stderr.strip()[-500:]}")
    return cp


def in_ns(ns: str, *argv: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *argv]
