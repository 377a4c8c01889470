"""Processes ccbench starts on a remote node, found and ended after a crash.

A run whose control machine dies (a closed laptop, an OOM kill) leaves its iperf3
servers and clients, samplers and probes running on the nodes: killing the local ssh
client does not end the remote command (there is no terminal to hang up). So every
process ccbench spawns over SSH records itself first: the wrapper writes its start
time (`ps -o lstart=`, the same on Linux and FreeBSD) to PROC_DIR/<testbed>/<pid>, then
execs the command under the same pid, the leader of its own process group whether sshd
or `sudo -n` started the wrapper (_RECORD). The next `testbed up` or run sweeps the node
(every testbed's records), and the testbed's `down` its own: a pid whose process still
runs with the recorded start time (not a reused pid) is sent SIGTERM, then SIGKILL if it
has not ended after 2 s; files of processes that are gone are removed, and `down`
removes the testbed's directory. After the sweep, each instrument undoes what it
switched on (Instrument.leftovers_argv: a siftr logger, a trace instance), printing
`logger NAME` lines this module parses too; and `down` removes the files the
instruments write on the nodes (Instrument.node_files: a run killed before it fetched
them leaves them), printing `file PATH`, and checks they are gone (files_left_argv).

The scripts are constants: only directories (PROC_DIR, a checked testbed id) and the
instruments' declared paths (node_path) reach them, as arguments. sh, not Python: the
nodes have no Python guaranteed (FreeBSD base).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

ROOT_DIR = "/var/tmp/ccbench"  # ccbench's own directory on a node
PROC_DIR = f"{ROOT_DIR}/procs"

# Records the process, prints its pid for SshProc.stop(), then becomes the command, the
# leader of a process group of its own, so the sweep ends what it starts with it (flent,
# fping and irtt under the flent probe's shell). sshd makes a command a session leader
# (OpenSSH session.c, do_exec_no_pty: setsid), but `sudo -n` without a pty forks it and
# execs with no setpgid (sudo src/exec_nopty.c, exec_nopty), so under sudo the shell here
# leads nothing: it becomes a session leader in place (setsid(1) forks only when it leads
# a group already: util-linux sys-utils/setsid.c), or, with no setsid (FreeBSD's base
# system), starts the command as a job of its own group (`set -m`: FreeBSD's sh turns job
# control on without a tty when not interactive, bin/sh/jobs.c jobctl_notty) and waits.
# The record's directory (ROOT_DIR's levels too, whichever runs first) is made 0700: POSIX
# mkdir -p gives the levels it makes the umask's mode with u+wx.
_LEAF = (
    'd="$1"; shift; (umask 077; mkdir -p "$d") 2>/dev/null && '
    'ps -o lstart= -p $$ > "$d/$$" 2>/dev/null; echo "ccbench-pid $$" >&2; exec "$@"'
)
# $1 _LEAF, $2 the directory, the rest the command. Recorded once it leads its group.
_RECORD = r"""leaf=$1; shift
if [ "$(ps -o pgid= -p $$ | tr -d ' ')" = "$$" ]; then exec sh -c "$leaf" ccbench-pid "$@"; fi
if command -v setsid >/dev/null 2>&1; then exec setsid sh -c "$leaf" ccbench-pid "$@"; fi
d=$1; shift; set -m; "$@" & p=$!
(umask 077; mkdir -p "$d") 2>/dev/null && ps -o lstart= -p $p > "$d/$p" 2>/dev/null
echo "ccbench-pid $p" >&2; wait $p"""

# $1 the directory, $2 "all" (its files and its testbeds' subdirectories' files) or
# "one" (its files only). SIGTERM first; SIGKILL for what has not ended after 2 s (polled:
# a sweep of processes that end at once takes no 2 s); what even SIGKILL left (a process
# in uninterruptible sleep) is named `alive` and its file kept, so it is still known.
# A recorded process that leads its own process group (every one _RECORD starts) is ended
# with its group: a wrapper shell's children (flent under the flent probe's sh) end with
# it, and one that outlives the shell keeps the group's id in use, so it is still found
# (`kill -SIG -PGID` is the form both dash and FreeBSD's kill(1) read as a group).
# One `-o` a column: FreeBSD's ps reads an item with `=` as the last of its -o argument,
# the rest its header (bin/ps/keyword.c, parsefmt), so `-o pgid=,stat=` would print the
# pgid alone.
_SWEEP = r"""d="$1"; left=""; groups=" "
# the recorded process ($1, its file $2) still running (a zombie has ended)
ours() {
  s=$(ps -o stat= -p "$1" 2>/dev/null)
  [ -n "$s" ] && [ "${s#Z}" = "$s" ] &&
    [ "$(ps -o lstart= -p "$1" 2>/dev/null)" = "$(cat "$2" 2>/dev/null)" ]
}
# a process of group $1 still running (its leader gone or not)
grp() {
  ps -A -o pgid= -o stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ {f=1} END {exit !f}'
}
# pid $1's process, or its group when it leads one we signalled, still running
running() {
  case "$groups" in *" $1 "*) grp "$1" ;; *) ours "$1" "$2" ;; esac
}
signal() {  # $1 signal, $2 pid: the group when it leads one we signalled
  case "$groups" in *" $2 "*) kill -"$1" -"$2" 2>/dev/null ;; *) kill -"$1" "$2" 2>/dev/null ;; esac
}
found() {
  [ -f "$1" ] || return 0
  p=${1##*/}
  case "$p" in ''|*[!0-9]*) rm -f "$1"; return 0 ;; esac
  if [ -s "$1" ] && ours "$p" "$1"; then
    echo "left $p $(ps -o comm= -p "$p" 2>/dev/null)"
    [ "$(ps -o pgid= -p "$p" 2>/dev/null | tr -d ' ')" = "$p" ] && groups="$groups$p "
    signal TERM "$p"
    left="$left $1"
  else
    rm -f "$1"
  fi
}
# those of `left` still running stay in it; the files of the others go
still() {
  keep=""
  for f in $left; do
    if running "${f##*/}" "$f"; then keep="$keep $f"; else rm -f "$f"; fi
  done
  left=$keep
}
wait_s() {  # $1 tenths of a second at most, until `left` is empty
  i=0
  while [ -n "$left" ] && [ $i -lt "$1" ]; do sleep 0.1; i=$((i+1)); still; done
}
for f in "$d"/*; do found "$f"; done
if [ "$2" = all ]; then for f in "$d"/*/*; do found "$f"; done; fi
wait_s 20
for f in $left; do signal KILL "${f##*/}" && echo "killed ${f##*/}"; done
wait_s 10
for f in $left; do echo "alive ${f##*/} $(ps -o comm= -p "${f##*/}" 2>/dev/null)"; done
true"""


def proc_dir(tb_id: str) -> str:
    """Where the processes of testbed `tb_id`'s runs are recorded on a node: its
    `down` ends exactly these (`tb_id` is a checked testbed id: safe.testbed_id)."""
    return f"{PROC_DIR}/{tb_id}"


def wrapper(proc_dir: str = PROC_DIR) -> list[str]:
    """The argv prefix of every process ccbench spawns on a remote node."""
    return ["sh", "-c", _RECORD, "ccbench-pid", _LEAF, proc_dir]


def sweep_argv(proc_dir: str = PROC_DIR, every_testbed: bool = True) -> list[str]:
    """One command that ends what earlier runs left on a node (see the module doc):
    those recorded in `proc_dir`, and with `every_testbed` those in its testbeds'
    subdirectories too (`up`: whichever testbed's run crashed)."""
    return ["sh", "-c", _SWEEP, "ccbench-sweep", proc_dir, "all" if every_testbed else "one"]


# Removes each directory given that is empty, in order (a directory ccbench made on a
# node goes with its last file; one holding anything else stays).
_RMDIRS = 'for d in "$@"; do rmdir "$d" 2>/dev/null; done; true'


def rmdirs_argv(*dirs: str) -> list[str]:
    return ["sh", "-c", _RMDIRS, "ccbench-rmdir", *dirs]


# The nodes' world-writable directory ccbench's paths are in (root's, sticky: an entry
# there is removed or renamed by its owner alone): the directories below it that ccbench
# uses are each checked to be the running user's before use (LEVELS_SH).
NODE_TMP = "/var/tmp"
# sh functions. `mine DIR`: DIR is the running user's own directory: not a symbolic link,
# a directory, owned by the effective uid, writable by no one else (another user could
# otherwise have made it, or plant entries in it, in a world-writable /var/tmp). find(1),
# not stat(1) (GNU -c, BSD -f): FreeBSD's find has -maxdepth, -user and -perm
# (usr.bin/find/option.c, the options table); `-perm -MODE` is true when all of MODE's
# bits are set (function.c, f_perm, F_ATLEAST); -user takes a numeric uid (c_user:
# atoi when getpwnam finds no such name); GNU findutils reads these the same, and neither
# follows a link given as the path (-P, the default: FreeBSD main.c FTS_PHYSICAL).
# `levels TOP DIR [make]`: every level of DIR below TOP is mine (with `make`, each missing
# one made first, mode 0700); on failure $bad is the first that is not, and 1 returned;
# without `make` a missing level ends the walk (nothing below it).
LEVELS_SH = r"""mine() {
  [ ! -L "$1" ] && [ -d "$1" ] &&
    [ -n "$(find "$1" -maxdepth 0 -user "$(id -u)" ! -perm -020 ! -perm -002 2>/dev/null)" ]
}
levels() {
  p=$1; rest=${2#"$1"/}; bad=$2
  [ "$rest" != "$2" ] || return 1
  while [ -n "$rest" ]; do
    p=$p/${rest%%/*}
    case "$rest" in */*) rest=${rest#*/} ;; *) rest="" ;; esac
    [ "$3" = make ] && mkdir -m 700 "$p" 2>/dev/null
    [ "$3" != make ] && [ ! -e "$p" ] && [ ! -L "$p" ] && return 0
    mine "$p" || { bad=$p; return 1; }
  done
}
"""
# A directory whose entries are each named by the pid of the process that made it
# (flent's data directories, one such directory per testbed: probes.flent FLENT_SH),
# given as PIDS + its path: only the entries of processes no longer running are a
# `down`'s to remove (its own, ended by then); the directory and its parents below
# NODE_TMP go when empty.
PIDS = "pids:"
# $1 TOP (NODE_TMP), then paths: removes each (a directory with what is in it), printing
# `file PATH` for each that was there; of a PIDS directory, the entries of ended
# processes, and only when every level of it below TOP is the caller's (`levels`): else
# it is not ccbench's, left alone and named (`foreign PATH`, the first level that is not).
_REMOVE = (
    LEVELS_SH
    + r"""top=$1; shift
for f in "$@"; do
  case "$f" in
  pids:*)
    d=${f#pids:}
    levels "$top" "$d" || { echo "foreign $bad"; continue; }
    for e in "$d"/*; do
      p=${e##*/}
      case "$p" in ''|*[!0-9]*) continue ;; esac
      kill -0 "$p" 2>/dev/null && continue
      rm -rf -- "$e"; echo "file $e"
    done
    while [ "$d" != "$top" ]; do
      rmdir "$d" 2>/dev/null || [ ! -e "$d" ] || break; d=${d%/*}
    done ;;
  *) if [ -e "$f" ] || [ -L "$f" ]; then rm -rf -- "$f"; echo "file $f"; fi ;;
  esac
done; true"""
)
# $1 TOP, then paths: prints `ccbench-left PATH` for each path given that is there (of a
# PIDS directory that is the caller's, each entry of an ended process); exits 1 if any is.
_LEFT = (
    LEVELS_SH
    + r"""top=$1; shift; r=0; for f in "$@"; do
  case "$f" in
  pids:*)
    levels "$top" "${f#pids:}" || continue
    for e in "${f#pids:}"/*; do
      p=${e##*/}
      case "$p" in ''|*[!0-9]*) continue ;; esac
      kill -0 "$p" 2>/dev/null || { echo "ccbench-left $e"; r=1; }
    done ;;
  *) if [ -e "$f" ] || [ -L "$f" ]; then echo "ccbench-left $f"; r=1; fi ;;
  esac
done; exit $r"""
)
_LEFT_LINE = re.compile(r"^ccbench-left (\S+)$", re.M)


def per_process(path: str) -> str:
    """`path` (node_path) as a directory of per-process entries (PIDS)."""
    return PIDS + node_path(path)


def node_path(path: str) -> str:
    """`path` when it may be given to `rm -rf` on a node: absolute, under /var/tmp, its
    name there beginning with `ccbench`, no `..`, no whitespace (what an instrument
    declares it writes: a mistake in a declaration raises, not removes); PIDS + such a
    path as well (per_process)."""
    if path.startswith(PIDS):
        return PIDS + node_path(path[len(PIDS) :])
    parts = path.split("/")
    if (not path.startswith("/var/tmp/ccbench") or ".." in parts or "" in parts[1:]
            or any(c.isspace() for c in path)):  # fmt: skip
        raise ValueError(f"not a node path of ccbench's own: {path!r}")
    return path


def remove_files_argv(paths: Sequence[str], top: str = NODE_TMP) -> list[str]:
    """One command that removes `paths` (node_path each) on a node; `top`: where the
    levels of a PIDS directory checked as the caller's begin (tests: a temporary one)."""
    return ["sh", "-c", _REMOVE, "ccbench-rm", top, *map(node_path, paths)]


def files_left_argv(paths: Sequence[str], top: str = NODE_TMP) -> list[str]:
    """One command that exits 0 when none of `paths` is on a node; files_left reads
    which are."""
    return ["sh", "-c", _LEFT, "ccbench-files", top, *paths]


def files_left(stdout: str) -> list[str]:
    """The paths files_left_argv found (its lines among any other output)."""
    return _LEFT_LINE.findall(stdout)


@dataclass(frozen=True)
class Swept:
    """What a sweep found: processes ended ("pid name"), of those the ones that needed
    SIGKILL, those even SIGKILL left running ("pid name"), loggers turned off, files
    removed, and directories left alone as not ccbench's (`foreign`)."""

    ended: tuple[str, ...] = ()
    killed: tuple[str, ...] = ()
    loggers: tuple[str, ...] = ()
    alive: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    foreign: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ended or self.loggers or self.alive or self.files or self.foreign)

    def summary(self) -> str:
        """One clause for a log line: 'ended 2 process(es) (iperf3, ss); siftr off'."""
        parts = []
        if self.ended:
            parts.append(f"ended {len(self.ended)} process(es) ({_names(self.ended)})")
        if self.alive:
            parts.append(f"{len(self.alive)} still running after SIGKILL ({_names(self.alive)})")
        if self.loggers:
            parts.append(f"turned off {', '.join(self.loggers)}")
        if self.files:
            parts.append(f"removed {', '.join(self.files)}")
        if self.foreign:
            parts.append(f"left alone {', '.join(self.foreign)} (a link, another user's or "
                         "writable by others: not ccbench's)")  # fmt: skip
        return "; ".join(parts)


def _names(procs: tuple[str, ...]) -> str:
    return ", ".join(sorted({e.split(" ", 1)[1] if " " in e else "?" for e in procs}))


_LINE = re.compile(r"^(left|killed|alive|logger|file|foreign) (\S+)(?: (.*))?$")


def parse_sweep(stdout: str) -> Swept:
    """sweep_argv's output; lines it does not know are ignored (a shell's noise)."""
    found: dict[str, list[str]] = {k: [] for k in ("left", "killed", "alive", "logger", "file",
                                                   "foreign")}  # fmt: skip
    for line in stdout.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        what, first, rest = m.groups()
        named = f"{first} {(rest or '?').strip() or '?'}"
        found[what].append(named if what in ("left", "alive") else first)
    return Swept(tuple(found["left"]), tuple(found["killed"]), tuple(found["logger"]),
                 tuple(found["alive"]), tuple(found["file"]), tuple(found["foreign"]))  # fmt: skip


__all__ = ["LEVELS_SH", "NODE_TMP", "PIDS", "PROC_DIR", "ROOT_DIR", "Swept", "files_left",
           "files_left_argv", "node_path", "parse_sweep", "per_process", "proc_dir",
           "remove_files_argv", "rmdirs_argv", "sweep_argv", "wrapper"]  # fmt: skip
