"""The report's invalid-runs table: the runs that ran and failed a validity check, each
reason's class (its code) and words, and how many of them only the host failed."""

from __future__ import annotations

import pandas as pd

from ccbench.reasons import HOST_STALLS
from ccbench.report import data
from ccbench.report.fmt import NA


def rows(runs: pd.DataFrame) -> list[dict[str, str]]:
    """Runs that ran and failed a validity check (skipped runs are listed apart): each
    reason's class (its code; none in tables from before codes were stored) and words."""
    bad = runs[data.is_invalid(runs)]
    return [
        {
            "run_id": str(r["run_id"]),
            "variant": str(r["variant"]),
            "repetition": str(r["repetition"]),
            "attempt": str(r.get("attempt", "")),
            "codes": ", ".join(str(r["reason_codes"]).split()) or NA,
            "reasons": str(r["reasons"]) or "(no reason recorded)",
        }
        for _, r in bad.iterrows()
    ]


def host_stalled_sentence(runs: pd.DataFrame) -> str:
    """How many of the invalid runs only the host failed (reasons.HOST_STALLS): those a
    quieter host may make valid when measured again. Empty: none."""
    n = int((data.is_invalid(runs) & runs["host_stalled"]).sum())
    if not n:
        return ""
    codes = ", ".join(sorted(c.value for c in HOST_STALLS))
    return (f"{n} of them only because the host stalled ({codes}): measured again on a "
            f"quieter host, they may be valid.")  # fmt: skip
