"""`ccbench run` keeps what it judged; the workflow's `parse` moves it into place instead
of judging the same raw files again, but only while they, the attempts and ccbench's
code are what the verdict was made from."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ccbench.summarize import judge as judge_mod

RUN = (Path(__file__).resolve().parents[1] / "fixtures" / "results-small" / "runs"
       / "two-flows-bbr-r1-3c359d7e")  # fmt: skip


def copy(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    shutil.copytree(RUN / "raw", d / "raw")
    shutil.copy(RUN / "attempts.json", d / "attempts.json")
    return d


def keep(run: Path) -> None:
    rec, df = judge_mod.judge(run / "raw")
    rec = rec.model_copy(update={"attempt": 1})
    judge_mod.keep_for_parse(run, rec, df)


def test_parse_takes_what_run_judged_the_same_bytes(tmp_path: Path) -> None:
    fresh, kept = copy(tmp_path, "fresh"), copy(tmp_path, "kept")
    judge_mod.parse_run_dir(fresh)
    keep(kept)
    judge_mod.parse_run_dir(kept)
    assert not (kept / judge_mod.KEPT).exists()
    assert (kept / "summary.json").read_bytes() == (fresh / "summary.json").read_bytes()
    assert (kept / "timeseries.parquet").read_bytes() == (fresh / "timeseries.parquet").read_bytes()


def test_a_changed_raw_file_is_judged_again(tmp_path: Path) -> None:
    run = copy(tmp_path, "run")
    keep(run)
    (run / judge_mod.KEPT / "summary.json").write_text("{}")  # would be wrong if taken
    meta = run / "raw" / "meta.json"
    os.utime(meta, ns=(meta.stat().st_atime_ns, meta.stat().st_mtime_ns + 1))
    rec = judge_mod.parse_run_dir(run)
    assert rec.run_id == "two-flows-bbr-r1-3c359d7e" and not (run / judge_mod.KEPT).exists()
