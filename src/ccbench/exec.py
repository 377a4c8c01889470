"""One Executor interface: run argv lists on a node, wherever that node is.

Implementations: `NetnsExecutor` (a network namespace on this machine, or the host
itself) and `SshExecutor` (in ccbench.ssh). Commands are always argv lists; nothing
here ever builds a shell string, so config values cannot become shell syntax.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Sequence
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

    `stdin_pipe`: keep its stdin open for `release()` (used with GATE).
    """

    def __init__(
        self,
        argv: Sequence[str],
        stdout: Path | None,
        stderr: Path | None = None,
        stdin_pipe: bool = False,
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


def run_captured(
    full: Sequence[str], name: str, *, input: str | None, timeout: float | None,
    shown: Sequence[str] | None = None,
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
        )
    except FileNotFoundError as e:
        raise CcbenchError(f"{name}: command not found: {full[0]}") from e
    except subprocess.TimeoutExpired as e:
        cmd = " ".join(str(a) for a in (shown if shown is not None else full))
        raise CcbenchError(f"{name}: `{cmd}` timed out after {timeout}s") from e


class NetnsExecutor:
    """Runs commands inside network namespace `netns` (None: the host itself)."""

    def __init__(self, netns: str | None):
        self.netns = netns
        self.name = netns or "host"

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
        full = self.wrap(argv)
        cp = run_captured(full, self.name, input=input, timeout=timeout)
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
        return LocalProc(self.wrap_spawned(inner, gated), stdout, stderr, stdin_pipe=gated)

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
