"""SshExecutor: the Executor interface over OpenSSH, with one reused connection per host.

Why OpenSSH and not asyncssh: the user's own ssh config, agent, keys and Emulab's
jump hosts work unchanged, and ControlMaster gives connection reuse for free.

SSH always hands the remote side ONE command string for its shell. So every argv
element is quoted with shlex.quote before it is joined, and what ccbench runs
remotely is never composed from unquoted config values.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ccbench import fetch, leftovers, safe
from ccbench.errors import CcbenchError
from ccbench.exec import (
    GATE,
    CommandFailed,
    Executor,
    LocalProc,
    Result,
    pid_alive,
    run_captured,
)
from ccbench.fetch import Fetched, FetchFailed

STDERR_PREFIX = "ccb-ssh-"  # + ccbench's pid: spawn()'s temporary stderr files


def remove_stale_stderr() -> int:
    """Remove spawn()'s temporary files left by a ccbench process that was killed (its
    pid in the name no longer runs); how many."""
    n = 0
    for f in Path(tempfile.gettempdir()).glob(f"{STDERR_PREFIX}*-*.err"):
        pid = f.name[len(STDERR_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and not pid_alive(int(pid)):
            f.unlink(missing_ok=True)
            n += 1
    return n


# Several commands in one round trip: $1 is a separator, then each command's argv and
# the separator after it. Each runs in a subshell, stdin closed, and its exit code is
# printed after it, on a line of its own ("ccbench-rc N"). The text eval'd is only
# "${i}" references built here: values stay positional, never part of the script.
_BATCH = r"""sep=$1; shift
while [ $# -gt 0 ]; do
  n=0; for a in "$@"; do [ "$a" = "$sep" ] && break; n=$((n+1)); done
  refs=""; i=1; while [ $i -le $n ]; do refs="$refs \"\${$i}\""; i=$((i+1)); done
  ( eval "$refs" ) </dev/null; printf '\nccbench-rc %s\n' "$?"
  shift $n; [ $# -gt 0 ] && shift
done; true"""
BATCH_SEP = "--ccbench-next--"
_RC = re.compile(r"^ccbench-rc (\d+)$", re.M)


def reachable(ex: Executor) -> None:
    """The host behind `ex` answers (else its CcbenchError, as run raises it) and its
    login shell runs ccbench's commands (LOGIN_PROBE); else one line naming the shell
    and what to do."""
    res = ex.run(LOGIN_PROBE, check=False, timeout=30)
    if res.ok:
        return
    shell = ex.login_shell() if isinstance(ex, SshExecutor) else "?"
    said = (res.stderr.strip().splitlines() or [f"exit {res.returncode}"])[-1]
    raise CcbenchError(
        f"{ex.name}: its login shell {shell} does not run ccbench's commands ({said!r} for "
        "a quoted newline, which csh and tcsh reject): make sh or bash the login shell of "
        "that account (on Emulab: Manage Account, Default Shell) and try again"
    )


def batch_argv(argvs: Sequence[Sequence[str]]) -> list[str]:
    """One command that runs `argvs` in order on a node (one ssh round trip, not one
    each: the hosts' `down` and its checks); batch_rcs reads their exit codes."""
    out = ["sh", "-c", _BATCH, "ccbench-batch", BATCH_SEP]
    for argv in argvs:
        if not argv or BATCH_SEP in argv:
            raise CcbenchError(f"cannot batch {list(argv)!r}")
        out += [*map(str, argv), BATCH_SEP]
    return out


def batch_rcs(stdout: str) -> list[int]:
    """The exit code of each command a batch_argv ran, in order (fewer: it was cut short)."""
    return [int(m) for m in _RC.findall(stdout)]


# What `up` first asks each host: it answers, and its login shell runs what ccbench sends,
# one ssh command string (sshd hands it to the user's login shell, `-c`) whose scripts
# hold newlines inside quotes. sh and bash run it; csh and tcsh (Emulab lets a user's
# login shell be tcsh) reject it: "Unmatched '''." (tcsh 6.24, checked on this machine).
LOGIN_PROBE = ["sh", "-c", "exit 0\n"]

# An ssh_config option as `-o` takes it: "Keyword=value" or "Keyword value", one line.
_OPTION = re.compile(r"^[A-Za-z][A-Za-z0-9]*(=| +)[^\n\r]+$")


@dataclass(frozen=True)
class SshTarget:
    """Where one node's commands go. Checked on creation, whatever the source (a
    manifest, a hand-written inventory, a state file): ssh reads a destination that
    starts with '-' as an option (`-oProxyCommand=...` would run a local command)."""

    host: str
    user: str | None = None
    port: int = 22
    identity: str | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        safe.ssh_host(self.host, "host")
        if self.user is not None:
            safe.ssh_user(self.user, f"{self.host}: user")
        if isinstance(self.port, bool) or not isinstance(self.port, int):
            raise CcbenchError(f"{self.host}: port {self.port!r} is not a number")
        if not 1 <= self.port <= 65535:
            raise CcbenchError(f"{self.host}: port {self.port} is not in 1..65535")
        if self.identity is not None and (not isinstance(self.identity, str)
                                          or not self.identity.strip()
                                          or "\n" in self.identity):  # fmt: skip
            raise CcbenchError(f"{self.host}: identity {self.identity!r} is not a file name")
        for opt in self.options:
            if not isinstance(opt, str) or not _OPTION.fullmatch(opt):
                raise CcbenchError(f"{self.host}: ssh option {opt!r} is not 'Keyword=value'")

    @property
    def dest(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host


def private_dir() -> Path:
    """ccbench's own ssh directory (shared-connection sockets, known_hosts): 0700,
    owned by this user, not a link; $CCBENCH_SSH_DIR, else ~/.cache/ccbench/ssh. A
    predictable name in /tmp would let another local user plant the control socket."""
    d = Path(os.environ.get("CCBENCH_SSH_DIR") or Path.home() / ".cache" / "ccbench" / "ssh")
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = d.lstat()
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise CcbenchError(f"{d}: not a directory of this user's (ccbench's ssh directory)")
    if st.st_mode & 0o077:
        d.chmod(0o700)
    return d


class SshExecutor:
    def __init__(
        self,
        name: str,
        target: SshTarget,
        *,
        control_dir: Path | None = None,
        connect_timeout_s: int = 10,
        retries: int = 2,
        proc_dir: str = leftovers.PROC_DIR,
    ):
        self.name = name
        self.target = target
        self.retries = retries
        # Where spawn() records its processes on the node (ccbench.leftovers: a crash's
        # are found by the next run, a testbed's own by its `down`): the wrapper prints
        # the remote pid (to stderr) so stop() can signal the remote process itself,
        # not only the local ssh client, then becomes the command.
        self.pid_wrapper = leftovers.wrapper(proc_dir)
        control_dir = control_dir or private_dir()
        self.base = ["ssh"]
        # The inventory's own options first: for each keyword ssh takes the first value,
        # so a lab's settings (e.g. StrictHostKeyChecking=no for throw-away hosts) win.
        for opt in target.options:
            self.base += ["-o", opt]
        self.base += [
            "-p", str(target.port),
            # First contact with a new pcNNN must work without a prompt (BatchMode), yet
            # a changed key must not: accept-new, into a known_hosts file of ccbench's
            # own, after the user's.
            "-o", "StrictHostKeyChecking=accept-new",
            "-o", f"UserKnownHostsFile={control_dir}/known_hosts ~/.ssh/known_hosts",
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={connect_timeout_s}",
            "-o", "ServerAliveInterval=5",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={control_dir}/ccb-ssh-%C",
            "-o", "ControlPersist=120",
            "-o", "LogLevel=ERROR",
        ]  # fmt: skip
        if target.identity:
            self.base += ["-i", target.identity, "-o", "IdentitiesOnly=yes"]

    def command(self, argv: Sequence[str]) -> list[str]:
        remote = " ".join(shlex.quote(str(a)) for a in argv)
        # `--` before the destination: nothing after it is read as an ssh option.
        return [*self.base, "--", self.target.dest, remote]

    def run(
        self,
        argv: Sequence[str],
        *,
        input: str | None = None,
        check: bool = True,
        timeout: float | None = 60.0,
    ) -> Result:
        full = self.command(argv)
        for attempt in range(self.retries + 1):
            cp = run_captured(full, self.name, input=input, timeout=timeout, shown=argv)
            # 255 is ssh's own failure (unreachable, auth): retry, then say so clearly.
            if cp.returncode != 255:
                break
            if attempt < self.retries:
                time.sleep(1.0 * (attempt + 1))
        if cp.returncode == 255:
            msg = (cp.stderr.strip().splitlines() or ["ssh failed"])[-1]
            raise CcbenchError(f"{self.name} ({self.target.dest}) unreachable over ssh: {msg}")
        res = Result(tuple(str(a) for a in argv), cp.returncode, cp.stdout, cp.stderr)
        if check and not res.ok:
            raise CommandFailed(self.name, res)
        return res

    def login_shell(self, timeout: float = 30.0) -> str:
        """The login user's shell there, as sshd sets $SHELL (this one string reads the
        same in sh and the csh family; no sudo in front)."""
        got = run_captured([*self.base, "--", self.target.dest, "echo $SHELL"], self.name,
                           input=None, timeout=timeout, shown=["echo", "$SHELL"])  # fmt: skip
        return got.stdout.strip() or "?"

    def run_where_tools_run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0
    ) -> Result:
        """As spawn() wraps it (wrap_spawned), so a subclass that starts its tools elsewhere
        runs this there too."""
        return self.run(self.wrap_spawned(list(argv)), check=check, timeout=timeout)

    def spawn(
        self,
        argv: Sequence[str],
        *,
        stdout: Path | None = None,
        stderr: Path | None = None,
        gated: bool = False,
    ) -> SshProc:
        inner = [*self.pid_wrapper, *(GATE if gated else []), *self.wrap_spawned(list(argv))]
        own = stderr is None
        if stderr is None:  # the remote pid arrives on stderr: it needs a file
            fd, name = tempfile.mkstemp(prefix=f"{STDERR_PREFIX}{os.getpid()}-", suffix=".err")
            os.close(fd)
            stderr = Path(name)
        local = LocalProc(self.command(inner), stdout, stderr, stdin_pipe=gated)
        return SshProc(self, local, stderr, remove_stderr=own)

    def close(self) -> None:
        """End this host's shared connection (ControlMaster) now rather than after
        ControlPersist: `down` leaves no ssh process behind. No master: nothing to do."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([*self.base, "-O", "exit", "--", self.target.dest],
                           capture_output=True, timeout=10, stdin=subprocess.DEVNULL)  # fmt: skip

    def wrap_spawned(self, argv: list[str]) -> list[str]:
        """The remote command line of a background process, after the pid and start
        gate wrappers (subclasses run it elsewhere, e.g. in a container)."""
        return argv

    def put(self, local: Path, remote: str) -> None:
        self.run(["sh", "-c", 'cat > "$1"', "put", remote], input=local.read_text())

    def get(self, remote: str, local: Path, *, compress: bool | None = None) -> Fetched:
        """Stream `remote` to `local` (ccbench.fetch: the size asked first, gzip on the
        node when large or `compress`, a timeout from the size, the arrival checked,
        all or nothing). Lands at `local`, or `local`.gz when compressed; FetchFailed
        otherwise. ssh failing to connect before any byte is retried like run()."""
        t0 = time.monotonic()
        fetch.clear(local)
        try:
            size = self.run(["wc", "-c", remote], check=False)
        except CcbenchError as e:  # unreachable, or timed out
            raise FetchFailed(self.name, remote, local, 0, str(e)) from None
        if not size.ok:
            detail = (size.stderr.strip().splitlines() or [f"exit {size.returncode}"])[-1]
            raise FetchFailed(self.name, remote, local, 0, f"cannot size it: {detail}")
        try:
            node_bytes = fetch.parse_size(size.stdout)
        except ValueError as e:
            raise FetchFailed(self.name, remote, local, 0, str(e)) from None
        gz = fetch.want_compression(node_bytes, compress)
        path = fetch.compressed_name(local) if gz else local
        argv = self.command([*fetch.GZIP_ARGV, remote] if gz else ["cat", "--", remote])
        budget = fetch.timeout_for(node_bytes)
        for attempt in range(self.retries + 1):
            try:
                got = fetch.receive(
                    argv, node=self.name, remote=remote, local=path,
                    node_bytes=node_bytes, compressed=gz, timeout_s=budget,
                )  # fmt: skip
                break
            except FetchFailed as e:
                if e.rc != 255 or e.received or attempt == self.retries:
                    raise
                time.sleep(1.0 * (attempt + 1))
        return Fetched(self.name, remote, path, node_bytes, got, gz, time.monotonic() - t0,
                       budget)  # fmt: skip

    def write_file(self, path: str, text: str) -> None:
        self.run(["tee", path], input=text)


class SshProc:
    """A remote process: the local ssh client plus the remote pid it reported."""

    def __init__(
        self, ex: SshExecutor, local: LocalProc, stderr: Path, remove_stderr: bool = False
    ):
        # The ssh client's stdin is the remote command's stdin: release() writes the go.
        self.ex = ex
        self.local = local
        self.stderr = stderr
        self.remove_stderr = remove_stderr  # a temp file of spawn()'s own: gone once ended

    def _ended(self, rc: int) -> int:
        if self.remove_stderr:
            self.stderr.unlink(missing_ok=True)
        return rc

    def remote_pid(self, timeout_s: float = 10.0) -> int | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                for line in self.stderr.read_text().splitlines():
                    if line.startswith("ccbench-pid "):
                        return int(line.split()[1])
            if self.local.poll() is not None:
                return None
            time.sleep(0.02)
        return None

    def release(self) -> None:
        self.local.release()

    def poll(self) -> int | None:
        return self.local.poll()

    def wait(self, timeout: float | None = None) -> int:
        return self._ended(self.local.wait(timeout))

    def send_signal(self, sig: int) -> None:
        pid = self.remote_pid(timeout_s=1.0)
        if pid is not None and self.local.poll() is None:
            self.ex.run(["kill", f"-{signal.Signals(sig).name[3:]}", str(pid)], check=False)

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 3.0) -> int:
        self.send_signal(sig)
        try:
            return self._ended(self.local.wait(grace_s))
        except subprocess.TimeoutExpired:
            self.send_signal(signal.SIGKILL)
            return self._ended(self.local.stop(signal.SIGKILL, grace_s=5.0))
