"""Golden: every parser's streaming entry point gives what its whole-text function
gives, on every real capture (tests/captures) and on the siftr
logs written from the documented formats (tests/captures/freebsd: no real siftr log was
found in public repositories; the format is sys/netinet/siftr.c, siftr_process_pkt). The
files are read the way a caller reads raw/: opened, not slurped,
and also through gzip, as a compressed raw file is."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest

from ccbench.parse.flent import parse_flent_gz, read_flent_gz
from ccbench.parse.fping import parse_fping, read_fping
from ccbench.parse.iperf3 import interval_batches, parse_iperf3, read_iperf3
from ccbench.parse.irtt import parse_irtt, read_irtt
from ccbench.parse.ping import iter_ping_runs, parse_ping, parse_ping_runs, read_ping
from ccbench.parse.qdisc import (
    iter_qdisc_samples,
    iter_queue_points,
    parse_qdisc_samples,
    queue_point_batches,
    queue_points,
)
from ccbench.parse.siftr_stream import SiftrReader, parse_siftr, with_footer
from ccbench.parse.ss import SsReader, parse_ss_samples

CAP = Path(__file__).resolve().parents[1] / "captures"


def names(pattern: str, root: Path = CAP) -> list[Path]:
    found = sorted(root.glob(pattern))
    assert found, f"no capture matches {pattern}"
    return found


def gz_text(path: Path) -> io.TextIOWrapper:
    """The file as a gzip-compressed raw file is read: a text stream through gzip."""
    return io.TextIOWrapper(gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(path.read_bytes()))))


@pytest.mark.parametrize("path", names("freebsd/*.log"), ids=lambda p: p.name)
@pytest.mark.parametrize("block_chars", [1, 97, 1 << 20])
def test_siftr_stream_equals_whole_written_from_docs(path: Path, block_chars: int) -> None:
    whole = parse_siftr(path.read_text())
    binary = gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(path.read_bytes())))
    for source in (path.open(), gz_text(path), path.read_text().splitlines(keepends=True),
                   path.open("rb"), binary):  # fmt: skip
        reader = SiftrReader(source, block_chars=block_chars)
        rows = [r for b in reader for r in b.to_pylist()]
        assert with_footer(reader.log(), rows) == whole
        if hasattr(source, "close"):
            source.close()


@pytest.mark.parametrize("path", [*names("ss-*.txt"), *names("run-local-2cubic/ss-s*.txt")],
                         ids=lambda p: p.name)  # fmt: skip
def test_ss_stream_equals_whole(path: Path) -> None:
    text = path.read_text()
    whole = parse_ss_samples(text)
    with path.open() as f:
        reader = SsReader(f)
        assert list(reader) == whole
    complete = text[: text.rfind("\n") + 1]
    ts = [float(ln[3:]) for ln in complete.splitlines() if ln.startswith("TS ")]
    assert reader.last_ts == ts[-1]
    batches = list(SsReader(gz_text(path)).batches(rows=7))
    assert max(b.num_rows for b in batches) == 7
    assert [r for b in batches for r in b.to_pylist()] == whole


@pytest.mark.parametrize("path", names("qdisc/qdisc-*.txt"), ids=lambda p: p.name)
def test_qdisc_stream_equals_whole(path: Path) -> None:
    whole = parse_qdisc_samples(path.read_text())
    with path.open() as f:
        assert list(iter_qdisc_samples(f)) == whole
    with gz_text(path) as f:
        pts = list(iter_queue_points(iter_qdisc_samples(f)))
    assert pts == queue_points(whole)
    rows = [r for b in queue_point_batches(pts, rows=64) for r in b.to_pylist()]
    assert [r["backlog_pkts"] for r in rows] == [p.backlog_pkts for p in pts]
    assert rows[0]["t_unix"] == pts[0].t_unix and rows[-1]["drops"] == pts[-1].drops


@pytest.mark.parametrize("path", names("ping-*.txt"), ids=lambda p: p.name)
def test_ping_stream_equals_whole(path: Path) -> None:
    text = path.read_text()
    with path.open() as f:
        assert list(iter_ping_runs(f)) == parse_ping_runs(text)
    if len(parse_ping_runs(text)) <= 1:
        with gz_text(path) as f:
            assert read_ping(f) == parse_ping(text)
    else:
        with path.open() as f, pytest.raises(ValueError, match="ping runs in the text"):
            read_ping(f)


@pytest.mark.parametrize("path", names("probe/fping-*.txt"), ids=lambda p: p.name)
def test_fping_stream_equals_whole(path: Path) -> None:
    whole = parse_fping(path.read_text())
    with path.open() as f:
        assert read_fping(f) == whole
    with path.open() as f:  # a small reorder window holds the same probes here
        assert read_fping(f, window=3) == whole


@pytest.mark.parametrize("path", names("probe/irtt-*.json"), ids=lambda p: p.name)
def test_irtt_stream_equals_whole(path: Path) -> None:
    with path.open() as f:
        assert read_irtt(f) == parse_irtt(json.loads(path.read_text()))


@pytest.mark.parametrize(
    "path",
    [*names("iperf3*.json"), *names("run-local-2cubic/iperf3-*.json")],
    ids=lambda p: p.name,
)  # fmt: skip
def test_iperf3_stream_equals_whole(path: Path) -> None:
    whole = parse_iperf3(json.loads(path.read_text()))
    with gz_text(path) as f:
        assert read_iperf3(f) == whole
    rows = [r for b in interval_batches(whole.intervals, size=5) for r in b.to_pylist()]
    assert rows == whole.intervals


@pytest.mark.parametrize("path", names("probe/*.flent.gz"), ids=lambda p: p.name)
def test_flent_stream_equals_whole(path: Path) -> None:
    with path.open("rb") as f:
        assert read_flent_gz(f) == parse_flent_gz(path.read_bytes())


def test_lines_without_newlines_are_refused_not_dropped() -> None:
    text = (CAP / "ss-cubic-5s.txt").read_text()
    with pytest.raises(ValueError, match="line 1 has no newline but is not the last"):
        list(SsReader(text.splitlines()))
    assert list(SsReader(text.splitlines(), newlines=False)) == parse_ss_samples(text)
    qtext = (CAP / "qdisc/qdisc-rt1-2cubic-100m.txt").read_text()
    with pytest.raises(ValueError, match="has no newline"):
        list(iter_qdisc_samples(qtext.splitlines()))
