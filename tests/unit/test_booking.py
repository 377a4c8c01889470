"""Planning before booking (issue 21): `ccbench matrix` on an Emulab config lists the runs
and what to instantiate with no hosts inventory yet (it exists only once the experiment
does), names the missing inventory as the one thing left, and exits 0; the workflow's
`ccbench matrix --json` still refuses without it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ccbench import booking, matrix
from ccbench.cli import main
from ccbench.config import load_yaml
from ccbench.model import Matrix

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


# --- how long: traffic and the estimated wall time (issue 32) --------------------------


def _matrix(name: str) -> Matrix:
    path = REPO / "config" / name
    return matrix.load(load_yaml(str(path)), path.name, need_inventory=False)


def test_the_local_estimate_is_the_measured_pipeline() -> None:
    # bench/pipeline.py's config: its measured wall time (docs/fidelity.md, 590 s for
    # 540 s of traffic) comes back from the per-run, per-testbed and analysis parts
    m = _matrix("config.yaml")
    (e,) = booking.estimates(m)
    assert (e.runs, e.traffic_s, e.testbeds, e.reboots) == (18, 540.0, 2, 0)
    assert booking.total_s(m, [e], 0.0) == pytest.approx(590.0)
    line = booking.time_lines(m)[-1]
    assert line.startswith("in all about 10 min (1.09 × the traffic: one dumbbell")


def test_seed_001_on_emulab_books_the_longest_dumbbell_and_the_set_up() -> None:
    m = _matrix("examples/emulab-seed001.yaml")
    ests = booking.estimates(m)
    assert [(e.where, e.runs, e.traffic_s, e.testbeds, e.reboots) for e in ests] == [
        ("dumbbell 1", 24, 24 * 300.0, 2, 0),
        ("dumbbell 2", 12, 12 * 300.0, 2, 0),
        ("dumbbell 3", 12, 12 * 300.0, 2, 0),
    ]
    ssh = booking.SSH
    longest = 24 * 300 + 24 * ssh.run_s + 2 * ssh.testbed_s
    assert ests[0].wall_s == pytest.approx(longest)
    # side by side: the longest dumbbell, then the analysis, after swap-in
    assert booking.total_s(m, ests, 1800.0) == pytest.approx(1800 + longest + ssh.analysis_s)
    lines = booking.time_lines(m, setup_min=30)
    assert lines[1].startswith("  dumbbell 1: 24 runs, 2 h 00 min of traffic; about 2 h 0")
    assert lines[4].startswith(
        f"book the experiment for about {booking.hours(1800 + longest + ssh.analysis_s)} "
        "(the dumbbells run side by side"
    )


def test_a_kernel_axis_on_one_dumbbell_adds_a_reboot() -> None:
    m = _matrix("examples/emulab-seed001-reboot.yaml")
    (e,) = booking.estimates(m, reboot_s=600.0)
    assert (e.runs, e.reboots) == (40, 1)  # before, then after the patch
    without = booking.estimates(m, reboot_s=0.0)[0]
    assert e.wall_s - without.wall_s == pytest.approx(600.0)
    assert "1 reboot(s) × 10 min" in booking.time_lines(m, reboot_min=10)[1]


def test_a_labs_sender_sets_take_turns() -> None:
    m = _matrix("examples/lab-seed000.yaml")
    ests = booking.estimates(m)
    assert [(e.where, e.runs) for e in ests] == [("sender set 1", 12), ("sender set 2", 6)]
    # one after the other, nothing booked by a profile: no swap-in
    total = sum(e.wall_s for e in ests) + booking.SSH.analysis_s
    assert booking.total_s(m, ests, 0.0) == pytest.approx(total)
    assert "take turns" in booking.time_lines(m)[-1] and "swap-in" not in booking.time_lines(m)[-1]


@pytest.mark.parametrize(("s", "shown"), [(59, "1 min"), (60, "1 min"), (61, "2 min"),
                                          (3599, "1 h 00 min"), (7441, "2 h 05 min")])  # fmt: skip
def test_hours_round_up_to_the_minute(s: float, shown: str) -> None:
    assert booking.hours(s) == shown


def test_matrix_prints_how_long_and_takes_other_allowances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = str(REPO / "config" / "examples" / "emulab-seed001-reboot.yaml")
    assert main(["matrix", "--config", cfg, "--reboot-min", "45", "--setup-min", "0"]) == 0
    out = capsys.readouterr().out
    assert "1 reboot(s) × 45 min" in out and "swap-in and start-up" not in out
    with pytest.raises(SystemExit) as e:
        main(["matrix", "--config", cfg, "--reboot-min", "soon"])
    assert e.value.code == 2
    assert "not a number of minutes: 'soon'" in capsys.readouterr().err


def test_the_profiles_instructions_say_how_long_to_book() -> None:
    """profile.py stays self-contained (the portal runs it alone): the hours its
    instructions quote are checked against what `ccbench matrix` prints."""
    instructions = (REPO / "profile.py").read_text().split("\nInstructions:\n", 1)[1]
    head = instructions.strip().split("\n\n", 1)[0]  # its first paragraph
    assert head.startswith("How long to book: ")
    quoted = re.findall(r"(emulab-seed001(?:-reboot)?\.yaml)\b[^)]*\) about (\d+ h \d\d min)",
                        " ".join(head.split()))  # fmt: skip
    assert len(quoted) == 2
    for name, said in quoted:
        book = booking.time_lines(_matrix(f"examples/{name}"))
        assert any(line.startswith(f"book the experiment for about {said} ") for line in book)
    assert f"{booking.SETUP_MIN:g} min for swap-in" in " ".join(head.split())
    assert f"{booking.REBOOT_MIN:g} min a reboot" in " ".join(head.split())


def test_the_ssh_estimate_comes_close_to_the_rehearsal_it_was_measured_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """scripts/emulab_rehearsal.py --duration 30 (2026-11-27): its workflow (4 runs of
    30 s on 2 dumbbells side by side) took 127.7 s, Snakemake's own start and the matrix
    job included, which the model leaves out."""
    monkeypatch.syspath_prepend(str(REPO / "scripts"))  # its package `rehearsal`
    spec = importlib.util.spec_from_file_location(
        "emulab_rehearsal", REPO / "scripts" / "emulab_rehearsal.py"
    )
    assert spec is not None and spec.loader is not None
    rehearsal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rehearsal)
    cfg = rehearsal.workflow_config(Path("hosts.yaml"), 30.0)
    m = matrix.load(cfg, "rehearsal", need_inventory=False)
    ests = booking.estimates(m)
    assert [(e.runs, e.traffic_s, e.testbeds) for e in ests] == [(2, 60.0, 1), (2, 60.0, 1)]
    assert ests[0].costs is booking.SSH
    estimate = booking.total_s(m, ests, 0.0)
    assert 0.85 * 127.7 <= estimate <= 127.7


def test_emulab_md_shows_what_matrix_prints() -> None:
    """docs/emulab.md, "How long to book", quotes the lines for seed 001 as printed."""
    section = (REPO / "docs" / "emulab.md").read_text().split("\n## How long to book\n")[1]
    block = section.split("```\n", 2)[1]
    assert block.splitlines() == booking.time_lines(_matrix("examples/emulab-seed001.yaml"))
