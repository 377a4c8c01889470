"""A lab's `testbed up` with every command it runs on a host recorded (a recording
Executor: SshExecutor.run, wrapped), and which of those only read. Used by
tests/unit/test_lab_guard.py (fake hosts) and tests/integration/test_lab_rehearsal.py
(real hosts over SSH: `python -m tests.lab_recording CONFIG...` prints, per config, JSON
{"refused": the one line or null, "ran": [[host, argv], ...]})."""

from __future__ import annotations

import json
import sys
from typing import Any

from ccbench.exec_ssh import BATCH_SEP, LOGIN_PROBE, batch_argv
from ccbench.testbed import lab_checks


def reads_only(argv: list[str]) -> bool:
    """The commands a refused `up` may run: each only reads (reachable with its login
    shell, the interfaces, the qdiscs, the programs there)."""
    return (argv == LOGIN_PROBE or argv == ["ip", "-j", "-4", "addr", "show"]
            or argv[:5] == list(lab_checks.QDISC_SHOW)
            or argv[:4] == lab_checks.has_programs()[:4])  # fmt: skip


def commands(argv: list[str]) -> list[list[str]]:
    """The commands one argv runs: a batch's (exec_ssh.batch_argv) each, else itself."""
    head = batch_argv([["true"]])[:5]
    if argv[:5] != head:
        return [argv]
    out: list[list[str]] = [[]]
    for a in argv[5:]:
        if a == BATCH_SEP:
            out.append([])
        else:
            out[-1].append(a)
    return out[:-1]


def recorded_up(config: str) -> dict[str, Any]:
    from ccbench.errors import CcbenchError
    from ccbench.exec_ssh import SshExecutor
    from ccbench.lifecycle import named_testbed

    ran: list[list[Any]] = []
    real = SshExecutor.run

    def run(self: SshExecutor, argv: Any, **kw: Any) -> Any:
        ran.append([self.name, [str(a) for a in argv]])
        return real(self, argv, **kw)

    SshExecutor.run = run  # type: ignore[method-assign]
    try:
        tb = named_testbed(config, None, None, None)
        try:
            tb.up()
            refused = None
        except CcbenchError as e:
            refused = str(e)
    finally:
        SshExecutor.run = real  # type: ignore[method-assign]
    return {"refused": refused, "ran": ran}


if __name__ == "__main__":
    for cfg in sys.argv[1:]:
        print(json.dumps(recorded_up(cfg)))
