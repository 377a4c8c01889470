"""Find the project's native delay element (native/ccdelay, built by setup.sh)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ccbench.errors import CcbenchError


def ccdelay_path() -> str:
    env = os.environ.get("CCBENCH_CCDELAY")
    candidates = [env] if env else []
    repo = Path(__file__).resolve().parents[2]
    candidates.append(str(repo / "native" / "ccdelay" / "ccdelay"))
    found = shutil.which("ccdelay")
    if found:
        candidates.append(found)
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise CcbenchError(
        "the delay element native/ccdelay/ccdelay is not built (run ./setup.sh, or "
        "`make -C native/ccdelay`), and this kernel has no netem"
    )
