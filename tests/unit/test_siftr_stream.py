"""ccbench.parse.siftr_stream: the fast path, its fallback, block boundaries, and
bounded memory on a large SYNTHETIC siftr 1.3.0 log (ccbench.parse.siftr_synth:
siftr.c's record layout, made-up numbers). The logs in tests/captures/freebsd were
WRITTEN FROM THE DOCUMENTED FORMATS (no real siftr log was found in public repositories;
the format is sys/netinet/siftr.c, siftr_process_pkt, and siftr(4))."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from ccbench.hosts.siftr_plan import RECORD_BYTES
from ccbench.parse import siftr_stream
from ccbench.parse.siftr import _fixed_us, _hex_int64
from ccbench.parse.siftr_stream import SCHEMA, SiftrReader, _epoch_us, parse_siftr
from ccbench.parse.siftr_synth import siftr13_log

CAP = Path(__file__).resolve().parents[1] / "captures" / "freebsd"
LOGS = sorted(CAP.glob("*.log"))


def rows(reader: SiftrReader) -> list[dict[str, Any]]:
    return [r for b in reader for r in b.to_pylist()]


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_fast_path_reads_every_layout_written_from_docs(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = rows(SiftrReader(path.open()))

    # ... without ever falling back to the line-by-line converter,
    def no_fallback(*_: Any) -> None:
        raise AssertionError("fell back")

    monkeypatch.setattr(SiftrReader, "_slow", no_fallback)
    assert rows(SiftrReader(path.open())) == fast
    monkeypatch.undo()

    # ... and the converter parse_siftr always used gives the same rows.
    def never_fast(*_: Any) -> None:
        raise siftr_stream._Fallback

    monkeypatch.setattr(SiftrReader, "_fast", never_fast)
    assert rows(SiftrReader(path.open())) == fast


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_the_columns_asked_for_are_those_of_the_whole_record(path: Path) -> None:
    keys = ("t_s", "direction", "local", "cwnd_bytes", "srtt_us")
    with path.open("rb") as a, path.open("rb") as b:
        whole, some = SiftrReader(a), SiftrReader(b, columns=keys)
        got = list(some)
        assert all(x.schema.names == list(keys) for x in got)
        assert [r for x in got for r in x.to_pylist()] == [
            {k: r[k] for k in keys} for x in whole for r in x.to_pylist()]  # fmt: skip
        assert some.log() == whole.log()  # the flows and their record counts too
    with path.open("rb") as a, path.open("rb") as b:
        whole, uncounted = SiftrReader(a), SiftrReader(b, columns=keys, counts=False)
        assert [r for x in uncounted for r in x.to_pylist()] == [
            {k: r[k] for k in keys} for x in whole for r in x.to_pylist()]  # fmt: skip
        # the flows are the footer's as written (none without one): siftr2's count
        # their records themselves, siftr 1.x's are left uncounted
        log, counted = uncounted.log(), whole.log()
        assert [(f.local, f.peer) for f in log.flows] == (
            [(f.local, f.peer) for f in counted.flows] if counted.complete else []
        )
        if log.logger == "siftr2":
            assert log == counted
        else:
            assert all(f.records is None for f in log.flows)
    with pytest.raises(ValueError, match="no such siftr columns"):
        SiftrReader(io.BytesIO(path.read_bytes()), columns=("cwnd",))


def test_batches_are_typed_and_bounded() -> None:
    reader = SiftrReader(siftr13_log(2, 1e9, 2.0, 4), block_chars=1 << 16)
    batches = list(reader)
    assert len(batches) > 10 and all(b.schema == SCHEMA for b in batches)
    assert max(b.nbytes for b in batches) < 1 << 20
    assert SCHEMA.field("srtt_us").type == pa.float64()
    assert SCHEMA.field("cwnd_bytes").type == pa.int64()
    log = reader.log()
    assert log.complete and [f.records for f in log.flows] == [30961, 30961]
    assert sum(b.num_rows for b in batches) == 61922


def test_synthetic_log_parses_whole_and_streamed_alike() -> None:
    text = "".join(siftr13_log(2, 1e8, 1.0, 1))
    whole = parse_siftr(text)
    assert whole.version == "1.3.0" and whole.complete
    assert {f.peer for f in whole.flows} == {"10.1.3.21:5201", "10.1.3.22:5202"}
    reader = SiftrReader(siftr13_log(2, 1e8, 1.0, 1), block_chars=4096)
    assert rows(reader) == whole.records
    assert reader.log().flows == whole.flows


def test_synthetic_record_size_within_the_plans_estimate() -> None:
    text = "".join(siftr13_log(2, 1e9, 1.0, 4))
    n = len(parse_siftr(text).records)
    assert text.count("\n") == n + 2  # header, records, footer
    assert len(text) / n <= RECORD_BYTES["siftr"]


def test_bad_record_deep_in_a_long_log_names_its_line() -> None:
    lines = "".join(siftr13_log(1, 1e9, 0.5, 1)).splitlines(keepends=True)
    lines[30001] = lines[30001].replace(",1448,", ",14x8,", 1)
    with pytest.raises(ValueError, match=r"^line 30002: bad siftr 1.3.0 record: invalid literal"):
        rows(SiftrReader(lines, block_chars=1 << 16))


def test_blank_lines_and_crlf_take_the_fallback_and_agree() -> None:
    text = (CAP / "siftr-1.3.0-written-from-docs.log").read_text()
    blanks = text.replace("\n", "\n  \n", 3)
    assert rows(SiftrReader([blanks])) == parse_siftr(text).records
    crlf = text.replace("\n", "\r\n")
    assert rows(SiftrReader([crlf])) == parse_siftr(text).records


@pytest.mark.parametrize("block_chars", [1, 64, 1 << 20])
def test_second_cycle_is_refused_across_blocks(block_chars: int) -> None:
    text = (CAP / "siftr-1.3.0-written-from-docs.log").read_text()
    with pytest.raises(ValueError, match=r"line 8: a second enable/disable cycle"):
        rows(SiftrReader([text + "\n" + text], block_chars=block_chars))
    # blank lines after the footer are still the same log
    assert len(rows(SiftrReader([text + "\n \n"], block_chars=block_chars))) == 6


def test_read_once_and_log_after() -> None:
    reader = SiftrReader((CAP / "siftr2-2.4-written-from-docs.log").open())
    with pytest.raises(RuntimeError, match="read the batches first"):
        reader.log()
    assert rows(reader)[0]["local"] is None  # siftr2: addresses only in the footer
    assert reader.flows_by_id()["a5b6c7d8"].local == "10.1.1.11:54321"
    with pytest.raises(RuntimeError, match="read once"):
        list(reader)


def test_hex_decoding_matches_int() -> None:
    values = ["0", "f", "A", "7fffffff", "ffffffff", "123456789abcdef", "1c2d3e4f"]
    assert _hex_int64(pa.array(values)).tolist() == [int(v, 16) for v in values]
    assert _hex_int64(pa.array(values).slice(2, 3)).tolist() == [int(v, 16) for v in values[2:5]]
    for bad in (["0x1f"], [""], ["g"], ["1" * 16]):
        with pytest.raises(ValueError, match="not a hex number"):
            _hex_int64(pa.array(bad))


def test_stamps_are_read_exactly_whatever_their_form() -> None:
    fixed = ["1794999999.510000", "0000000001.000001", "1794999999.999999"]
    assert _fixed_us(pa.array(fixed)).tolist() == [int(v.replace(".", "")) for v in fixed]
    assert _epoch_us(pa.array(fixed).slice(1)).to_pylist() == [1000001, 1794999999999999]
    # other widths and forms take the regular expression, or are no stamp at all
    mixed = ["1.5", "12.250000", "7"]
    assert _fixed_us(pa.array(mixed)) is None
    assert _epoch_us(pa.array(mixed)).to_pylist() == [1_500_000, 12_250_000, 7_000_000]
    assert _fixed_us(pa.array(["12345678"])) is None  # no point: whole seconds
    assert _epoch_us(pa.array(["12345678"])).to_pylist() == [12_345_678_000_000]
    for bad in (["-123456.000001"], ["+12345.000001"], ["1234567.00000x"]):
        assert _fixed_us(pa.array(bad)) is None
        with pytest.raises(siftr_stream._Fallback):
            _epoch_us(pa.array(bad))


# The reader's peaks in a process of its own, reading a log file as text: the pieces
# its reads give take the same path as the generator's pieces (text_blocks).
_PEAK = textwrap.dedent("""
    import json, sys, tracemalloc
    import pyarrow as pa
    from ccbench.parse.counts import ValueCounts
    from ccbench.parse.siftr_stream import SiftrReader
    tracemalloc.start()
    n, srtt = 0, ValueCounts()
    with open(sys.argv[1], encoding="utf-8") as f:
        for batch in SiftrReader(f):
            n += batch.num_rows
            srtt.add(batch.column("srtt_us"))
    print(json.dumps({"records": n, "python": tracemalloc.get_traced_memory()[1],
                      "arrow": pa.default_memory_pool().max_memory(),
                      "distinct": srtt.distinct, "p95": srtt.percentile(95)}))
""")


def _peak(seconds: float, tmp_path: Path) -> dict[str, float]:
    """The log is written here first: synthesized under tracemalloc (as the reader is
    measured) it took three quarters of the time, and its pyarrow CSV writer would share
    the pool whose peak is measured."""
    log = tmp_path / f"siftr-{seconds}s.log"
    try:
        with log.open("w", encoding="utf-8") as f:
            f.writelines(siftr13_log(1, 1e9, seconds, 4, window_s=0.05))
        out = subprocess.run([sys.executable, "-c", _PEAK, str(log)], capture_output=True,
                             text=True, check=True, timeout=300)  # fmt: skip
    finally:
        log.unlink(missing_ok=True)  # 170 MB for 10^6 records: not kept with tmp_path
    return dict(json.loads(out.stdout))


def test_memory_does_not_grow_with_the_logs_length(tmp_path: Path) -> None:
    """10^5 and 10^6 records (1 Gbit/s at ppl 4: 3.3 s and 33 s): Python's peak
    (tracemalloc) and pyarrow's (its pool) stay the same within 2 MiB, and so does the
    exact srtt histogram (a count per distinct us value)."""
    small, large = _peak(3.3, tmp_path), _peak(33.0, tmp_path)
    assert 0.95e5 < small["records"] < 1.05e5 and 0.95e6 < large["records"] < 1.05e6
    for key in ("python", "arrow"):
        assert large[key] - small[key] < 2 * 2**20, (key, small, large)
        assert large[key] < 64 * 2**20, (key, large)
    assert large["distinct"] < 2000
