"""Terminal output: one-line status messages on stderr (rich, plain when not a TTY)."""

from __future__ import annotations

from rich.console import Console

# soft_wrap: a message is one line in a log, whatever its length (no wrap at 80 columns)
console = Console(stderr=True, highlight=False, soft_wrap=True)


def info(msg: str) -> None:
    console.print(f"[dim]ccbench:[/dim] {msg}")
