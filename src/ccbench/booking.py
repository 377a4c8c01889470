"""What a comparison on SSH hosts needs instantiated (`ccbench matrix` before booking):
per dumbbell, its pairs, its senders' OS and kernels, and the bottlenecks its testbeds
set up; the machines in all. And how long it takes: per dumbbell (a lab's sender set)
its traffic and an estimated wall time, from overheads the benches measured. Planned
from the matrix alone: the hosts inventory exists only once the experiment does."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ccbench.model import Matrix, PlannedRun
from ccbench.spec import os_titles
from ccbench.testbed.kinds import kind

# A dumbbell's machines besides its pairs: rt1, rt2 and the delay node dl.
ROUTERS_AND_DELAY = 3


@dataclass(frozen=True)
class Costs:
    """Seconds a workflow spends beyond the configured traffic: per run (iperf3's own
    start and stop, the run's set-up and wrap-up, its `ccbench run` and `parse` jobs,
    Snakemake's step to the next job), per testbed set-up (`testbed up`: build or
    readying, and calibration), and once after the last run (aggregate, figures,
    verdicts, report, gate)."""

    run_s: float
    testbed_s: float
    analysis_s: float
    measured: str  # where the numbers come from


# docs/fidelity.md, "Pipeline overhead": bench/pipeline.py on config/config.yaml, 18 runs
# of 30 s (540 s of traffic) on 2 local testbeds, 2026-11-24, this 2-vCPU VM: wall time
# 590 s (1.09 × the traffic), the two testbed_up jobs 9.3 s, the analysis 9.8 s; the
# rest of the wall time beyond the traffic is the runs' (30.9 s: 1.72 s a run).
LOCAL = Costs(
    run_s=(590.0 - 540.0 - 9.3 - 9.8) / 18,
    testbed_s=9.3 / 2,
    analysis_s=9.8,
    measured="bench/pipeline.py, docs/fidelity.md",
)

# Over SSH: `scripts/emulab_rehearsal.py --duration 30` (the Emulab path on namespaces
# with real sshds: 4 runs of 30 s on 2 dumbbells, side by side), 2026-11-27, this VM;
# its Snakemake benchmark files. A run job took 6.08 s beyond its traffic (36.60,
# 35.11, 37.10, 35.52 s: commands' round trips, the flows' gate, fetching raw files),
# its parse 1.97 s (1.49, 2.80, 1.78, 1.79); Snakemake's step to the next job is the
# local table's (18.2 s over 18 runs). A `testbed up` (every host, its NICs and the
# delay node read; idle RTT of every pair, the rate probe): 7.41 and 7.39 s. The
# analysis: aggregate 1.52 + figures 15.84 + verdicts 0.90 + report 13.18 + gate 1.00 s.
# The model gives that workflow 118 s; its step 5 took 128 s (Snakemake's own start
# and the matrix job are not in it). A control machine far from the hosts adds its
# round-trip time to every command.
SSH = Costs(
    run_s=(6.60 + 5.11 + 7.10 + 5.52) / 4 + (1.49 + 2.80 + 1.78 + 1.79) / 4 + 18.2 / 18,
    testbed_s=(7.41 + 7.39) / 2,
    analysis_s=1.52 + 15.84 + 0.90 + 13.18 + 1.00,
    measured="scripts/emulab_rehearsal.py, docs/emulab.md",
)

# Allowances, not measurements (ccbench cannot time Emulab itself; `ccbench matrix
# --reboot-min/--setup-min` replace them): between kernels, building and installing
# the next one on the senders, the reboot and the start-up scripts again
# (docs/kernel-patch.md); before the first run, Emulab's swap-in (disk images, boot)
# and the start-up scripts' package installs.
REBOOT_MIN = 30.0
SETUP_MIN = 30.0


@dataclass(frozen=True)
class Estimate:
    """One dumbbell's (a lab's sender set's) time: its runs' traffic and the overheads."""

    where: str  # "dumbbell 2", "sender set 1"
    runs: int
    traffic_s: float
    testbeds: int
    reboots: int  # kernels its variants need, less the one it starts with
    costs: Costs
    reboot_s: float

    @property
    def overhead_s(self) -> float:
        return (self.runs * self.costs.run_s + self.testbeds * self.costs.testbed_s
                + self.reboots * self.reboot_s)  # fmt: skip

    @property
    def wall_s(self) -> float:
        return self.traffic_s + self.overhead_s


def reboots(runs: list[PlannedRun]) -> int:
    """Reboots between kernels: each kernel the runs name but the first needs one
    (runs waiting for a kernel run after the senders boot it: docs/kernel-patch.md)."""
    return max(0, len({r.kernel["label"] for r in runs if r.kernel}) - 1)


def estimates(m: Matrix, reboot_s: float = REBOOT_MIN * 60) -> list[Estimate]:
    """Per dumbbell, in order."""
    tb_kind = kind(next(iter(m.testbeds.values())).testbed.kind)
    costs = LOCAL if tb_kind.caps.senders_here else SSH
    where = "sender set" if tb_kind.caps.dumbbells_share_hosts else "dumbbell"
    out = []
    for d in sorted({tb.dumbbell for tb in m.testbeds.values()}):
        runs = [r for r in m.runs.values() if r.testbed.dumbbell == d]
        testbeds = sum(1 for tb in m.testbeds.values() if tb.dumbbell == d)
        out.append(Estimate(f"{where} {d}", len(runs), sum(r.traffic_s for r in runs),
                            testbeds, reboots(runs), costs, reboot_s))  # fmt: skip
    return out


def total_s(m: Matrix, ests: list[Estimate], setup_s: float) -> float:
    """The whole comparison: dumbbells side by side (a lab's sender sets, sharing
    receivers, take turns), then the analysis; `setup_s` before it all."""
    shared = kind(next(iter(m.testbeds.values())).testbed.kind).caps.dumbbells_share_hosts
    runs = sum(e.wall_s for e in ests) if shared else max(e.wall_s for e in ests)
    return setup_s + runs + ests[0].costs.analysis_s


def hours(s: float) -> str:
    """A duration as a booking names it, rounded up to the minute: "2 h 05 min"."""
    m = math.ceil(s / 60)
    return f"{m // 60} h {m % 60:02d} min" if m >= 60 else f"{m} min"


def time_lines(
    m: Matrix, reboot_min: float = REBOOT_MIN, setup_min: float = SETUP_MIN
) -> list[str]:
    """How long, a line per dumbbell (sender set) and one for the whole: traffic and
    the estimated wall time with what it adds (docs/emulab.md, "How long to book")."""
    tb_kind = kind(next(iter(m.testbeds.values())).testbed.kind)
    ests = estimates(m, reboot_min * 60)
    setup_s = setup_min * 60 if tb_kind.booked_by_profile else 0.0
    out = [f"how long (an estimate: overheads measured by {ests[0].costs.measured}):"]
    for e in ests:
        boots = f", {e.reboots} reboot(s) × {reboot_min:g} min" if e.reboots else ""
        out.append(f"  {e.where}: {e.runs} runs, {hours(e.traffic_s)} of traffic; about "
                   f"{hours(e.wall_s)} with {e.costs.run_s:.1f} s a run, {e.testbeds} "
                   f"testbed set-up(s) × {e.costs.testbed_s:.0f} s{boots}")  # fmt: skip
    total = total_s(m, ests, setup_s)
    traffic = sum(e.traffic_s for e in ests)
    if len(ests) > 1 and not tb_kind.caps.dumbbells_share_hosts:
        how = "the dumbbells run side by side"
    else:  # one after the other: all the traffic on one path
        how = (f"{total / traffic:.2f} × the traffic: " if traffic else "") + (
            "the sender sets take turns" if len(ests) > 1 else "one dumbbell")  # fmt: skip
    setup = f", and {setup_min:g} min for swap-in and start-up scripts" if setup_s else ""
    what = "book the experiment for" if tb_kind.booked_by_profile else "in all"
    out.append(f"{what} about {hours(total)} ({how}, then the analysis{setup}); a retried "
               "attempt adds its run again")  # fmt: skip
    if any(e.reboots for e in ests) or setup_s:
        out.append("  (reboots and swap-in are allowances, not measured: --reboot-min, "
                   "--setup-min)")  # fmt: skip
    return out


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
