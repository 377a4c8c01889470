"""`ccbench` command line: the interface the Snakemake rules and users call."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ccbench import __version__, interrupts
from ccbench.errors import CcbenchError
from ccbench.model import Matrix  # standard library only: read before the root check


def _on_sigterm(signum: int, frame: Any) -> None:
    # Same path as Ctrl-C: every `finally` clean-up runs.
    raise KeyboardInterrupt


def _testbed_kind(a: argparse.Namespace) -> str:
    """The testbed kind a command is about, read cheaply (stdlib JSON, YAML if it can be
    imported) so that a user who is not root hears that first. The default kind when
    unsure: the real loading below says what is wrong."""
    from ccbench.testbed.kinds import DEFAULT

    try:
        if getattr(a, "matrix", None):
            m = Matrix.load(a.matrix)
            if getattr(a, "run_id", None):
                return m.runs[a.run_id].testbed_kind
            return m.testbeds[a.testbed].kind
        if getattr(a, "id", None) and not getattr(a, "config", None):
            from ccbench.safe import TESTBED_ID
            from ccbench.testbed import base  # a testbed's state says its kind

            if not TESTBED_ID.fullmatch(a.id):
                return DEFAULT  # refused below, before anything is touched
            st = base.STATE_ROOT / a.id / "state.json"
            return str(json.loads(st.read_text()).get("kind", DEFAULT)) if st.is_file() else DEFAULT
        if getattr(a, "config", None):
            import yaml

            return str((yaml.safe_load(Path(a.config).read_text()).get("testbed") or {})
                       .get("kind", DEFAULT))  # fmt: skip
    except Exception:  # unreadable here: the real loading below says what is wrong
        return DEFAULT
    return DEFAULT


def _root_for_local(a: argparse.Namespace) -> None:
    # Root only where namespaces are touched; inventories and SSH testbeds are a lab
    # user's business (a laptop driving Emulab).
    from ccbench.privileges import require_root
    from ccbench.testbed.kinds import REGISTRY

    known = REGISTRY.get(_testbed_kind(a))
    if os.geteuid() != 0 and (known is None or known.caps.needs_root):
        require_root()


def cmd_testbed(a: argparse.Namespace) -> int:
    if a.action == "inventory":
        return _inventory(a)
    _root_for_local(a)
    from ccbench import lifecycle
    from ccbench.testbed import manage

    if a.action == "down":
        ids = lifecycle.ids_to_remove(a.all, a.config, a.id)
        failed = []
        for d in manage.down_each(ids):
            if d.ok:
                print(f"testbed {d.id}: {d.said}", flush=True)
            else:
                failed.append(d.id)
                print(f"ccbench: error: {d.said}", file=sys.stderr, flush=True)
        if failed and len(ids) > 1:
            print(f"ccbench: error: {len(failed)} of {len(ids)} testbeds not as found after "
                  f"down: {', '.join(failed)}", file=sys.stderr)  # fmt: skip
        return 2 if failed else 0
    if a.action == "status" and not (a.config or a.matrix):
        for each in manage.found():
            state = "up" if each.complete else "incomplete/stale"
            print(f"{each.id}: {each.kind}, {state}, {each.namespaces} namespace(s)")
        return 0
    tb = lifecycle.named_testbed(a.config, a.matrix, a.testbed, a.id)
    if a.action == "up":
        cal = lifecycle.bring_up(tb, a.replace, a.calibration_out, a.skip_unavailable)
        if "skipped" in cal:
            print(f"testbed {tb.id}: not run: {cal['skipped']}")
            return 0
        rtts = ", ".join(
            f"{k} {v['judged_ms']:.2f} ms ({v['judged_on']}, median {v['median_ms']:.2f})"
            for k, v in cal["idle_rtt"].items()
        )
        ratio = cal["rate"]["ratio"]
        print(
            f"testbed {tb.id} up: delay via {cal['delay_method']}; idle RTT {rtts}; "
            f"bottleneck rate {ratio:.3f} of expected"
        )
        return 0
    # status
    up = tb.is_up()
    print(f"testbed {tb.id}: {'up' if up else 'not up'}")
    return 0 if up else 1


def _inventory(a: argparse.Namespace) -> int:
    import yaml

    from ccbench import inventory

    if not a.manifest:
        raise CcbenchError("inventory: --manifest FILE (the experiment's manifest RSpec) is needed")
    p = Path(a.manifest)
    if not p.is_file():
        raise CcbenchError(f"{p}: no such manifest")
    inv = inventory.from_manifest(p.read_bytes(), str(p), user=a.user)
    text = "# ccbench hosts inventory, from " + p.name + "\n" + yaml.safe_dump(inv.to_dict())
    if a.out:
        Path(a.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def cmd_run(a: argparse.Namespace) -> int:
    _root_for_local(a)
    from ccbench import lifecycle

    req = lifecycle.run_request(a.config, a.matrix, a.run_id, a.attempts)
    done = lifecycle.run_on_testbed(
        req, Path(a.out), a.calibration, a.keep_testbed, write_summary=not a.raw_only
    )
    if isinstance(done, lifecycle.Skipped):
        print(f"{a.out}: skipped: {done.reason}")
        return 0
    if isinstance(done, lifecycle.Waiting):
        print(f"{a.out}: not run: {done.reason} (senders run: "
              f"{'; '.join(f'{n} {i}' for n, i in sorted(done.senders.items()))})")  # fmt: skip
        return 0
    s = done
    flows = ", ".join(
        f"{f.cc_used or f.cc_requested} {f.throughput_bps / 1e6:.1f} Mbit/s"
        if f.throughput_bps is not None
        else f"flow {f.flow} failed"
        for f in s.flows
    )
    verdict = "valid" if s.valid else "INVALID: " + "; ".join(r.text for r in s.reasons)
    util = s.utilization_pct
    print(f"{a.out}: {flows}; utilization {util:.1f}%; {verdict}" if util is not None
          else f"{a.out}: {verdict}")  # fmt: skip
    return 0 if s.valid or not a.fail_invalid else 3


def cmd_parse(a: argparse.Namespace) -> int:
    from ccbench.summarize.judge import parse_run_dir

    if a.nice:
        os.nice(19)
    for d in map(Path, a.run_dirs):
        parse_run_dir(d)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="ccbench", description="Congestion-control comparisons on a dumbbell."
    )
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)

    t = sub.add_parser("testbed", help="build, inspect or remove a dumbbell; make an inventory")
    t.add_argument("action", choices=["up", "status", "down", "inventory"])
    t.add_argument("--manifest", help="with inventory: the experiment's manifest RSpec")
    t.add_argument("--out", help="with inventory: write the hosts YAML here (default stdout)")
    t.add_argument("--user", help="with inventory: your login name on the nodes (default: what "
                   "your ssh config says; never another member's from the manifest)")  # fmt: skip
    t.add_argument("--config", help="YAML config (testbed + topology sections)")
    t.add_argument("--id", help="testbed id (overrides the config's)")
    t.add_argument("--all", action="store_true", help="with down: every ccbench testbed")
    t.add_argument("--matrix", help="the workflow's matrix.json (with --testbed ID)")
    t.add_argument("--testbed", help="with --matrix: which testbed")
    t.add_argument("--replace", action="store_true",
                   help="with up: first remove a testbed with the same id")  # fmt: skip
    t.add_argument("--calibration-out", help="with up: also write calibration JSON here")
    t.add_argument("--skip-unavailable", action="store_true",
                   help="with up and --calibration-out: if the kernel lacks what is asked "
                   "(e.g. an AQM), record a skip there and exit 0")  # fmt: skip
    t.set_defaults(func=cmd_testbed)

    r = sub.add_parser("run", help="one run of N concurrent flows")
    src = r.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="YAML config (testbed, topology, run)")
    src.add_argument("--matrix", help="the workflow's matrix.json (with --run-id)")
    r.add_argument("--run-id", help="with --matrix: which run")

    r.add_argument("--out", required=True, help="run directory (raw/ and summary.json)")
    r.add_argument("--attempts", type=int, help="retries for invalid runs (overrides config)")
    r.add_argument("--keep-testbed", action="store_true",
                   help="leave a testbed this run had to build up afterwards")  # fmt: skip
    r.add_argument("--fail-invalid", action="store_true", help="exit 3 if the run is invalid")
    r.add_argument("--calibration", help="the testbed's calibration JSON (a skip is honoured)")
    r.add_argument("--raw-only", action="store_true",
                   help="write raw/ and attempts.json only (the workflow's parse step "
                   "writes summary.json)")  # fmt: skip
    r.set_defaults(func=cmd_run)

    p = sub.add_parser("parse", help="raw/ -> summary.json and timeseries.parquet")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--nice", action="store_true", help="run at the lowest CPU priority")
    p.set_defaults(func=cmd_parse)

    from ccbench import workflow_cli

    workflow_cli.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    # A job a shell script starts with `&` inherits SIGINT ignored, and exec keeps an
    # ignored signal ignored in every tool ccbench starts: the samplers and ping it stops
    # with SIGINT would each wait out their grace and be killed (9 s more per run). A
    # handled signal is reset to its default at exec, so handle it (as Python would).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupts.install()
    a = build_parser().parse_args(argv)
    try:
        rc = int(a.func(a))
    except CcbenchError as e:
        print(f"ccbench: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ccbench: interrupted; cleaned up", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`ccbench matrix | head -1`): end quietly, as cat does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    try:
        interrupts.redeliver()
    except KeyboardInterrupt:
        # A finalizer swallowed the stop after the command's last step: it is done.
        print("ccbench: interrupted after the command completed; what it made stands",
              file=sys.stderr)  # fmt: skip
        return 130
    return rc


if __name__ == "__main__":
    sys.exit(main())
