"""The root check, kept free of heavy imports so it runs first."""

from __future__ import annotations

import os

from ccbench.errors import CcbenchError


def require_root() -> None:
    if os.geteuid() != 0:
        raise CcbenchError("the local testbed needs root (network namespaces): run with sudo")
