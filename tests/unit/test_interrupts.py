"""A KeyboardInterrupt raised inside a finalizer (where a signal handler may run) is not
lost: the next command an executor runs, or the end of the CLI, raises it again."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections.abc import Iterator

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

        def build():
            ap = argparse.ArgumentParser()
            ap.set_defaults(func=cmd)
            return ap
        cli.build_parser = build
        sys.exit(cli.main([]))
    """)
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert got.returncode == 130, got.stderr
    assert "interrupted after the command completed" in got.stderr
    assert "Exception ignored" in got.stderr  # Python's own line, kept
