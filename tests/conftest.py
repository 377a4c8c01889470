"""Shared test helpers: how to call the real CLI, and the root/netns guard."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def ccbench(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the real `ccbench` CLI of this checkout in a subprocess."""
    cp = subprocess.run(
        [sys.executable, "-m", "ccbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    if check and cp.returncode != 0:
        raise AssertionError(f"ccbench {' '.join(args)} -> {cp.returncode}\n{cp.stderr}")
    return cp


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (run: sudo ./test.sh)")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)
