"""`ccbench parse` on damaged copies of a real run (tests/captures/run-local-2cubic).

One corruption per case. Each either stops with exit 2 and one line naming the file
(only spec.json: without it there is no run), or writes summary.json (after
timeseries.parquet) with valid false and a reason naming the problem. Never a
traceback, never valid true. The undamaged copy still parses valid.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ccbench import cli
from ccbench.reasons import Code
from tests.conftest import texts_of

CAPTURE = Path(__file__).resolve().parents[1] / "captures" / "run-local-2cubic"


def _edit(name: str, fn: Callable[[Any], Any]) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        p = raw / name
        doc = json.loads(p.read_text())
        p.write_text(json.dumps(fn(doc)))

    return apply


def _write(name: str, data: str | bytes) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        p = raw / name
        if isinstance(data, bytes):
            p.write_bytes(data)
        else:
            p.write_text(data)

    return apply


def _both(*fns: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        for fn in fns:
            fn(raw)

    return apply


def _remove(name: str) -> Callable[[Path], None]:
    return lambda raw: (raw / name).unlink()


def _replace_text(name: str, old: str, new: str, count: int = 1) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        p = raw / name
        text = p.read_text()
        assert old in text
        p.write_text(text.replace(old, new, count))

    return apply


def _truncate(name: str, share: float) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        p = raw / name
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * share)])

    return apply


def _set(path: str, value: Any) -> Callable[[Any], Any]:
    """Set a dotted path ("end.sum_received.bytes") in a JSON document."""

    def fn(doc: Any) -> Any:
        *parents, last = path.split(".")
        d = doc
        for k in parents:
            d = d[int(k)] if isinstance(d, list) else d[k]
        d[last] = value
        return doc

    return fn


def _scale_flow(factor: float) -> Callable[[Any], Any]:
    """Every byte count and rate of the flow times `factor` (sender and receiver)."""

    def fn(doc: Any) -> Any:
        for part in ("sum_sent", "sum_received"):
            doc["end"][part]["bytes"] = int(doc["end"][part]["bytes"] * factor)
            doc["end"][part]["bits_per_second"] *= factor
        return doc

    return fn


def _received_more_than_sent(doc: Any) -> Any:
    doc["end"]["sum_received"]["bytes"] = doc["end"]["sum_sent"]["bytes"] + 1000
    return doc


def _tc_backwards(raw: Path) -> None:
    """tc-after.json's counters below tc-before.json's (a qdisc reset, or files swapped)."""
    before = (raw / "tc-before.json").read_text()
    after = (raw / "tc-after.json").read_text()
    (raw / "tc-before.json").write_text(after)
    (raw / "tc-after.json").write_text(before)


def _delay_backwards(raw: Path) -> None:
    after = json.loads((raw / "delay-after.json").read_text())
    after["lateness"]["count"] = 10
    (raw / "delay-after.json").write_text(json.dumps(after))


def _ss_ts_backwards(raw: Path) -> None:
    p = raw / "ss-s1.txt"
    lines = p.read_text().split("\n")
    ts = [i for i, line in enumerate(lines) if line.startswith("TS ")]
    lines[ts[5]] = "TS 1000000000.0"
    p.write_text("\n".join(lines))


def _cpu_files(before: str, after: str) -> Callable[[Path], None]:
    def apply(raw: Path) -> None:
        (raw / "cpu-before.txt").write_text(before)
        (raw / "cpu-after.txt").write_text(after)

    return apply


CPU = "cpu  {} 0 {} {} 0 0 {} 0 0 0\ncpu0 1 2 3 4\n"

ERROR = "error"
INVALID = "invalid"

# (case, corruption, outcome, what the error line / the reason must contain); the reason
# is a damaged file's (Code.FILE_DAMAGED, its words naming the file) unless NOT_FILES
# names its class
CASES: list[tuple[str, Callable[[Path], None], str, str]] = [
    # sampler (ss) output
    ("ss truncated", _truncate("ss-s1.txt", 0.4), INVALID, "ss-s1.txt: samples end"),
    ("ss garbage", _write("ss-s1.txt", "hello\nnot ss at all\n"), INVALID,
     "ss-s1.txt: not ss samples"),
    ("ss binary", _write("ss-s2.txt", bytes(range(256)) * 4), INVALID, "ss-s2.txt: not UTF-8"),
    ("ss bad number", _replace_text("ss-s1.txt", "cwnd:13", "cwnd:abc"), INVALID,
     "ss-s1.txt: not ss samples (line 3: bad ss value cwnd:abc)"),
    ("ss time backwards", _ss_ts_backwards, INVALID, "goes back"),
    ("ss empty", _write("ss-s1.txt", ""), INVALID, "ss-s1.txt: no samples"),
    # meta.json
    ("meta garbage", _write("meta.json", "{\"flows\": [1, 2"), INVALID,
     "meta.json: not valid JSON"),
    ("meta binary", _write("meta.json", b"\xff\xfe\x00garbage"), INVALID,
     "meta.json: not UTF-8"),
    ("meta list", _write("meta.json", "[1, 2, 3]"), INVALID,
     "meta.json: a JSON list where an object belongs"),
    ("meta missing", _remove("meta.json"), INVALID, "meta.json: missing"),
    ("meta client_rc string", _edit("meta.json", _set("client_rc", "0 0")), INVALID,
     "meta.json: client_rc is not a list of 2 exit codes"),
    ("meta started NaN", _replace_text("meta.json", "1795308774.8957584", "NaN"), INVALID,
     "meta.json: contains NaN"),
    ("meta flows objects", _edit("meta.json", _set("flows", [[1, 0.0]])), INVALID,
     "meta.json: flows is not a list"),
    # tc counters
    ("tc-before missing", _remove("tc-before.json"), INVALID, "tc-before.json: missing"),
    ("tc-after missing", _remove("tc-after.json"), INVALID, "tc-after.json: missing"),
    ("tc-after garbage", _write("tc-after.json", "Cannot find device \"rt1-b\"\n"), INVALID,
     "tc-after.json: not valid JSON"),
    ("tc-after empty", _write("tc-after.json", ""), INVALID,
     "tc-after.json: no bottleneck queue"),
    ("tc-before object", _write("tc-before.json", '{"kind": "tbf"}'), INVALID,
     "tc-before.json: tc -j output is not a JSON list"),
    ("tc-after list in list", _write("tc-after.json", "[[1, 2]]"), INVALID,
     "tc-after.json: qdisc [0]: a JSON list where an object belongs"),
    ("tc-after drops string", _replace_text("tc-after.json", '"drops":694', '"drops":"many"'),
     INVALID, "tc-after.json: qdisc [0] (tbf) drops: 'many' is not a number"),
    ("tc counters backwards", _tc_backwards, INVALID, "counters went backwards"),
    # delay element statistics
    ("delay-after garbage", _truncate("delay-after.json", 0.5), INVALID,
     "delay-after.json: not valid JSON"),
    ("delay-before missing", _remove("delay-before.json"), INVALID,
     "delay-before.json: missing"),
    ("delay counters backwards", _delay_backwards, INVALID,
     "delay-after.json: not ccdelay statistics (ValueError: lateness.count went backwards"),
    ("delay-after list", _write("delay-after.json", "[]"), INVALID,
     "delay-after.json: a JSON list where an object belongs"),
    ("delay lateness list", _edit("delay-after.json", _set("lateness", [1])), INVALID,
     "delay-after.json: not ccdelay statistics"),
    # iperf3 documents
    ("iperf3 truncated", _truncate("iperf3-1.json", 0.5), INVALID,
     "iperf3-1.json: not valid JSON"),
    ("iperf3 list", _write("iperf3-2.json", "[]"), INVALID,
     "iperf3-2.json: a JSON list where an object belongs"),
    ("iperf3 end list", _edit("iperf3-1.json", _set("end", [])), INVALID,
     "iperf3-1.json: end: a JSON list where an object belongs"),
    ("iperf3 string number",
     _edit("iperf3-1.json", _set("end.sum_received.bits_per_second", "fast")), INVALID,
     "iperf3-1.json: end.sum_received.bits_per_second: 'fast' is not a number"),
    ("iperf3 NaN", _replace_text("iperf3-1.json", '"bytes":', '"bytes": NaN, "x":'), INVALID,
     "iperf3-1.json: contains NaN"),
    ("iperf3 intervals string", _edit("iperf3-1.json", _set("intervals", "none")), INVALID,
     "iperf3-1.json: intervals: a JSON string where a list belongs"),
    ("iperf3 stream list",
     _edit("iperf3-2.json", _set("end.streams", [[1]])), INVALID,
     "iperf3-2.json: end.streams[0]: a JSON list where an object belongs"),
    ("negative throughput",
     _edit("iperf3-1.json", _set("end.sum_received.bits_per_second", -2.3e7)), INVALID,
     "flow 1: negative throughput"),
    ("negative retransmits", _edit("iperf3-2.json", _set("end.sum_sent.retransmits", -5)),
     INVALID, "flow 2: negative retransmits (-5)"),
    ("beyond the bottleneck", _edit("iperf3-1.json", _scale_flow(10)), INVALID,
     "bytes received, more than the 50 Mbit/s bottleneck can carry in 3 s"),
    ("utilization over 100 %", _edit("iperf3-2.json", _scale_flow(1.3)), INVALID,
     "the bottleneck can give in 3 s"),
    ("received more than sent", _edit("iperf3-1.json", _received_more_than_sent), INVALID,
     "flow 1: receiver got"),
    ("iperf3 a directory", lambda raw: ((raw / "iperf3-1.json").unlink(),
                                        (raw / "iperf3-1.json").mkdir()),
     INVALID, "iperf3-1.json: unreadable"),
    # calibration, provenance, optional files
    ("calibration garbage", _write("calibration.json", "{{"), INVALID,
     "calibration.json: not valid JSON"),
    ("calibration list", _write("calibration.json", "[]"), INVALID,
     "calibration.json: a JSON list where an object belongs"),
    ("calibration problems string", _edit("calibration.json", _set("problems", "none")),
     INVALID, "calibration.json: problems is not a list of strings"),
    ("facts garbage", _write("facts.json", "uname: Linux"), INVALID,
     "facts.json: not valid JSON"),
    ("sender-setup list", _write("sender-setup.json", '[{"stack": "rack"}]'), INVALID,
     "sender-setup.json: a JSON list where an object belongs"),
    ("skipped garbage", _write("skipped.json", "{"), INVALID, "skipped.json: not valid JSON"),
    ("error.txt binary", _write("error.txt", b"\xff\xfe boom"), INVALID, "run failed:"),
    ("cpu garbage", _cpu_files(CPU.format(1, 1, 1, 0), "garbage\n"), INVALID,
     "no aggregate 'cpu' line"),
    ("cpu backwards", _cpu_files(CPU.format(500, 500, 5000, 0), CPU.format(400, 600, 6000, 0)),
     INVALID, "cpu-after.txt: cpu counters went backwards (user)"),
    ("probe garbage", _write("probe-irtt.json", '{"version": 1}'), INVALID,
     "probe-irtt.json: unreadable"),
    ("probe flent not gzip", _write("probe.flent.gz", b"not gzip"), INVALID,
     "probe.flent.gz: unreadable"),
    # flent missing on the sender (seen in CI: a dangling /usr/local/bin/flent): the shell
    # wrapper prints nothing and the reason carries the wrapper's own stderr
    ("probe flent not found", _both(_write("probe.flent.gz", b""),
                                    _write("probe.err", "sh: 1: flent: not found\n")),
     INVALID, "probe.flent.gz: unreadable (Expecting value: line 1 column 1 (char 0); "
     "probe.err: sh: 1: flent: not found)"),
    # spec.json: the only file whose damage stops the parse
    ("spec garbage", _write("spec.json", "{ topology"), ERROR, "spec.json: not valid JSON"),
    ("spec binary", _write("spec.json", b"\x00\xff\x10"), ERROR, "spec.json: not UTF-8"),
    ("spec list", _write("spec.json", "[]"), ERROR,
     "spec.json: a JSON list where an object belongs"),
    ("spec without topology", _edit("spec.json", lambda d: {"flows": d["flows"]}), ERROR,
     "spec.json: no 'topology' object"),
    ("spec rate string", _edit("spec.json", _set("topology.rate_mbit", "fast")), ERROR,
     "spec.json: topology.rate_mbit: 'fast' is not a non-negative number"),
    ("spec no flows", _edit("spec.json", _set("flows", [])), ERROR, "spec.json: no 'flows'"),
    ("spec unknown field", _edit("spec.json", _set("topology.colour", "red")), ERROR,
     "spec.json: not a run spec"),
    ("spec NaN duration", _replace_text("spec.json", '"duration_s": 3.0', '"duration_s": NaN'),
     ERROR, "spec.json: contains NaN"),
    ("spec missing", _remove("spec.json"), ERROR, "not a run directory"),
]  # fmt: skip


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(CAPTURE, run / "raw")
    return run


def _parse(run: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = cli.main(["parse", str(run)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return rc, err.splitlines()


def test_the_undamaged_copy_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_dir(tmp_path)
    rc, err = _parse(run, capsys)
    assert (rc, err) == (0, [])
    s = json.loads((run / "summary.json").read_text())
    assert s["valid"] and s["reasons"] == []
    assert (run / "timeseries.parquet").exists()
    assert not list(run.glob("*.tmp"))


# Cases whose numbers no run can produce, or whose run failed, rather than a damaged file.
NOT_FILES = {
    "tc counters backwards": Code.PLAUSIBILITY,
    "negative throughput": Code.PLAUSIBILITY,
    "negative retransmits": Code.PLAUSIBILITY,
    "beyond the bottleneck": Code.PLAUSIBILITY,
    "utilization over 100 %": Code.PLAUSIBILITY,
    "received more than sent": Code.PLAUSIBILITY,
    "error.txt binary": Code.RUN_FAILED,
}


@pytest.mark.parametrize(
    ("corrupt", "outcome", "expect", "code"),
    [pytest.param(fn, outcome, expect, NOT_FILES.get(name, Code.FILE_DAMAGED), id=name)
     for name, fn, outcome, expect in CASES],
)  # fmt: skip
def test_a_damaged_run_is_refused_or_invalid(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    corrupt: Callable[[Path], None],
    outcome: str,
    expect: str,
    code: Code,
) -> None:
    run = _run_dir(tmp_path)
    corrupt(run / "raw")
    rc, err = _parse(run, capsys)
    if outcome == ERROR:
        assert rc == 2
        assert len(err) == 1, err
        assert err[0].startswith("ccbench: error: ") and expect in err[0], err
        assert not (run / "summary.json").exists()
        assert not (run / "timeseries.parquet").exists()
        return
    assert (rc, err) == (0, [])
    s = json.loads((run / "summary.json").read_text())
    assert s["valid"] is False
    assert any(expect in t for t in texts_of(s["reasons"], code)), s["reasons"]
    assert (run / "timeseries.parquet").exists()
    assert not list(run.glob("*.tmp"))


def test_outputs_are_not_left_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The time series fails to write: no summary.json appears, no temp file stays."""
    from ccbench.summarize.judge import parse_run_dir

    run = _run_dir(tmp_path)

    def fail(self: Any, path: Path, **kw: Any) -> None:
        Path(path).write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("pandas.DataFrame.to_parquet", fail)
    from ccbench.errors import CcbenchError

    with pytest.raises(CcbenchError, match="cannot write its outputs"):
        parse_run_dir(run)
    assert sorted(p.name for p in run.iterdir()) == ["raw"]


def test_a_reparse_replaces_a_stale_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _run_dir(tmp_path)
    (run / "summary.json").write_text('{"valid": true, "stale": true}')
    (run / "raw" / "tc-after.json").unlink()
    rc, _ = _parse(run, capsys)
    s = json.loads((run / "summary.json").read_text())
    assert rc == 0 and not s["valid"] and "stale" not in s
