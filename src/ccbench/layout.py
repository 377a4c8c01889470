"""The on-disk layout of a run, named once, and the reader of its raw files.

A run directory (results/runs/<run id>/):

    raw/                  what the run recorded (below); renamed into place when complete
    attempts.json         every attempt's verdict (`ccbench run`)
    invalid-attempts/N/   raw/ of attempt N, kept when it was invalid and retried
    summary.json          the run record (`ccbench parse`, ccbench.record)
    timeseries.parquet    the run's time series (`ccbench parse`, ccbench.timeseries)

raw/ holds spec.json (what was asked), meta.json (what happened when: ccbench.runmeta),
calibration.json, facts.json, kernel.json, sender-setup.json, qdisc-config.txt, the
before/after snapshots (tc-, delay-, drops-), one iperf3-K.json (+ server-K.json) per
flow, the instruments' files, the probe's file, error.txt (the attempt failed) or
skipped.json (not run, and why); docs/architecture.md's table is made from RAW_FILES
below and the instruments' and probe tools' declarations. Each name is
written once in the package: here (the constants and functions below, instruments'
files among them), or in the module of the instrument or probe tool whose file it is
(instruments.interfaces for one, each probe tool's `raw_file`); every
reader and writer uses these, never a literal (tests/unit/test_raw_names.py). A large
file fetched from a remote node may be stored compressed (NAME.gz, NAME.xz or NAME.zst);
every reader here opens both forms.
"""

from __future__ import annotations

import gzip
import inspect
import io
import lzma
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from ccbench import jsonio
from ccbench.errors import CcbenchError
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec, spec_dict_problem

if TYPE_CHECKING:
    from ccbench.roles import Roles

# The iperf3 server of flow k listens on BASE_PORT + k unless its sender pins a port
# (flow_port); a port per flow: a sender's sockstat and siftr samples name it.
BASE_PORT = 5201
MAX_FLOWS = 1000  # the ports a run's servers may use: BASE_PORT + 1 .. BASE_PORT + MAX_FLOWS


def flow_port(roles: Roles, spec: RunSpec, k: int) -> int:
    """Flow k's iperf3 server port on a testbed with `roles` (Testbed.roles): the port
    its sender pins (a lab's `server_port`), else BASE_PORT + k. The one place a flow's
    port is decided: its server listens there, its client connects there, the
    instruments filter by it. Two flows of the run on one port are refused."""
    ports: list[int] = []
    pinning: list[str] = []  # who pins each flow's port ("" where none does)
    for i, f in enumerate(spec.flows, start=1):
        pinned = roles.pinned_port(f.pair)
        port = pinned if pinned is not None else BASE_PORT + i
        pinning.append(roles.senders[f.pair - 1] if pinned is not None else "")
        if port in ports:
            j = ports.index(port) + 1
            who = " and ".join(sorted({p for p in (pinning[j - 1], pinning[-1]) if p}))
            raise CcbenchError(
                f"flows {j} and {i} would both be served on port {port} ({who} pins it): "
                "a sender that pins its port sends one flow a run, on a port no other flow "
                "has; pin another port, or remove server_port from the lab inventory"
            )
        ports.append(port)
    return ports[k - 1]


# --- raw/ ------------------------------------------------------------------------
SPEC = "spec.json"
META = "meta.json"
CALIBRATION = "calibration.json"
HOST_FACTS = "facts.json"
KERNEL = "kernel.json"
SENDER_SETUP = "sender-setup.json"
HOST_CHANGES = "host-changes.json"  # the run's host settings: each change and its undo, as run
QDISC_CONFIG = "qdisc-config.txt"
ERROR = "error.txt"
SKIPPED = "skipped.json"
PROBE_ERR = "probe.err"
BEFORE, AFTER = "before", "after"


def tc(when: str) -> str:
    return f"tc-{when}.json"


def delay(when: str) -> str:
    return f"delay-{when}.json"


def drops(when: str) -> str:
    return f"drops-{when}.json"


def cpu(when: str) -> str:
    return f"cpu-{when}.txt"


def iperf3(k: int) -> str:
    return f"iperf3-{k}.json"


def server(k: int) -> str:
    """Flow k's iperf3 server: JSON with the receiver's intervals (runs before
    receiver-side series wrote its text output to server-K.txt, which nothing reads)."""
    return f"server-{k}.json"


def probe_server(k: int) -> str:
    return f"probe-server-{k}.txt"


def ss(node: str) -> str:
    return f"ss-{node}.txt"


def qdisc(node: str) -> str:
    return f"qdisc-{node}.txt"


def siftr(node: str) -> str:
    return f"siftr-{node}.log"


def sockstat(k: int) -> str:
    return f"sockstat-{k}.txt"


def bql(when: str) -> str:
    """The bottleneck NIC's transmit queues' BQL state (SSH testbeds)."""
    return f"bql-{when}.txt"


def bblog(node: str, name: str) -> str:
    """One of a FreeBSD sender's BBLog files (tcplog_dumper's pcapng), or its dumper's
    log (`name` "dumper")."""
    return f"bblog-{node}-{name}"


def tcp_counters(node: str, when: str) -> str:
    return f"tcp-counters-{node}-{when}.json"


def stderr_of(name: str) -> str:
    """Where a tool writing `name` leaves its stderr (iperf3-1.json -> iperf3-1.err)."""
    return name.rsplit(".", 1)[0] + ".err"


SS_GLOB = "ss-s*.txt"
SIFTR_GLOB = "siftr-s*.log"


@dataclass(frozen=True)
class RawFile:
    """A raw/ file as docs/architecture.md's table shows it (scripts/gen_references.py):
    its name (a constant, or the function that makes it: each parameter a placeholder)
    and what it holds. RAW_FILES here, each instrument's `raw_files` and each probe
    tool's `raw_file` are the table."""

    name: str | Callable[..., str]
    what: str

    def shown(self) -> str:
        """The name with `when` as {before,after} and any other parameter in upper case
        (iperf3-K.json, tc-{before,after}.json)."""
        if isinstance(self.name, str):
            return self.name
        params = inspect.signature(self.name).parameters
        return self.name(*(f"{{{BEFORE},{AFTER}}}" if p == "when" else p.upper() for p in params))


# The run's own files (the instruments' are theirs: Instrument.raw_files).
RAW_FILES = (
    RawFile(SPEC, "what was asked (the run spec; hashes to the run id)"),
    RawFile(
        META,
        "what happened when, one typed record (`runmeta.RunMeta`): the traffic's start "
        "(`started_unix`), each flow's release (`flows`) and exit code (`client_rc`), the "
        "probe's argv (`probe_argv`), each instrument's record (`instruments.<name>`); and, "
        "read by the integration tests, `bench/pipeline.py` and "
        "`scripts/rehearsal/evidence.py` only, the clients' argv (`client_argv`), where the "
        "tools ran (`tools`), how long the traffic and the run's own steps took "
        "(`traffic_wall_s`, `phases_s`), when it ended (`finished_unix`)",
    ),
    RawFile(CALIBRATION, "the testbed's calibration as the run found it"),
    RawFile(HOST_FACTS, "host facts: the senders' identity, the receivers' buffers, the NICs"),
    RawFile(KERNEL, "the kernel the variant needs"),
    RawFile(SENDER_SETUP, "the senders' set-up: each step a FreeBSD stack or CC needed, as run"),
    RawFile(QDISC_CONFIG, "the bottleneck router's qdiscs as configured (`tc qdisc show`)"),
    RawFile(
        HOST_CHANGES,
        "the run's host settings: each change made on an endpoint with its undo, every "
        "command as run and what the host reported after it (`host_apply`)",
    ),
    RawFile(tc, "the bottleneck's qdisc and its counters around the run"),
    RawFile(delay, "the delay element's counters around the run"),
    RawFile(drops, "every node's drop counters around the run"),
    RawFile(iperf3, "flow K's iperf3 client (JSON)"),
    RawFile(
        server,
        "flow K's iperf3 server (JSON with the receiver's intervals; runs made before the "
        "receiver-side series kept server-K.txt, which nothing reads)",
    ),
    RawFile(probe_server, "the latency probe's server K, on the first flow's receiver"),
    RawFile(PROBE_ERR, "the latency probe's errors"),
    RawFile(ERROR, "the attempt failed, and why"),
    RawFile(SKIPPED, "the run was not run, and why"),
)

# --- the run directory -----------------------------------------------------------
RAW = "raw"
SUMMARY = "summary.json"
TIMESERIES = "timeseries.parquet"
ATTEMPTS = "attempts.json"
INVALID_ATTEMPTS = "invalid-attempts"


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def raw(self) -> Path:
        return self.path / RAW

    @property
    def summary(self) -> Path:
        return self.path / SUMMARY

    @property
    def timeseries(self) -> Path:
        return self.path / TIMESERIES

    @property
    def attempts(self) -> Path:
        return self.path / ATTEMPTS

    def invalid_attempt(self, n: int) -> Path:
        return self.path / INVALID_ATTEMPTS / str(n)

    def raw_tmp(self, pid: int) -> Path:
        """Where an attempt writes before its raw/ is complete."""
        return self.path / f".raw.tmp-{pid}"


# --- the results directory ---------------------------------------------------------
MATRIX = "matrix.json"
RUNS = "runs"
TESTBEDS = "testbeds"
TABLES = "tables"
CALIBRATION_FAILURES = "calibration-failures.jsonl"

# --- compressed raw files ------------------------------------------------------------
COMPRESSED = (".gz", ".xz", ".zst")


def stored(raw: Path, name: str) -> Path | None:
    """The file `name` of raw/ as stored: plain, or compressed with one of COMPRESSED;
    None if it is in neither form."""
    for p in (raw / name, *(raw / (name + s) for s in COMPRESSED)):
        if p.exists():
            return p
    return None


def open_binary(path: Path) -> IO[bytes]:
    """A stored raw file's bytes, decompressed as its suffix says."""
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path, "rb"))
    if path.suffix == ".xz":
        return lzma.open(path, "rb")
    if path.suffix == ".zst":
        import zstandard  # only where a node compressed with zstd

        return cast(IO[bytes], zstandard.ZstdDecompressor().stream_reader(path.open("rb")))
    return path.open("rb")


def open_text(path: Path) -> IO[str]:
    """A stored raw file as UTF-8 text, read as a stream (never whole)."""
    return io.TextIOWrapper(open_binary(path), encoding="utf-8", newline="")


# What reading a damaged compressed file may raise besides OSError.
_DECOMPRESS_ERRORS: tuple[type[BaseException], ...] = (EOFError, lzma.LZMAError, gzip.BadGzipFile)


def file_problem(name: str, what: str, code: Code = Code.FILE_DAMAGED) -> Reason:
    """A reason about raw file `name`: its words start with the name, its evidence names
    the file."""
    return Reason.of(code, f"{name}: {what}", file=name)


class RawDir:
    """The files of one run's raw/ directory. Reading one never raises: a file that is
    missing (where the run needs it), not UTF-8, not JSON or not the JSON type its
    writer writes adds one reason naming it to `problems`, and the reader gets None."""

    def __init__(self, raw: Path) -> None:
        self.path = raw
        self.failed = (raw / ERROR).exists()
        self.problems: list[Reason] = []

    def problem(self, name: str, what: str, code: Code = Code.FILE_DAMAGED) -> None:
        self.problems.append(file_problem(name, what, code))

    def exists(self, name: str) -> bool:
        return stored(self.path, name) is not None

    def glob(self, pattern: str) -> list[str]:
        """Names (without a compression suffix) of the raw files matching `pattern`."""
        names = {p.name for p in self.path.glob(pattern)}
        for s in COMPRESSED:
            names |= {p.name[: -len(s)] for p in self.path.glob(pattern + s)}
        return sorted(names)

    def text(self, name: str, *, required: bool = False) -> str | None:
        p = stored(self.path, name)
        if p is None:
            if required and not self.failed:  # a failed run's missing files say nothing new
                self.problem(name, "missing")
            return None
        try:
            with open_binary(p) as fh:
                data = fh.read()
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            self.problem(name, f"not UTF-8 text (byte {e.start})")
        except OSError as e:
            self.problem(name, f"unreadable ({e.strerror or e})")
        except _DECOMPRESS_ERRORS as e:
            self.problem(p.name, f"damaged ({type(e).__name__}: {e})")
        return None

    def lines(self, name: str) -> Iterator[str] | None:
        """The file's lines as a stream (None, and a problem, when it cannot be opened);
        a decoding error while reading is the caller's to catch (UnicodeDecodeError,
        OSError, EOFError)."""
        p = stored(self.path, name)
        if p is None:
            return None
        try:
            fh = open_text(p)
        except OSError as e:
            self.problem(name, f"unreadable ({e.strerror or e})")
            return None
        return _closing_lines(fh)

    def json(self, name: str, *, required: bool = False, kind: type = dict) -> Any:
        text = self.text(name, required=required)
        if text is None:
            return None
        if not text.strip():
            self.problem(name, "empty")
            return None
        try:
            doc = jsonio.loads(text)
        except jsonio.NotANumber as e:
            self.problem(name, str(e))
            return None
        except ValueError as e:
            self.problem(name, f"not valid JSON ({e})")
            return None
        if not isinstance(doc, kind):
            want = "a list" if kind is list else "an object"
            self.problem(name, f"a JSON {jsonio.jtype(doc)} where {want} belongs")
            return None
        return doc


def _closing_lines(fh: IO[str]) -> Iterator[str]:
    with fh:
        yield from fh


def read_spec_dict(raw: Path) -> dict[str, Any]:
    """raw/spec.json as a mapping; CcbenchError (one line naming the file) when it is
    missing, not UTF-8, not JSON or not an object."""
    path = raw / SPEC
    try:
        doc = jsonio.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CcbenchError(f"{path}: missing (not a run directory?)") from None
    except UnicodeDecodeError as e:
        raise CcbenchError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise CcbenchError(f"{path}: unreadable ({e.strerror or e})") from None
    except jsonio.NotANumber as e:
        raise CcbenchError(f"{path}: {e}") from None
    except ValueError as e:
        raise CcbenchError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise CcbenchError(f"{path}: a JSON {jsonio.jtype(doc)} where an object belongs")
    return doc


def load_spec(raw: Path) -> RunSpec:
    """raw/spec.json as a RunSpec; CcbenchError (one line naming the file) when it is
    missing, not JSON, or not a run spec (fields missing, or of the wrong type)."""
    doc = read_spec_dict(raw)
    path = raw / SPEC
    problem = spec_dict_problem(doc)
    if problem:
        raise CcbenchError(f"{path}: {problem}")
    try:
        return RunSpec.from_dict(doc)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise CcbenchError(f"{path}: not a run spec ({e})") from None
