"""The Emulab rehearsal (scripts/emulab_rehearsal.py) -- Linux senders, Linux delay
node instead of FreeBSD dummynet.

The whole Emulab user path minus the portal, as a user runs it before booking
hardware: profile.py -> request RSpec -> a manifest as Emulab fills it in -> one
namespace per node wired as its links say, each with its own sshd and its start-up
command (the real emulab/*.sh) -> `ccbench testbed inventory --manifest` -> `snakemake
all` over SSH -> PDF. What it cannot cover: FreeBSD senders, Emulab's real dummynet
delay node, the portal, real NICs (see the script's docstring).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from lxml import etree

from tests.conftest import REPO
from tests.integration.conftest import namespaces

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_emulab_rehearsal_linux_senders_linux_delay_node_not_dummynet(tmp_path: Path) -> None:
    if not Path("/usr/sbin/sshd").exists():
        pytest.skip("openssh-server is not installed (./setup.sh installs it)")
    if not (REPO / "native" / "ccdelay" / "ccdelay").exists():
        pytest.skip("native/ccdelay is not built (./setup.sh builds it)")
    local_before = Path("/local").exists()
    scratch_before = set(Path(tempfile.gettempdir()).glob("ccb-rh-*"))
    work = tmp_path / "rehearsal"
    t0 = time.monotonic()
    cp = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "emulab_rehearsal.py"), "--workdir", str(work),
         "--duration", "8"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    took = time.monotonic() - t0
    out = cp.stdout + cp.stderr

    # Everything the rehearsal made is gone, whatever its outcome.
    assert namespaces("ccb-rh-") == [], out
    assert Path("/local").exists() == local_before
    assert set(Path(tempfile.gettempdir()).glob("ccb-rh-*")) == scratch_before
    left = subprocess.run(["pgrep", "-f", "ccb-rh-"], capture_output=True, text=True).stdout
    assert left == "", f"processes left behind: {left}"

    assert cp.returncode in (0, 1), out[-3000:]
    print(out)
    print(f"rehearsal took {took:.0f} s")

    # The manifest as Emulab fills it in, and the inventory made from it.
    root = etree.parse(str(work / "manifest.xml")).getroot()
    s1 = next(n for n in root.iter("{*}node") if n.get("client_id") == "s1")
    logins = [g.get("username") for g in s1.iter("{*}login")]
    assert len(logins) == 3 and logins[0] != "root" and "root" in logins
    assert s1.find("{*}interface").get("component_id").endswith(":eth1")
    inv = yaml.safe_load((work / "hosts.yaml").read_text())
    db = inv["dumbbells"][1]
    assert db["dl"]["os"] == "dummynet" and db["s1"]["os"] == "linux"
    assert inv["ssh"]["user"] == "root" and db["rt1"]["address"] == "10.1.2.1"

    # Every node's start-up script finished, with the profile's settings.
    done = (work / "nodes" / "rt1" / "var-tmp" / "ccbench-setup.done").read_text()
    assert "role=rt1" in done and "queue=48" in done and "rate_mbit=100" in done
    nic = json.loads((work / "nodes" / "rt1" / "var-tmp" / "ccbench" / "nic-eth3.json").read_text())
    assert nic["tx_ring_asked"] == 48 and nic["generic-segmentation-offload"] == "off"

    # The report, and the evidence: rt1's queue is where packets were dropped.
    pdfs = list((work / "reports").glob("*.pdf"))
    assert len(pdfs) == 1 and pdfs[0].stat().st_size > 10_000
    ev = json.loads((work / "evidence.json").read_text())
    runs = ev["runs"]
    assert {(r["scenario"], r["variant"]) for r in runs} == {
        (s, v) for s in ("single-flow", "two-flows-48") for v in ("linux-cubic", "linux-reno")
    }
    dl = ev["delay_node"]["dl"]
    assert dl["dropped"] == {}, "the delay node dropped packets"
    assert dl["after"]["ccdelay"]["packets_received"] > 100_000
    for r in runs:
        what = f"{r['scenario']}/{r['variant']}"
        assert r["cc_used"] == [r["variant"].split("-")[1]] * len(r["cc_used"]), what
        # The dl node is logged in to like any node; its `ipfw pipe show` fails here
        # (Linux, no dummynet) and is listed as unread, nothing else is.
        assert r["ledger_unread"] == ["dl dummynet"], what
        assert r["ledger_outside"] == {}, f"{what}: lost outside the bottleneck"
        assert r["rt1_queue_drops"] and r["rt1_queue_drops"] > 0, what
        assert r["rt1_queue_had"] == r["rt1_queue_asked"], (
            f"{what}: rt1's queue during the run was {r['rt1_queue_had']} packets, the run "
            f"asked for {r['rt1_queue_asked']}: the two bottleneck configurations share one "
            "SSH dumbbell and the last `testbed up` decides the queue for both (ccbench "
            "re-applies no testbed's qdisc before its runs)"
        )
        assert r["valid"], f"{what}: {r['reasons']}"
    assert cp.returncode == 0, out[-3000:]
