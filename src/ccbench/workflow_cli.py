"""Subcommands used by the Snakemake workflow (matrix, aggregate, report)."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    return None
