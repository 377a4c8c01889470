"""What a non-editable install gets: the wheel carries the schemas and templates, so a
`pip install`ed ccbench validates a config; and topology defaults live in one place."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from ccbench.config import topology_from, validate
from ccbench.spec import Topology

REPO = Path(__file__).resolve().parents[2]


def _clean_tree(dest: Path) -> Path:
    """The checkout's tracked files only: no egg-info or build/ left by an editable
    install, whose SOURCES.txt would add files the package data rules miss."""
    import shutil

    # tracked files and new ones git does not ignore (what a commit would carry)
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                            "--exclude-standard"], capture_output=True, cwd=REPO,
                           check=True).stdout.decode().split("\0")  # fmt: skip
    for f in filter(None, files):
        src = REPO / f
        if src.is_file() and not src.is_symlink():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    return dest


def test_wheel_has_schemas_and_validates_the_default_config(tmp_path: Path) -> None:
    tree = _clean_tree(tmp_path / "tree")
    cp = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(tmp_path / "dist"), str(tree)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("ccbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for need in ("ccbench/schemas/matrix.yaml", "ccbench/schemas/run.yaml",
                 "ccbench/templates/report.html.j2", "ccbench/templates/report.css"):  # fmt: skip
        assert need in names, need
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # The installed package, not this checkout's: it must validate and expand the config.
    code = (
        "import ccbench, sys; from ccbench import config, matrix; "
        "assert ccbench.__file__.startswith(sys.argv[1]), ccbench.__file__; "
        "m = matrix.load(config.load_yaml(sys.argv[2]), 'cfg'); print(len(m.runs))"
    )
    cp = subprocess.run(
        [sys.executable, "-c", code, str(site), str(REPO / "config" / "config.yaml")],
        capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert cp.stdout.strip() == "18"


def test_topology_defaults_are_the_schemas() -> None:
    """The run schema's defaults are where topology defaults live; the dataclass's
    defaults (for code that builds a Topology directly) must equal them."""
    from_schema = topology_from(validate({"topology": {}}, "run", "defaults")["topology"])
    assert from_schema == Topology()
    assert [f.name for f in dataclasses.fields(Topology)] == list(dataclasses.asdict(Topology()))
