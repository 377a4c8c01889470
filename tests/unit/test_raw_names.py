"""Every raw-file name is written once, by its owner, and read and written through it.

A run's raw/ files are named in one place each: ccbench.layout (the run's own files and
the snapshots around its traffic), or the module of the instrument or probe tool whose
file it is (instruments/*.py, probes/*.py). This scans the package's source for string
literals that are a raw-file name and fails naming file:line for one outside its owner,
and for a name written twice. An f-string is read as a template (each {...} a
placeholder). A literal is a raw-file name when it has the form of an owner's name, the
owner's placeholders (and globs) matching anything: "drops-after.json" is
layout.drops(), "meta.json" layout.META. Docstrings, and strings that only mention a
name among other words (a message, a description), are prose, not names; the names of
the run directory around raw/ (summary.json, attempts.json, ...) are layout's too but not
raw files, and are left out.

docs/architecture.md's table of raw/, generated from the owners' declarations of their
names (layout.RAW_FILES, Instrument.raw_files, ProbeTool.raw_file), is checked against
the same names, both ways: a name written without a declaration, or a declaration of a
name no owner writes, fails.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from ccbench import layout

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "ccbench"
ARCH = REPO / "docs" / "architecture.md"

# A file name with an extension: what raw/ holds (a template may have placeholders or
# globs in it), or, with none, an owner's "word-{...}" template (bblog-NODE-NAME).
_EXT = r"\.(?:json|jsonl|txt|log|err|gz|xz|zst|pcapng|parquet)"
_FILE = re.compile(rf"[\w*{{}}][\w.*{{}}-]*{_EXT}")
_BARE = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*-\{\}[\w.*{}-]*")
# The run directory's and results directory's own files: named by layout, not in raw/.
NOT_RAW = {layout.SUMMARY, layout.TIMESERIES, layout.ATTEMPTS, layout.MATRIX,
           layout.CALIBRATION_FAILURES}  # fmt: skip


def is_owner(rel: str) -> bool:
    return rel == "layout.py" or rel.startswith(("instruments/", "probes/"))


def literals(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every string literal but docstrings; an f-string as a template
    with `{}` for each placeholder (its format specs are not literals of their own)."""
    tree = ast.parse(source)
    skip: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = n.body[0] if n.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        elif isinstance(n, ast.JoinedStr):
            skip.update(id(v) for v in n.values)
        elif isinstance(n, ast.FormattedValue) and n.format_spec is not None:
            skip.add(id(n.format_spec))
    for n in ast.walk(tree):
        if id(n) in skip:
            continue
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.lineno, n.value
        elif isinstance(n, ast.JoinedStr):
            yield n.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}"
                                    for v in n.values)  # fmt: skip


def pattern(template: str) -> re.Pattern[str]:
    """What a name template matches: its placeholders and globs any text."""
    return re.compile(re.escape(template).replace(r"\{\}", ".+").replace(r"\*", ".+"))


def owned(sources: dict[str, str]) -> dict[str, list[str]]:
    """Each raw-file name template its owners write -> where (file:line), from the
    sources (path relative to the package -> text)."""
    out: dict[str, list[str]] = {}
    for rel, text in sources.items():
        if not is_owner(rel):
            continue
        for line, s in literals(text):
            if (_FILE.fullmatch(s) or _BARE.fullmatch(s)) and s not in NOT_RAW:
                out.setdefault(s, []).append(f"{rel}:{line}")
    return out


def misplaced(sources: dict[str, str]) -> list[str]:
    """Every raw-file name written outside its owner or twice, as `file:line: text
    (owner: where)`."""
    names = owned(sources)
    pats = {t: pattern(t) for t in names}
    found = [f"{where[1]}: {t!r} is named twice (first at {where[0]})"
             for t, where in names.items() if len(where) > 1]  # fmt: skip
    for rel, text in sources.items():
        for line, s in literals(text):
            for t, p in pats.items():
                home = names[t][0]
                if not p.fullmatch(s) or home.split(":")[0] == rel:
                    continue
                found.append(f"{rel}:{line}: {s!r} is {t!r}, named at {home}")
    return sorted(found)


def package_sources() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def test_no_raw_file_name_outside_its_owner() -> None:
    assert misplaced(package_sources()) == []


def test_the_owners_name_the_raw_files_the_runs_write() -> None:
    """The scan sees what it is for: layout's names and the instruments' and probes'."""
    names = owned(package_sources())
    assert {"meta.json", "spec.json", "tc-{}.json", "iperf3-{}.json", "bblog-{}-{}",
            "interfaces-{}-{}.json", "tcp-probe-{}.txt", "probe-fping.txt",
            "probe.flent.gz"} <= set(names)  # fmt: skip
    assert not NOT_RAW & set(names)
    assert names["interfaces-{}-{}.json"][0].startswith("instruments/interfaces.py:")


def test_the_scan_flags_names_not_prose() -> None:
    sources = {
        "layout.py": 'META = "meta.json"\ndef tc(w):\n    return f"tc-{w}.json"\n',
        "probes/ping.py": 'RAW = "probe-ping.txt"\n',
        "summarize/x.py": (
            '"""Reads tc-before.json (a docstring: prose)."""\n'
            'a = rd.json("tc-before.json")\n'
            'b = f"{name}: not after tc-after.json"\n'  # a message mentioning one
            'c = "state.json"\n'  # not a raw file
            'd = rd.json(f"tc-{when}.json")\n'
            'e = "meta.json"\n'
            'f = f"{x:.1f}"\n'
        ),
        "instruments/y.py": 'g = "probe-ping.txt"\n',
    }
    assert misplaced(sources) == [
        "instruments/y.py:1: 'probe-ping.txt' is 'probe-ping.txt', named at probes/ping.py:1",
        "instruments/y.py:1: 'probe-ping.txt' is named twice (first at probes/ping.py:1)",
        "summarize/x.py:2: 'tc-before.json' is 'tc-{}.json', named at layout.py:3",
        "summarize/x.py:5: 'tc-{}.json' is 'tc-{}.json', named at layout.py:3",
        "summarize/x.py:6: 'meta.json' is 'meta.json', named at layout.py:1",
    ]
    sources["layout.py"] += 'OTHER = "meta.json"\n'
    assert "layout.py:4: 'meta.json' is named twice (first at layout.py:1)" in misplaced(sources)


# --- docs/architecture.md's raw/ table ---------------------------------------------


def documented() -> list[str]:
    """The names in the first column of the raw/ table (generated between its markers
    from the owners' declarations), each as a template: `{a,b}` expanded, an upper-case
    word (K, NODE, WHEN) a placeholder."""
    text = ARCH.read_text()
    begin = text.index("<!-- The raw/ table: generated")
    table = text[begin : text.index("<!-- End of the generated raw/ table. -->", begin)]
    out = []
    for row in table.splitlines()[5:]:  # after the marker's three lines and the head
        for name in re.findall(r"`([^`]+)`", row.split("|")[1]):
            alts = re.fullmatch(r"(.*)\{(\w+),(\w+)\}(.*)", name)
            expanded = [alts[1] + a + alts[4] for a in alts.group(2, 3)] if alts else [name]
            out += [re.sub(r"\b[A-Z]+\b", "{}", n) for n in expanded]
    return out


def test_the_docs_table_of_raw_is_the_owners_names() -> None:
    """Every name the raw/ table shows is one the owners write, and every file name
    they write (globs aside) is in the table."""
    names = [t for t in owned(package_sources()) if "*" not in t]
    docs = documented()
    assert docs, "no raw/ table found"
    unknown = [d for d in docs if not any(pattern(t).fullmatch(d) for t in names)]
    assert unknown == []
    missing = [t for t in names if not any(pattern(t).fullmatch(d) for d in docs)]
    assert missing == []
