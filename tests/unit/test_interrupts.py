"""A KeyboardInterrupt raised inside a finalizer (where a signal handler may run) is not
lost: the next command an executor runs, or the end of the CLI, raises it again."""

from __future__ import annotations

import gc
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator

import pytest

from ccbench import exec as ex
from ccbench import interrupts


class _StoppedInFinalizer:
    def __del__(self) -> None:
        raise KeyboardInterrupt  # as `cli._on_sigterm` does when the signal lands here


@pytest.fixture
def hook(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[BaseException]]:
    """interrupts' hook installed over one that records what reaches it (Python's
    default prints it: "Exception ignored in ...")."""
    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    monkeypatch.setattr(interrupts, "_previous", interrupts._previous)
    monkeypatch.setattr(interrupts, "_dropped", False)
    interrupts.install()
    yield seen


def test_a_swallowed_interrupt_is_raised_by_the_next_command(hook: list[BaseException]) -> None:
    obj = _StoppedInFinalizer()
    del obj
    gc.collect()
    assert [type(e) for e in hook] == [KeyboardInterrupt]  # still reported as Python does
    with pytest.raises(KeyboardInterrupt):
        ex.NetnsExecutor(None).run(["true"])
    # once: the clean-up that follows runs its commands
    assert ex.NetnsExecutor(None).run(["true"]).ok


def test_nothing_swallowed_nothing_raised(hook: list[BaseException]) -> None:
    interrupts.redeliver()
    assert ex.NetnsExecutor(None).run(["true"]).ok


def test_other_unraisable_errors_are_left_to_python(hook: list[BaseException]) -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("not a stop")

    b = Broken()
    del b
    interrupts.redeliver()  # no stop recorded
    assert [str(e) for e in hook] == ["not a stop"]


def _cli_with(
    code: str, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """A real process running the CLI with `code`'s `cmd` as its only command."""
    main = textwrap.dedent("""
        def build():
            ap = argparse.ArgumentParser()
            ap.set_defaults(func=cmd)
            return ap
        cli.build_parser = build
        sys.exit(cli.main([]))
    """)
    return subprocess.run([sys.executable, "-c", code + main], capture_output=True, text=True,
                          preexec_fn=preexec)  # fmt: skip


def test_the_cli_reports_a_stop_swallowed_after_its_last_command() -> None:
    """A real process: SIGTERM's handler runs inside a finalizer (a Popen freed after
    its command), the command finishes, and the CLI still exits 130 saying so."""
    code = textwrap.dedent("""
        import argparse, os, signal, sys
        from ccbench import cli

        class Late:
            def __del__(self):
                os.kill(os.getpid(), signal.SIGTERM)  # handled here, in the finalizer
                for _ in range(1000):
                    pass

        def cmd(a):
            Late()
            return 0

    """)
    got = _cli_with(code)
    assert got.returncode == 130, got.stderr
    assert "interrupted after the command completed" in got.stderr
    assert "Exception ignored" in got.stderr  # Python's own line, kept


def test_children_of_a_cli_started_with_sigint_ignored_get_the_default() -> None:
    """A real process started as `cmd &` in a script starts (SIGINT ignored): the tools
    the CLI starts must stop on SIGINT (samplers, ping), so they get the default."""
    code = textwrap.dedent("""
        import argparse, signal, subprocess, sys
        from ccbench import cli

        def cmd(a):
            p = subprocess.run(["grep", "^SigIgn", "/proc/self/status"],
                               capture_output=True, text=True)
            print(p.stdout.strip())
            return 0

    """)

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    got = _cli_with(code, ignore_sigint)
    assert got.returncode == 0, got.stderr
    mask = int(got.stdout.split()[-1], 16)
    assert not mask & (1 << (signal.SIGINT - 1)), got.stdout
