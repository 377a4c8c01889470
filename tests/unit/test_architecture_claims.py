"""docs/architecture.md's checkable claims against the code, read statically (source
files, their syntax trees, the registries): what tests/unit/test_docs.py (layers, cycles,
the module table, the 500-line cap, `kind ==`) and tests/unit/test_raw_names.py (raw/
names and their table) do not already check."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from ccbench import config, instruments, layout, probes, spec
from ccbench.instruments.base import BeforeAfter, Cost, Instrument, SummaryPart
from ccbench.probes.base import ProbeTool
from ccbench.testbed import kinds

REPO = Path(__file__).resolve().parents[2]
PKG = REPO / "src" / "ccbench"
ARCH = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
STDLIB = sys.stdlib_module_names


FLAT = " ".join(ARCH.split())


def section(start: str, end: str, text: str = FLAT) -> str:
    """The page's text from `start` up to `end` (whitespace runs as one space, unless
    `text` is the page as written)."""
    i = text.index(start)
    return text[i : text.index(end, i)]


def ticked(text: str) -> list[str]:
    """The `code` spans of `text`, whitespace runs as one space."""
    return [" ".join(t.split()) for t in re.findall(r"`([^`]+)`", text)]


def sources() -> dict[str, ast.Module]:
    """Each module of the package (dotted name below ccbench) -> its syntax tree."""
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = p.relative_to(PKG).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(p.read_text(encoding="utf-8"))
    return out


SOURCES = sources()


def imported(tree: ast.Module) -> set[str]:
    """Every module `tree` imports (absolute names), anywhere in it."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            out |= {a.name for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and not n.level:
            out |= {n.module, *(f"{n.module}.{a.name}" for a in n.names)}
    return out


def dotted(node: ast.AST) -> str:
    """`a.b.c` of a name or attribute chain ('' for anything else)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


# --- The repository ------------------------------------------------------------------


def test_the_repository_listing_names_what_is_there() -> None:
    """Each line's path, and every file it names with an extension, exists (a name
    without a directory is looked for where the line's path is)."""
    block = section("## The repository", "## Layers", ARCH).split("```")[1]
    missing = []
    head = ""
    for line in block.strip().splitlines():
        first, _, rest = line.partition("  ")
        head = first or head  # a line going on from the one before has no path
        for path in head.replace(",", " ").split():
            if not (REPO / path).exists():
                missing.append(path)
        base = REPO / head.split(",")[0].strip() if head.strip().endswith("/") else REPO
        for name in re.findall(r"\b[\w-]+\.(?:py|sh|md|yaml)\b", rest):
            if not any(p.exists() for p in (base / name, REPO / name, base / "config" / name)):
                missing.append(f"{head.strip()} {name}")
    assert missing == []
    results = [p for p in (REPO / "tests" / "fixtures").iterdir() if p.is_dir()]
    assert len(results) == 2, results  # "two small results sets"


def test_the_profile_is_self_contained() -> None:
    """profile.py imports nothing of the repository: the portal runs it alone."""
    tree = ast.parse((REPO / "profile.py").read_text(encoding="utf-8"))
    local = {p.stem for p in REPO.glob("*.py")} | {p.name for p in REPO.iterdir() if p.is_dir()}
    mine = {m for m in imported(tree) if m.split(".")[0] in local | {"ccbench"}}
    assert mine == set()


def test_rules_call_the_ccbench_cli() -> None:
    """Every rule's `shell:` command is a `ccbench` subcommand, and a rule of its own
    parses raw/ into summary.json (`ccbench parse`), apart from the run."""
    commands = []
    for smk in [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]:
        lines = smk.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() == "shell:":
                body = [x.strip() for x in lines[i + 1 :] if not x.strip().startswith("#")]
                commands.append((smk.name, body[0]))
    assert commands
    assert [c for c in commands if not c[1].startswith('"ccbench ')] == []
    assert any(c[1].startswith('"ccbench parse ') for c in commands)


# --- Layers --------------------------------------------------------------------------


def test_which_package_inits_import_their_modules() -> None:
    """The page names the packages whose `__init__` imports their own modules; the
    testbed package's `__init__` is a docstring only."""
    said = section("which is why that one is empty", "What the layers are")
    named = set(ticked(said)) - {"__init__"}
    pkgs = {m for m in SOURCES if (PKG / m.replace(".", "/") / "__init__.py").is_file() and m}
    own = {p for p in pkgs if any(i.startswith(f"ccbench.{p}.") for i in imported(SOURCES[p]))}
    assert own == named
    body = SOURCES["testbed"].body
    assert len(body) == 1 and isinstance(body[0], ast.Expr)  # its docstring


def test_descriptions_are_frozen_and_the_run_id_hashes_the_spec() -> None:
    for cls in (spec.Topology, spec.Flow, spec.Variant, spec.RunSpec):
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]
    run_id = inspect.getsource(spec.RunSpec.run_id.fget)  # type: ignore[attr-defined]
    assert "to_dict()" in run_id


def test_testbed_kinds_name_their_implementations() -> None:
    """Each kind names its class and remover as "module:name" (each resolves), and the
    registry imports none of those modules: it stays in the lowest layer."""
    impl = set()
    for k in kinds.REGISTRY.values():
        for ref in (k.testbed_class, k.remover):
            assert isinstance(ref, str) and re.fullmatch(r"[\w.]+:\w+", ref), ref
            module, name = ref.split(":")
            assert hasattr(importlib.import_module(module), name), ref
            impl.add(module)
    assert not imported(SOURCES["testbed.kinds"]) & impl


# --- The modules ---------------------------------------------------------------------


def test_the_package_version_comes_from_the_metadata() -> None:
    assert "importlib.metadata.version" in imported(SOURCES[""])


def test_light_modules_import_only_the_standard_library() -> None:
    """`errors` and `privileges` (the root check runs first) and `upgrade` ("standard
    library only") import nothing heavy: the standard library, and ccbench.errors."""
    for m in ("errors", "privileges", "upgrade"):
        heavy = {i for i in imported(SOURCES[m]) if i.split(".")[0] not in STDLIB}
        assert heavy <= {"ccbench.errors", "ccbench.errors.CcbenchError"}, (m, heavy)


def _json_writes(tree: ast.Module) -> list[int]:
    """Lines that write JSON: json.dump to anything but stdout, or json.dumps handed to
    a write (write, write_text, writelines, print to a file)."""
    lines = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Call):
            continue
        f = dotted(n.func)
        if f == "json.dump" and not (len(n.args) > 1 and dotted(n.args[1]) == "sys.stdout"):
            lines.append(n.lineno)
        elif f.rsplit(".", 1)[-1] in ("write", "write_text", "writelines"):
            inner = [c for a in n.args for c in ast.walk(a) if isinstance(c, ast.Call)]
            lines += [c.lineno for c in inner if dotted(c.func) == "json.dumps"]
    return lines


def test_jsonio_is_the_one_writer_of_json_files() -> None:
    found = {m: lines for m, t in SOURCES.items() if m != "jsonio" and (lines := _json_writes(t))}
    assert found == {}
    probe = ast.parse('fh.write(json.dumps(x) + "\\n")\njson.dump(x, fh)\njson.dump(x, sys.stdout)')
    assert _json_writes(probe) == [1, 2]  # the scan sees both forms


COMPAT = re.compile(r"upgrade|^OLD_|_ADDED$|_RENAMED$")


def test_compatibility_steps_are_where_the_page_says() -> None:
    """Functions named for an upgrade and tables of old or added keys are only in the
    modules the page names (upgrade, spec, runmeta, config), and the names it gives
    exist."""
    where = set()
    for m, tree in SOURCES.items():
        for n in tree.body:
            names = [n.name] if isinstance(n, ast.FunctionDef) else []
            if isinstance(n, ast.Assign | ast.AnnAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            if any(COMPAT.search(x) for x in names):
                where.add(m)
    assert where == {"upgrade", "spec", "runmeta", "config"}
    import ccbench.runmeta

    for mod, name in ((spec, "FIELDS_ADDED"), (spec, "OLD_RECORD_KEYS"),
                      (ccbench.runmeta, "upgrade"), (config, "OLD_KEYS")):  # fmt: skip
        assert hasattr(mod, name), name


def test_results_are_read_through_upgrade() -> None:
    """matrix.json (model), summary.json and timeseries.parquet (record_load; the
    report's thinned series) and the report's tables (report.data) pass upgrade's step."""
    calls = {m: {dotted(n.func) for n in ast.walk(t) if isinstance(n, ast.Call)}
             for m, t in SOURCES.items()}  # fmt: skip
    assert "upgrade.matrix" in calls["model"]
    assert {"upgrade.summary", "upgrade.timeseries"} <= calls["record_load"]
    assert "upgrade.timeseries" in calls["report.thinned"]
    assert {"upgrade.runs_table", "upgrade.summary_table"} <= calls["report.data"]
    readers = {m for m, c in calls.items() if "pd.read_csv" in c}
    assert readers == {"report.data", "workflow_cli"}  # the page names both


# --- On-disk layout ------------------------------------------------------------------


def test_the_run_directory_is_layouts() -> None:
    block = section("results/runs/<run id>/", "`raw/`:", ARCH)
    names = [line.split()[0] for line in block.splitlines()[1:] if line.strip()]
    run = layout.RunDir(Path("x"))
    assert names[:6] == [
        f"{layout.RAW}/",
        f"{run.raw_tmp(0).name.removesuffix('0')}<pid>/",
        layout.ATTEMPTS,
        f"{layout.INVALID_ATTEMPTS}/N/",
        layout.SUMMARY,
        layout.TIMESERIES,
    ]
    assert "`.gz`, `.xz`, `.zst`" in ARCH and layout.COMPRESSED == (".gz", ".xz", ".zst")
    assert layout.stderr_of("iperf3-1.json") == "iperf3-1.err"


def test_meta_json_is_read_only_through_runmeta() -> None:
    """No call outside runmeta is handed layout.META but a reason naming the file
    (timeseries names it in a message's prefix)."""
    handed = sorted(
        f"{m}:{n.lineno}"
        for m, t in SOURCES.items() if m not in ("runmeta", "layout")
        for n in ast.walk(t) if isinstance(n, ast.Call)
        if any(dotted(a) in ("layout.META", "META") for a in n.args)
        and not dotted(n.func).endswith(".problem")  # a reason naming the file
    )  # fmt: skip
    assert handed == []


# --- Adding a testbed kind, an instrument, a probe tool --------------------------------


def test_the_kind_recipe_names_real_capabilities() -> None:
    said = section("its `Capabilities` (", ", `testbed_class`")
    caps = {f.name for f in dataclasses.fields(kinds.Capabilities)}
    named = {t for t in ticked(said) if re.fullmatch(r"[a-z_]+", t)}
    assert named == caps  # every capability, and only those
    for attr in ("name", "description", "testbed_class", "remover"):
        assert hasattr(kinds.TestbedKind, attr) or attr in kinds.TestbedKind.__annotations__


def _schema_testbed(name: str) -> dict[str, Any]:
    sch = config.schema(name)
    node = sch["properties"]["testbed"]
    ref = node.get("$ref", "")
    return sch["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


def test_the_default_kind_and_the_hand_written_delay_list() -> None:
    """The default kind is kinds.DEFAULT and both schemas' default; the schemas'
    `testbed.delay` list is the one the page says is written by hand."""
    assert kinds.DEFAULT == "local"
    for name in ("matrix", "run"):
        tb = _schema_testbed(name)["properties"]
        assert tb["kind"]["default"] == kinds.DEFAULT, name
        assert tb["delay"]["enum"] == ["auto", "netem", "ccdelay"], name
    assert "(`auto`, `netem`, `ccdelay`)" in ARCH


def test_the_instrument_recipe_names_real_attributes() -> None:
    """Every name step 1 gives an instrument (`start`, `raw_files`, `summary_part(...)`)
    is an attribute of Instrument or BeforeAfter; the others it names are a SummaryPart
    field, a ccbench module, a registered instrument or a parameter of a method named."""
    said = section("1. **`src/ccbench/instruments/<name>.py`**", "2. **`src/ccbench/parse/")
    names = {
        re.split(r"[ (]", t)[0]
        for t in ticked(said)
        if re.fullmatch(r"[a-z_0-9]+(\(.*\)| = .*)?", t)
    }
    params = {p for a in vars(Instrument).values() if callable(a)
              for p in inspect.signature(a).parameters}  # fmt: skip
    fields = {f.name for f in dataclasses.fields(SummaryPart)}
    modules = {m.split(".")[0] for m in SOURCES}
    declared = set(dir(BeforeAfter)) | set(Instrument.__annotations__)
    other = names - declared
    assert other - fields - modules - set(instruments.REGISTRY) - params == {"down"}  # the command
    assert {"raw_files", "summary_part", "for_run", "from_record"} <= names
    assert {"SNAPSHOT", "SAMPLED", "PER_PACKET"} <= {c.name for c in Cost}


def test_the_probe_recipe_names_real_attributes() -> None:
    for attr in ("name", "raw_file", "oses", "description", "plan", "read"):
        assert hasattr(ProbeTool, attr) or attr in ProbeTool.__annotations__, attr
    assert len(probes.REGISTRY) > 1
    setup = (REPO / "emulab" / "setup-linux-host.sh").read_text(encoding="utf-8")
    assert "for tool in irtt fping flent netperf" in setup
    assert "`for tool in irtt fping flent netperf`" in ARCH


# What the registry decides: a literal compared with one of these changes with it.
FROM_REGISTRY = {"REGISTRY", "for_run", "SENDER_SOURCES", "traced_twin", "traced_twin_names"}


def _lists_of_instruments(tree: ast.Module) -> list[int]:
    """Lines comparing (==) what the registry decides with a literal list, tuple or set
    of two or more instrument names, and messages listing the registry's instruments
    ("there are: a, b"): each a list to edit when an instrument is added."""
    names = set(instruments.REGISTRY)
    out = []
    for n in ast.walk(tree):
        if not (isinstance(n, ast.Compare) and any(isinstance(o, ast.Eq) for o in n.ops)):
            continue
        sides = (n.left, *n.comparators)
        used = {dotted(x).rsplit(".", 1)[-1] for s in sides for x in ast.walk(s)}
        for side in sides:
            items = side.elts if isinstance(side, ast.List | ast.Tuple | ast.Set) else []
            strs = [e.value for e in items if isinstance(e, ast.Constant)]
            if len(strs) >= 2 and set(strs) <= names and used & FROM_REGISTRY:
                out.append(n.lineno)
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            listed = re.search(r"there are: ([\w, ]+)", n.value)
            if listed and len(set(listed[1].split(", ")) & names) >= 2:
                out.append(n.lineno)
    return out


def test_the_instruments_test_derives_its_lists_from_the_registry() -> None:
    """So adding an instrument by the recipe needs no edit to it (the recipe says so)."""
    test = ast.parse((REPO / "tests" / "unit" / "test_instruments.py").read_text())
    assert _lists_of_instruments(test) == []
    probe = ast.parse(
        'assert for_run(t) == ["ss", "qdisc"]\nsays = "(there are: bblog, tcp_probe)"\n'
        'assert sorted(m.instruments) == ["ss", "qdisc"]'
    )
    assert _lists_of_instruments(probe) == [1, 2]
