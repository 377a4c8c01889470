"""Ctrl-C and SIGTERM that Python dropped, delivered again.

A signal's handler runs at whatever Python code the main thread is executing. When that is
a finalizer (e.g. `subprocess.Popen.__del__`, run each time a finished command's Popen is
freed), the KeyboardInterrupt it raises cannot propagate: CPython passes it to
`sys.unraisablehook` ("Exception ignored in ...", Python/errors.c, `PyErr_WriteUnraisable`)
and carries on, so a stop the user asked for would be lost and the command would finish.
The hook below remembers it, and `redeliver()`, called before each command an executor
runs, raises it again at a point where every `finally` clean-up runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

_dropped = False
_previous: Callable[[Any], object] = sys.__unraisablehook__


def _hook(unraisable: Any) -> None:
    global _dropped
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _dropped = True
    _previous(unraisable)  # Python's "Exception ignored" line (or a test runner's) stays


def install() -> None:
    global _previous
    if sys.unraisablehook is not _hook:
        _previous = sys.unraisablehook
        sys.unraisablehook = _hook


def redeliver() -> None:
    """Raise the KeyboardInterrupt a finalizer swallowed, once."""
    global _dropped
    if _dropped:
        _dropped = False
        raise KeyboardInterrupt
