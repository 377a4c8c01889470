"""Processes ccbench starts on a remote node, found and ended after a crash.

A run whose control machine dies (a closed laptop, an OOM kill) leaves its iperf3
servers and clients, samplers and probes running on the nodes: killing the local ssh
client does not end the remote command (there is no terminal to hang up). So every
process ccbench spawns over SSH records itself first: the wrapper writes its start
time (`ps -o lstart=`, the same on Linux and FreeBSD) to PROC_DIR/<pid>, then execs the
command under the same pid. The next `testbed up` or run sweeps the node: a pid whose
process still runs with the recorded start time (not a reused pid) is sent SIGTERM,
then SIGKILL after 2 s; files of processes that are gone are removed. After the sweep,
each instrument undoes what it switched on (Instrument.leftovers_argv: a siftr logger,
a trace instance), printing `logger NAME` lines this module parses too.

Both scripts are constants: only PROC_DIR (also a constant) reaches them, as an
argument. sh, not Python: the nodes have no Python guaranteed (FreeBSD base).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PROC_DIR = "/var/tmp/ccbench/procs"

# Records the process, prints its pid for SshProc.stop(), then becomes the command.
_RECORD = (
    'd="$1"; shift; mkdir -p "$d" 2>/dev/null && ps -o lstart= -p $$ > "$d/$$" 2>/dev/null; '
    'echo "ccbench-pid $$" >&2; exec "$@"'
)

_SWEEP = r"""d="$1"; left=""
# the recorded process, still running (a zombie has ended: its parent reaps it)
ours() {
  s=$(ps -o stat= -p "$1" 2>/dev/null)
  [ -n "$s" ] && [ "${s#Z}" = "$s" ] &&
    [ "$(ps -o lstart= -p "$1" 2>/dev/null)" = "$(cat "$d/$1" 2>/dev/null)" ]
}
if [ -d "$d" ]; then
  for f in "$d"/*; do
    [ -f "$f" ] || continue
    p=${f##*/}
    case "$p" in ''|*[!0-9]*) rm -f "$f"; continue ;; esac
    if [ -s "$f" ] && ours "$p"; then
      echo "left $p $(ps -o comm= -p "$p" 2>/dev/null)"
      kill -TERM "$p" 2>/dev/null
      left="$left $p"
    else
      rm -f "$f"
    fi
  done
fi
if [ -n "$left" ]; then
  sleep 2
  for p in $left; do
    if ours "$p"; then
      kill -KILL "$p" 2>/dev/null && echo "killed $p"
    fi
    rm -f "$d/$p"
  done
fi
true"""


def wrapper(proc_dir: str = PROC_DIR) -> list[str]:
    """The argv prefix of every process ccbench spawns on a remote node."""
    return ["sh", "-c", _RECORD, "ccbench-pid", proc_dir]


def sweep_argv(proc_dir: str = PROC_DIR) -> list[str]:
    """One command that ends what earlier runs left on a node (see the module doc)."""
    return ["sh", "-c", _SWEEP, "ccbench-sweep", proc_dir]


@dataclass(frozen=True)
class Swept:
    """What a sweep found: processes ended ("pid name"), of those the ones that needed
    SIGKILL, and loggers turned off."""

    ended: tuple[str, ...] = ()
    killed: tuple[str, ...] = ()
    loggers: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.ended or self.loggers)

    def summary(self) -> str:
        """One clause for a log line: 'ended 2 process(es) (iperf3, ss); siftr off'."""
        parts = []
        if self.ended:
            names = sorted({e.split(" ", 1)[1] if " " in e else "?" for e in self.ended})
            parts.append(f"ended {len(self.ended)} process(es) ({', '.join(names)})")
        if self.loggers:
            parts.append(f"turned off {', '.join(self.loggers)}")
        return "; ".join(parts)


_LINE = re.compile(r"^(left|killed|logger) (\S+)(?: (.*))?$")


def parse_sweep(stdout: str) -> Swept:
    """sweep_argv's output; lines it does not know are ignored (a shell's noise)."""
    ended: list[str] = []
    killed: list[str] = []
    loggers: list[str] = []
    for line in stdout.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        what, first, rest = m.groups()
        if what == "left":
            ended.append(f"{first} {(rest or '?').strip() or '?'}")
        elif what == "killed":
            killed.append(first)
        else:
            loggers.append(first)
    return Swept(tuple(ended), tuple(killed), tuple(loggers))


__all__ = ["PROC_DIR", "Swept", "parse_sweep", "sweep_argv", "wrapper"]
