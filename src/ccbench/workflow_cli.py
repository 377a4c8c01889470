"""Subcommands the Snakemake workflow calls: matrix, aggregate, figures, report.

They are ordinary CLI commands (argv in, files out), so every rule's action can be
rerun by hand from its log line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ccbench.model import Matrix


def cmd_matrix(a: argparse.Namespace) -> int:
    from ccbench import matrix
    from ccbench.config import load_yaml
    from ccbench.errors import CcbenchError
    from ccbench.testbed.kinds import kind as testbed_kind

    for f in a.source or []:
        load_yaml(f)  # strictly: one line on duplicate keys, bad encoding, size
    if a.config_json:
        text = sys.stdin.read() if a.config_json == "-" else a.config_json
        try:
            cfg = json.loads(text)
        except ValueError as e:
            raise CcbenchError(f"--config-json: not JSON ({e})") from None
        source = ", ".join(a.source) if a.source else "config"
        if not isinstance(cfg, dict):
            raise CcbenchError(f"{source}: the top level must be a mapping")
    else:
        cfg, source = load_yaml(a.config), a.config
    if a.json:  # the workflow's: it runs nothing without the hosts it needs
        json.dump(matrix.load(cfg, source).to_dict(), sys.stdout, indent=1, sort_keys=True)
        return 0
    # Listing what a config asks for needs no hosts yet: planning comes before booking.
    m = matrix.load(cfg, source, need_inventory=False)
    total = sum(r.traffic_s for r in m.runs.values())
    print(f"{len(m.runs)} runs on {len(m.testbeds)} testbed(s), "
          f"{total:g}s of traffic; baseline {m.baseline}")  # fmt: skip
    for i, rid in enumerate(m.order, 1):
        r = m.runs[rid]
        how = "" if r.spec.tracing == "inline" else f"  {r.spec.tracing}"
        print(f"{i:4d}  {rid}  testbed {r.testbed_id}  {r.traffic_s:g}s{how}")
    print("\n".join(_host_lines(m)))
    tb_cfg = next(iter(m.testbeds.values())).testbed
    tb_kind = testbed_kind(tb_cfg.kind)
    from ccbench import booking

    if tb_kind.booked_by_profile:
        print("\n".join(booking.lines(m)))
    if m.runs:
        print("\n".join(booking.time_lines(m, a.reboot_min, a.setup_min)))
    if tb_kind.caps.needs_inventory:
        try:
            matrix.check_inventory(source, {"kind": tb_cfg.kind, "inventory": tb_cfg.inventory},
                                   m.testbeds)  # fmt: skip
        except CcbenchError as e:
            print(f"still missing: {e}; `snakemake` runs nothing until it is there, and "
                  f"{tb_kind.inventory_hint}")  # fmt: skip
    return 0


def _host_lines(m: Matrix) -> list[str]:
    """Each variant's endpoint settings beyond ccbench's baseline and its path MTU (the
    runs of a variant share them in every scenario but the MTU, a scenario's topology)."""
    seen: dict[str, set[str]] = {}
    for r in m.runs.values():
        seen.setdefault(r.spec.variant, set()).add(
            f"{r.spec.host.describe()}; MTU {r.spec.topology.mtu}"
        )
    if all(s == {"ccbench's baseline; MTU 1500"} for s in seen.values()):
        return []
    out = ["host settings per variant (read back on every run; docs/configs.md):"]
    return out + [f"  {v}: {' | '.join(sorted(s))}" for v, s in seen.items()]


def cmd_aggregate(a: argparse.Namespace) -> int:
    from ccbench.aggregate import aggregate

    m = Matrix.load(a.matrix)
    dirs = [Path(p).parent for p in a.summaries]
    tables = aggregate(dirs, m, Path(a.out))
    s = tables["runs"]
    print(f"aggregated {len(s)} runs ({int((~s['valid']).sum())} invalid) into {a.out}")
    return 0


def cmd_verdicts(a: argparse.Namespace) -> int:
    import pandas as pd

    from ccbench import verdicts

    m = Matrix.load(a.matrix)
    tables = Path(a.tables)
    runs = pd.read_csv(tables / "runs.csv") if (tables / "runs.csv").exists() else None
    v = verdicts.evaluate(pd.read_csv(tables / "summary.csv"), list(m.expectations), runs)
    out = Path(a.out)
    v.to_csv(out, index=False)
    st = verdicts.status_of(v)
    print(f"{len(v)} verdicts: {int((st == verdicts.PASS).sum())} passed, "
          f"{int((st == verdicts.FAIL).sum())} failed, "
          f"{int((st == verdicts.UNRESOLVED).sum())} not resolved -> {out}")  # fmt: skip
    return 0


def cmd_gate(a: argparse.Namespace) -> int:
    import pandas as pd

    from ccbench import verdicts
    from ccbench.errors import CcbenchError

    if a.runs:
        runs = pd.read_csv(a.runs)
        ran = ~runs["skipped"].astype(bool) if "skipped" in runs else pd.Series(True, runs.index)
        if not ran.any():
            why = sorted({str(r).removeprefix("skipped: ") for r in runs.get("reasons", [])})
            raise CcbenchError(f"nothing could run ({len(runs)} runs not run): {'; '.join(why)}")
    failed = verdicts.failed_gates(pd.read_csv(a.verdicts))
    if failed:
        for line in failed[1:]:
            print(f"ccbench: gate failed: {line}", file=sys.stderr)
        raise CcbenchError(f"gate failed: {failed[0]}")
    if a.ok:
        Path(a.ok).write_text("all gated expectations passed\n")
    return 0


def cmd_figures(a: argparse.Namespace) -> int:
    from ccbench.report import figures

    figures.make_all(Path(a.tables), Path(a.runs), Matrix.load(a.matrix), Path(a.out),
                     a.workers)  # fmt: skip
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from ccbench.report import document

    document.build(Path(a.tables), Path(a.figures), Matrix.load(a.matrix), Path(a.runs),
                   Path(a.pdf), Path(a.html))  # fmt: skip
    return 0


def booking_defaults() -> tuple[float, float]:
    from ccbench.booking import REBOOT_MIN, SETUP_MIN

    return REBOOT_MIN, SETUP_MIN


def _minutes(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = -1.0
    if not 0 <= v < 10_000:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}")
    return v


def _workers(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(f"not a number of processes (1-256): {text!r}")
    return n


def add_commands(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("matrix", help="expand a comparison config into runs")
    src = m.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="comparison YAML (config/config.yaml)")
    src.add_argument("--config-json", help="the same, as JSON; '-' reads it from stdin "
                     "(how the Snakefile passes it)")  # fmt: skip
    m.add_argument("--source", action="append",
                   help="a YAML file the JSON config came from: read strictly first "
                   "(repeat for several)")  # fmt: skip
    m.add_argument("--json", action="store_true", help="print the expanded matrix as JSON")
    m.add_argument("--reboot-min", type=_minutes, default=booking_defaults()[0],
                   help="minutes a reboot between kernels takes (build, install, boot, "
                   "start-up scripts), for the time estimate (default: %(default)g, an "
                   "allowance)")  # fmt: skip
    m.add_argument("--setup-min", type=_minutes, default=booking_defaults()[1],
                   help="minutes Emulab's swap-in and the start-up scripts take, for the "
                   "time estimate (default: %(default)g, an allowance)")  # fmt: skip
    m.set_defaults(func=cmd_matrix)

    g = sub.add_parser("aggregate", help="summaries of all runs -> tables with CIs")
    g.add_argument("--matrix", required=True, help="matrix JSON (results/matrix.json)")
    g.add_argument("--out", required=True, help="directory for runs/flows/summary tables")
    g.add_argument("summaries", nargs="+", help="results/runs/*/summary.json")
    g.set_defaults(func=cmd_aggregate)

    v = sub.add_parser("verdicts", help="evaluate the config's expectations on the tables")
    v.add_argument("--matrix", required=True)
    v.add_argument("--tables", required=True)
    v.add_argument("--out", required=True, help="verdicts CSV")
    v.set_defaults(func=cmd_verdicts)

    gt = sub.add_parser("gate", help="exit non-zero if a gated expectation failed")
    gt.add_argument("--verdicts", required=True)
    gt.add_argument("--ok", help="write this file when every gate passed")
    gt.add_argument("--runs", help="the runs table: fail also if no run could run at all")
    gt.set_defaults(func=cmd_gate)

    f = sub.add_parser("figures", help="tables + time series -> figures")
    f.add_argument("--matrix", required=True)
    f.add_argument("--tables", required=True)
    f.add_argument("--runs", required=True, help="directory holding the run directories")
    f.add_argument("--out", required=True)
    f.add_argument("--workers", type=_workers, help="processes drawing figures side by side "
                   "(default: one per CPU; the files are the same for any number)")  # fmt: skip
    f.set_defaults(func=cmd_figures)

    r = sub.add_parser("report", help="tables + figures -> PDF and HTML report")
    r.add_argument("--matrix", required=True)
    r.add_argument("--tables", required=True)
    r.add_argument("--figures", required=True)
    r.add_argument("--runs", required=True)
    r.add_argument("--pdf", required=True)
    r.add_argument("--html", required=True)
    r.set_defaults(func=cmd_report)
