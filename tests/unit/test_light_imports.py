"""What every workflow job and testbed command loads stays light: the run, the matrix,
the testbeds and the CLI import no columnar or plotting library (pyarrow and numpy
alone took about 0.9 s of each `ccbench run`, `testbed up` and Snakemake start); the
parsers import them where they make a table."""

from __future__ import annotations

import subprocess
import sys

LIGHT = ["ccbench.cli", "ccbench.matrix", "ccbench.run", "ccbench.testbed.local",
         "ccbench.testbed.remote", "ccbench.testbed.lab", "ccbench.instruments"]  # fmt: skip
HEAVY = ["pyarrow", "pandas", "numpy", "matplotlib", "weasyprint"]


def test_the_run_path_imports_no_heavy_library() -> None:
    code = (
        f"import importlib, sys\nfor m in {LIGHT!r}: importlib.import_module(m)\n"
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert cp.stdout.strip() == "", f"imported on the run path: {cp.stdout.strip()}"
