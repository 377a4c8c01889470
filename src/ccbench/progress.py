"""Terminal output: one-line status messages and an elapsed/ETA bar for runs."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

console = Console(stderr=True, highlight=False)


def info(msg: str) -> None:
    console.print(f"[dim]ccbench:[/dim] {msg}")


def track_seconds(label: str, total_s: float, done: Callable[[], bool], step_s: float = 0.2) -> None:
    """Show elapsed/ETA until `done()` or `total_s` + grace; plain lines when not a TTY."""
    t0 = time.monotonic()
    if not sys.stderr.isatty():
        info(f"{label}: {total_s:g}s of traffic")
        while not done():
            time.sleep(step_s)
        info(f"{label}: finished after {time.monotonic() - t0:.1f}s")
        return
    cols = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:>5.1f}/{task.total:g}s"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*cols, console=console, transient=True) as bar:
        task = bar.add_task(label, total=total_s)
        while not done():
            bar.update(task, completed=min(total_s, time.monotonic() - t0))
            time.sleep(step_s)
