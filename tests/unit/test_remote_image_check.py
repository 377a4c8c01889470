"""`tools: container` on SSH hosts (command plans, no hosts): every Linux node is asked
for the image and for podman's init before anything runs, and a node without either is
refused in one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ccbench.container import DEFAULT_IMAGE, INIT_PATH
from ccbench.errors import CcbenchError
from ccbench.exec import Result
from ccbench.spec import Topology
from tests.ssh_plans import ssh_testbed


class Node:
    """Answers `podman image exists` and `test -x INIT_PATH` as the node would."""

    def __init__(self, name: str, has: set[str], asked: list[tuple[str, list[str]]]) -> None:
        self.name, self.has, self.asked = name, has, asked

    def run(self, argv: Any, **kw: Any) -> Result:
        argv = list(argv)
        self.asked.append((self.name, argv))
        what = "image" if argv[:3] == ["podman", "image", "exists"] else "init"
        return Result(tuple(argv), 0 if what in self.has else 1, "", "")


def bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lacking: dict[str, str]) -> Any:
    asked: list[tuple[str, list[str]]] = []

    def ex(n: str) -> Node:
        return Node(n, {"image", "init"} - {lacking.get(n, "")}, asked)

    tb = ssh_testbed(tmp_path, monkeypatch, "ctr", Topology(pairs=1), ex, tools="container")
    return tb, asked


@pytest.mark.parametrize(
    ("lacking", "says"),
    [
        ({}, None),
        ({"r1": "image"}, f"image {DEFAULT_IMAGE} is missing on r1 "),
        ({"s1": "init"}, f"podman's init {INIT_PATH} is missing on s1 (apt-get install catatonit"),
    ],
)
def test_each_linux_node_is_asked_for_the_image_and_the_init(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lacking: dict[str, str], says: str | None
) -> None:
    tb, asked = bed(tmp_path, monkeypatch, lacking)
    if says is None:
        tb.check_image()
    else:
        with pytest.raises(CcbenchError) as e:
            tb.check_image()
        assert says in str(e.value) and "\n" not in str(e.value)
    nodes = sorted({n for n, _ in asked})
    assert nodes == ["r1", "rt1", "rt2", "s1"]
    # only reads: whether the image exists, whether the init is there
    assert all(a[:3] == ["podman", "image", "exists"] or a == ["test", "-x", INIT_PATH]
               for _, a in asked)  # fmt: skip
