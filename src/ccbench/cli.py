"""`ccbench` command line: the interface the Snakemake rules and users call."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from ccbench.errors import CcbenchError, Unavailable


def _on_sigterm(signum: int, frame: Any) -> None:
    # Same path as Ctrl-C: every `finally` clean-up runs.
    raise KeyboardInterrupt


# Beside `testbed up --calibration-out FILE`: one line per calibration that failed every
# try (rules/common.smk counts them to retry that testbed when the workflow is rerun).
FAILURES_LOG = "calibration-failures.jsonl"


def _testbed_kind(a: argparse.Namespace) -> str:
    """The testbed kind a command is about, read cheaply (stdlib JSON, YAML if it can be
    imported) so that a user who is not root hears that first. "local" when unsure:
    the local testbed is the default."""
    try:
        if getattr(a, "matrix", None):
            m = json.loads(Path(a.matrix).read_text())
            if getattr(a, "run_id", None):
                return str(m["runs"][a.run_id]["spec"]["testbed"]["kind"])
            return str(m["testbeds"][a.testbed]["testbed"]["kind"])
        if getattr(a, "spec_json", None):
            text = a.spec_json
            d = json.loads(text if text.lstrip().startswith("{") else Path(text).read_text())
            return str(d["testbed"]["kind"])
        if getattr(a, "id", None) and not getattr(a, "config", None):
            from ccbench.safe import TESTBED_ID
            from ccbench.testbed.base import STATE_ROOT  # a testbed's state says its kind

            if not TESTBED_ID.fullmatch(a.id):
                return "local"  # refused below, before anything is touched

            st = STATE_ROOT / a.id / "state.json"
            return str(json.loads(st.read_text()).get("kind", "local")) if st.is_file() else "local"
        if getattr(a, "config", None):
            import yaml

            return str((yaml.safe_load(Path(a.config).read_text()).get("testbed") or {})
                       .get("kind", "local"))  # fmt: skip
    except Exception:  # unreadable here: the real loading below says what is wrong
        return "local"
    return "local"


def _root_for_local(a: argparse.Namespace) -> None:
    # Root only where namespaces are touched; inventories and SSH testbeds are a lab
    # user's business (a laptop driving Emulab).
    from ccbench.privileges import require_root

    if os.geteuid() != 0 and _testbed_kind(a) == "local":
        require_root()


def cmd_testbed(a: argparse.Namespace) -> int:
    if a.action != "inventory":
        _root_for_local(a)
    from ccbench import safe, testbed
    from ccbench.config import load_testbed_config
    from ccbench.testbed import local

    if a.action == "inventory":
        return _inventory(a)
    if a.action == "down":
        if a.all:
            ids = local.all_ids()
        elif a.config:
            ids = [load_testbed_config(a.config)[0].id]
        elif a.id:
            ids = [safe.testbed_id(a.id, "--id")]
        else:
            raise CcbenchError("down: say which testbed: --id ID, --config FILE or --all")
        for tb_id in ids:
            print(f"testbed {tb_id}: {testbed.down(tb_id)}")
        return 0
    if not a.config and not a.spec_json and not a.matrix:
        if a.action == "status":
            for tb_id in local.all_ids():
                st = local.STATE_ROOT / tb_id / "state.json"
                ok = st.exists() and json.loads(st.read_text()).get("complete")
                n = len(local.list_namespaces(local.ns_prefix(tb_id)))
                print(f"{tb_id}: {'up' if ok else 'incomplete/stale'}, {n} namespace(s)")
            return 0
        raise CcbenchError("--config FILE is needed")
    if a.spec_json or a.matrix:
        from ccbench.config import TestbedConfig, topology_from, validate

        if a.matrix:
            tbs = json.loads(Path(a.matrix).read_text())["testbeds"]
            if a.testbed not in tbs:
                raise CcbenchError(f"{a.matrix}: no testbed '{a.testbed}' (--testbed ID)")
            d = tbs[a.testbed]
        else:
            d = json.loads(a.spec_json)
        tbc = TestbedConfig.from_dict(d["testbed"])
        topo = topology_from(validate({"topology": d["topology"]}, "run", "spec")["topology"])
    else:
        tbc, topo = load_testbed_config(a.config)
    if a.id:
        tbc = type(tbc)(**{**tbc.__dict__, "id": safe.testbed_id(a.id, "--id")})
    tb = testbed.make(tbc, topo)
    if a.action == "up":
        if a.replace:
            testbed.down(tb.id)
        elif tb.kind == "local" and local.list_namespaces(local.ns_prefix(tb.id)):
            raise CcbenchError(
                f"testbed '{tb.id}' already exists: `ccbench testbed down --id {tb.id}` first"
            )
        try:
            cal = tb.up()
        except Unavailable as e:
            if not (a.skip_unavailable and a.calibration_out):
                raise
            # The workflow goes on; this testbed's runs are reported as not run. A
            # failed calibration (`retry`) is tried again when the workflow is rerun;
            # its record keeps every try.
            rec = {**getattr(e, "record", {}), "skipped": str(e), "retry": e.retry}
            out = Path(a.calibration_out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(rec, indent=2))
            if e.retry:  # one line per failed `up`: the workflow reruns it when this grows
                with out.with_name(FAILURES_LOG).open("a") as fh:
                    fh.write(json.dumps({"time": rec.get("time"), "reason": str(e)}) + "\n")
            print(f"testbed {tb.id}: not run: {e}")
            return 0
        if a.calibration_out:
            Path(a.calibration_out).parent.mkdir(parents=True, exist_ok=True)
            Path(a.calibration_out).write_text(json.dumps(cal, indent=2))
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
    from ccbench import testbed
    from ccbench.config import TestbedConfig, load_run_config
    from ccbench.privileges import require_root
    from ccbench.run import execute
    from ccbench.spec import RunSpec
    from ccbench.testbed.base import signals_deferred

    if a.matrix or a.spec_json:
        if a.matrix:
            if not a.run_id:
                raise CcbenchError("--matrix needs --run-id")
            runs = json.loads(Path(a.matrix).read_text())["runs"]
            if a.run_id not in runs:
                raise CcbenchError(f"{a.matrix}: no run '{a.run_id}'")
            d = runs[a.run_id]["spec"]
        else:
            text = a.spec_json
            d = json.loads(text if text.lstrip().startswith("{") else Path(text).read_text())
        tbc = TestbedConfig.from_dict(d["testbed"])
        spec = RunSpec.from_dict(d["run"])
        attempts = int(d.get("attempts", 1))
        # The kernel the variant needs ({label, match}): beside the spec, not in it, so
        # a changed regex does not change the run's id (ccbench.matrix).
        kernel_req = d.get("kernel")
    else:
        tbc, spec, attempts = load_run_config(a.config)
        kernel_req = None
    if a.attempts:
        attempts = a.attempts
    if a.calibration and "skipped" in json.loads(Path(a.calibration).read_text()):
        from ccbench.run import record_skip

        reason = json.loads(Path(a.calibration).read_text())["skipped"]
        record_skip(spec, Path(a.out), reason)
        print(f"{a.out}: skipped: {reason}")
        return 0
    if tbc.kind == "local":
        require_root()
    tb = testbed.make(tbc, spec.topology)
    ephemeral = not tb.is_up()
    if ephemeral:
        # A testbed with this id may exist for another topology, or be stale.
        testbed.down(tb.id)
        tb.up()
    try:
        if kernel_req:
            from ccbench import kernel
            from ccbench.run import kernel_identities, record_wait

            seen = kernel_identities(tb, spec)
            if not any(kernel.matches(kernel_req["match"], i) for i in seen.values()):
                # Booted into another kernel: nothing is measured under the wrong label.
                reason = record_wait(spec, Path(a.out), kernel_req, seen)
                print(f"{a.out}: not run: {reason} (senders run: "
                      f"{'; '.join(f'{n} {i}' for n, i in sorted(seen.items()))})")  # fmt: skip
                return 0
        s = execute(tb, spec, Path(a.out), attempts, write_summary=not a.raw_only,
                    kernel_req=kernel_req)  # fmt: skip
        # The record of an earlier check that found another kernel (rules/common.smk).
        (Path(a.out) / "waiting.json").unlink(missing_ok=True)
    finally:
        if ephemeral and not a.keep_testbed:
            with signals_deferred():
                testbed.down(tb.id)
    flows = ", ".join(
        f"{f['cc_used'] or f['cc_requested']} {f['throughput_bps'] / 1e6:.1f} Mbit/s"
        if f["throughput_bps"] is not None
        else f"flow {f['flow']} failed"
        for f in s["flows"]
    )
    verdict = "valid" if s["valid"] else "INVALID: " + "; ".join(s["reasons"])
    util = s.get("utilization_pct")
    print(f"{a.out}: {flows}; utilization {util:.1f}%; {verdict}" if util is not None
          else f"{a.out}: {verdict}")  # fmt: skip
    return 0 if s["valid"] or not a.fail_invalid else 3


def cmd_parse(a: argparse.Namespace) -> int:
    from ccbench.summary import parse_run_dir

    if a.nice:
        os.nice(19)
    for d in map(Path, a.run_dirs):
        parse_run_dir(d)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="ccbench", description="Congestion-control comparisons on a dumbbell."
    )
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
    t.add_argument("--spec-json", help="testbed + topology as JSON")
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
    src.add_argument("--spec-json", help="run spec as JSON (a file, or inline)")
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
    a = build_parser().parse_args(argv)
    try:
        return int(a.func(a))
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


if __name__ == "__main__":
    sys.exit(main())
