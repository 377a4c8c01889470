"""The report's only number formatter.

Every table cell and caption number goes through fmt(), so a test can recompute a
value (from the tables or from raw iperf3 JSON) and find the same string in the PDF.
"""

from __future__ import annotations

import math

NA = "n/a"

# Decimals per kind of quantity: the report's only rounding rules.
DIGITS = {"mbps": 1, "pct": 1, "jain": 3, "ms": 1, "count": 0, "s": 1, "ratio": 2}


def fmt(x: object, digits: int | None = 1, *, sign: bool = False) -> str:
    """x with `digits` decimals; None/NaN/non-numbers -> "n/a"; no "-0.0";
    sign=True prefixes "+" to positive values (for deltas). digits=None: the shortest
    form (for values as configured, e.g. a duration of 2.5 s or a loss rate of 0.001)."""
    if x is None or isinstance(x, bool):
        return NA
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return NA
    if math.isnan(v):
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
    try:
        d, c = float(delta), float(ci)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(d) and math.isfinite(c) and abs(d) > c
