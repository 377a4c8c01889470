"""ccbench sends every remote command as ONE ssh command string, which sshd hands to the
login user's shell (`shell -c STRING`); its scripts hold newlines inside quotes. sh and
bash run that; csh and tcsh (an Emulab account may have tcsh as its login shell) reject
it. `up` asks each host first (exec_ssh.reachable, LOGIN_PROBE) and says so in one
line. The strings run here for real in sh, bash and, where installed, tcsh."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from ccbench import leftovers
from ccbench.errors import CcbenchError
from ccbench.exec import Result
from ccbench.exec_ssh import LOGIN_PROBE, SshExecutor, SshTarget, reachable


def sent(argv: list[str]) -> str:
    """The string ssh hands the login shell for `argv` (SshExecutor.command's last)."""
    return SshExecutor("h", SshTarget("h.example.org")).command(argv)[-1]


@pytest.mark.parametrize("shell", ["sh", "bash", "tcsh"])
def test_the_probe_fails_where_ccbenchs_scripts_do(shell: str) -> None:
    """LOGIN_PROBE's string fails in a shell exactly when a real script of ccbench's
    (the sweep, newlines in its quotes) fails to parse there."""
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    probe = subprocess.run([shell, "-c", sent(LOGIN_PROBE)], capture_output=True, text=True)
    # the sweep's script, parsed and run on a directory that is not there: nothing to do
    sweep = subprocess.run([shell, "-c", sent(leftovers.sweep_argv("/nonexistent/ccb"))],
                           capture_output=True, text=True)  # fmt: skip
    assert (probe.returncode == 0) == (sweep.returncode == 0) == (shell != "tcsh"), (probe, sweep)
    if shell == "tcsh":
        assert "Unmatched" in probe.stderr


class Answers(SshExecutor):
    """An executor whose host answers LOGIN_PROBE as `shell` would."""

    def __init__(self, shell: str, rc: int, stderr: str = "") -> None:
        super().__init__("s1", SshTarget("pc1.emulab.net", "alice"))
        self.shell, self.rc, self.stderr = shell, rc, stderr
        self.asked: list[list[str]] = []

    def run(self, argv: Any, **kw: Any) -> Result:
        self.asked.append(list(argv))
        return Result(tuple(argv), self.rc, "", self.stderr)

    def login_shell(self, timeout: float = 30.0) -> str:
        return self.shell


def test_a_csh_login_shell_is_said_in_one_line() -> None:
    ok = Answers("/bin/bash", 0)
    reachable(ok)
    assert ok.asked == [LOGIN_PROBE]
    with pytest.raises(CcbenchError) as e:
        reachable(Answers("/bin/tcsh", 1, "Unmatched '''.\n"))
    said = str(e.value)
    assert "\n" not in said and said.startswith("s1: its login shell /bin/tcsh does not run")
    assert "Unmatched" in said and "make sh or bash the login shell" in said
