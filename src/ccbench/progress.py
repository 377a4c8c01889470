"""Terminal output: one-line status messages on stderr (rich, plain when not a TTY)."""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True, highlight=False)


def info(msg: str) -> None:
    console.print(f"[dim]ccbench:[/dim] {msg}")
