from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.sshnode import sshd_argv
from ccbench import layout
from ccbench.container import DEFAULT_IMAGE
from ccbench.parse.procstat import usage_between
from ccbench.reasons import Code, Reason, host_stalled_only
from tests.conftest import REPO, ccbench
from tests.integration import shared_runs

# Above this share of CPU time taken by the hypervisor, a fidelity measurement on this
# VM measures the neighbours; idle steal here is ~1 %, busy periods reach 10-26 %.
MAX_STEAL_PCT = float(os.environ.get("CCB_TEST_MAX_STEAL", "2"))
FIDELITY_TRIES = 3


class StolenRun(AssertionError):
    """A fidelity try whose run was judged invalid for the router's CPU steal (Code.STEAL)."""


class FidelityRetry(UserWarning):
    """A fidelity try that failed before a later one passed: pytest's warnings summary
    names the test and why, so a log shows which check this VM spoils first."""


@pytest.fixture(scope="session")
def image() -> str:
    """The Linux-node tooling image (containers/build.sh: built if absent or out of
    date), once per session for every test that runs tools in it."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed: ./setup.sh installs it (containers/build.sh)")
    result = subprocess.run(["bash", str(REPO / "containers" / "build.sh")],
                            capture_output=True, text=True, timeout=1500, check=False)  # fmt: skip
    assert result.returncode == 0, f"containers/build.sh failed:\n{result.stderr[-4000:]}"
    return os.environ.get("CCBENCH_IMAGE", DEFAULT_IMAGE)


def measure_fidelity(measure: Callable[[], None], tries: int = FIDELITY_TRIES) -> None:
    """Run a fidelity measurement with its asserts (utilization, RTT, lateness, rate).

    These check what the testbed can do, on a VM that shares its CPUs: a failed try is
    measured again, up to `tries` (each failed try a FidelityRetry warning). All tries
    failing fails the test, unless the hypervisor stole more than MAX_STEAL_PCT during
    every one of them (or the run was invalid for the steal validity measured over its
    traffic: validity.check_steal); then the test is skipped, saying so, since such
    numbers say nothing about ccbench.
    """
    stolen: list[bool] = []
    notes: list[str] = []
    for k in range(1, tries + 1):
        before = Path("/proc/stat").read_text()
        try:
            measure()
            return
        except AssertionError as e:
            steal = usage_between(before, Path("/proc/stat").read_text())["steal_pct"] or 0.0
            stolen.append(steal > MAX_STEAL_PCT or isinstance(e, StolenRun))
            notes.append(f"try {k}: steal {steal:.1f}%: {str(e).splitlines()[0][:200]}")
            if k < tries:
                warnings.warn(FidelityRetry(notes[-1]), stacklevel=2)
    if all(stolen):
        pytest.skip(
            f"hypervisor steal > {MAX_STEAL_PCT:g}% (or the run's own steal check) in "
            "every try; " + " | ".join(notes)
        )
    pytest.fail("fidelity not reached in any try: " + " | ".join(notes))


HOST_SYSCTLS = (
    "net.ipv4.tcp_congestion_control",
    "net.ipv4.tcp_allowed_congestion_control",
    "net.ipv4.ip_forward",
    "net.core.rmem_max",
    "net.core.wmem_max",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
    "net.ipv4.tcp_no_metrics_save",
)


def host_sysctls() -> dict[str, str]:
    return {
        k: subprocess.run(["sysctl", "-n", k], capture_output=True, text=True).stdout.strip()
        for k in HOST_SYSCTLS
    }


def namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(prefix)]


def started(pid: int) -> str | None:
    """A process's start time (/proc/PID/stat field 22): a pid used again is another."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def in_namespaces(names: list[str]) -> dict[int, str | None]:
    """Every process in the named namespaces (`ip netns pids`), pid -> start time."""
    out = {}
    for ns in names:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
        out.update({int(p): started(int(p)) for p in pids.stdout.split()})
    return out


def still_running(procs: dict[int, str | None]) -> list[str]:
    """Of `procs` (pid -> start time), those running yet, with their command lines (a
    zombie has ended: a killed run's tool waits there until init reaps it)."""
    left = []
    for pid, when in procs.items():
        with contextlib.suppress(OSError, IndexError):
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            if stat[0] not in ("Z", "X") and stat[19] == when:
                left.append(f"{pid} {Path(f'/proc/{pid}/cmdline').read_bytes()!r}")
    return left


def spawn_sshd(netns: str, listen: str, d: Path, name: str) -> subprocess.Popen[bytes]:
    """A real sshd in namespace `netns` listening on `listen`, keys and authorized_keys
    from `d` (its pid file d/NAME.pid), as bench.sshnode starts its nodes: only the
    network namespace changes (the sessions keep the host's /sys with its cgroup
    mounts, which podman needs, as on a real host), and this machine's ~/.bashrc is
    hidden from the sessions. Debian's bash sources it for every command sshd runs, and
    here it runs `pyenv init` (0.3 s and 0.15 s of CPU per command): a testbed node's
    root shell does not, and the VM's CPUs are the path's."""
    argv = sshd_argv(netns, listen, d, pid_file=d / f"{name}.pid")
    return subprocess.Popen(argv, stderr=subprocess.DEVNULL)


def write_config(path: Path, tb_id: str, **topo: object) -> Path:
    cfg = {
        "testbed": {"id": tb_id},
        "topology": {"pairs": 2, "rate_mbit": 100, "rtt_ms": 40, **topo},
        # attempts: an invalid run (e.g. the VM stalled the delay element) is retried,
        # as the tool does for users; a second invalid attempt fails the test.
        "run": {"duration_s": 5, "interval_s": 0.5, "attempts": 2, "flows": [{"cc": "cubic"}]},
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


@contextlib.contextmanager
def testbed_up(cfg: Path, tb_id: str) -> Iterator[tuple[str, Path]]:
    """Testbed `tb_id` of `cfg` up for the block, then down, leaving no namespace."""
    ccbench("testbed", "down", "--id", tb_id)
    ccbench("testbed", "up", "--config", str(cfg))
    try:
        yield tb_id, cfg
    finally:
        ccbench("testbed", "down", "--id", tb_id)
        assert namespaces(f"ccb-{tb_id}-") == []


@pytest.fixture(scope="session")
def bdp_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real 100 Mbit x 40 ms dumbbell with a 1-BDP pfifo (shared_runs.BDP), shared by
    the tests (in any module) that check this dumbbell."""
    cfg = write_config(tmp_path_factory.mktemp("tb") / "tb.yaml", "itbdp", **shared_runs.BDP)
    with testbed_up(cfg, "itbdp") as tb:
        yield tb


@pytest.fixture(scope="session")
def q48_testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The same with 48 packets of pfifo (shared_runs.Q48: a standing queue, losses)."""
    cfg = write_config(tmp_path_factory.mktemp("tb") / "tb.yaml", "itq48", **shared_runs.Q48)
    with testbed_up(cfg, "itq48") as tb:
        yield tb


def _shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, testbed: tuple[str, Path],
    topology: dict[str, Any], run: dict[str, Any],
    check: Callable[[Path, dict[str, Any]], None],
) -> shared_runs.SharedRun:  # fmt: skip
    """`run` on `testbed`, measured once for every test that reads it (its fidelity
    `check` is theirs together: a try that fails it is measured again)."""
    d = tmp_path_factory.mktemp(name)
    cfg = shared_runs.run_config(d / "run.yaml", testbed[0], topology, run)
    out = d / "out"
    measure_fidelity(lambda: shared_runs.measure_parsed(cfg, out, check))
    return shared_runs.SharedRun(out, json.loads((out / "summary.json").read_text()))


@pytest.fixture(scope="session")
def cubic_bdp_run(bdp_testbed: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
                  ) -> shared_runs.SharedRun:  # fmt: skip
    """One CUBIC flow through the 1-BDP queue (shared_runs.CUBIC_BDP)."""
    return _shared_run(tmp_path_factory, "cubic-bdp", bdp_testbed, shared_runs.BDP,
                       shared_runs.CUBIC_BDP, shared_runs.cubic_bdp_check)  # fmt: skip


@pytest.fixture(scope="session")
def traced_q48_run(q48_testbed: tuple[str, Path], tmp_path_factory: pytest.TempPathFactory
                   ) -> shared_runs.SharedRun:  # fmt: skip
    """CUBIC and BBR through 48 packets, every ACK traced (shared_runs.TRACED_Q48)."""
    return _shared_run(tmp_path_factory, "traced-q48", q48_testbed, shared_runs.Q48,
                       shared_runs.TRACED_Q48, shared_runs.traced_q48_check)  # fmt: skip


def run_measured(
    cfg: Path, out: Path, check: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """`ccbench run` whose summary must be valid and pass `check`, as a fidelity
    measurement (see measure_fidelity); returns the summary of the try that passed.
    One run a try (`--attempts 1`): the tries are the retries, so a VM that spoils every
    run costs FIDELITY_TRIES runs, not that times the config's attempts."""
    got: dict[str, Any] = {}

    def measure() -> None:
        shutil.rmtree(out, ignore_errors=True)
        ccbench("run", "--config", str(cfg), "--out", str(out), "--attempts", "1")
        s = json.loads((out / "summary.json").read_text())
        if not s["valid"] and Code.STEAL in [r["code"] for r in s["reasons"]]:
            raise StolenRun(s["reasons"])
        assert s["valid"], s["reasons"]
        if check:
            check(s)
        got.update(s)

    measure_fidelity(measure)
    return got


# Reasons a run is invalid because the VM, not the code under test, fell behind
# (validity.check_rtt_excess, the delay element's lateness check, the router's CPU
# steal, a per-ACK trace whose reader fell behind: reasons.HOST_STALLS). Tests whose subject
# is not fidelity (crash clean-up, resume, kernel waits) accept a run judged invalid for
# these only: the check did its job; fidelity has its own tests (measure_fidelity).
def assert_judged(summary: dict[str, Any], also: tuple[Code, ...] = ()) -> None:
    """The run was measured and judged: valid, or invalid only because the host stalled
    (or for a reason of a code in `also`: what else the test's subject is not)."""
    assert not summary.get("skipped"), summary["reasons"]
    rest = [Reason.model_validate(r) for r in summary["reasons"] if r["code"] not in also]
    assert summary["valid"] or not rest or host_stalled_only(rest), summary["reasons"]


# A flent probe in a container (podman, then flent's Python, then fping and irtt) can
# take its first sample after the traffic began when the tests beside it load the
# machine: 0.68 s into a 3-s run in one CI run (2026-11-28; flent is released 1.5 s
# early and needs about 1.1 s idle), so it covered 80 %. validity's coverage check did
# its job; for a test whose subject is where the tools run, that run is judged too.
PROBE_STARTED_LATE = (Code.PROBE_SHORT,)


def run_judged(cfg: Path, out: Path, also: tuple[Code, ...] = ()) -> dict[str, Any]:
    """`ccbench run --config cfg` once, for a test whose subject is not fidelity (which
    tool ran, what it recorded): its summary, valid or invalid only because the host
    stalled (assert_judged, with `also`); not measured again for a stall, as
    run_measured does, nor by the run's own attempts (`--attempts 1`)."""
    ccbench("run", "--config", str(cfg), "--out", str(out), "--attempts", "1")
    s: dict[str, Any] = json.loads((out / "summary.json").read_text())
    assert_judged(s, also)
    return s


def run_snakemake(
    workdir: Path,
    config: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess[str]:
    """The real workflow of this checkout in `workdir` with `config` (2 cores)."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--cores", "2", "--configfile", str(config), *extra],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip


# The .test comparison (2 variants x 2 repetitions x 3 s on a real local dumbbell), run
# to its end: test_pipeline's checks assert on one. A test that had to run it to the end
# anyway (its crash test: killed after its first run, resumed, finished) offers its work
# directory, so the comparison is not run a second time in one session.
TEST_CONFIG = REPO / ".test" / "config" / "config.yaml"
_FINISHED: list[Path] = []


def offer_test_comparison(work: Path) -> None:
    """`work` holds the .test comparison done (every run judged, a valid one of each
    variant, the report made)."""
    _FINISHED.append(work)


def finished_test_comparison() -> Path | None:
    """The work directory a test offered, if any (the latest)."""
    return _FINISHED[-1] if _FINISHED else None


def job_counts(cp: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """Rule -> jobs from `snakemake --dry-run --quiet rules` output."""
    counts = {}
    for line in cp.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


def kill_mid_traffic(ctl: str, cfg: Path, out: Path, sending: Callable[[], bool]) -> None:
    """`ccbench run --config cfg` in namespace `ctl` (the control machine), its whole
    process group SIGKILLed a second after `sending()` says the flows send: the control
    machine dies mid-run, and what its run started on the hosts runs on (nothing hangs
    it up)."""
    import signal
    import time

    proc = subprocess.Popen(
        ["ip", "netns", "exec", ctl, sys.executable, "-m", "ccbench.cli", "run", "--config",
         str(cfg), "--out", str(out)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not sending():
            err = out / "raw" / layout.ERROR
            why = err.read_text().strip()[:300] if err.exists() else ""
            assert proc.poll() is None and time.monotonic() < deadline, f"no traffic: {why}"
            time.sleep(0.2)
        time.sleep(1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def plant_instrument_files() -> list[Path]:
    """What a killed run's instruments leave on its hosts: each file they declare
    (Instrument.node_files; BBLog's a directory of the dumper's files). Written here:
    the rehearsals' hosts share this machine's /var/tmp, and cannot write them
    themselves (siftr and BBLog are FreeBSD's; tcp_probe over SSH needs each sender's
    own kernel: its trace instance is one per testbed). Returns them, for the test to
    see `down` remove them."""
    from ccbench.instruments import bblog, node_files

    files = [Path(f) for f in node_files()]
    for f in files:
        where = f / "1.pcapng" if str(f) == bblog.DIR else f
        where.parent.mkdir(parents=True, exist_ok=True)
        where.write_text(f"what a killed run's {f.name} held\n")
    return files
