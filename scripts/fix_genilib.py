#!/usr/bin/env python3
"""Make PyPI's geni-lib 0.9.9.4 usable on Python 3 (idempotent).

Every geni-lib release on PyPI ships a Python-2-only ``geni/portal.py`` (print
statements, ``raw_input``), and ``Request.writeXML`` writes bytes to a text
stream, so ``python profile.py`` cannot print its RSpec. Upstream fixed this but
never published the fix to PyPI. This script makes the few exact replacements:

* ``geni/portal.py``: the three print statements and ``raw_input(`` -> ``input(``;
* ``geni/rspec/pg.py``: ``toXMLString(True)`` -> ``toXMLString(True, True)`` in
  ``Request.writeXML`` (ask for a str, not bytes).

Every file is checked against the sha256 of the released original and of the
fixed result: a fixed file is skipped, an original one is patched (all files are
checked before any is written), anything else is refused with one line and exit
status 1. Set-up runs::

    pip install geni-lib==0.9.9.4 six lxml && python scripts/fix_genilib.py

Options: ``--check`` only reports (exit 1 if a file still needs fixing);
``--path DIR`` works on a copy of the ``geni`` package directory (for tests).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import os
import sys
import tempfile
from pathlib import Path

VERSION = "0.9.9.4"

# path inside the geni package -> sha256 of the 0.9.9.4 original and of the fixed
# file, and the exact (old, new, expected count) replacements between them.
FIXES: dict[str, dict] = {
    "portal.py": {
        "original": "370b9620ac11b3bb4d01d20f5ec6c6808b049074deeed5377699ad73fba57aab",
        "fixed": "b6fb0d2fe3476dc88b84e1395a0527ae7a3f9afd13d65939cb42249cac31a98e",
        "replacements": [
            ("raw_input(", "input(", 1),
            ("print param.longDescription\n", "print(param.longDescription)\n", 1),
            (
                'print "No help available for this parameter"\n',
                'print("No help available for this parameter")\n',
                1,
            ),
            (
                "print \"ERROR: Could not coerce '%s' to '%s'\" % (val, opts['type'])\n",
                "print(\"ERROR: Could not coerce '%s' to '%s'\" % (val, opts['type']))\n",
                1,
            ),
            (
                "print \"ERROR: Illegal value '%s'\" % (val,),[name]\n",
                "print(\"ERROR: Illegal value '%s'\" % (val,), [name])\n",
                1,
            ),
        ],
    },
    "rspec/pg.py": {
        "original": "1193d4870d4fc0e018af86f0f1b3f87f12f33f0414163c6311f82ec8039cc5fe",
        "fixed": "de5848c4035350fc4d664e71ab47f9e85b445bb8d506fd2d1960ff54de749165",
        "replacements": [
            ("    buf = self.toXMLString(True)\n", "    buf = self.toXMLString(True, True)\n", 1),
        ],
    },
}


class FixError(Exception):
    """A condition the fix-up refuses to continue from (one line for the user)."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def apply_replacements(text: str, replacements) -> str:
    for old, new, count in replacements:
        found = text.count(old)
        if found != count:
            raise FixError(f"expected {count} occurrence(s) of {old.strip()!r}, found {found}")
        text = text.replace(old, new)
    return text


def locate_package() -> Path:
    """The installed ``geni`` package directory (without importing it)."""
    spec = importlib.util.find_spec("geni")
    if spec is None or not spec.submodule_search_locations:
        raise FixError(
            "geni-lib is not installed in this Python "
            f"({sys.executable}); run: pip install geni-lib=={VERSION} six lxml"
        )
    try:
        version = importlib.metadata.version("geni-lib")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version is not None and version != VERSION:
        raise FixError(f"installed geni-lib is {version}; this fix-up knows only {VERSION}")
    return Path(list(spec.submodule_search_locations)[0])


def plan(package: Path) -> list[tuple[Path, str | None]]:
    """Check every file first: [(path, new text or None if already fixed)]."""
    out = []
    for rel, fix in FIXES.items():
        path = package / rel
        if not path.is_file():
            raise FixError(f"{path}: missing (is this geni-lib {VERSION}?)")
        data = path.read_bytes()
        digest = sha256(data)
        if digest == fix["fixed"]:
            out.append((path, None))
            continue
        if digest != fix["original"]:
            raise FixError(
                f"{path}: unknown sha256 {digest}; not the geni-lib {VERSION} file, refusing"
            )
        new = apply_replacements(data.decode("utf-8"), fix["replacements"])
        new_digest = sha256(new.encode("utf-8"))
        if new_digest != fix["fixed"]:
            raise FixError(f"{path}: fixed text has sha256 {new_digest}, expected {fix['fixed']}")
        compile(new, str(path), "exec")  # the fixed file must be valid Python 3
        out.append((path, new))
    return out


def write_atomic(path: Path, text: str) -> None:
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    # drop the stale byte code so Python recompiles the fixed source
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="report only; exit 1 if not fixed")
    ap.add_argument("--path", type=Path, help="the geni package directory (default: installed)")
    args = ap.parse_args(argv)
    try:
        package = args.path if args.path else locate_package()
        todo = plan(package)
    except FixError as e:
        print(f"fix_genilib: {e}", file=sys.stderr)
        return 1
    pending = [p for p, new in todo if new is not None]
    if args.check:
        for path, new in todo:
            print(f"fix_genilib: {path}: {'needs fixing' if new is not None else 'fixed'}")
        return 1 if pending else 0
    for path, new in todo:
        if new is None:
            print(f"fix_genilib: {path}: already fixed")
        else:
            write_atomic(path, new)
            print(f"fix_genilib: {path}: fixed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
