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
from typing import Any

_dropped = False


def _hook(unraisable: Any) -> None:
    global _dropped
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        _dropped = True
    sys.__unraisablehook__(unraisable)


def install() -> None:
    sys.unraisablehook = _hook


def redeliver() -> None:
    """Raise the KeyboardInterrupt a finalizer swallowed, once."""
    global _dropped
    if _dropped:
        _dropped = False
        raise KeyboardInterrupt
