"""flent's data directory on a node, per testbed and made safely: the probe's script
(probes.flent FLENT_SH) run for real under /bin/sh (dash here) in a temporary stand-in
for /var/tmp (its first argument; the plan's is always /var/tmp: test_probe.py), and the
removal a testbed's `down` runs (leftovers.remove_files_argv on its probes.node_dirs).

Each level below /var/tmp (ccbench's directory, flent/, the testbed's) is made 0700 when
missing and must be the running user's own directory that no one else may write; the
check is `find DIR -maxdepth 0 -user UID ! -perm -020 ! -perm -002` (leftovers.LEVELS_SH),
which FreeBSD's find reads the same: -maxdepth, -user and -perm are in its options table
(usr.bin/find/option.c), `-perm -MODE` is "all of MODE's bits set" (function.c, f_perm,
F_ATLEAST) and -user takes a numeric uid (function.c, c_user: atoi when getpwnam finds
no such name); find does not follow a link given as its path unless -H/-L (-P, main.c's
FTS_PHYSICAL)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench import leftovers, probes
from ccbench.layout import RawDir
from ccbench.probes.flent import FLENT_SH, node_dir
from ccbench.reasons import Code
from ccbench.summarize.probe import probe_record, recorded_run
from ccbench.validity import check_probe

NOBODY = 65534
ME = os.geteuid()


def flent(top: Path, tb: str = "t1") -> subprocess.CompletedProcess[str]:
    """FLENT_SH as the plan runs it, `top` for /var/tmp, with a stand-in for flent that
    writes its data file where -D says, records that directory in top/used and exits 3."""
    fake = ["sh", "-c", 'printf data > "$2/x.flent.gz"; echo "$2" > "$0"; exit 3',
            str(top / "used")]  # fmt: skip
    argv = ["/bin/sh", "-c", FLENT_SH, "ccbench-flent", str(top), tb_dir(top, tb), *fake]
    return subprocess.run(argv, capture_output=True, text=True, timeout=10)


def tb_dir(top: Path, tb: str) -> str:
    """node_dir(tb) with `top` for /var/tmp."""
    return str(top / Path(node_dir(tb)).relative_to(leftovers.NODE_TMP))


def levels(top: Path, tb: str = "t1") -> list[Path]:
    """ccbench's directory, flent/, the testbed's, below `top`."""
    return [top / "ccbench", top / "ccbench" / "flent", Path(tb_dir(top, tb))]


def ran(top: Path, cp: subprocess.CompletedProcess[str]) -> Path:
    """The directory flent wrote in; asserts it ran and its file came out."""
    assert cp.returncode == 3 and cp.stdout == "data" and cp.stderr == "", cp
    return Path((top / "used").read_text().strip())


def refused(top: Path, cp: subprocess.CompletedProcess[str], level: Path, what: str) -> None:
    """One line on stderr naming `level` and what it is (`ls -ldn`), flent not run."""
    assert cp.returncode == 2 and cp.stdout == "", cp
    assert cp.stderr == (f"ccbench-flent: refused {level} ({what}): not a directory of uid "
                         f"{ME}'s own that no one else may write\n")  # fmt: skip
    assert not (top / "used").exists()


def test_a_fresh_node_gets_each_level_made_0700_and_flent_its_own_directory(
    tmp_path: Path,
) -> None:
    used = ran(tmp_path, flent(tmp_path))
    assert used.parent == Path(tb_dir(tmp_path, "t1")) and used.name.isdigit()
    assert not used.exists() and not used.parent.exists()  # its own and the testbed's: gone
    for d in levels(tmp_path)[:2]:  # ccbench's and flent/ stay (another testbed's may use them)
        st = d.lstat()
        assert (st.st_uid, oct(st.st_mode)) == (ME, "0o40700"), d
    # the same testbed's next run, and another testbed's beside it
    assert ran(tmp_path, flent(tmp_path)).parent == used.parent
    assert ran(tmp_path, flent(tmp_path, "t2")).parent == Path(tb_dir(tmp_path, "t2"))


def test_a_killed_runs_directory_of_the_same_testbed_is_used_again(tmp_path: Path) -> None:
    """A run killed mid-flent left the testbed's directory (0700, ours) and its entry."""
    stale = Path(tb_dir(tmp_path, "t1")) / "1"
    stale.mkdir(parents=True, mode=0o700)
    for d in levels(tmp_path):
        d.chmod(0o700)
    assert ran(tmp_path, flent(tmp_path)).parent == stale.parent
    assert stale.exists()  # `down`'s to remove (below), not a run's


@pytest.mark.parametrize("at", [0, 1, 2], ids=["ccbench", "flent", "testbed"])
def test_a_level_another_user_made_is_refused(tmp_path: Path, at: int) -> None:
    """Made before ccbench by another user (nobody here), at any level: refused, nothing
    made below it (nor in it)."""
    level = levels(tmp_path)[at]
    level.mkdir(parents=True, mode=0o700)
    os.chown(level, NOBODY, NOBODY)
    refused(tmp_path, flent(tmp_path), level, f"drwx------ uid {NOBODY}")
    assert list(level.iterdir()) == []


@pytest.mark.parametrize("to", ["ours", "dangling"])
def test_a_link_in_a_levels_place_is_refused(tmp_path: Path, to: str) -> None:
    """A symbolic link where flent/ belongs, to a directory of ours (0700) or to nothing
    (mkdir does not follow it either): refused, the target untouched."""
    target = tmp_path / "elsewhere"
    if to == "ours":
        target.mkdir(mode=0o700)
    (tmp_path / "ccbench").mkdir(mode=0o700)
    link = levels(tmp_path)[1]
    link.symlink_to(target)
    refused(tmp_path, flent(tmp_path), link, f"lrwxrwxrwx uid {ME}")
    assert (list(target.iterdir()) == []) if to == "ours" else not target.exists()


@pytest.mark.parametrize(
    ("mode", "ok"),
    [(0o777, False), (0o770, False), (0o1777, False), (0o755, True), (0o700, True)],
    ids=["0777", "0770", "1777", "0755", "0700"],
)
def test_a_level_writable_by_others_is_refused(tmp_path: Path, mode: int, ok: bool) -> None:
    """Ours but writable by the group or everyone (another user could plant the next
    level in it): refused; ours and writable by us alone (0755: ccbench's directory as
    the process records' `mkdir -p` made it under umask 022 before): used."""
    level = levels(tmp_path)[1]
    level.mkdir(parents=True, mode=0o700)
    level.chmod(mode)
    cp = flent(tmp_path)
    if ok:
        ran(tmp_path, cp)
    else:
        refused(tmp_path, cp, level, subprocess.run(
            ["ls", "-ldn", str(level)], capture_output=True, text=True).stdout.split()[0]
            + f" uid {ME}")  # fmt: skip


def test_a_file_in_a_levels_place_is_refused(tmp_path: Path) -> None:
    (tmp_path / "ccbench").write_text("not a directory")
    refused(tmp_path, flent(tmp_path), tmp_path / "ccbench", f"-rw-r--r-- uid {ME}")


def test_a_refusal_makes_the_run_invalid_with_its_line(tmp_path: Path) -> None:
    """The run's raw/ as the refused script leaves it (its stdout the empty data file,
    its stderr probe.err): the probe's error and the validity reason quote the line."""
    top, raw = tmp_path / "node", tmp_path / "raw"
    raw.mkdir()
    level = levels(top)[0]
    level.mkdir(parents=True)
    os.chown(level, NOBODY, NOBODY)
    cp = flent(top)
    (raw / "probe.flent.gz").write_text(cp.stdout)
    (raw / "probe.err").write_text(cp.stderr)
    rec = probe_record(RawDir(raw), recorded_run(raw))
    assert rec is not None
    why = f"Expecting value: line 1 column 1 (char 0); probe.err: {cp.stderr.strip()}"
    assert rec["error"] == f"probe.flent.gz: {why}" and len(cp.stderr) < 200  # not cut
    (got,) = check_probe(rec, "flent")
    assert got.code == Code.PROBE_FAILED and got.text == f"probe: probe.flent.gz: {why}"


def entries(top: Path, tb: str, *pids: int) -> Path:
    d = Path(tb_dir(top, tb))
    for p in pids:
        (d / str(p)).mkdir(parents=True, mode=0o700)
        (d / str(p) / "x.flent.gz").write_text("x")
    for lv in levels(top, tb):
        lv.chmod(0o700)
    return d


def ended_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_down_removes_its_own_testbeds_directory_alone(tmp_path: Path) -> None:
    """`down` of t1 (the plan: probes.node_dirs) removes t1's data directories of ended
    processes, then t1's directory, never t2's (another testbed's, a killed run's entry
    included: its own `down` removes it); flent/ and ccbench's go once empty."""
    assert probes.node_dirs("t1") == ["pids:/var/tmp/ccbench/flent/t1"]
    mine = entries(tmp_path, "t1", ended_pid(), ended_pid())
    theirs = entries(tmp_path, "t2", ended_pid())
    had, kept = sorted(map(str, mine.iterdir())), sorted(theirs.iterdir())
    dirs = [leftovers.PIDS + str(mine)]
    rm = subprocess.run(leftovers.remove_files_argv([], top=str(tmp_path)) + dirs,
                        capture_output=True, text=True, timeout=10)  # fmt: skip
    assert leftovers.parse_sweep(rm.stdout) == leftovers.Swept(files=tuple(had))
    assert not mine.exists() and sorted(theirs.iterdir()) == kept
    shutil.rmtree(theirs)
    subprocess.run(leftovers.remove_files_argv([], top=str(tmp_path)) + dirs, timeout=10)
    assert list(tmp_path.iterdir()) == []  # flent/ and ccbench's, empty: gone


@pytest.mark.parametrize("how", ["nobody's", "a link", "writable by all"])
def test_down_leaves_a_level_that_is_not_its_own_and_names_it(tmp_path: Path, how: str) -> None:
    """A level of t1's path that is not the caller's: nothing below it removed or
    listed as left, the level named (`foreign`)."""
    mine = entries(tmp_path, "t1", ended_pid())
    flent_dir = levels(tmp_path)[1]
    if how == "nobody's":
        os.chown(flent_dir, NOBODY, NOBODY)
    elif how == "writable by all":
        flent_dir.chmod(0o777)
    else:
        flent_dir.rename(tmp_path / "real")
        flent_dir.symlink_to(tmp_path / "real")
    dirs = [leftovers.PIDS + str(mine)]
    rm = subprocess.run(leftovers.remove_files_argv([], top=str(tmp_path)) + dirs,
                        capture_output=True, text=True, timeout=10)  # fmt: skip
    assert leftovers.parse_sweep(rm.stdout) == leftovers.Swept(foreign=(str(flent_dir),))
    assert len(list(mine.iterdir())) == 1
    left = subprocess.run(leftovers.files_left_argv([], top=str(tmp_path)) + dirs,
                          capture_output=True, text=True, timeout=10)  # fmt: skip
    assert (left.returncode, left.stdout) == (0, "")


def test_local_down_runs_the_same_removal_on_this_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-kernel testbed's `down` removes its flent directories in this machine's
    /var/tmp by the script a node's `down` runs (above), and names a level it left."""
    from ccbench.exec import Result
    from ccbench.testbed import local

    ran: list[list[str]] = []
    said: list[str] = []

    class Here:
        def __init__(self, ns: None) -> None:
            assert ns is None  # on the host, not in a namespace

        def run(self, argv: list[str], check: bool = True) -> Result:
            ran.append(argv)
            return Result(tuple(argv), 0, "foreign /var/tmp/ccbench/flent\n", "")

    monkeypatch.setattr(local, "NetnsExecutor", Here)
    monkeypatch.setattr(local, "info", said.append)
    local._remove_probe_dirs("t1")
    assert ran == [leftovers.remove_files_argv(["pids:/var/tmp/ccbench/flent/t1"])]
    assert ran[0][4] == "/var/tmp"
    assert said == ["testbed t1: left alone /var/tmp/ccbench/flent (a link, another user's or "
                    "writable by others: not ccbench's)"]  # fmt: skip
