"""ccbench's JSON files: written strict (NaN and infinity become null) and atomically,
read strict (NaN, Infinity are refused: no tool ccbench reads writes them)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class NotANumber(ValueError):
    """A JSON document holds NaN or Infinity, which are not JSON numbers."""


def _reject_constant(name: str) -> Any:
    raise NotANumber(f"contains {name}, which is not a number")


def loads(text: str | bytes) -> Any:
    """Strict JSON: NotANumber for NaN/Infinity, ValueError for anything not JSON."""
    return json.loads(text, parse_constant=_reject_constant)


def is_number(x: Any) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def jtype(x: Any) -> str:
    """JSON's name for a parsed value's type, for messages."""
    if isinstance(x, dict):
        return "object"
    if isinstance(x, list):
        return "list"
    if isinstance(x, str):
        return "string"
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, (int, float)):
        return "number"
    return "null" if x is None else type(x).__name__


def clean(x: Any) -> Any:
    """NaN/inf -> None, recursively, so the document is strict JSON."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    return x


def dumps(obj: Any) -> str:
    return json.dumps(clean(obj), indent=2, allow_nan=False)


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to a temporary name beside `path`, then rename: a reader sees the
    old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, obj: Any) -> None:
    """The one JSON writer: strict JSON, indented, replaced atomically."""
    write_text_atomic(path, dumps(obj))


def append_line(path: Path, obj: Any) -> None:
    """`obj` as one line of strict JSON appended to the log `path` (JSON Lines)."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(clean(obj), allow_nan=False) + "\n")


def read_json(path: Path) -> Any:
    """The JSON in `path`; None if it is missing or not (strict) JSON."""
    try:
        return loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
