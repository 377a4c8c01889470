"""What a comparison on SSH hosts needs instantiated (`ccbench matrix` before booking):
per dumbbell, its pairs, its senders' OS and kernels, and the bottlenecks its testbeds
set up; the machines in all. Planned from the matrix alone: the hosts inventory exists
only once the experiment does."""

from __future__ import annotations

from ccbench.model import Matrix
from ccbench.spec import os_titles

# A dumbbell's machines besides its pairs: rt1, rt2 and the delay node dl.
ROUTERS_AND_DELAY = 3


def lines(m: Matrix) -> list[str]:
    """The dumbbells to instantiate and the machines in all, a line each."""
    dumbbells = sorted({tb.dumbbell for tb in m.testbeds.values()})
    out, machines = [], 0
    for d in dumbbells:
        tbs = [tb for tb in m.testbeds.values() if tb.dumbbell == d]
        runs = [r for r in m.runs.values() if r.testbed.dumbbell == d]
        pairs = max(tb.topology.pairs for tb in tbs)
        machines += 2 * pairs + ROUTERS_AND_DELAY
        variants = list(dict.fromkeys(r.variant for r in runs))
        defs = [v for v in m.variants if v.label in variants]
        oses = os_titles(list(dict.fromkeys(v.os for v in defs)))
        kernels = sorted({v.kernel for v in defs if v.kernel})
        paths = "; ".join(
            f"{tb.topology.rate_mbit:g} Mbit/s x {tb.topology.rtt_ms:g} ms, "
            f"{tb.topology.queue_kind} {tb.topology.queue_limit_pkts}"
            for tb in tbs
        )
        out.append(
            f"  dumbbell {d}: {pairs} pair(s), {oses} senders"
            + (f" booting {' / '.join(repr(k) for k in kernels)}" if kernels else "")
            + f" (variants {', '.join(variants)}); bottlenecks {paths}"
        )
    head = (f"to instantiate (profile.py): {len(dumbbells)} dumbbell(s), {machines} machines "
            "in all")  # fmt: skip
    return [head, *out]
