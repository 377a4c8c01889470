"""Shared test helpers: how to call the real CLI, the root/netns guard, the signals
the suite's children start with, and a run's reasons selected by code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from ccbench.reasons import Code, Reason

REPO = Path(__file__).resolve().parents[1]


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


def codes(reasons: Iterable[Any]) -> list[Code]:
    """The codes of a run's reasons: typed (Reason, from summarize) or as summary.json
    holds them ({code, text, evidence})."""
    return [Code(r.code if isinstance(r, Reason) else r["code"]) for r in reasons]


def texts_of(reasons: Iterable[Any], code: Code) -> list[str]:
    """The words of a run's reasons of class `code` (typed or from summary.json)."""
    got = [r if isinstance(r, Reason) else Reason.model_validate(r) for r in reasons]
    return [r.text for r in got if r.code == code]


def damaged_files(reasons: Iterable[Any]) -> list[str]:
    """The files a run's damaged-file reasons name (Code.FILE_DAMAGED: evidence `file`)."""
    got = [r if isinstance(r, Reason) else Reason.model_validate(r) for r in reasons]
    return [str(r.evidence["file"]) for r in got if r.code == Code.FILE_DAMAGED]


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell (`./test.sh &`, a
    # runner without job control) inherits SIGINT ignored, and so would every tool a run
    # starts: the ping probe and the ss and qdisc samplers, which a run stops with
    # SIGINT, would then each sit out their 3 s grace (9 s a run, measured). A handler
    # here is reset to the default in every child at exec: the tools run as from a
    # terminal, however the suite was started.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root for network namespaces (run: sudo ./test.sh)")
    for item in items:
        if "netns" in item.keywords:
            item.add_marker(skip)
