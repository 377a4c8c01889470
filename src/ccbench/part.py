"""A piece of a run record (summary.json): typed, described, read-only. The record's
own pieces are in ccbench.record.parts; an instrument declares its piece in its own
module (ccbench.instruments) or its parser's, and ccbench.run_record adds it to
RunRecord by its `summary_key`. Here, below all of them, so none imports another's
package for it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Part(BaseModel):
    """A piece of the record: its keys are exactly these fields (a writer that adds a key
    without describing it here fails), read-only once built."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def d(text: str, default: Any = ...) -> Any:
    return Field(default, description=text)
