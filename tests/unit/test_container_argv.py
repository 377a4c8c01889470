"""The exact podman command lines that ccbench.container builds."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ccbench import container
from ccbench.container import DEFAULT_IMAGE, container_argv, image_present


def test_argv_without_name() -> None:
    assert container_argv("ccct-a", DEFAULT_IMAGE, ["iperf3", "-s", "-1"]) == [
        "podman",
        "run",
        "--rm",
        "--pull=never",
        "--init",
        "--network",
        "ns:/run/netns/ccct-a",
        "--privileged",
        "--dns",
        "127.0.0.1",
        "localhost/ccbench-linux-node:latest",
        "iperf3",
        "-s",
        "-1",
    ]


def test_argv_with_name() -> None:
    argv = ["iperf3", "-J", "-C", "cubic", "-t", "3", "-c", "198.18.252.1"]
    assert container_argv("snd1", "localhost/img:1", argv, name="ccct-client") == [
        "podman",
        "run",
        "--rm",
        "--pull=never",
        "--init",
        "--network",
        "ns:/run/netns/snd1",
        "--privileged",
        "--dns",
        "127.0.0.1",
        "--name",
        "ccct-client",
        "localhost/img:1",
        *argv,
    ]


def test_argv_keeps_arguments_verbatim() -> None:
    # Arguments are never joined or re-split: spaces and shell syntax stay literal.
    argv = ["sh", "-c", "echo $HOME; ls 'a b'"]
    assert container_argv("ns", "img", argv)[-3:] == argv


def test_argv_is_a_new_list() -> None:
    argv = ["versions"]
    cmd = container_argv("ns", "img", argv)
    cmd.append("x")
    assert argv == ["versions"]


@pytest.mark.parametrize("netns", ["", "../etc", "a/b", "..", "-x", "a b", "ns;rm"])
def test_bad_netns_rejected(netns: str) -> None:
    with pytest.raises(ValueError):
        container_argv(netns, "img", ["true"])


@pytest.mark.parametrize("image", ["", "--privileged", "a b"])
def test_bad_image_rejected(image: str) -> None:
    with pytest.raises(ValueError):
        container_argv("ns", image, ["true"])


def test_empty_argv_rejected() -> None:
    with pytest.raises(ValueError):
        container_argv("ns", "img", [])


def test_string_argv_rejected() -> None:
    with pytest.raises(TypeError):
        container_argv("ns", "img", "iperf3 -s")


@pytest.mark.parametrize("name", ["", "-x", "a b", "a/b"])
def test_bad_name_rejected(name: str) -> None:
    with pytest.raises(ValueError):
        container_argv("ns", "img", ["true"], name=name)


def test_image_present_without_podman(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda _name: None)
    assert image_present("anything") is False


def test_image_present_uses_podman_image_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_kwargs: object) -> subprocess.CompletedProcess[bytes]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0 if cmd[-1] == "have:1" else 1)

    monkeypatch.setattr(shutil, "which", lambda _name: "/usr/bin/podman")
    monkeypatch.setattr(subprocess, "run", fake_run)
    assert image_present("have:1") is True
    assert image_present("lack:1") is False
    assert calls == [
        ["/usr/bin/podman", "image", "exists", "have:1"],
        ["/usr/bin/podman", "image", "exists", "lack:1"],
    ]


def test_missing_init_names_the_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(container, "INIT_PATH", str(tmp_path / "catatonit"))
    assert container.missing_init() == (
        f"podman's init {tmp_path / 'catatonit'} is missing (apt-get install catatonit)"
    )
    (tmp_path / "catatonit").write_text("")
    assert container.missing_init() is None
