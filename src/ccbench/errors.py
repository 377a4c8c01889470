"""The one exception type users see: its message is the single line ccbench prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


class CcbenchError(Exception):
    """A problem the user can fix (bad config, not root, missing qdisc, ...)."""


class Refused(CcbenchError):
    """A host refused what the run asks of it (a sysctl it lacks, an offload it cannot
    switch): the run is reported invalid with this reason and not tried again, since
    another attempt would ask the same."""


class Unavailable(CcbenchError):
    """What the config asks for does not exist here (e.g. an AQM this kernel lacks).
    The workflow turns it into a skipped scenario with this reason, not a failure."""

    # Would trying again later help? Not for a missing qdisc; yes for a calibration.
    retry = False


class CalibrationFailed(Unavailable):
    """A testbed that was built but could not be calibrated, every try of it. The
    workflow reports its runs as not run (like an Unavailable scenario) and tries the
    testbed again when the same command is rerun. `record` holds every try."""

    retry = True

    def __init__(self, msg: str, record: dict[str, Any] | None = None):
        super().__init__(msg)
        self.record = record or {}


def registered(table: Mapping[str, T], name: str, key: str, what: str) -> T:
    """`table[name]` of a registry (testbed kinds, layouts, probe tools), or the one line
    naming the config key, the unknown name and the choices."""
    try:
        return table[name]
    except KeyError:
        raise CcbenchError(f"{key}: unknown {what} '{name}' (one of {', '.join(table)})") from None
