"""Malformed comparison configs, as a new user writes them: each is refused by the real
`ccbench matrix` with exit 2 and one line naming the problem, never a traceback; a few
odd-but-right ones are accepted on purpose. A property test mutates valid configs at
random and holds the same line."""

from __future__ import annotations

import copy
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ccbench.cli import main
from ccbench.config import schema as config_schema
from tests.unit.schema_strategy import from_schema
from tests.unit.test_matrix import write_inventory

REPO = Path(__file__).resolve().parents[2]
BASE = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

Mutation = Callable[[dict[str, Any], Path], None]


def setp(path: str, value: Any) -> Mutation:
    """Set a dotted path (list indices as numbers) in the config."""

    def mutate(cfg: dict[str, Any], _: Path) -> None:
        *head, last = path.split(".")
        node: Any = cfg
        for k in head:
            node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return mutate


def ssh(pairs: int = 2, **variant: Any) -> Mutation:
    """testbed kind ssh with a real (hand-written) inventory; optionally a FreeBSD variant."""

    def mutate(cfg: dict[str, Any], d: Path) -> None:
        cfg["testbed"] = {"kind": "ssh", "inventory": str(write_inventory(d, pairs))}
        if variant:
            cfg["variants"][1] = {"label": "fbsd", "os": "freebsd", **variant}

    return mutate


def flows(*fl: dict[str, Any]) -> Mutation:
    return setp("scenarios.two-flows-48.flows", list(fl))


BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n"
    for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)

# (case, mutation of the default config or raw file text/bytes, what the line must say)
REFUSED: list[tuple[str, Mutation | str | bytes, str]] = [
    # whole numbers written as floats never reach iperf3 as "-P 2.0"
    ("pairs float", setp("topology.pairs", 2.0), "is not of type 'integer'"),
    ("repetitions float", setp("repetitions", 2.0), "is not of type 'integer'"),
    ("flows float", setp("scenarios.two-flows-48.flows", 2.0), "flows"),
    ("streams float", flows({"cc": "cubic", "streams": 2.0}), "flows"),
    ("attempts float", setp("attempts", 2.0), "is not of type 'integer'"),
    ("mtu float", setp("topology.mtu", 1500.5), "is not of type 'integer'"),
    ("repetitions bool", setp("repetitions", True), "is not of type 'integer'"),
    # NaN and infinity pass min/max comparisons: refused wherever they stand
    ("duration nan", setp("duration_s", math.nan), "duration_s: nan is not a finite number"),
    ("duration inf", setp("duration_s", math.inf), "duration_s: inf is not a finite number"),
    ("rate nan", setp("topology.rate_mbit", math.nan), "topology.rate_mbit: nan"),
    ("rtt -inf", setp("topology.rtt_ms", -math.inf), "not a finite number"),
    ("loss rate nan", setp("topology.loss", {"mode": "random", "rate": math.nan}), "nan"),
    ("interval nan", setp("interval_s", math.nan), "interval_s: nan"),
    ("expectation nan", setp("expectations.0.value", math.nan), "expectations[0].value"),
    # bounds
    ("flow start huge", flows({"cc": "cubic", "start_s": 1e9}), "flows"),
    ("flow duration huge", flows({"cc": "cubic", "duration_s": 1e9}), "flows"),
    ("pairs 0", setp("topology.pairs", 0), "pairs"),
    ("flows 61", setp("scenarios.two-flows-48.flows", 61), "flows"),
    ("loss rate 1.5", setp("topology.loss", {"mode": "random", "rate": 1.5}), "rate"),
    (
        "both queue limits",
        setp("scenarios.two-flows-48.topology.queue", {"limit_pkts": 5, "limit_bdp": 1}),
        "queue",
    ),
    ("queue kind cake", setp("scenarios.two-flows-48.topology.queue", {"kind": "cake"}), "kind"),
    ("pair beyond pairs", flows({"pair": 3, "cc": "cubic"}), "pair: 3 is not in 1..2"),
    ("scenario duration 1e9", setp("scenarios.two-flows-48.duration_s", 1e9), "duration_s"),
    # CC names
    ("flow cc pattern", flows({"cc": "cubic; reboot"}), "flows"),
    ("variant cc empty", setp("variants.0.cc", ""), "variants.0.cc"),
    # Python's `$` matches before a final newline: patterns are anchored at the true end
    ("variant cc newline", setp("variants.0.cc", "cubic\n"), "does not match"),
    ("label newline", setp("variants.0.label", "cubic\n"), "does not match"),
    ("report_name newline", setp("report_name", "r\n"), "does not match"),
    # names no kernel has (htcp and vegas are loadable modules on stock distro kernels)
    ("flow cc not in kernel", flows({"cc": "ccbnone"}), "no TCP congestion control 'ccbnone'"),
    ("variant cc not in kernel", setp("variants.1.cc", "ccbnone2"), "(it has: "),
    ("stack on linux", setp("variants.1.stack", "rack"), "stack 'rack' is a FreeBSD setting"),
    (
        "freebsd on local",
        setp("variants.1", {"label": "f", "cc": "cubic", "os": "freebsd"}),
        "needs testbed.kind ssh",
    ),
    ("freebsd cc unknown", ssh(cc="bogus"), "unknown FreeBSD congestion control 'bogus'"),
    ("freebsd stack unknown", ssh(cc="cubic", stack="fast"), "unknown FreeBSD TCP stack 'fast'"),
    (
        "freebsd flow cc unknown",
        lambda c, d: (ssh(cc="cubic")(c, d), flows({"cc": "westwood"})(c, d)),
        "unknown FreeBSD congestion control 'westwood'",
    ),
    # the SSH testbed's inventory, at validation
    ("ssh without inventory", setp("testbed", {"kind": "ssh"}), "needs a hosts inventory"),
    (
        "ssh inventory missing",
        setp("testbed", {"kind": "ssh", "inventory": "/nonexistent.yaml"}),
        "no such inventory",
    ),
    (
        "ssh inventory garbage",
        lambda c, d: (
            (d / "inv.yaml").write_text("ssh: [\n"),
            setp("testbed", {"kind": "ssh", "inventory": str(d / "inv.yaml")})(c, d),
        ),
        "not valid YAML",
    ),
    ("ssh inventory too small", ssh(pairs=1), "has 1 sender/receiver pairs"),
    (
        "ssh more dumbbells than pinned",
        lambda c, d: (ssh()(c, d), setp("variants.1.dumbbell", 2)(c, d)),
        "dumbbell",
    ),
    # paths and names
    ("results_dir ..", setp("results_dir", "../elsewhere"), "may not contain '..'"),
    ("results_dir inner ..", setp("results_dir", "a/../../b"), "may not contain '..'"),
    ("results_dir absolute", setp("results_dir", "/etc"), "results_dir"),
    ("report_name path", setp("report_name", "../x"), "report_name"),
    ("scenario name", setp("scenarios.Bad Name", {"flows": 1}), "scenarios"),
    ("testbed id in matrix", setp("testbed", {"id": "../.."}), "testbed"),
    ("variant label dup", setp("variants.1.label", "cubic"), "labels must be unique"),
    ("two baselines", setp("variants.1.baseline", True), "more than one baseline"),
    ("expectation unknown variant", setp("expectations.2.than", "nope"), "no variant 'nope'"),
    ("unknown key", setp("repetitons", 3), "Additional properties"),
    # the file itself
    ("duplicate key", "repetitions: 1\nrepetitions: 50\n", "duplicate key 'repetitions'"),
    ("not utf-8", b"title: caf\xe9\n", "not UTF-8"),
    ("binary", b"\x00\x01\x02scenarios", "binary"),
    ("alias bomb", BOMB, "alias bomb"),
    ("recursive alias", "a: &a [*a]\n", "a value that contains itself"),
    ("nested 70 deep", "x: " + "[" * 70 + "]" * 70 + "\n", "nested more than 64 levels"),
    ("nested 5000 deep", "x: " + "[" * 5000 + "]" * 5000 + "\n", "nested more than 64 levels"),
    ("too large", "title: " + "x" * 1_000_001 + "\n", "a config may have at most"),
    ("a list", "- 1\n- 2\n", "top level must be a mapping"),
    ("empty file", "", "'scenarios' is a required property"),
    ("empty mapping", "{}\n", "'scenarios' is a required property"),
    ("yaml syntax", "scenarios: {a: [\n", "not valid YAML"),
]

ACCEPTED: list[tuple[str, Mutation | str, str]] = [
    # (case, config, why it is right to accept it)
    ("default", lambda c, d: None, "the shipped default"),
    (
        "anchors",
        "topology: &t {pairs: 2}\nscenarios: {a: {flows: 1, topology: *t}}\n"
        "variants: [{label: x, cc: cubic}]\n",
        "a few aliases are ordinary YAML",
    ),
    ("flow cc variant", flows({"cc": "variant"}, {"cc": "reno"}), "'variant' is the default CC"),
    ("freebsd reno on ssh", ssh(cc="reno", stack="rack"), "reno is FreeBSD's newreno"),
    ("freebsd bbr stack", ssh(cc="bbr"), "cc bbr selects FreeBSD's bbr stack"),
    ("results_dir dotted", setp("results_dir", "results.v2/run-1"), "dots inside names are fine"),
]


def _write(tmp: Path, case: Mutation | str | bytes) -> Path:
    p = tmp / "config.yaml"
    if isinstance(case, bytes):
        p.write_bytes(case)
    elif isinstance(case, str):
        p.write_text(case)
    else:
        cfg = copy.deepcopy(BASE)
        case(cfg, tmp)
        # PyYAML writes .nan/.inf, which the loader reads back as floats
        p.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return p


def _matrix(p: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = main(["matrix", "--json", "--config", str(p)])  # the workflow's: hosts too
    return rc, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("name,case,says", REFUSED, ids=[c[0] for c in REFUSED])
def test_bad_config_is_one_clear_line(
    name: str,
    case: Mutation | str | bytes,
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, err = _matrix(_write(tmp_path, case), capsys)
    assert rc == 2, err
    assert len(err) == 1, err
    assert err[0].startswith("ccbench: error: ") and says in err[0], err[0]


@pytest.mark.parametrize("name,case,why", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_odd_but_right_config_is_accepted(
    name: str,
    case: Mutation | str,
    why: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rc, err = _matrix(_write(tmp_path, case), capsys)
    assert rc == 0, (why, err)


def test_counts() -> None:
    """The issue asks for at least 40 malformed configs of every kind."""
    assert len(REFUSED) >= 40


# --- property: random mutations of valid configs ------------------------------------

VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.integers(0, 5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_mutated_configs_expand_or_are_refused_in_one_line(
    data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    from ccbench import matrix
    from ccbench.errors import CcbenchError

    cfg = copy.deepcopy(BASE)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(cfg)
        path = data.draw(st.sampled_from(paths))
        node: Any = cfg
        for k in path[:-1]:
            node = node[k]
        if data.draw(st.booleans()) and isinstance(node, dict):
            del node[path[-1]]
        else:
            node[path[-1]] = data.draw(VALUES)
    try:
        m = matrix.load(cfg, "fuzz")
    except CcbenchError as e:
        line = str(e)
        assert "\n" not in line and line.startswith("fuzz"), line
        return
    # accepted: a real matrix whose numbers are all finite and whose ids are unique
    assert m.runs and len(m.order) == len(m.runs)
    for r in m.runs.values():
        for f in r.flows:
            assert isinstance(f.streams, int) and math.isfinite(f.duration_s)


MATRIX_SCHEMA = config_schema("matrix")  # with its registry lists filled in
# What a hand-edited YAML file gets wrong: a line lost or doubled, a stray character.
TEXT_EDITS = st.sampled_from(["drop line", "double line", "insert", "none"])


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much, HealthCheck.data_too_large],
)  # fmt: skip
@given(data=st.data())
def test_configs_drawn_from_the_schema_expand_or_exit_2_in_one_line(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """Configs drawn from the matrix schema itself (schema_strategy), whole or a few
    top-level keys of the default comparison, then edited as text, through the real
    CLI: `ccbench matrix` lists runs (exit 0) or says one line (exit 2), never a
    traceback."""
    if data.draw(st.booleans()):  # a whole config drawn from the schema
        cfg = data.draw(from_schema(MATRIX_SCHEMA))
    else:  # the default comparison with some of its top-level keys drawn from the schema
        cfg = copy.deepcopy(BASE)
        props = MATRIX_SCHEMA["properties"]
        for key in data.draw(st.lists(st.sampled_from(sorted(props)), min_size=1, max_size=3)):
            cfg[key] = data.draw(from_schema(props[key], MATRIX_SCHEMA))
    lines = yaml.safe_dump(cfg, allow_unicode=True).splitlines()
    edit = data.draw(TEXT_EDITS)
    if edit != "none" and lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        if edit == "drop line":
            del lines[i]
        elif edit == "double line":
            lines.insert(i, lines[i])
        else:
            col = data.draw(st.integers(0, len(lines[i])))
            ch = data.draw(st.sampled_from([":", "-", "&a", "*a", "[", "{", "'", "\t", "!!"]))
            lines[i] = lines[i][:col] + ch + lines[i][col:]
    p = tmp_path_factory.mktemp("gen") / "cfg.yaml"
    p.write_text("\n".join(lines) + "\n")
    rc = main(["matrix", "--config", str(p)])
    out, err = capsys.readouterr()
    event(f"exit {rc}")  # pytest --hypothesis-show-statistics shows how many of each
    assert rc in (0, 2), err
    if rc == 2:
        assert len(err.splitlines()) == 1 and err.startswith("ccbench: error: "), err
    else:
        assert out.strip() and not err.strip(), err


# --- the same line through snakemake ----------------------------------------------------

THROUGH_SNAKEMAKE = ["duplicate key", "flows float", "duration nan", "stack on linux",
                     "results_dir ..", "ssh without inventory", "flow cc not in kernel",
                     "empty mapping"]  # fmt: skip


def _snakemake(cfg: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"),
         "--directory", str(workdir), "--cores", "1", "--dry-run", "--configfile", str(cfg)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
    )  # fmt: skip


@pytest.mark.parametrize("name", THROUGH_SNAKEMAKE)
def test_snakemake_prints_the_same_line_first(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = next(c for n, c, _ in REFUSED if n == name)
    cfg = _write(tmp_path, case)
    _, line = _matrix(cfg, capsys)
    cp = _snakemake(cfg, tmp_path)
    assert cp.returncode != 0
    ours = [x for x in cp.stderr.splitlines() if x.startswith("ccbench: ")]
    assert ours == line, cp.stderr[-2000:]
    assert "Traceback" not in cp.stderr


def test_snakemake_takes_a_config_larger_than_one_argument(tmp_path: Path) -> None:
    """The config reaches `ccbench matrix` on stdin: 300 KB would exceed the 128 KiB
    limit of one command-line argument."""
    cfg = copy.deepcopy(BASE)
    cfg["question"] = "why? " * 60_000
    p = tmp_path / "big.yaml"
    p.write_text(yaml.safe_dump(cfg))
    cp = _snakemake(p, tmp_path)
    assert cp.returncode == 0, cp.stderr[-2000:]


def test_matrix_into_head_ends_quietly(tmp_path: Path) -> None:
    """`ccbench matrix --json ... | head -1`: no BrokenPipeError traceback (100
    repetitions: far more JSON than a pipe holds)."""
    cfg = tmp_path / "big.yaml"
    cfg.write_text(yaml.safe_dump({**BASE, "repetitions": 100}))
    p = subprocess.Popen(
        [sys.executable, "-m", "ccbench.cli", "matrix", "--json", "--config", str(cfg)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
    )  # fmt: skip
    assert p.stdout is not None and p.stderr is not None
    assert p.stdout.readline().strip() == b"{"
    p.stdout.close()  # as head does after its line
    err = p.stderr.read().decode()
    p.wait(timeout=60)
    assert err == "", err
