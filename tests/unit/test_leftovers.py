"""ccbench.leftovers for real, on this machine's sh and ps (the same scripts run on the
nodes over SSH; FreeBSD's ps has the same `-o lstart=` and `-o comm=`): a process the
wrapper started is found and ended by the sweep, a stubborn one is killed, files of
processes that are gone (or whose pid was reused) are removed without a word; and the
files the instruments write on a node are removed by `down` and checked gone."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ccbench import instruments, leftovers


def spawn(proc_dir: Path, *argv: str, session: bool = False) -> subprocess.Popen[bytes]:
    """`argv` under the wrapper; `session`: as sshd starts a command, the leader of a
    session and process group of its own."""
    p = subprocess.Popen([*leftovers.wrapper(str(proc_dir)), *argv], start_new_session=session,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    # Until the start time is in the file: the shell creates it (empty) before ps writes.
    deadline = time.monotonic() + 10
    record = proc_dir / str(p.pid)
    while not (record.exists() and record.stat().st_size > 0):
        assert time.monotonic() < deadline, "the wrapper recorded nothing"
        time.sleep(0.01)
    return p


def sweep(proc_dir: Path, every_testbed: bool = True) -> leftovers.Swept:
    out = subprocess.run(leftovers.sweep_argv(str(proc_dir), every_testbed), capture_output=True,
                         text=True, check=True, timeout=30).stdout  # fmt: skip
    return leftovers.parse_sweep(out)


def test_the_wrapper_records_the_command_under_its_own_pid(tmp_path: Path) -> None:
    p = spawn(tmp_path, "sleep", "60")
    try:
        assert p.stderr is not None
        assert p.stderr.readline().decode().strip() == f"ccbench-pid {p.pid}"  # for stop()
        started = subprocess.run(["ps", "-o", "lstart=", "-p", str(p.pid)],
                                 capture_output=True, text=True).stdout  # fmt: skip
        assert (tmp_path / str(p.pid)).read_text() == started
        assert Path(f"/proc/{p.pid}/comm").read_text().strip() == "sleep"  # exec'd, same pid
    finally:
        p.kill()
        p.wait()


def test_a_left_process_is_ended_and_named(tmp_path: Path) -> None:
    p = spawn(tmp_path, "sleep", "60")
    got = sweep(tmp_path)
    assert p.wait(timeout=5) == -15  # SIGTERM
    assert got.ended == (f"{p.pid} sleep",) and got.killed == ()
    assert got.summary() == "ended 1 process(es) (sleep)"
    assert list(tmp_path.iterdir()) == []


def test_a_testbeds_down_ends_its_own_and_an_up_every_testbeds(tmp_path: Path) -> None:
    """Each testbed's runs record under its own directory (leftovers.proc_dir): its
    `down` ends those at once (no fixed 2 s wait) and removes the directory; an `up`
    sweeps every testbed's."""
    mine, other = spawn(tmp_path / "t1", "sleep", "60"), spawn(tmp_path / "t2", "sleep", "60")
    try:
        t0 = time.monotonic()
        got = sweep(tmp_path / "t1", every_testbed=False)
        assert time.monotonic() - t0 < 1.5
        assert mine.wait(timeout=5) == -15 and other.poll() is None
        assert got.ended == (f"{mine.pid} sleep",) and got.alive == ()
        subprocess.run(leftovers.rmdirs_argv(str(tmp_path / "t1"), str(tmp_path)), check=True)
        assert [p.name for p in tmp_path.iterdir()] == ["t2"]  # not empty: stays
        assert sweep(tmp_path).ended == (f"{other.pid} sleep",)
        assert other.wait(timeout=5) == -15
        subprocess.run(leftovers.rmdirs_argv(str(tmp_path / "t2"), str(tmp_path)), check=True)
        assert not tmp_path.exists()
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_one_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    p = spawn(tmp_path, "sh", "-c", "trap '' TERM; while :; do sleep 0.1; done")
    got = sweep(tmp_path)
    assert p.wait(timeout=5) == -9
    assert got.killed == (str(p.pid),)
    assert list(tmp_path.iterdir()) == []


def group(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    out = subprocess.run(["ps", "-A", "-o", "pid=,pgid=,stat="], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return [int(p) for p, g, st in (ln.split() for ln in out.splitlines())
            if int(g) == pgid and not st.startswith("Z")]  # fmt: skip


@pytest.mark.parametrize(
    ("script", "members", "killed"),
    [
        # flent under the flent probe's sh: both end at SIGTERM, the group with its leader
        pytest.param("sleep 60 & sleep 61; wait", 3, False, id="children end with it"),
        # the leader ends at SIGTERM, its child does not: the group still holds the
        # leader's id, so the sweep waits for it and kills it
        pytest.param("sh -c 'trap \"\" TERM; while :; do sleep 0.1; done' & wait", 2, True,
                     id="a child ignoring SIGTERM is killed after its leader"),
    ],
)  # fmt: skip
def test_a_session_leader_is_ended_with_its_group(
    tmp_path: Path, script: str, members: int, killed: bool
) -> None:
    """A wrapper shell started as sshd starts it (its own session) with children that
    would outlive it: the sweep ends the group."""
    p = spawn(tmp_path, "sh", "-c", script, session=True)
    try:
        deadline = time.monotonic() + 5
        while len(group(p.pid)) < members:
            assert time.monotonic() < deadline, group(p.pid)
            time.sleep(0.02)
        got = sweep(tmp_path)
        assert got.ended == (f"{p.pid} sh",) and got.alive == ()
        assert got.killed == ((str(p.pid),) if killed else ())
        assert group(p.pid) == [] and list(tmp_path.iterdir()) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_files_of_ended_or_reused_pids_go_quietly(tmp_path: Path) -> None:
    done = spawn(tmp_path, "true")
    done.wait()
    me = tmp_path / "1"  # pid 1 runs, but it is not the process that was recorded
    me.write_text("Thu Jan  1 00:00:00 1970\n")
    (tmp_path / "not-a-pid").write_text("x")
    got = sweep(tmp_path)
    assert not got and got.summary() == ""
    assert list(tmp_path.iterdir()) == []


def test_no_directory_no_output(tmp_path: Path) -> None:
    assert not sweep(tmp_path / "never-made")


def test_parse_names_loggers_and_ignores_noise() -> None:
    got = leftovers.parse_sweep("left 812 iperf3\nleft 813 \nkilled 812\nlogger siftr\nnoise\n")
    assert got.ended == ("812 iperf3", "813 ?") and got.killed == ("812",)
    assert got.loggers == ("siftr",)
    assert got.summary() == "ended 2 process(es) (?, iperf3); turned off siftr"
    stuck = leftovers.parse_sweep("left 9 iperf3\nkilled 9\nalive 9 iperf3\n")
    assert stuck.alive == ("9 iperf3",)  # even SIGKILL left it (uninterruptible sleep)
    assert stuck.summary() == "ended 1 process(es) (iperf3); 1 still running after SIGKILL (iperf3)"


def test_plans_per_os() -> None:
    """Plan test: every node is swept (testbed.remote.end_leftovers); then each
    instrument undoes its own: Linux removes a tcp_probe trace instance, FreeBSD turns off
    siftr/siftr2 (no FreeBSD here)."""
    linux, freebsd = instruments.leftovers_argv("linux"), instruments.leftovers_argv("freebsd")
    assert len(linux) == 1 and "/sys/kernel/tracing/instances/ccbench-*" in linux[0][2]
    assert len(freebsd) == 1 and freebsd[0][:2] == ["sh", "-c"]
    assert "sysctl net.inet.$m.enabled=0" in freebsd[0][2] and "siftr siftr2" in freebsd[0][2]
    assert leftovers.sweep_argv()[-2:] == [leftovers.PROC_DIR, "all"]  # `up`: every testbed's
    assert leftovers.sweep_argv(leftovers.proc_dir("t1"), every_testbed=False)[-2:] == [
        f"{leftovers.PROC_DIR}/t1", "one"]  # fmt: skip


# What the instruments declare they write on a node (node_files), registry order (the
# probes' are per testbed: ProbeTool.node_dirs, tests/unit/test_flent_dir.py).
NODE_FILES = ["/var/tmp/ccbench-siftr.log", "/var/tmp/ccbench-bblog",
              "/var/tmp/ccbench-tcp-probe.txt"]  # fmt: skip


def test_the_instruments_and_probes_declare_their_node_files() -> None:
    """`down` removes what every instrument and probe writes on a node, whatever its
    OS; only paths of ccbench's own may be declared (they reach `rm -rf`)."""
    from ccbench.testbed.remote import node_files

    assert node_files() == NODE_FILES
    assert [leftovers.node_path(p) for p in NODE_FILES] == NODE_FILES
    for bad in ("/", "/var/tmp", "/var/tmp/ccbench/../../etc", "/etc/ccbench",
                "var/tmp/ccbench-x", "/var/tmp/ccbench-a b", "/var/tmp/ccbench//x",
                "/var/tmp/other"):  # fmt: skip
        with pytest.raises(ValueError, match="not a node path of ccbench's own"):
            leftovers.remove_files_argv([bad])


def script(argv: list[str], paths: list[Path] | list[str]) -> subprocess.CompletedProcess[str]:
    """One of leftovers' scripts (its sh -c head and TOP) run here on `paths` (tmp_path's:
    the node_path guard is the test above)."""
    return subprocess.run([*argv[:5], *map(str, paths)], capture_output=True, text=True,
                          timeout=10)  # fmt: skip


def test_files_removed_then_checked_gone_for_real(tmp_path: Path) -> None:
    log, trace, missing = tmp_path / "siftr.log", tmp_path / "bblog", tmp_path / "none"
    log.write_text("x")
    (trace / "sub").mkdir(parents=True)
    (trace / "sub" / "a.pcapng").write_text("y")  # a directory goes whole
    dangling = tmp_path / "link"
    dangling.symlink_to(tmp_path / "nowhere")
    paths = [log, trace, dangling, missing]
    left = script(leftovers.files_left_argv([]), paths)
    assert left.returncode == 1
    assert leftovers.files_left(left.stdout) == [str(log), str(trace), str(dangling)]
    got = script(leftovers.remove_files_argv([]), paths)
    assert got.returncode == 0 and list(tmp_path.iterdir()) == []
    swept = leftovers.parse_sweep(got.stdout)
    assert swept.files == (str(log), str(trace), str(dangling)) and swept
    assert swept.summary() == f"removed {log}, {trace}, {dangling}"
    gone = script(leftovers.files_left_argv([]), paths)
    assert gone.returncode == 0 and gone.stdout == ""


def ps_columns(script: str) -> list[list[str]]:
    """The `-o` arguments of each `ps` in `script`, one list a ps."""
    return [re.findall(r"-o\s+(\S+)", m) for m in re.findall(r"\bps( -[^|;\n)]*)", script)]


def test_every_ps_names_one_column_an_o() -> None:
    """Plan test (no FreeBSD here): FreeBSD's ps reads an `-o` item that has `=` as the
    last of its argument, the rest its header (bin/ps/keyword.c, parsefmt: "If an item
    contains an equals sign, it specifies a column header, may contain embedded
    separator characters and is always the last item"), so `-o pgid=,stat=` prints the
    pgid under a header `,stat=`. Every ps in the node scripts gives each `=` column an
    -o of its own; the sweep's group test reads pgid and stat as two columns."""
    scripts = [leftovers._LEAF, leftovers._RECORD, leftovers._SWEEP]
    found = [cols for s in scripts for cols in ps_columns(s)]
    assert ["pgid=", "stat="] in found  # the group test
    for cols in found:
        assert cols and all("=" not in c or (c.endswith("=") and "," not in c) for c in cols), cols
    assert ps_columns("ps -A -o pgid=,stat= 2>/dev/null") == [["pgid=,stat="]]  # the old form


def under_sudo_nopty(proc_dir: Path, *argv: str, shell: str = "sh",
                     env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:  # fmt: skip
    """`argv` under the wrapper as `sudo -n` without a pty starts it (sudo src/exec_nopty.c,
    exec_nopty: fork, then exec with no setpgid): a stand-in for sudo that leads the
    session sshd made (start_new_session) forks the wrapper, which leads nothing; `shell`
    runs the wrapper's script (bash stands in for FreeBSD's sh: dash has no job control
    without a tty)."""
    wrapper = [shell, *leftovers.wrapper(str(proc_dir))[1:]]
    return subprocess.Popen(["sh", "-c", '"$@"; exit $?', "sudo", *wrapper, *argv],
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)  # fmt: skip


def recorded(proc_dir: Path) -> int:
    deadline = time.monotonic() + 10
    while not any(f.stat().st_size for f in proc_dir.glob("*")):
        assert time.monotonic() < deadline, "the wrapper recorded nothing"
        time.sleep(0.01)
    return int(next(f.name for f in proc_dir.glob("*") if f.stat().st_size))


def no_setsid(tmp_path: Path) -> dict[str, str]:
    """A PATH with the tools the wrapper and its command use, and no setsid(1) (as
    FreeBSD's base system)."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("sh", "bash", "ps", "tr", "mkdir", "sleep"):
        (d / tool).symlink_to(shutil.which(tool) or tool)
    return {**os.environ, "PATH": str(d)}


@pytest.mark.parametrize("how", ["setsid", "job control"])
def test_under_sudo_without_a_pty_the_sweep_ends_the_whole_group(tmp_path: Path, how: str) -> None:
    """The flent probe's shape (a shell whose children would outlive it) under `sudo -n`
    without a pty: the recorded process leads a group of its own (setsid(1) on Linux;
    where there is none, a job of its own group under `set -m`), so the sweep ends the
    shell and its children, and sudo's stand-in ends with them."""
    procs = tmp_path / "procs"
    env = no_setsid(tmp_path) if how == "job control" else None
    sudo = under_sudo_nopty(procs, "sh", "-c", "sleep 60 & sleep 61; wait",
                            shell="bash" if env else "sh", env=env)  # fmt: skip
    try:
        pid = recorded(procs)
        assert os.getpgid(sudo.pid) == sudo.pid != pid  # sudo leads; the tool is its child's
        assert os.getpgid(pid) == pid  # ... and leads a group of its own
        deadline = time.monotonic() + 5
        while len(group(pid)) < 3:
            assert time.monotonic() < deadline, group(pid)
            time.sleep(0.02)
        got = sweep(procs)
        assert got.ended == (f"{pid} sh",) and got.alive == () and got.killed == ()
        assert group(pid) == [] and list(procs.iterdir()) == []
        assert sudo.wait(timeout=5) != 0  # its command ended by SIGTERM
    finally:
        for g in (sudo.pid, *([pid] if "pid" in locals() else [])):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, signal.SIGKILL)
        sudo.wait()


def test_a_per_process_directory_loses_only_ended_processes_entries(tmp_path: Path) -> None:
    """A testbed's flent data directory on a node holds one entry per flent, named by
    its wrapper's pid: `down` (its own processes ended) removes the entries of processes
    that no longer run, never a live one, and the directory once empty. For real, here
    (tmp_path for /var/tmp; levels that are not the caller's: test_flent_dir.py)."""
    with pytest.raises(ValueError, match="not a node path"):
        leftovers.remove_files_argv([leftovers.PIDS + "/etc"])
    d = tmp_path / "ccbench" / "flent" / "t1"
    d.mkdir(parents=True)
    rm, gone = (f([], top=str(tmp_path)) for f in (leftovers.remove_files_argv,
                                                    leftovers.files_left_argv))  # fmt: skip
    live = subprocess.Popen(["sleep", "60"])
    try:
        ended = subprocess.Popen(["true"])
        ended.wait()
        for p in (live.pid, ended.pid):
            (d / str(p)).mkdir()
            (d / str(p) / "x.flent.gz").write_text("x")
        (d / "notes").write_text("not an entry of a process")
        arg = [leftovers.PIDS + str(d)]
        left = script(gone, arg)
        assert left.returncode == 1 and leftovers.files_left(left.stdout) == [f"{d}/{ended.pid}"]
        got = leftovers.parse_sweep(script(rm, arg).stdout)
        assert got.files == (f"{d}/{ended.pid}",)
        assert sorted(p.name for p in d.iterdir()) == sorted([str(live.pid), "notes"])
        assert script(gone, arg).returncode == 0
        live.kill()
        live.wait()
        (d / "notes").unlink()
        script(rm, arg)
        assert list(tmp_path.iterdir()) == []  # empty: gone, and its empty parents
    finally:
        live.kill()
        live.wait()


def test_the_wrapper_makes_its_record_directories_0700(tmp_path: Path) -> None:
    """Whichever runs first on a node, the process records' `mkdir -p` or flent's
    script, ccbench's directory below /var/tmp is made 0700 (umask 077 for mkdir -p,
    whose intermediate levels take the umask's mode)."""
    procs = tmp_path / "ccbench" / "procs" / "t1"
    p = spawn(procs, "sleep", "60")
    p.kill()
    p.wait()
    made = [procs, procs.parent, procs.parent.parent]  # t1, procs/, ccbench's
    assert [oct(d.stat().st_mode & 0o777) for d in made] == ["0o700"] * 3
