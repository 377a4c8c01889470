#!/usr/bin/env python3
"""Emulab rehearsal -- Linux senders, Linux delay node instead of FreeBSD dummynet.

The whole Emulab user path minus the portal, on this machine, before you book
hardware (run as root, after ./setup.sh):

    sudo .venv/bin/python scripts/emulab_rehearsal.py [--workdir DIR] [--duration S]

1. profile.py with a small parameter set (two dumbbells of 2 pairs, Ubuntu senders,
   100 Mbit/s, 40 ms RTT, 48-packet queue, host offloads off: see PROFILE_ARGS) -> the
   request RSpec (`request.xml`).
2. A manifest made from it as Emulab fills one in (`manifest.xml`): a pcNNN per
   node with one <login> per project member (yours not first), <host>,
   <emulab:vnode>, interface names (component_id ...:ethN) and MAC addresses, link
   VLAN tags. Host names are addresses on a management network made here.
3. "Emulab": one network namespace per node, wired as the manifest's links say
   (a veth pair per link, named and addressed as its interfaces), a management
   network (each node's control network and default route, with its own sshd and
   host key; /run/sshd, sshd's privilege-separation directory, made when missing:
   /run is emptied at boot), the delay nodes `dl` and `dl-d2` bridges that only delay,
   by their pipes' latency (native/ccdelay: this kernel has no netem), then every
   node's start-up command
   from its <execute> element, as is: the real emulab/*.sh with /local/repository
   bound to this checkout, and each node's /var/tmp, /etc/sysctl.d and /local/logs
   its own (a mount namespace per node). Nothing here uses ccbench's local testbed
   code: only the profile's scripts set the nodes up.
4. `ccbench testbed inventory --manifest manifest.xml --user YOU --out hosts.yaml`.
5. `snakemake --cores N all --configfile rehearsal.yaml` (a 100 Mbit/s miniature of
   config/examples/emulab-seed001.yaml with Linux senders, 1 repetition, its two
   bottleneck configurations on two dumbbells: `testbed.dumbbells: 2`) over SSH, run
   from a control namespace on the management network -> reports/*.pdf.

Then it writes `evidence.json` and prints, per run, the bottleneck evidence: its
dumbbell, when its traffic ran (and which runs of the other dumbbell overlapped it),
the queue rt1 of that dumbbell had, rt1's qdisc drops (summary.json `bottleneck`)
against what the delay node dropped (its interfaces' counters and ccdelay's queue),
and the loss ledger. Each delay node is logged in to like every node and read as
ccbench.delaynode reads Emulab's (`sudo sysctl -n kern.hz`, `sudo ipfw pipe show`):
here that fails (no dummynet), so the evidence lists it as "not dummynet:
configuration not read", with why; the ledger's `ipfw pipe show` fails the same way
and is listed under `loss_ledger.unread`; its drops are read by this script instead.

What it cannot cover: FreeBSD senders (no FreeBSD here), Emulab's real dummynet
delay node (ipfw pipes, its queue and counters), the portal itself (profile.py's
two portal passes are tests/unit/test_profile_portal.py), mapping onto hardware,
real NICs (veth: no TX ring, no link speed), separate kernels per node (host-wide
sysctls such as net.core.rmem_max cannot be set from a node), and package
installation at boot (the scripts run with CCBENCH_SETUP_NO_PACKAGES=1 and use this
machine's tools). `sudo` on the nodes is a stand-in that runs the command as root
(Emulab's is passwordless sudo). The login user is root (sshd here authenticates
local users).

Everything it makes (namespaces, sshd and ccdelay processes, the ssh agent, mounts,
/local and /run/sshd when it made them, temporary files) is removed at the end, also on error or
Ctrl-C; the work directory (RSpecs, inventory, results, report, logs) is kept.
Exit status: 0 when the report was written, every run valid and run on the queue it
asked for, and runs of the two dumbbells overlapped in time; 1 when the report was
written but not so (the reasons are printed); 2 on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from rehearsal.common import CTL, PREFIX, REPO, Failed, in_ns, log, run
from rehearsal.evidence import delay_drops, overlaps, runs_evidence
from rehearsal.manifest import make_manifest, read_manifest, request_rspec
from rehearsal.nodes import Rehearsal

UBUNTU24 = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"
# Host offloads off: a veth has no wire, so a sender's TSO/GSO "segment" crosses to rt1
# as one skb of up to 64 KB and sits in its queue as one packet (measured with the OS
# defaults: one cubic flow through the 1-BDP, 331-packet queue had a mean RTT of 112 ms,
# where 331 frames allow at most 80; with offloads off the run is valid). On Emulab the
# sender's NIC segments in hardware and rt1 receives frames; switching TSO/GSO off on
# the senders' veths (the profile's "offloads off", applied by the start-up scripts)
# is what models that.
PROFILE_ARGS = [
    "--pairs", "2", "--dumbbells", "2", "--senderImage", UBUNTU24, "--bandwidthMbps", "100",
    "--rttMs", "40", "--queuePackets", "48", "--hostOffloads", "off",
]  # fmt: skip
DUMBBELLS = 2


def workflow_config(inventory: Path, duration: float, one_run: bool = False) -> dict[str, Any]:
    """A 100 Mbit/s miniature of config/examples/emulab-seed001.yaml, Linux senders;
    `one_run`: its two-flow, 48-packet run of CUBIC alone, on dumbbell 1 (the seeds'
    run length at the rehearsal's rate)."""
    cfg = _miniature(inventory, duration)
    if one_run:
        cfg["testbed"]["dumbbells"] = 1
        cfg["scenarios"] = {"two-flows-48": cfg["scenarios"]["two-flows-48"]}
        cfg["variants"] = cfg["variants"][:1]
    return cfg


def _miniature(inventory: Path, duration: float) -> dict[str, Any]:
    return {
        "title": "Emulab rehearsal: Linux senders, Linux delay node instead of FreeBSD dummynet",
        "question": (
            "Does the Emulab path (profile.py, its start-up scripts, the manifest's "
            "inventory, the SSH testbed) run seed 001's comparison end to end on two "
            "dumbbells side by side, each run on its own rt1 queue, with that queue the "
            "only place packets are dropped? (A rehearsal on one machine: 100 Mbit/s, "
            "Linux CUBIC vs NewReno.)"
        ),
        "report_name": "emulab-rehearsal",
        "results_dir": "results",
        # one bottleneck configuration per dumbbell (matrix: spread over the dumbbells),
        # whose runs snakemake runs side by side (a job per dumbbell at a time)
        "testbed": {"kind": "ssh", "inventory": str(inventory), "dumbbells": DUMBBELLS},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, "mtu": 1500},
        "scenarios": {
            "single-flow": {
                "description": "one flow, 1-BDP queue (seed 001's single-path test)",
                "flows": 1,
                "topology": {"queue": {"kind": "pfifo", "limit_bdp": 1.0}},
            },
            "two-flows-48": {
                "description": "two flows through the 48-packet pfifo (seed 001's Emulab test)",
                "flows": 2,
                "topology": {"queue": {"kind": "pfifo", "limit_pkts": 48}},
            },
        },
        "variants": [
            {"label": "linux-cubic", "cc": "cubic", "os": "linux", "baseline": True},
            {"label": "linux-reno", "cc": "reno", "os": "linux"},
        ],
        "repetitions": 1,
        "duration_s": duration,
        "interval_s": 0.5,
        "attempts": 2,
        "seed": 1,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", default="emulab-rehearsal",
                    help="where the RSpecs, inventory, results, report and logs go "
                         "(default: ./emulab-rehearsal; must be empty or absent)")  # fmt: skip
    ap.add_argument("--cores", type=int, default=2, help="snakemake --cores (default 2)")
    ap.add_argument("--duration", type=float, default=10, help="flow length in s (default 10)")
    ap.add_argument("--one-run", action="store_true",
                    help="one run only (two CUBIC flows, 48 packets, dumbbell 1): with "
                         "--duration 300, a seed-length run over SSH")  # fmt: skip
    ap.add_argument("--hold", action="store_true",
                    help="stop after the nodes are up and the inventory is written: "
                         "print how to reach them, wait for Ctrl-C, then clean up")  # fmt: skip
    a = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("rehearsal: error: run as root (network namespaces, sshd per node)", file=sys.stderr)
        return 2
    work = Path(a.workdir).resolve()
    if work.exists() and any(work.iterdir()):
        print(f"rehearsal: error: {work} is not empty", file=sys.stderr)
        return 2
    (work / "logs").mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="ccb-rh-"))
    rh = Rehearsal(work, scratch, a.cores, a.duration)
    rh.later(lambda: shutil.rmtree(scratch, ignore_errors=True))
    snake: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGINT too: started in the background, Python would inherit it ignored
    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    t0 = time.monotonic()
    try:
        with _step("1. profile.py -> request RSpec"):
            request = request_rspec(work / "request.xml", scratch, PROFILE_ARGS)
        with _step("2. manifest as Emulab fills it in"):
            manifest = make_manifest(request, rh.user)
            (work / "manifest.xml").write_bytes(manifest)
            nodes, links = read_manifest(manifest)
        with _step("3. nodes: namespaces, links, sshd, delay node, start-up services"):
            rh.nodes = nodes
            rh.keys()
            rh.local_mountpoint()
            rh.build(nodes, links)
            rh.privsep_dir()
            for node in nodes:
                rh.sshd(node)
            for node, info in nodes.items():
                if info["delay_ms"] is not None:
                    rh.delay_node(node)
            rh.wait_sshd()
            rh.startup()
            rh.check_done()
            delay = [n for n, i in nodes.items() if i["delay_ms"] is not None]
            configs = {n: rh.delay_config(n) for n in delay}
            for n, c in configs.items():
                log(f"{n}: {c['configuration']}" + (f" ({c['why']})" if "why" in c else ""))
        with _step("4. ccbench testbed inventory"):
            run(*in_ns(CTL, "ccbench", "testbed", "inventory", "--manifest",
                       str(work / "manifest.xml"), "--user", rh.user,
                       "--out", str(work / "hosts.yaml")), env=rh.env)  # fmt: skip
        if a.hold:
            log(f"holding: nodes are namespaces {PREFIX}<node>; ssh from {CTL} with "
                f"SSH_AUTH_SOCK={rh.env['SSH_AUTH_SOCK']}; inventory {work / 'hosts.yaml'}. "
                "Ctrl-C ends.")  # fmt: skip
            while True:
                time.sleep(3600)
        with _step("5. snakemake all over SSH"):
            cfg = work / "rehearsal.yaml"
            wf = workflow_config(work / "hosts.yaml", a.duration, a.one_run)
            cfg.write_text(yaml.safe_dump(wf, sort_keys=False))
            before = {n: rh.delay_counters(n) for n in delay}
            with open(work / "logs" / "snakemake.log", "wb") as out:
                snake.append(subprocess.Popen(
                    in_ns(CTL, "snakemake", "--snakefile", str(REPO / "Snakefile"),
                          "--directory", str(work), "--workflow-profile",
                          str(REPO / "profiles" / "default"), "--cores", str(a.cores), "all",
                          "--configfile", str(cfg)),
                    stdout=out, stderr=out, env=rh.env,
                ))  # fmt: skip
                rc = snake[0].wait(timeout=1800 + 3 * a.duration)
            after = {n: rh.delay_counters(n) for n in delay}
            if rc != 0:
                tail = (work / "logs" / "snakemake.log").read_text()[-1500:]
                raise Failed(f"snakemake exited {rc} (logs/snakemake.log):\n{tail}")
        return report(work, configs, before, after, time.monotonic() - t0,
                      need_parallel=not a.one_run)  # fmt: skip
    except Failed as e:
        print(f"rehearsal: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rehearsal: interrupted; cleaning up", file=sys.stderr)
        return 2
    finally:
        for p in snake:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)  # snakemake brings its testbeds down
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
        _close_masters(scratch / "ccbench-ssh")
        problems = rh.clean()
        for s, h in old.items():
            signal.signal(s, h)
        for pr in problems:
            print(f"rehearsal: clean-up: {pr}", file=sys.stderr)


@contextlib.contextmanager
def _step(what: str) -> Iterator[None]:
    t = time.monotonic()
    log(what)
    yield
    log(f"   ({time.monotonic() - t:.1f} s)")


def _close_masters(sshdir: Path) -> None:
    """End ccbench's shared ssh connections (ControlPersist) by their sockets."""
    if not sshdir.is_dir():
        return
    for sock in sshdir.glob("ccb-ssh-*"):
        subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "ccb-rh"],
                       capture_output=True, timeout=15)  # fmt: skip


def report(work: Path, configs: dict[str, dict[str, Any]], before: dict[str, Any],
           after: dict[str, Any], took: float, need_parallel: bool = True) -> int:  # fmt: skip
    pdfs = sorted((work / "reports").glob("*.pdf"))
    runs = runs_evidence(work / "results")
    side_by_side = overlaps(runs)
    dl = {n: {**configs[n], "dropped": delay_drops(before[n], after[n]), "before": before[n],
              "after": after[n]} for n in after}  # fmt: skip
    nics = {}
    for f in sorted((work / "nodes").glob("*/var-tmp/ccbench/nic-*.json")):
        nics[f"{f.parents[2].name} {f.stem[4:]}"] = json.loads(f.read_text())
    evidence = {
        "name": "rehearsal -- Linux senders, Linux delay node instead of FreeBSD dummynet",
        "report": [str(p) for p in pdfs],
        "runs": runs,
        "parallel": side_by_side,
        "delay_node": dl,
        "nic_records": nics,
        "seconds": round(took, 1),
    }
    (work / "evidence.json").write_text(json.dumps(evidence, indent=1))
    log(f"report: {', '.join(map(str, pdfs)) or 'NONE'}")
    log("bottleneck evidence (rt1 qdisc drops vs delay-node drops):")
    for r in runs:
        log(f"  d{r['dumbbell']} {r['scenario']:>13} {r['variant']:<12} valid={r['valid']!s:<5} "
            f"rt1 queue={r['rt1_queue_had']} "
            f"util={r['utilization_pct'] or 0:5.1f}% rt1 queue drops={r['rt1_queue_drops']} "
            f"shaper drops={r['rt1_shaper_dropped']} retx={r['retransmits']} "
            f"outside={r['ledger_outside']} unread={r['ledger_unread']}")  # fmt: skip
        if r["rt1_queue_had"] != r["rt1_queue_asked"]:
            log(f"      rt1's queue was {r['rt1_queue_had']} packets, the run asked for "
                f"{r['rt1_queue_asked']}: another bottleneck configuration's testbed_up "
                "had rebuilt it (the dumbbell is shared)")  # fmt: skip
        for reason in r["reasons"]:
            log(f"      invalid: {reason}")
    for o in side_by_side:
        log(f"  side by side: {o['runs'][0]} (d{o['dumbbells'][0]}, {o['queues'][0]}) and "
            f"{o['runs'][1]} (d{o['dumbbells'][1]}, {o['queues'][1]}) overlapped "
            f"{o['overlap_s']} s")  # fmt: skip
    if not side_by_side:
        log("  no runs of different dumbbells overlapped in time")
    for n, d in dl.items():
        log(f"  delay node {n}: {d['configuration']}")
        log(f"  delay node {n} (whole workflow): dropped {d['dropped'] or 0}; ccdelay "
            f"received {d['after']['ccdelay']['packets_received']} packets, "
            f"{d['after']['ccdelay']['late_5ms']} > 5 ms late")  # fmt: skip
    log(f"evidence: {work / 'evidence.json'} ({took:.0f} s)")
    if not pdfs:
        return 2
    ok = all(r["valid"] and r["rt1_queue_had"] == r["rt1_queue_asked"] for r in runs)
    return 0 if runs and ok and (side_by_side or not need_parallel) else 1


if __name__ == "__main__":
    sys.exit(main())
