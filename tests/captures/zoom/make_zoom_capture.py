"""Trim a real traced run to the rows of its first seconds, for tests/unit/test_report_zoom.py.

Usage: make_zoom_capture.py RUN_DIR T_END OUT_DIR
Copies RUN_DIR/summary.json unchanged and writes the rows of RUN_DIR/timeseries.parquet
with t_s <= T_END (every source, every column, values unchanged) to
OUT_DIR/timeseries.parquet in row groups of 2000 rows, so a window's read can skip groups.
"""

import shutil
import sys
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

run, t_end, out = Path(sys.argv[1]), float(sys.argv[2]), Path(sys.argv[3])
out.mkdir(parents=True, exist_ok=True)
shutil.copy(run / "summary.json", out / "summary.json")
tab = pq.read_table(run / "timeseries.parquet")
tab = tab.filter(pc.less_equal(tab.column("t_s"), t_end))
pq.write_table(tab, out / "timeseries.parquet", row_group_size=2000, compression="zstd")
print(out, tab.num_rows, "rows")
