"""What a parse runs on: the interpreter and its build, the columnar libraries and the
CPU, as a child `ccbench parse` sees them (same interpreter, same environment).

A parse's speed per byte depends on these and nothing else ccbench chooses: it reads
siftr logs with pyarrow's CSV reader and compute kernels (ccbench.parse.siftr_stream)
and keeps their rows as Arrow tables, builds the smaller sources' rows (ss, iperf3, the
queue) with pandas, writes the series with pyarrow's Parquet writer, and inflates .gz raw
files with the interpreter's zlib. bench/seed_scale.py prints this line
beside its timings, so two machines' numbers can be told apart by what they ran on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

# Run in the child: only the standard library and the libraries a parse imports.
_PROBE = """
import json, os, platform, sys, sysconfig, zlib
import numpy, pandas, pyarrow
flags = sysconfig.get_config_var("CONFIG_ARGS") or ""
cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")), platform.machine())
import ccbench
src = os.path.dirname(ccbench.__file__)
print(json.dumps({
    "python": platform.python_version(),
    "implementation": platform.python_implementation(),
    "executable": sys.executable,
    "pgo": "--enable-optimizations" in flags,
    "lto": "--with-lto" in flags,
    "bytecode_cached": os.path.isdir(os.path.join(src, "__pycache__")),
    "dont_write_bytecode": sys.dont_write_bytecode,
    "pyarrow": pyarrow.__version__,
    "arrow_simd": pyarrow.runtime_info().simd_level,
    "arrow_pool": pyarrow.default_memory_pool().backend_name,
    "pandas": pandas.__version__,
    "pandas_string": str(pandas.options.future.infer_string),
    "numpy": numpy.__version__,
    "zlib": zlib.ZLIB_RUNTIME_VERSION,
    "cpu": cpu,
    "cpus": os.cpu_count(),
}))
"""


def probe() -> dict[str, Any]:
    """The backends as a child interpreter (sys.executable) reports them."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         check=True, timeout=120)  # fmt: skip
    found: dict[str, Any] = json.loads(out.stdout)
    return found


def describe(b: dict[str, Any]) -> str:
    """One line: interpreter (build), libraries, CPU."""
    build = "+".join(name for name, on in (("PGO", b["pgo"]), ("LTO", b["lto"])) if on)
    cache = "cached" if b["bytecode_cached"] else "compiled at each start"
    return (
        f"{b['implementation']} {b['python']} ({b['executable']}; "
        f"{build or 'no PGO/LTO'}; ccbench bytecode {cache}), "
        f"pyarrow {b['pyarrow']} (SIMD {b['arrow_simd']}, {b['arrow_pool']}), "
        f"pandas {b['pandas']} (arrow strings: {b['pandas_string']}), numpy {b['numpy']}, "
        f"zlib {b['zlib']}; CPU {b['cpu']} x {b['cpus']}"
    )
