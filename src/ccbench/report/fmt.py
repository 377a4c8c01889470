"""The report's only number formatter.

Every table cell and caption number goes through fmt(), so a test can recompute a
value (from the tables or from raw iperf3 JSON) and find the same string in the PDF.
"""

from __future__ import annotations

import math
from typing import SupportsFloat

from ccbench.metric_catalog import DIGITS  # the report's only rounding rules

NA = "n/a"
__all__ = ["DIGITS", "NA", "as_float", "fmt", "fmt_ci", "significant"]


def as_float(x: object) -> float | None:
    """A cell (int, float, numpy scalar, numeric string) as a float; None when float()
    cannot read it. The one place the report turns an untyped cell into a number."""
    if not isinstance(x, SupportsFloat | str | bytes):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x: object, digits: int | None = 1, *, sign: bool = False) -> str:
    """x with `digits` decimals; None/NaN/non-numbers -> "n/a"; no "-0.0";
    sign=True prefixes "+" to positive values (for deltas). digits=None: the shortest
    form (for values as configured, e.g. a duration of 2.5 s or a loss rate of 0.001)."""
    if x is None or isinstance(x, bool):
        return NA
    v = as_float(x)
    if v is None or math.isnan(v):
        return NA
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    s = f"{v:g}" if digits is None else f"{v:.{digits}f}"
    if float(s) == 0.0:
        return s.lstrip("-")
    return "+" + s if sign and v > 0 else s


def fmt_ci(mean: object, ci: object, digits: int = 1, *, sign: bool = False) -> str:
    """ "mean ± ci95"; the CI reads "n/a" when there was one repetition only."""
    m = fmt(mean, digits, sign=sign)
    return NA if m == NA else f"{m} ± {fmt(ci, digits)}"


def significant(delta: object, ci: object) -> bool:
    """True when the 95 % CI of a delta excludes 0 (both known)."""
    d, c = as_float(delta), as_float(ci)
    if d is None or c is None:
        return False
    return math.isfinite(d) and math.isfinite(c) and abs(d) > c
