"""The documentation against the code: the generated references are current, the README
is a front page whose links resolve and whose commands are the ones CI runs, and the
package keeps the shape the README and docs/architecture.md describe (its layers, no
import cycle, spec apart from the testbed modules, no module over 500 lines, no
testbed-kind comparison outside the registry, no role name written outside the modules
that define roles and layouts)."""

from __future__ import annotations

import ast
import importlib.util
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
PKG = SRC / "ccbench"
README = REPO / "README.md"
DOCS = REPO / "docs"
MAX_README_LINES = 150
MAX_MODULE_LINES = 500


def _gen_references() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_references", REPO / "scripts" / "gen_references.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


# --- (a) the generated references -----------------------------------------------------


def test_generated_references_are_current() -> None:
    gen = _gen_references()
    rendered = gen.render()
    assert set(rendered) == {DOCS / "config-reference.md", DOCS / "summary-reference.md",
                             DOCS / "architecture.md"}  # fmt: skip
    stale = [str(p.relative_to(REPO)) for p in gen.out_of_date(rendered)]
    assert not stale, (
        f"{', '.join(stale)} out of date with the config schemas / the run record / the "
        "declared raw/ names: "
        "run `.venv/bin/python scripts/gen_references.py` and commit the result"
    )


def test_config_reference_lists_every_registry_value() -> None:
    """The lists the schemas take from the registries reach the reference (the point of
    generating it): every testbed kind, probe tool and queue kind is named."""
    from ccbench import probes, queues
    from ccbench.testbed import kinds

    text = (DOCS / "config-reference.md").read_text()
    for name in (*kinds.NAMES, *probes.NAMES, *queues.NAMES):
        assert f"`{name}`" in text, name


# --- (b), (c), (g) the README as a front page ----------------------------------------

README_TEXT = README.read_text(encoding="utf-8")


def test_readme_is_short() -> None:
    n = len(README_TEXT.splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; at most {MAX_README_LINES}"


def _links(text: str) -> list[str]:
    """Targets of the markdown links and images in `text`, without #anchors."""
    return [m.group(1) for m in re.finditer(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)", text)]


def test_readme_docs_links_resolve() -> None:
    docs_links = [t for t in _links(README_TEXT) if t.startswith("docs/")]
    assert docs_links, "README.md links no guide in docs/"
    missing = [t for t in docs_links if not (REPO / t).is_file()]
    assert not missing, f"README.md links missing files: {', '.join(missing)}"


def test_readme_links_every_guide() -> None:
    guides = {f"docs/{p.name}" for p in DOCS.glob("*.md")}
    unlinked = guides - set(_links(README_TEXT))
    assert not unlinked, f"README.md's reading list misses: {', '.join(sorted(unlinked))}"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces
    to hyphens."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_docs_relative_links_resolve() -> None:
    """Links between the guides (and from the README) reach a file and, with #anchor,
    a heading of it."""
    bad = []
    for page in [README, *DOCS.glob("*.md")]:
        text = page.read_text(encoding="utf-8")
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)", text):
            if "://" in target:
                continue
            dest = (page.parent / target) if target else page
            if not dest.exists():
                bad.append(f"{page.name} -> {target}")
            elif anchor and anchor not in _anchors(dest):
                bad.append(f"{page.name} -> {target}#{anchor}")
    assert not bad, "broken links: " + "; ".join(bad)


QUICK_START = "## Quick start (Debian 12, as root; a root shell drops the `sudo`)"


def _code_block_after(heading: str) -> list[str]:
    """The lines of the first fenced code block after the README heading `heading`."""
    lines = README_TEXT.splitlines()
    start = lines.index(heading)
    opening = next(i for i in range(start, len(lines)) if lines[i].startswith("```"))
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].startswith("```"))
    return lines[opening + 1 : closing]


def _commands(lines: list[str]) -> list[list[str]]:
    """Each line's words, comments dropped; empty lines left out."""
    return [words for line in lines if (words := shlex.split(line, comments=True))]


def test_quick_start_commands_are_what_ci_runs() -> None:
    """The README's three commands: set-up and tests are .ci/run's own steps (run as
    root there, hence without sudo), the test command is test.sh, and the main job is
    the Snakefile's default target as its header names it."""
    quick = _commands(_code_block_after(QUICK_START))
    assert len(quick) == 3, quick
    assert all(c[0] == "sudo" for c in quick), quick
    setup, main, tests = (c[1:] for c in quick)
    assert setup == ["./setup.sh"] and tests == ["./test.sh"], quick
    ci = _commands((REPO / ".ci" / "run").read_text().splitlines())
    assert setup in ci and tests in ci and ci.index(setup) < ci.index(tests), ci
    for script in ("setup.sh", "test.sh"):
        assert (REPO / script).stat().st_mode & 0o111, f"{script} is not executable"
    assert "pytest" in (REPO / "test.sh").read_text()
    snakefile = (REPO / "Snakefile").read_text()
    assert f"`sudo {shlex.join(main)}`" in snakefile.splitlines()[1], "Snakefile header"
    target = main[-1]
    assert re.search(rf"^rule {target}:\n    default_target: True", snakefile, re.M)


# --- (d) layers and cycles ---------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _nodes(node: ast.AST, type_checking: bool = False) -> list[ast.AST]:
    """Every node below `node` (inside functions too) except `if TYPE_CHECKING:`
    bodies (their else branch counts), or with them (`type_checking`)."""
    out: list[ast.AST] = []
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child) and not type_checking:
            for c in child.orelse:
                out += [c, *_nodes(c)]
            continue
        out += [child, *_nodes(child, type_checking)]
    return out


def _imports(module: str, path: Path, type_checking: bool = False) -> list[tuple[str, int]]:
    """(imported ccbench module, line) of every import in `path`; `from pkg import x`
    is an import of pkg.x when that is a module, else of pkg. `type_checking`: those
    under `if TYPE_CHECKING:` too."""
    found = []
    is_pkg = path.name == "__init__.py"
    for n in _nodes(ast.parse(path.read_text(encoding="utf-8")), type_checking):
        if isinstance(n, ast.Import):
            found += [(a.name, n.lineno) for a in n.names if a.name.split(".")[0] == "ccbench"]
        elif isinstance(n, ast.ImportFrom):
            if n.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (n.level - 1)]
                target = ".".join(base + ([n.module] if n.module else []))
            else:
                target = n.module or ""
            if target.split(".")[0] != "ccbench":
                continue
            for a in n.names:
                sub = f"{target}.{a.name}"
                found.append((sub if sub in MODULES else target, n.lineno))
    return found


EDGES = [(m, target, line) for m, p in MODULES.items() for target, line in _imports(m, p)]


def _layers() -> tuple[dict[str, int], dict[str, int], dict[int, str]]:
    """(exact names, patterns 'x' of 'x.*', layer names) from the README's list."""
    block = _code_block_after("## Architecture")
    assert block and block[0].startswith("layers ("), block[:1]
    exact: dict[str, int] = {}
    patterns: dict[str, int] = {}
    names: dict[int, str] = {}
    for line in block[1:]:
        num, name, *mods = line.split()
        names[int(num)] = name.rstrip(":")
        for m in mods:
            if m.endswith(".*"):
                patterns[m[:-2]] = int(num)
            else:
                exact[m] = int(num)
    return exact, patterns, names


EXACT, PATTERNS, LAYER_NAMES = _layers()


def layer_of(module: str) -> int | None:
    """The README's layer of `module`: its exact name, else the longest pattern `x.*`
    covering it (x itself or below); the package `ccbench` is foundation."""
    name = module.removeprefix("ccbench").removeprefix(".")
    if not name:
        return 1
    if name in EXACT:
        return EXACT[name]
    covering = [p for p in PATTERNS if name == p or name.startswith(p + ".")]
    return PATTERNS[max(covering, key=len)] if covering else None


def test_every_module_has_a_layer() -> None:
    homeless = [m for m in MODULES if layer_of(m) is None]
    assert not homeless, f"in no layer of README.md's list: {', '.join(homeless)}"


def test_layer_list_names_only_real_modules() -> None:
    short = {m.removeprefix("ccbench.") for m in MODULES}
    ghosts = [n for n in EXACT if n not in short] + [p for p in PATTERNS if p not in short]
    assert not ghosts, f"README.md's layer list names no such module: {', '.join(ghosts)}"


def test_imports_respect_the_layers() -> None:
    bad = []
    for m, target, line in EDGES:
        lm, lt = layer_of(m), layer_of(target)
        if lm is not None and lt is not None and lt > lm:
            bad.append(f"{MODULES[m].relative_to(REPO)}:{line}: {m} ({lm} {LAYER_NAMES[lm]}) "
                       f"imports {target} ({lt} {LAYER_NAMES[lt]})")  # fmt: skip
    assert not bad, "imports from a later layer:\n" + "\n".join(bad)


def _loaded(module: str, target: str) -> list[str]:
    """What importing `target` from `module` runs: `target` and each package above it
    (Python imports a.b before a.b.c), except `module`'s own packages, which ran before
    `module` itself."""
    own = {module.rsplit(".", i)[0] for i in range(1, module.count(".") + 1)}
    parts = target.split(".")
    chain = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return [m for m in chain if m in MODULES and m not in own and m != module]


# Every import that runs: inside functions, under `if TYPE_CHECKING:` (a type checker
# follows it), and the packages Python imports first.
ALL_EDGES = [(m, loaded) for m, p in MODULES.items()
             for target, _ in _imports(m, p, type_checking=True)
             for loaded in _loaded(m, target)]  # fmt: skip


def _cycles(edges: list[tuple[str, str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m, target in edges:
        graph[m].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = {stack.pop()}
            while v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                out.append(group)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle() -> None:
    """No cycle, counting every import that runs or that a type checker follows (also
    in functions, and the parent packages Python imports first)."""
    cycles = [sorted(c) for c in _cycles(ALL_EDGES)]
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_cycle_check_counts_every_kind_of_import() -> None:
    """The edges the check sees include a type-only import, a function-local one, and
    a parent package (ccbench.testbed before ccbench.testbed.base)."""
    edges = set(ALL_EDGES)
    assert ("ccbench.instruments.base", "ccbench.timeseries_sink") in edges  # TYPE_CHECKING
    assert ("ccbench.summarize.run_metrics", "ccbench.instruments") in edges  # in a function
    assert ("ccbench.instruments.base", "ccbench.testbed") in edges  # a parent package
    assert _cycles([("ccbench.record", "ccbench.upgrade"), ("ccbench.upgrade", "ccbench.record")])


def test_spec_imports_no_testbed_module() -> None:
    """Testbed modules import spec, so spec reaches none of them, counting imports under
    `if TYPE_CHECKING:` and inside functions: no cycle between them of any kind."""
    reached, todo = set(), ["ccbench.spec"]
    while todo:
        m = todo.pop()
        for target, _ in _imports(m, MODULES[m], type_checking=True):
            if target in MODULES and target not in reached:
                reached.add(target)
                todo.append(target)
    testbeds = sorted(m for m in reached if m.startswith("ccbench.testbed"))
    assert not testbeds, f"ccbench.spec reaches {', '.join(testbeds)}"


def test_architecture_page_lists_every_module_in_its_layer() -> None:
    """docs/architecture.md's module table names every module with the README's layer,
    by name or by a pattern `x.*` (the modules below package x that no row names: an
    instrument added to instruments/ needs no row)."""
    listed: dict[str, int] = {}
    patterns: dict[str, int] = {}
    for line in (DOCS / "architecture.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].isdigit():
            for name in re.findall(r"`([a-z0-9_.]+)`", cells[0]):
                listed[name] = int(cells[1])
            for pkg in re.findall(r"`([a-z0-9_.]+)\.\*`", cells[0]):
                patterns[pkg] = int(cells[1])
    short = {m.removeprefix("ccbench.") or "ccbench": m for m in MODULES}
    for name in set(short) - set(listed):
        pkg = name.rsplit(".", 1)[0] if "." in name else None
        if pkg in patterns:
            listed[name] = patterns[pkg]
    assert not set(short) - set(listed), f"not in the table: {set(short) - set(listed)}"
    assert not set(listed) - set(short), f"no such module: {set(listed) - set(short)}"
    assert not set(patterns) - set(short), f"no such package: {set(patterns) - set(short)}"
    wrong = [n for n, m in short.items() if listed[n] != layer_of(m)]
    assert not wrong, f"layer differs from README.md's: {', '.join(wrong)}"


# --- (e), (f) the package's shape ----------------------------------------------------


def test_no_module_over_500_lines() -> None:
    lines = {str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines())
             for p in MODULES.values()}  # fmt: skip
    long = {name: n for name, n in lines.items() if n > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_no_kind_comparison_outside_the_registry() -> None:
    """`grep -rn 'kind ==' src` finds nothing outside testbed/kinds.py: what depends on
    the testbed kind asks its class's capabilities."""
    registry = PKG / "testbed" / "kinds.py"
    hits = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
            for p in sorted((REPO / "src").rglob("*"))
            if p.is_file() and p != registry and "__pycache__" not in p.parts
            for n, line in enumerate(p.read_text(errors="replace").splitlines(), start=1)
            if "kind ==" in line]  # fmt: skip
    assert not hits, "kind comparisons outside the registry:\n" + "\n".join(hits)


# Role names written as literals ("rt1", "dl", f"s{i}", ...): only the modules that
# define roles and layouts hold them; everything else asks ccbench.roles.
_ROLE = r"(rt1|rt2|dl|s\d+|r\d+)"
ROLE_LITERAL = re.compile("|".join((f'"{_ROLE}"', f"'{_ROLE}'", r"""f["'](s|r)\{""")))
ROLE_MODULES = {PKG / "roles.py", PKG / "topology.py"}


def test_no_role_literal_outside_the_roles_and_layouts() -> None:
    hits = [f"{p.relative_to(REPO)}:{n}: {line.strip()}"
            for p in sorted(PKG.rglob("*.py")) if p not in ROLE_MODULES
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
            if ROLE_LITERAL.search(line)]  # fmt: skip
    assert not hits, "role names outside ccbench.roles and ccbench.topology:\n" + "\n".join(hits)
