"""Planning before booking (issue 21): `ccbench matrix` on an Emulab config lists the runs
and what to instantiate with no hosts inventory yet (it exists only once the experiment
does), names the missing inventory as the one thing left, and exits 0; the workflow's
`ccbench matrix --json` still refuses without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ccbench.cli import main

REPO = Path(__file__).resolve().parents[2]
EMULAB = sorted((REPO / "config" / "examples").glob("emulab-seed*.yaml"))


@pytest.mark.parametrize("path", EMULAB, ids=lambda p: p.name)
def test_an_emulab_config_is_planned_without_its_inventory(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)  # no hosts.yaml here
    assert main(["matrix", "--config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[1:3] == ["runs", "on"]
    plan = next(i for i, line in enumerate(out) if line.startswith("to instantiate"))
    assert plan > 1 and out[plan + 1].startswith("  dumbbell 1: ")
    assert out[-1].startswith("still missing: ") and "hosts.yaml: no such inventory" in out[-1]
    assert main(["matrix", "--json", "--config", str(path)]) == 2


def test_seed_001_needs_three_dumbbells_of_21_machines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    main(["matrix", "--config", str(REPO / "config" / "examples" / "emulab-seed001.yaml")])
    out = capsys.readouterr().out
    assert "3 dumbbell(s), 21 machines in all" in out
    assert "dumbbell 2: 2 pair(s), FreeBSD senders booting 'after patch (D49540)'" in out
    assert "dumbbell 3: 2 pair(s), Linux senders" in out
