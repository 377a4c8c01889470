"""FreeBSD boot tunables (a role's `loader:` settings, ccbench.hosts.loader): the exact
plans (kenv(1), sysctl(8), the /boot/loader.conf block script run for real with /bin/sh
on a file in a temporary directory), which report proves each tunable, the wait before
a run (ccbench.lifecycle) against a stand-in FreeBSD host that boots from its file, the
record of what was waited for down to the report's variant table, and the read-back.

No FreeBSD here: the stand-in answers as the sources say (bin/kenv/kenv.c kgetenv: the
value and a newline, with -q nothing and exit 255 when unset; sbin/sysctl/sysctl.c: an
unknown oid is "sysctl: unknown oid 'NAME'" and exit 1), and boots as the loader and
netisr_init do (stand/lua/config.lua env_var="value" lines into the kernel
environment; sys/net/netisr.c: maxthreads -1 is the CPU count, defaultqlimit above
maxqlimit is forced down to it).
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ccbench import aggregate, attempts, host_apply, lifecycle, record, run_record, run_senders
from ccbench.errors import CcbenchError, Refused
from ccbench.exec import Result
from ccbench.host_settings import HostSettings
from ccbench.hosts import loader
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments.base import Recording
from ccbench.instruments.host_settings import HostSettings as HostSettingsInstrument
from ccbench.layout import RawDir
from ccbench.matrix import expand
from ccbench.model import Variant
from ccbench.reasons import Code
from ccbench.report import provenance, tables
from ccbench.spec import Flow, RunSpec, Topology
from ccbench.summarize import summarize
from ccbench.testbed import manage
from tests.conftest import codes

REPO = Path(__file__).resolve().parents[2]
QDISC_CHECK = REPO / "tests" / "fixtures" / "matrix-qdisc-check.json"
RUN_ID = json.loads(QDISC_CHECK.read_text())["order"][0]
SEED003 = {"net.isr.maxthreads": "-1", "net.isr.defaultqlimit": "1024"}
KERNEL = "FreeBSD 14.2-RELEASE releng/14.2-n269506-c8918d6c7412 GENERIC"


# --- the plans --------------------------------------------------------------------


def test_each_tunable_is_read_as_the_loader_passed_it_and_as_the_kernel_uses_it() -> None:
    assert loader.read_plans("net.isr.defaultqlimit") == {
        "kenv": ["kenv", "-q", "net.isr.defaultqlimit"],
        "sysctl": ["sysctl", "-n", "net.isr.defaultqlimit"],
    }
    with pytest.raises(CcbenchError, match="bad loader tunable name"):
        loader.read_plans("net.isr;reboot")


@pytest.mark.parametrize(
    ("name", "value", "proof"),
    [
        ("net.isr.defaultqlimit", "1024", "sysctl"),  # netisr.c CTLFLAG_RDTUN, capped
        ("net.link.ifqmaxlen", "1024", "sysctl"),  # if.c CTLFLAG_RDTUN
        ("net.inet.tcp.soreceive_stream", "1", "sysctl"),  # tcp_subr.c CTLFLAG_RDTUN
        ("net.isr.maxthreads", "2", "sysctl"),  # forced down above the CPU count
        ("net.isr.maxthreads", "-1", "kenv"),  # becomes the CPU count: only kenv says -1
        ("hw.vmx.rx_queues", "8", "kenv"),  # no sysctl; FreeBSD 14's vmx reads no hw.vmx
    ],
)  # fmt: skip
def test_which_report_proves_a_tunable(name: str, value: str, proof: str) -> None:
    assert loader.judged_on(name, value) == proof


def test_the_block_is_a_constant_script_with_the_lines_as_its_arguments() -> None:
    argv = loader.write_block({"net.isr.maxthreads": "-1", "hw.vmx.rx_queues": "8"})
    assert argv == ["sh", "-c", loader.BLOCK, "ccbench-loader", "/boot/loader.conf",
                    'hw.vmx.rx_queues="8"', 'net.isr.maxthreads="-1"']  # fmt: skip
    assert loader.remove_block() == ["sh", "-c", loader.BLOCK, "ccbench-loader",
                                     "/boot/loader.conf"]  # fmt: skip
    with pytest.raises(CcbenchError, match="bad loader tunable value"):
        loader.write_block({"net.isr.maxthreads": '1"\nkern.securelevel="3'})


def _sh(argv: list[str], conf: Path) -> subprocess.CompletedProcess[str]:
    """The plan exactly as a FreeBSD host runs it, its file argument pointed at `conf`."""
    assert argv[:2] == ["sh", "-c"] and argv[4] == loader.LOADER_CONF
    real = ["/bin/sh", "-c", argv[2], argv[3], str(conf), *argv[5:]]
    return subprocess.run(real, capture_output=True, text=True, timeout=10, check=False)


THEIRS = 'autoboot_delay="3"\n# ccbench begin\nold.tunable="1"\n# ccbench end\nvmm_load="YES"\n'


def test_the_block_replaces_an_earlier_one_and_touches_no_other_line(tmp_path: Path) -> None:
    conf = tmp_path / "loader.conf"
    conf.write_text(THEIRS)
    conf.chmod(0o600)
    r = _sh(loader.write_block(SEED003), conf)
    assert (r.returncode, r.stdout, r.stderr) == (0, "written\n", "")
    assert conf.read_text() == ('autoboot_delay="3"\nvmm_load="YES"\n# ccbench begin\n'
                                'net.isr.defaultqlimit="1024"\nnet.isr.maxthreads="-1"\n'
                                "# ccbench end\n")  # fmt: skip
    assert conf.stat().st_mode & 0o777 == 0o600  # its mode kept (cp -p, then renamed)
    # once: the same lines again change nothing
    assert _sh(loader.write_block(SEED003), conf).stdout == "unchanged\n"
    r = _sh(loader.remove_block(), conf)
    assert (r.returncode, r.stdout) == (0, "written\n")
    assert conf.read_text() == 'autoboot_delay="3"\nvmm_load="YES"\n'
    assert _sh(loader.remove_block(), conf).stdout == "unchanged\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.conf"]  # no temp left


def test_markers_someone_edited_leave_the_file_as_it_was(tmp_path: Path) -> None:
    conf = tmp_path / "loader.conf"
    for text in ('a="1"\n# ccbench begin\nb="2"\n', 'a="1"\n# ccbench end\n'):
        conf.write_text(text)
        r = _sh(loader.write_block({"net.link.ifqmaxlen": "1024"}), conf)
        assert r.returncode == 3 and r.stdout == ""
        assert r.stderr == (f"{conf}: its '# ccbench begin' and '# ccbench end' lines do not "
                            "pair up: fix them by hand\n")  # fmt: skip
        assert conf.read_text() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loader.conf"]


def test_a_missing_file_is_made_for_the_block_and_not_for_a_removal(tmp_path: Path) -> None:
    conf = tmp_path / "loader.conf"
    assert _sh(loader.remove_block(), conf).stdout == "unchanged\n" and not conf.exists()
    assert _sh(loader.write_block({"net.link.ifqmaxlen": "1024"}), conf).stdout == "written\n"
    assert conf.read_text() == '# ccbench begin\nnet.link.ifqmaxlen="1024"\n# ccbench end\n'


# --- a stand-in FreeBSD host --------------------------------------------------------


@dataclass
class Host:
    """kenv and sysctl answered from the running kernel's state; the block script run for
    real on `conf`; `reboot()` boots from `conf` as the loader and netisr_init do."""

    conf: Path
    ncpu: int = 4
    kenv: dict[str, str] = field(default_factory=dict)
    sysctl: dict[str, str] = field(default_factory=lambda: {
        "net.isr.maxthreads": "1", "net.isr.maxqlimit": "10240",
        "net.isr.defaultqlimit": "256", "net.link.ifqmaxlen": "50",
        "net.inet.tcp.soreceive_stream": "0"})  # fmt: skip
    ran: list[list[str]] = field(default_factory=list)

    def run(self, argv: list[str], check: bool = True, **_: object) -> Result:
        self.ran.append(list(argv))
        if argv[:2] == ["kenv", "-q"]:
            v = self.kenv.get(argv[2])
            return Result(tuple(argv), 0 if v is not None else 255, f"{v}\n" if v else "", "")
        if argv[:2] == ["sysctl", "-n"]:
            v = self.sysctl.get(argv[2])
            if v is None:
                return Result(tuple(argv), 1, "", f"sysctl: unknown oid '{argv[2]}'\n")
            return Result(tuple(argv), 0, f"{v}\n", "")
        if argv[:2] == ["sh", "-c"]:
            r = _sh(argv, self.conf)
            return Result(tuple(argv), r.returncode, r.stdout, r.stderr)
        return Result(tuple(argv), 1, "", f"{argv[0]}: not in this stand-in\n")

    def reboot(self) -> None:
        text = self.conf.read_text() if self.conf.exists() else ""
        self.kenv = dict(re.findall(r'^([\w.]+)="([^"]*)"$', text, re.M))
        for name in loader.KERNEL_VALUE:
            if name in self.kenv:
                self.sysctl[name] = self.kenv[name]
        if self.sysctl["net.isr.maxthreads"] == "-1":
            self.sysctl["net.isr.maxthreads"] = str(self.ncpu)
        maxq = int(self.sysctl["net.isr.maxqlimit"])
        if int(self.sysctl["net.isr.defaultqlimit"]) > maxq:
            self.sysctl["net.isr.defaultqlimit"] = str(maxq)


@dataclass
class Bed:
    hosts: dict[str, Host]
    os: dict[str, str] = field(default_factory=dict)
    id: str = "t1"
    kind: str = "ssh"

    def ex(self, node: str) -> Host:
        return self.hosts[node]

    def driver(self, node: str) -> FreeBSDHost | LinuxHost:
        return LinuxHost() if self.os.get(node) == "linux" else FreeBSDHost()

    def address(self, node: str) -> str:
        return "10.0.0.1"

    def is_up(self) -> bool:
        return True


def _bed(tmp_path: Path) -> Bed:
    return Bed({n: Host(tmp_path / f"{n}-loader.conf") for n in ("s1", "r1")})


def _spec(host: dict[str, Any]) -> RunSpec:
    return RunSpec(topology=Topology(pairs=1), flows=(Flow(1, "cubic"),),
                   host=HostSettings.from_dict(host))  # fmt: skip


# --- reading and judging -----------------------------------------------------------


def test_a_host_not_booted_with_the_tunables_and_one_whose_kernel_capped_one(
    tmp_path: Path,
) -> None:
    h = Host(tmp_path / "loader.conf")
    found = loader.read(h, SEED003)
    assert found["net.isr.maxthreads"] == loader.Reported(kenv=None, sysctl="1",
                                                          judged_on="kenv")  # fmt: skip
    assert loader.not_booted(SEED003, found) == ["net.isr.defaultqlimit", "net.isr.maxthreads"]
    assert [r.evidence for r in loader.judge("s1", SEED003, found)] == [
        {"node": "s1", "setting": "loader net.isr.defaultqlimit", "asked": "1024", "found": None,
         "judged_on": "kenv"},
        {"node": "s1", "setting": "loader net.isr.maxthreads", "asked": "-1", "found": None,
         "judged_on": "kenv"},
    ]  # fmt: skip
    h.conf.write_text('net.isr.maxthreads="-1"\nnet.isr.defaultqlimit="20000"\n')
    h.reboot()
    asked = {"net.isr.maxthreads": "-1", "net.isr.defaultqlimit": "20000"}
    found = loader.read(h, asked)
    assert found["net.isr.maxthreads"].sysctl == "4"  # -1: every CPU, judged on kenv
    assert loader.not_booted(asked, found) == []
    [capped] = loader.judge("s1", asked, found)
    assert (capped.code, capped.evidence) == (Code.HOST_SETTING, {
        "node": "s1", "setting": "loader net.isr.defaultqlimit", "asked": "20000",
        "found": "10240", "judged_on": "sysctl"})  # fmt: skip


# --- the wait ----------------------------------------------------------------------


def test_a_host_without_the_tunables_gets_the_block_once_and_the_run_waits(
    tmp_path: Path,
) -> None:
    h = Host(tmp_path / "loader.conf")
    h.conf.write_text(THEIRS)
    w = loader.pending(h, "s1", "senders", SEED003)
    assert w == loader.NodeWait("s1", "senders", SEED003, {"net.isr.defaultqlimit": None,
                                "net.isr.maxthreads": None}, wrote=True)  # fmt: skip
    assert 'net.isr.maxthreads="-1"' in h.conf.read_text()
    again = loader.pending(h, "s1", "senders", SEED003)
    assert again is not None and again.wrote is False  # written once
    assert loader.waiting_reason([w, dataclasses.replace(w, node="s2")]) == (
        "waiting for loader tunables net.isr.defaultqlimit=1024, net.isr.maxthreads=-1 on "
        "s1, s2: ccbench wrote them to /boot/loader.conf; reboot s1, s2"
    )
    h.reboot()
    n = len(h.ran)
    assert loader.pending(h, "s1", "senders", SEED003) is None
    assert [a[0] for a in h.ran[n:]] == ["kenv", "sysctl", "kenv", "sysctl"]  # nothing written


def test_a_block_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    h = Host(tmp_path / "loader.conf")
    h.conf.write_text("# ccbench begin\n")
    with pytest.raises(CcbenchError) as e:
        loader.pending(h, "s1", "senders", SEED003)
    assert str(e.value) == (f"s1: could not write ccbench's lines into /boot/loader.conf: "
                            f"{h.conf}: its '# ccbench begin' and '# ccbench end' lines do "
                            "not pair up: fix them by hand")  # fmt: skip


@pytest.fixture
def on_bed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Bed, list[str]]:
    """`ccbench run` on the stand-in testbed: the kernel read as a stock 14.2, and what
    reaches `attempts.execute` recorded instead of measured."""
    from ccbench import privileges

    bed = _bed(tmp_path)
    executed: list[str] = []
    monkeypatch.setattr(privileges, "require_root", lambda: None)
    monkeypatch.setattr(manage, "make", lambda cfg, topo: bed)
    monkeypatch.setattr(run_senders, "kernel_identities", lambda tb, spec: {"s1": KERNEL})
    monkeypatch.setattr(attempts, "execute", lambda tb, spec, out, *a, **kw: executed.append(
        spec.run_id))  # fmt: skip
    return bed, executed


def _request(host: dict[str, Any], kernel: dict[str, str] | None = None) -> lifecycle.RunRequest:
    req = lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID)
    spec = dataclasses.replace(req.spec, host=HostSettings.from_dict(host))
    return dataclasses.replace(req, spec=spec, kernel=kernel)


def test_a_run_waits_for_its_tunables_and_runs_after_the_reboot(
    tmp_path: Path, on_bed: tuple[Bed, list[str]]
) -> None:
    bed, executed = on_bed
    req = _request({"receivers": {"loader": SEED003}})
    out = tmp_path / "run"
    done = lifecycle.run_on_testbed(req, out, None, False, write_summary=False)
    reason = ("waiting for loader tunables net.isr.defaultqlimit=1024, net.isr.maxthreads=-1 "
              "on r1: ccbench wrote them to /boot/loader.conf; reboot r1")  # fmt: skip
    assert done == lifecycle.Waiting(reason, {"s1": KERNEL}) and executed == []
    assert not bed.hosts["s1"].conf.exists()  # the role says which hosts
    assert 'net.isr.maxthreads="-1"' in bed.hosts["r1"].conf.read_text()
    att = json.loads((out / "attempts.json").read_text())
    assert att["skipped"] == reason and att["attempts"] == []
    assert att["waiting"]["loader"] == {"r1": {
        "role": "receivers", "asked": SEED003, "wrote": True,
        "found": {"net.isr.defaultqlimit": None, "net.isr.maxthreads": None}}}  # fmt: skip
    assert "label" not in att["waiting"] and att["waiting"]["senders"] == {"s1": KERNEL}
    skipped = json.loads((out / "raw" / "skipped.json").read_text())
    assert skipped == {"reason": reason, "waiting": att["waiting"]}
    # checked again: the block is there already; after the reboot the run goes ahead
    again = lifecycle.run_on_testbed(req, out, None, False, write_summary=False)
    assert isinstance(again, lifecycle.Waiting) and executed == []
    waiting = json.loads((out / "attempts.json").read_text())["waiting"]
    assert waiting["loader"]["r1"]["wrote"] is False
    bed.hosts["r1"].reboot()
    lifecycle.run_on_testbed(req, out, None, False, write_summary=False)
    assert executed == [req.spec.run_id]


def test_one_check_waits_for_the_kernel_and_the_tunables_at_once(
    tmp_path: Path, on_bed: tuple[Bed, list[str]]
) -> None:
    bed, executed = on_bed
    req = _request({"senders": {"loader": {"net.link.ifqmaxlen": "1024"}}},
                   kernel={"label": "patched", "match": "D49540"})  # fmt: skip
    done = lifecycle.run_on_testbed(req, tmp_path / "run", None, False, write_summary=False)
    assert isinstance(done, lifecycle.Waiting) and executed == []
    assert done.reason == ("waiting for kernel 'patched'; waiting for loader tunables "
                           "net.link.ifqmaxlen=1024 on s1: ccbench wrote them to "
                           "/boot/loader.conf; reboot s1")  # fmt: skip
    waiting = json.loads((tmp_path / "run" / "attempts.json").read_text())["waiting"]
    assert waiting["label"] == "patched" and set(waiting["loader"]) == {"s1"}
    # the kernel booted, the tunables too: only the kernel was missing, then nothing
    bed.hosts["s1"].reboot()
    done = lifecycle.run_on_testbed(req, tmp_path / "run", None, False, write_summary=False)
    assert isinstance(done, lifecycle.Waiting) and done.reason == "waiting for kernel 'patched'"


def test_what_was_waited_for_reaches_the_record_and_the_variant_table(tmp_path: Path) -> None:
    spec = _spec({"senders": {"loader": {"net.link.ifqmaxlen": "1024"}}})
    out = tmp_path / "run"
    wait = loader.NodeWait("s1", "senders", {"net.link.ifqmaxlen": "1024"},
                           {"net.link.ifqmaxlen": "50"}, wrote=True)  # fmt: skip
    reason = attempts.record_wait(spec, out, None, {"s1": KERNEL}, [wait])
    s = run_record.RunRecord.from_dict(summarize(out / "raw"))
    assert s.status == "waiting" and codes(s.reasons) == [Code.WAITING]
    assert s.reasons[0].text.endswith(reason)  # what it waits for, named
    assert s.waiting is not None and s.waiting.label == ""
    assert s.waiting.loader["s1"].asked == {"net.link.ifqmaxlen": "1024"}
    assert s.waiting.loader["s1"].found == {"net.link.ifqmaxlen": "50"}
    record.write(out / "summary.json", s)
    row, _ = aggregate.run_rows(out)
    assert row["status"] == "waiting" and row["waiting_kernel"] == ""
    assert row["not_run_reason"] == reason
    import pandas as pd

    cells = tables.variant_kernels(pd.DataFrame([row]), Variant.from_dict(
        {"label": row["variant"], "cc": "cubic"}))  # fmt: skip
    assert cells["kernel_wait"] == reason and cells["n_wait"] == 1
    matrix: Any = SimpleNamespace(order=[row["run_id"]], runs={})
    order = provenance.run_order(matrix, pd.DataFrame([{**row, "order": 1}]), tmp_path)
    assert order[0]["status"] == "waiting for boot tunables"


# --- before the run, and the read-back -------------------------------------------------


def test_host_apply_refuses_another_os_and_a_value_the_kernel_replaced(tmp_path: Path) -> None:
    bed = _bed(tmp_path)
    spec = _spec({"receivers": {"loader": {"net.isr.defaultqlimit": "20000"}}})
    bed.os["r1"] = "linux"
    with pytest.raises(Refused) as e:
        host_apply.plan(bed, spec)  # type: ignore[arg-type]
    assert str(e.value) == ("testbed t1: r1 (receivers): loader tunables are FreeBSD's boot "
                            "settings (/boot/loader.conf); linux has none")  # fmt: skip
    bed.os.clear()
    r1 = bed.hosts["r1"]
    r1.conf.write_text('net.isr.defaultqlimit="20000"\n')
    r1.reboot()
    with pytest.raises(Refused) as e:
        host_apply.plan(bed, spec)  # type: ignore[arg-type]
    assert str(e.value) == ("testbed t1: r1 (receivers): loader net.isr.defaultqlimit asked "
                            "'20000', found '10240' (sysctl: the loader passed '20000', the "
                            "kernel uses '10240')")  # fmt: skip
    assert not [a for a in r1.ran if a[0] == "sh"]  # nothing changed
    ok = _spec({"receivers": {"loader": {"net.isr.defaultqlimit": "1024"}}})
    r1.conf.write_text('net.isr.defaultqlimit="1024"\n')
    r1.reboot()
    assert host_apply.plan(bed, ok) == []  # type: ignore[arg-type]


def test_the_values_are_read_back_into_the_record_and_a_mismatch_is_invalid(
    tmp_path: Path,
) -> None:
    bed = _bed(tmp_path)
    spec = _spec({"senders": {"loader": {"net.isr.maxthreads": "-1",
                                         "net.link.ifqmaxlen": "1024"}}})  # fmt: skip
    s1 = bed.hosts["s1"]
    s1.conf.write_text('net.isr.maxthreads="-1"\nnet.link.ifqmaxlen="1024"\n')
    s1.reboot()
    s1.sysctl["net.link.ifqmaxlen"] = "512"  # as if the kernel had used another value
    inst = HostSettingsInstrument.for_run(bed, spec)  # type: ignore[arg-type]
    assert inst is not None
    raw = tmp_path / "raw"
    raw.mkdir()
    inst.start(Recording(bed, spec, raw))  # type: ignore[arg-type]
    part = inst.summary_part(RawDir(raw), spec)
    assert part.value["s1"].loader == {
        "net.isr.maxthreads": loader.Reported(kenv="-1", sysctl="4", judged_on="kenv"),
        "net.link.ifqmaxlen": loader.Reported(kenv="1024", sysctl="512", judged_on="sysctl"),
    }
    assert part.value["r1"].loader == {}
    assert [r.evidence for r in part.reasons if r.code == Code.HOST_SETTING] == [
        {"node": "s1", "setting": "loader net.link.ifqmaxlen", "asked": "1024", "found": "512",
         "judged_on": "sysctl"}]  # fmt: skip


# --- ccbench matrix ----------------------------------------------------------------


def _cfg(testbed: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    from ccbench.config import validate

    cfg = {
        "testbed": testbed,
        "scenarios": {"one": {"topology": {"queue": {"kind": "pfifo", "limit_bdp": 1}}}},
        "variants": [{"label": "base", "cc": "cubic", **variant}],
        "topology": {"pairs": 1, "rate_mbit": 100, "rtt_ms": 40}, "repetitions": 1,
    }  # fmt: skip
    return validate(cfg, "matrix", "t.yaml")


def test_tunables_asked_of_hosts_that_cannot_run_freebsd_are_refused_at_matrix() -> None:
    with pytest.raises(CcbenchError) as e:
        expand(_cfg({"kind": "local"}, {"host": {"senders": {"loader": SEED003}}}), "t.yaml")
    assert str(e.value) == ("t.yaml: variant base: host.senders.loader: loader tunables are "
                            "FreeBSD's boot settings; its senders run linux")  # fmt: skip
    with pytest.raises(CcbenchError) as e:
        expand(_cfg({"kind": "local"}, {"host": {"receivers": {"loader": SEED003}}}), "t.yaml")
    assert str(e.value) == ("t.yaml: variant base: host.receivers.loader: loader tunables are "
                            "FreeBSD's boot settings; this testbed's hosts run linux")  # fmt: skip
    loader.check_variant("v", "freebsd", ("linux", "freebsd"),
                         HostSettings.from_dict({"senders": {"loader": SEED003}}))  # fmt: skip
