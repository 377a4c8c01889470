"""Hostile ids, inventories and manifests: nothing outside ccbench's own folders is
deleted, nothing reaches ssh as an option, each problem is one line before any ssh."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from ccbench import inventory, safe
from ccbench.errors import CcbenchError
from ccbench.exec_ssh import SshExecutor, SshTarget, private_dir
from ccbench.testbed import base  # noqa: E402
from tests.conftest import REPO

HOSTILE_IDS = ["..", "../../..", "../..", "/", "", "-rf", "a/b", "ABC", "toolongid", "a b",
               "ccb\n", ".", "~", "$(reboot)"]  # fmt: skip


@pytest.mark.parametrize("tb_id", HOSTILE_IDS)
def test_safe_testbed_id_refuses(tb_id: str) -> None:
    with pytest.raises(CcbenchError, match="is not a testbed id"):
        safe.testbed_id(tb_id)


def test_remove_tree_only_inside(tmp_path: Path) -> None:
    root = tmp_path / "state"
    (root / "ok" / "x").mkdir(parents=True)
    outside = tmp_path / "precious"
    outside.mkdir()
    (root / "link").symlink_to(outside)
    for bad in (root, root / "..", root / "ok" / ".." / "..", root / "link", Path("/")):
        with pytest.raises(CcbenchError, match="refusing to delete"):
            safe.remove_tree(bad, root)
    assert outside.is_dir() and root.is_dir()
    safe.remove_tree(root / "ok", root)
    safe.remove_tree(root / "gone", root)  # missing: fine (idempotent clean-up)
    assert not (root / "ok").exists()


class Sandbox(NamedTuple):
    state: Path  # the testbeds' state root (CCBENCH_STATE)
    sentinel: Path  # beside it: what `--id ..` once removed
    cfg: Path  # a valid testbed config (id keep)

    def intact(self) -> bool:
        return self.sentinel.read_text() == "keep me" and (self.state / "keep").is_dir()


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    state = tmp_path / "run" / "ccbench" / "testbeds"
    state.mkdir(parents=True)
    sentinel = tmp_path / "run" / "sentinel"
    sentinel.write_text("keep me")
    (state / "keep").mkdir()
    cfg = tmp_path / "tb.yaml"
    cfg.write_text("testbed: {id: keep}\ntopology: {pairs: 1}\n")
    return Sandbox(state, sentinel, cfg)


# Each `testbed` command that takes --id (with the sandbox's valid config where it
# ends in --config: the id is what is refused).
COMMANDS = {"down": ("down",), "down-config": ("down", "--config"), "up": ("up", "--config"),
            "status": ("status", "--config")}  # fmt: skip


def _argv(command: str, sandbox: Sandbox, tb_id: str) -> list[str]:
    args = COMMANDS[command]
    return ["testbed", *args, *([str(sandbox.cfg)] if args[-1] == "--config" else []),
            f"--id={tb_id}"]  # fmt: skip


def _cli_process(sandbox: Sandbox, argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CCBENCH_STATE": str(sandbox.state)}
    return subprocess.run([sys.executable, "-m", "ccbench.cli", *argv], capture_output=True,
                          text=True, cwd=REPO, env=env)  # fmt: skip


@pytest.mark.netns  # `testbed down` needs root (it lists and removes namespaces)
@pytest.mark.parametrize("command", COMMANDS)
def test_testbed_command_with_hostile_id_exits_2_in_one_line(
    command: str, sandbox: Sandbox
) -> None:
    """The real CLI process, CCBENCH_STATE in a sandbox: `--id ../../..` once resolved
    to /. Each command in a process of its own (the exit code and stderr a user sees);
    every hostile id through every command: the in-process test below."""
    cp = _cli_process(sandbox, _argv(command, sandbox, "../../.."))
    err = cp.stderr.strip().splitlines()
    assert cp.returncode == 2 and len(err) == 1, cp.stderr
    assert "--id" in err[0] and "Traceback" not in cp.stderr, err
    assert sandbox.intact()
    if command == "down-config":  # a valid id (none such here) gets through: removes nothing
        assert _cli_process(sandbox, _argv(command, sandbox, "abc1")).returncode == 0
        assert sandbox.intact()


@pytest.mark.netns
@pytest.mark.parametrize("tb_id", ["..", "../../..", "../", "/", "-rf"])
def test_testbed_down_with_hostile_id_deletes_nothing(
    tb_id: str, sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """`--id ..` once removed the state root's parent: each hostile id through each
    testbed command, by the CLI's main() (in this process: the state root patched to the
    sandbox), is refused in one line and deletes nothing; a valid id with the same
    config does reach `down`."""
    from ccbench.cli import main

    monkeypatch.setattr(base, "STATE_ROOT", sandbox.state)
    monkeypatch.setenv("CCBENCH_STATE", str(sandbox.state))  # for what the CLI starts
    for command in COMMANDS:
        rc = main(_argv(command, sandbox, tb_id))
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, (command, err)
        assert "--id" in err[0] and err[0].startswith("ccbench: error: "), (command, err)
        assert sandbox.intact()
    assert main(_argv("down-config", sandbox, "abc1")) == 0
    assert sandbox.intact()


def test_all_ids_lists_only_what_ccbench_could_have_made(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from ccbench.testbed import local

    (tmp_path / "abc1").mkdir()
    (tmp_path / "Not-An-Id").mkdir()
    (tmp_path / "lnk").symlink_to(tmp_path / "abc1")
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(local, "list_namespaces", lambda prefix="": [])
    monkeypatch.setattr(local, "tagged", lambda prefix="": [])  # no other test's processes
    assert local.all_ids() == ["abc1"]


# --- hosts inventories ----------------------------------------------------------------


def _inv(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "hosts.yaml"
    p.write_text(text)
    return p


GOOD = {
    "ssh": {"user": "alice"},
    "dumbbells": {
        1: {
            "s1": {"host": "pc1.emulab.net"},
            "r1": {"host": "10.0.0.2"},
            "rt1": {"host": "pc3.emulab.net"},
            "rt2": {"host": "pc4.emulab.net"},
        }
    },
}


def _with(path: list[object], value: object) -> str:
    import copy

    d = copy.deepcopy(GOOD)
    node: dict = d  # type: ignore[type-arg]
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value  # type: ignore[index]
    return yaml.safe_dump(d)


HOSTILE_INVENTORIES = [
    ("host option", _with(["dumbbells", 1, "s1", "host"], "-oProxyCommand=touch /tmp/pwn"),
     "is not a hostname"),
    ("host spaces", _with(["dumbbells", 1, "s1", "host"], "pc1 -p 2"), "is not a hostname"),
    ("host empty", _with(["dumbbells", 1, "s1", "host"], ""), "is not a hostname"),
    ("host number", _with(["dumbbells", 1, "s1", "host"], 12), "is not a hostname"),
    ("user option", _with(["ssh", "user"], "-lroot"), "is not a user name"),
    ("user spaces", _with(["dumbbells", 1, "r1", "user"], "a b"), "is not a user name"),
    ("port zero", _with(["dumbbells", 1, "s1", "port"], 0), "not a number in 1..65535"),
    ("port big", _with(["ssh", "port"], 70000), "not a number in 1..65535"),
    ("port text", _with(["dumbbells", 1, "s1", "port"], "22; reboot"), "not a number"),
    ("options not list", _with(["ssh", "options"], "ProxyCommand=x"), "a list of"),
    ("option dash", _with(["ssh", "options"], ["-oProxyCommand=x"]), "is not 'Keyword=value'"),
    ("option newline", _with(["ssh", "options"], ["A=b\nProxyCommand=x"]), "Keyword=value"),
    ("os unknown", _with(["dumbbells", 1, "s1", "os"], "windows"), "os 'windows'"),
    ("dl as linux", _with(["dumbbells", 1, "dl"], {"host": "pc9.emulab.net", "os": "linux"}),
     "dl: dummynet"),
    ("role unknown", _with(["dumbbells", 1, "router"], {"host": "pc9.emulab.net"}),
     "is not a role"),
    ("no host", _with(["dumbbells", 1, "s1"], {"port": 22}), "no host"),
    ("unknown node key", _with(["dumbbells", 1, "s1", "command"], "rm"), "unknown keys command"),
    ("unknown top key", _with(["hosts"], {}), "unknown keys hosts"),
    ("dumbbell name", _with(["dumbbells", "x"], {}), "not a dumbbell number"),
    ("same host twice", _with(["dumbbells", 1, "r1", "host"], "pc1.emulab.net"),
     "same host and port as"),
    ("address", _with(["dumbbells", 1, "s1", "address"], "10.1.1.x"), "not an IP address"),
    ("sudo text", _with(["ssh", "sudo"], "yes please"), "true or false"),
    ("duplicate role", "dumbbells:\n  1:\n    s1: {host: a}\n    s1: {host: b}\n",
     "duplicate key 's1'"),
    ("not yaml", "dumbbells: [\n", "not valid YAML"),
    ("a list", "- s1\n", "top level must be a mapping"),
]  # fmt: skip


@pytest.mark.parametrize("name,text,says", HOSTILE_INVENTORIES,
                         ids=[c[0] for c in HOSTILE_INVENTORIES])  # fmt: skip
def test_hostile_inventory_refused_at_load(name: str, text: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(CcbenchError) as e:
        inventory.load(_inv(tmp_path, text))
    assert says in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_good_inventory_loads(tmp_path: Path) -> None:
    inv = inventory.load(_inv(tmp_path, yaml.safe_dump(GOOD)))
    assert inv.dumbbell(1)["s1"].target.dest == "alice@pc1.emulab.net"
    assert inventory.pairs(inv.dumbbell(1)) == 1


def test_ssh_target_refuses_option_like_values_whatever_the_source() -> None:
    for kw in ({"host": "-oProxyCommand=id"}, {"host": "h", "user": "-x"},
               {"host": "h", "port": 0}, {"host": "h", "options": ("-F/tmp/x",)}):  # fmt: skip
        with pytest.raises(CcbenchError):
            SshTarget(**kw)  # type: ignore[arg-type]


def test_ssh_argv_puts_user_options_first_and_dashdash_before_destination(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CCBENCH_SSH_DIR", str(tmp_path / "ssh"))
    ex = SshExecutor("s1", SshTarget("pc1.emulab.net", "alice",
                                     options=("StrictHostKeyChecking=no",)))  # fmt: skip
    argv = ex.command(["true"])
    # ssh takes the first value of each keyword: the inventory's wins over ccbench's
    assert argv[1:3] == ["-o", "StrictHostKeyChecking=no"]
    assert "StrictHostKeyChecking=accept-new" in argv
    assert f"UserKnownHostsFile={tmp_path / 'ssh'}/known_hosts ~/.ssh/known_hosts" in argv
    assert f"ControlPath={tmp_path / 'ssh'}/ccb-ssh-%C" in argv
    assert argv[-3:-1] == ["--", "alice@pc1.emulab.net"]


def test_control_dir_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "ssh"
    monkeypatch.setenv("CCBENCH_SSH_DIR", str(d))
    assert private_dir() == d
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    d.chmod(0o777)  # loosened by someone: tightened again
    private_dir()
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    d.rmdir()
    d.symlink_to(tmp_path)  # a planted link is refused
    with pytest.raises(CcbenchError, match="not a directory of this user's"):
        private_dir()


# --- manifests ---------------------------------------------------------------------------

MANIFEST = """<rspec xmlns="http://www.geni.net/resources/rspec/3" type="manifest">
{nodes}
</rspec>"""


def _node(cid: str, inner: str) -> str:
    return f'<node client_id="{cid}"><services>{inner}</services></node>'


def _login(user: str, host: str, port: int = 22) -> str:
    return f'<login authentication="ssh-keys" hostname="{host}" port="{port}" username="{user}"/>'


def test_manifest_login_user_is_yours_never_another_members() -> None:
    nodes = "".join(
        _node(n, _login("zoe", f"{h}.emulab.net") + _login("alice", f"{h}.emulab.net"))
        for n, h in (("s1", "pc1"), ("rt1", "pc2"), ("rt2", "pc3"), ("r1", "pc4"))
    )
    xml = MANIFEST.format(nodes=nodes).encode()
    assert inventory.from_manifest(xml).dumbbell(1)["s1"].target.user is None  # ssh config
    inv = inventory.from_manifest(xml, user="alice")
    assert inv.dumbbell(1)["s1"].target.dest == "alice@pc1.emulab.net"
    with pytest.raises(CcbenchError, match="is not a user name"):
        inventory.from_manifest(xml, user="-oProxyCommand=x")


def test_manifest_tolerates_nodes_without_login_and_labels_the_delay_node() -> None:
    nodes = (
        _node("s1", _login("zoe", "pc1.emulab.net"))
        + '<node client_id="rt1"><host name="rt1.exp.proj.emulab.net"/></node>'
        + _node("rt2", _login("zoe", "pc3.emulab.net"))
        + _node("r1", _login("zoe", "pc4.emulab.net"))
        + '<node client_id="dl"/>'  # a delay node with no login at all
        + '<node client_id="bs1"><services/></node>'  # a blockstore: not a role
    )
    inv = inventory.from_manifest(MANIFEST.format(nodes=nodes).encode(), user="alice")
    db = inv.dumbbell(1)
    assert db["rt1"].target.host == "rt1.exp.proj.emulab.net"
    assert "dl" not in db
    nodes_dl = nodes.replace('<node client_id="dl"/>', _node("dl", _login("zoe", "pc5.emulab.net")))
    db = inventory.from_manifest(MANIFEST.format(nodes=nodes_dl).encode()).dumbbell(1)
    assert db["dl"].os == "dummynet"


def test_manifest_hostile_hostname_and_entities_refused() -> None:
    nodes = _node("s1", _login("zoe", "-oProxyCommand=id")) + "".join(
        _node(n, _login("zoe", f"{n}.emulab.net")) for n in ("rt1", "rt2", "r1")
    )
    with pytest.raises(CcbenchError, match="is not a hostname"):
        inventory.from_manifest(MANIFEST.format(nodes=nodes).encode())
    xxe = (b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/hostname">]>'
           b'<rspec><node client_id="s1"><services><login hostname="&x;" port="22"/>'
           b"</services></node></rspec>")  # fmt: skip
    with pytest.raises(CcbenchError):  # the entity is not resolved: no file is read
        inventory.from_manifest(xxe)


@pytest.mark.parametrize("port", ["22; id", "-1", "0", "70000", "２２"])
def test_manifest_login_port_that_is_not_a_port_is_refused(port: str) -> None:
    nodes = _node("s1", _login("zoe", "pc1.emulab.net").replace('port="22"', f'port="{port}"'))
    nodes += "".join(_node(n, _login("zoe", f"{n}.emulab.net")) for n in ("rt1", "rt2", "r1"))
    with pytest.raises(CcbenchError, match="node s1.*is not a number in 1..65535"):
        inventory.from_manifest(MANIFEST.format(nodes=nodes).encode())


@pytest.mark.parametrize(
    "state",
    [
        {"kind": "ssh"},
        {"kind": "ssh", "testbed": {"id": "ab1", "bogus": 1}, "topology": {}},
        {"kind": "ssh", "testbed": {"id": "ab1"}, "topology": {"pairs": 1, "nope": 2}},
    ],
)
def test_down_of_a_damaged_ssh_state_removes_it_and_says_so(
    state: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ccbench.testbed import manage

    monkeypatch.setattr(base, "STATE_ROOT", tmp_path)
    (tmp_path / "ab1").mkdir()
    (tmp_path / "ab1" / "state.json").write_text(json.dumps(state))
    (tmp_path / "keep").write_text("keep me")
    said = manage.down("ab1")
    assert said.startswith("state.json was damaged") and "SSH hosts" in said
    assert not (tmp_path / "ab1").exists() and (tmp_path / "keep").read_text() == "keep me"
