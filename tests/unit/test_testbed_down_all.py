"""`ccbench testbed down --all` tries every testbed (found on a lab whose router went
away: the first testbed not as found kept the others up), says each one's result, and
exits non-zero when any is not as found. manage.down recorded instead of done: no
testbed is touched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from ccbench import cli, privileges
from ccbench.errors import CcbenchError
from ccbench.testbed import local, manage

LAB_SAYS = "testbed lab2: not as found after down: r1: not reached (r1 (r1.lan) timed out)"


@pytest.fixture
def tried(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Testbeds a1, lab2, ssh3 and d4 here; lab2's `down` is not as found (the lab's
    own words), ssh3's fails in words that do not name it; the others go."""
    done: list[str] = []

    def down(tb_id: str, kinds: Mapping[str, Any] = manage.REGISTRY) -> str:
        done.append(tb_id)
        if tb_id == "lab2":
            raise CcbenchError(LAB_SAYS)
        if tb_id == "ssh3":
            raise CcbenchError("r1: could not remove loss rule: Permission denied")
        return "removed"

    monkeypatch.setattr(manage, "down", down)
    monkeypatch.setattr(local, "all_ids", lambda: ["a1", "lab2", "ssh3", "d4"])
    monkeypatch.setattr(privileges, "require_root", lambda: None)
    return done


def test_down_all_tries_every_testbed_and_fails_if_any_is_not_as_found(
    tried: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["testbed", "down", "--all"]) == 2
    assert tried == ["a1", "lab2", "ssh3", "d4"]  # past the ones not as found
    out, err = capsys.readouterr()
    assert out.splitlines() == ["testbed a1: removed", "testbed d4: removed"]
    assert err.splitlines() == [
        f"ccbench: error: {LAB_SAYS}",
        "ccbench: error: testbed ssh3: r1: could not remove loss rule: Permission denied",
        "ccbench: error: 2 of 4 testbeds not as found after down: lab2, ssh3",
    ]


def test_down_of_one_testbed_says_it_in_one_line(
    tried: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["testbed", "down", "--id", "lab2"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == [f"ccbench: error: {LAB_SAYS}"]
    assert cli.main(["testbed", "down", "--id", "d4"]) == 0
    assert capsys.readouterr() == ("testbed d4: removed\n", "")
    assert tried == ["lab2", "d4"]


def test_down_each_yields_as_it_goes(tried: list[str]) -> None:
    """Each result as soon as its testbed is done (a long `down --all` says how far it
    got): the second is not tried before the first is read."""
    each = manage.down_each(["a1", "lab2"])
    assert next(each) == manage.Downed("a1", "removed", True) and tried == ["a1"]
    assert next(each) == manage.Downed("lab2", LAB_SAYS, False)
    assert list(each) == []
