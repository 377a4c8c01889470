"""One Executor interface: run argv lists on a node, wherever that node is.

Implementations: `NetnsExecutor` (a network namespace on this machine, or the host
itself) and `SshExecutor` (ccbench.exec_ssh). Commands are always argv lists; nothing
here ever builds a shell string, so config values cannot become shell syntax.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ccbench import fetch, interrupts
from ccbench.errors import CcbenchError
from ccbench.fetch import Fetched


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class CommandFailed(CcbenchError):
    def __init__(self, where: str, result: Result):
        err = (result.stderr or result.stdout).strip().splitlines()
        detail = err[-1] if err else f"exit {result.returncode}"
        super().__init__(f"{where}: `{' '.join(result.argv)}` failed: {detail}")
        self.result = result


class Proc(Protocol):
    """A background process started by an Executor."""

    def poll(self) -> int | None: ...
    def release(self) -> None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 3.0) -> int: ...
    def send_signal(self, sig: int) -> None: ...


class Executor(Protocol):
    """Where commands run. `name` is used in error messages."""

    name: str

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        check: bool = True,
        timeout: float | None = 60.0,
    ) -> Result: ...

    def run_where_tools_run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0
    ) -> Result:
        """Run `argv` where spawn() starts the run's tools: the node itself, or with
        `tools: container` the image (run() always uses the node's own, for set-up).
        A check for the run's tools asks here (ccbench.needs)."""
        ...

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        gated: bool = False,
    ) -> Proc: ...

    def put(self, local: Path, remote: str) -> None: ...

    def write_file(self, path: str, text: str) -> None:
        """Write `text` to the node's file `path` (as root where the node needs sudo)."""
        ...

    def get(self, remote: str, local: Path, *, compress: bool | None = None) -> Fetched:
        """Copy the node's file `remote` to `local`, streamed, checked, all or nothing
        (ccbench.fetch). Returns where it landed (`local`, or `local`.gz when it came
        compressed); raises FetchFailed (one line: node, files, bytes received)."""
        ...


# A constant wrapper that holds a command until one line arrives on stdin, then
# becomes it (exec keeps the pid). Flows start when ccbench writes that line, so
# starts are as close as the pipes allow, also across SSH. The command itself is
# passed as positional arguments, never pasted into the script.
GATE = ["sh", "-c", 'read _go; exec "$@"', "ccbench-gate"]


class LocalProc:
    """A child process in its own process group, so stop() also reaches its children.

    `stdin_pipe`: keep its stdin open for `release()` (used with GATE). `env`: its
    environment (default: this process's).
    """

    def __init__(
        self,
        argv: Sequence[str],
        stdout: Path | None,
        stderr: Path | None = None,
        stdin_pipe: bool = False,
        env: Mapping[str, str] | None = None,
    ):
        self.argv = list(argv)
        self._out: IO[bytes] | None = open(stdout, "wb") if stdout else None  # noqa: SIM115
        self._err: IO[bytes] | None = open(stderr, "wb") if stderr else None  # noqa: SIM115
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.PIPE if stdin_pipe else subprocess.DEVNULL,
            stdout=self._out if self._out else subprocess.DEVNULL,
            stderr=self._err if self._err else subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def release(self) -> None:
        """Start a gated command now."""
        if self.popen.stdin:
            with contextlib.suppress(BrokenPipeError):
                self.popen.stdin.write(b"go\n")
                self.popen.stdin.close()

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float | None = None) -> int:
        rc = self.popen.wait(timeout)
        self._close()
        return rc

    def send_signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 3.0) -> int:
        self.send_signal(sig)
        try:
            return self.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.send_signal(signal.SIGKILL)
            return self.wait(5)

    def _close(self) -> None:
        for f in (self._out, self._err):
            if f:
                f.close()
        self._out = self._err = None


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists on this machine (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- processes left in namespaces ---------------------------------------------------

# What NetnsExecutor runs in a namespace carries the namespace's name in this variable
# of its environment, and so does what that starts (`ip netns exec`, sh's `exec`,
# iperf3 and ccdelay keep the environment they were given). `ip netns delete` only
# unmounts /run/netns/NAME: the namespace lives on while a process is in it, and then no
# name leads to it (`ip netns pids NAME` fails). The tag still says whose it was.
NETNS_TAG = "CCBENCH_NETNS"
NETNS_DIR = Path("/run/netns")  # where `ip netns add` mounts a namespace (ip-netns(8))


def running(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped by its parent) is dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def comm(pid: int) -> str:
    """The process's name (/proc/PID/comm), "?" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


@dataclass(frozen=True)
class Tagged:
    """A live process NetnsExecutor started (or one of its descendants) in namespace
    `netns`; `mounted`: that namespace is still in /run/netns (False: deleted)."""

    pid: int
    netns: str
    mounted: bool


def _netns_id(path: Path | str) -> tuple[int, int] | None:
    """A namespace's identity, as `ip netns pids` compares them (device, inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _tag(pid: int) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    key = NETNS_TAG.encode() + b"="
    for entry in env.split(b"\0"):
        if entry.startswith(key):
            return entry[len(key) :].decode(errors="replace")
    return None


def tagged(prefix: str) -> list[Tagged]:
    """Live processes tagged with a namespace whose name starts with `prefix`, in any
    network namespace but this machine's own (init's and this process's: a tag there
    is only an environment inherited on the host, not a process in a namespace). Finds
    them also after their namespace was deleted. Root reads every /proc/PID/environ."""
    own = {_netns_id("/proc/1/ns/net"), _netns_id("/proc/self/ns/net")}
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        ns = _netns_id(d / "ns" / "net")
        if ns is None or ns in own:
            continue
        tag = _tag(int(d.name))
        if tag is not None and tag.startswith(prefix) and running(int(d.name)):
            found.append((int(d.name), tag, ns))
    # Listed after the scan: a namespace added meanwhile, with a process already in it,
    # is not taken for a deleted one.
    mounted = {_netns_id(p) for p in NETNS_DIR.iterdir()} if NETNS_DIR.is_dir() else set()
    return [Tagged(pid, tag, ns in mounted) for pid, tag, ns in found]


def pids_in_any(names: Sequence[str]) -> list[int]:
    """Processes in any of the named namespaces, in one pass over /proc (what `ip netns
    pids` does per namespace)."""
    ids = {i for n in names if (i := _netns_id(NETNS_DIR / n)) is not None}
    return [
        int(d.name)
        for d in Path("/proc").iterdir()
        if d.name.isdigit() and _netns_id(d / "ns" / "net") in ids
    ]


def end_processes(pids: Callable[[], list[int]]) -> None:
    """SIGTERM what `pids()` lists, 2 s to end, then SIGKILL what is left (listed again:
    a process may have started another meanwhile)."""
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 1.0)):
        left = pids()
        for p in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + wait
        while left and time.monotonic() < deadline:
            left = [p for p in left if running(p)]
            time.sleep(0.02)


def run_captured(
    full: Sequence[str], name: str, *, input: str | None, timeout: float | None,
    shown: Sequence[str] | None = None, env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run one command line as every executor runs it: text, output captured, stdin
    closed unless `input` is given. A missing program or a timeout is one CcbenchError
    naming the host and `shown` (the command as the user wrote it; default `full`)."""
    interrupts.redeliver()
    try:
        return subprocess.run(
            list(full),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=None if input is not None else subprocess.DEVNULL,
            env=env,
        )
    except FileNotFoundError as e:
        raise CcbenchError(f"{name}: command not found: {full[0]}") from e
    except subprocess.TimeoutExpired as e:
        cmd = " ".join(str(a) for a in (shown if shown is not None else full))
        raise CcbenchError(f"{name}: `{cmd}` timed out after {timeout}s") from e


class NetnsExecutor:
    """Runs commands inside network namespace `netns` (None: the host itself). What it
    runs in a namespace carries the namespace's name (NETNS_TAG)."""

    def __init__(self, netns: str | None):
        self.netns = netns
        self.name = netns or "host"
        self.env = None if netns is None else {**os.environ, NETNS_TAG: netns}

    def wrap(self, argv: Sequence[str]) -> list[str]:
        argv = [str(a) for a in argv]
        if self.netns is None:
            return argv
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        check: bool = True,
        timeout: float | None = 60.0,
    ) -> Result:
        return self._run_line(self.wrap(argv), input=input, check=check, timeout=timeout)

    def run_where_tools_run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0
    ) -> Result:
        """As spawn() wraps it (wrap_spawned), so a subclass that starts its tools elsewhere
        runs this there too."""
        full = self.wrap_spawned([str(a) for a in argv], False)
        return self._run_line(full, input=None, check=check, timeout=timeout)

    def _run_line(
        self, full: list[str], *, input: str | None, check: bool, timeout: float | None
    ) -> Result:
        cp = run_captured(full, self.name, input=input, timeout=timeout, env=self.env)
        res = Result(tuple(full), cp.returncode, cp.stdout, cp.stderr)
        if check and not res.ok:
            raise CommandFailed(self.name, res)
        return res

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        gated: bool = False,
    ) -> LocalProc:
        # The gate runs inside the namespace, wrapped around the real command.
        inner = [*GATE, *argv] if gated else list(argv)
        return LocalProc(self.wrap_spawned(inner, gated), stdout, stderr, stdin_pipe=gated,
                         env=self.env)  # fmt: skip

    def wrap_spawned(self, inner: list[str], interactive: bool) -> list[str]:
        """The command line of a background process (subclasses run it elsewhere)."""
        return self.wrap(inner)

    def put(self, local: Path, remote: str) -> None:
        shutil.copyfile(local, remote)

    def get(self, remote: str, local: Path, *, compress: bool | None = None) -> Fetched:
        """A namespace shares this machine's files: a checked copy, never compressed."""
        return fetch.copy_local(self.name, remote, local)

    def write_file(self, path: str, text: str) -> None:
        """Write `text` to `path` as seen from inside the namespace (e.g. its /sys)."""
        self.run(["tee", path], input=text)
