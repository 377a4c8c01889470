"""A piece of a run record (summary.json): typed, described, read-only. The record's
own pieces are in ccbench.record.parts; an instrument declares its piece in its own
module (ccbench.instruments), and ccbench.record adds it to RunRecord by its
`summary_key`. Here, below both, so neither imports the other's package."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Part(BaseModel):
    """A piece of the record: its keys are exactly these fields (a writer that adds a key
    without describing it here fails), read-only once built."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def d(text: str, default: Any = ...) -> Any:
    return Field(default, description=text)
