"""The endpoints' CPU (ccbench.instruments.host_cpu): its command plans on fake local
and SSH testbeds (FreeBSD's `sysctl -n kern.cp_time kern.cp_times`, checked against
sys/kern/kern_clock.c; no FreeBSD here), its record read back, and the service demand
(CPU µs per KB delivered, netperf's calc_service_demand) recomputed here from the raw
files: a real local run's iperf3 JSON and /proc/stat, and host counters written from
the kernels' formats."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from ccbench import aggregate, instruments
from ccbench.exec import Result
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.linux import LinuxHost
from ccbench.instruments import BadRecord, Recording
from ccbench.instruments.host_cpu import MACHINE, HostCpu, HostCpuPart, file
from ccbench.layout import AFTER, BEFORE, RawDir, load_spec
from ccbench.run_record import RunRecord
from ccbench.spec import RunSpec
from tests.conftest import damaged_files
from tests.raw_meta import read_meta

CAP = Path(__file__).resolve().parents[1] / "captures"
LOCAL = CAP / "host-cpu" / "local-2cubic"
FBSD = CAP / "freebsd" / "sysctl-n-kern.cp_time-cp_times-4cpu-{}-written-from-kern-clock-c.txt"
FREEBSD_ARGV = ["sysctl", "-n", "kern.cp_time", "kern.cp_times"]


class Ex:
    """One node's executor: prints the counters of its OS, before then after."""

    def __init__(self, os: str) -> None:
        self.os = os
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], *, check: bool = True, **kw: Any) -> Result:
        self.calls.append(list(argv))
        when = BEFORE if len(self.calls) == 1 else AFTER
        path = Path(str(FBSD).format(when)) if self.os == "freebsd" else \
            CAP / f"procstat-{when}.txt"  # fmt: skip
        return Result(tuple(argv), 0, path.read_text(), "")


class FakeTestbed:
    """FreeBSD or Linux senders, Linux receivers; `kind` local (one kernel) or ssh."""

    def __init__(self, kind: str, senders_os: str = "linux") -> None:
        self.kind = kind
        self.senders_os = senders_os
        self.exs: dict[str, Ex] = {}

    def driver(self, node: str) -> Any:
        return FreeBSDHost() if node.startswith("s") and self.senders_os == "freebsd" \
            else LinuxHost()  # fmt: skip

    def ex(self, node: str) -> Ex:
        return self.exs.setdefault(node, Ex(self.driver(node).os))


def _spec() -> RunSpec:
    return load_spec(LOCAL)  # 2 pairs, two cubic flows of 4 s


def _raw_with_flows(tmp: Path) -> Path:
    """A raw/ holding the local run's iperf3 JSON and spec, without its counters."""
    raw = tmp / "raw"
    raw.mkdir()
    for f in LOCAL.iterdir():
        if not f.name.startswith("host-cpu-"):
            shutil.copy(f, raw / f.name)
    return raw


def _iperf3(k: int, side: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((LOCAL / f"{side}-{k}.json").read_text())
    return doc


def _kb_delivered() -> float:
    """What the two servers counted, in netperf's KB (1024 bytes)."""
    return sum(_iperf3(k, "server")["end"]["sum_received"]["bytes"] for k in (1, 2)) / 1024


def test_the_counters_argv_per_os() -> None:
    """FreeBSD: two lines of CP_USER..CP_IDLE ticks (sys/kern/kern_clock.c
    sysctl_kern_cp_time and sysctl_kern_cp_times); Linux: /proc/stat."""
    assert FreeBSDHost().cpu_counters() == FREEBSD_ARGV
    assert LinuxHost().cpu_counters() == ["cat", "/proc/stat"]


def test_ssh_reads_every_endpoint_before_and_after(tmp_path: Path) -> None:
    tb = FakeTestbed("ssh", senders_os="freebsd")
    ins = HostCpu.for_run(tb, _spec())  # type: ignore[arg-type]
    assert ins is not None
    assert ins.nodes == {"s1": "sender", "s2": "sender", "r1": "receiver", "r2": "receiver"}
    assert ins.node_os == {"s1": "freebsd", "s2": "freebsd", "r1": "linux", "r2": "linux"}
    assert ins.machine is False
    rec = Recording(tb, _spec(), tmp_path)  # type: ignore[arg-type]
    ins.start(rec)
    ins.stop(rec)
    assert {n: ex.calls for n, ex in tb.exs.items()} == {
        "s1": [FREEBSD_ARGV] * 2, "s2": [FREEBSD_ARGV] * 2,
        "r1": [["cat", "/proc/stat"]] * 2, "r2": [["cat", "/proc/stat"]] * 2,
    }  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        file(n, w) for n in ("s1", "s2", "r1", "r2") for w in (BEFORE, AFTER))  # fmt: skip


def test_one_kernel_reads_the_machine_once(tmp_path: Path) -> None:
    tb = FakeTestbed("local")
    ins = HostCpu.for_run(tb, _spec())  # type: ignore[arg-type]
    assert ins is not None and ins.machine is True
    rec = Recording(tb, _spec(), tmp_path)  # type: ignore[arg-type]
    assert ins.snapshots(rec, BEFORE) == [("s1", ["cat", "/proc/stat"], file(MACHINE, BEFORE))]
    assert file(MACHINE, AFTER) == "host-cpu-machine-after.txt"


def test_the_record_reads_back() -> None:
    for tb in (FakeTestbed("local"), FakeTestbed("ssh", senders_os="freebsd")):
        ins = HostCpu.for_run(tb, _spec())  # type: ignore[arg-type]
        assert ins is not None
        again = HostCpu.from_record(json.loads(json.dumps(ins.record_json())))
        assert again == ins
    recorded = read_meta(LOCAL).instrument(HostCpu)
    assert recorded is not None and recorded.machine is True
    for bad in ({"nodes": {"s1": "router"}, "node_os": {}, "machine": False}, {"nodes": {}},
                {"nodes": {}, "node_os": {}, "machine": "yes"}, []):  # fmt: skip
        with pytest.raises(BadRecord):
            HostCpu.from_record(bad)


def test_registered_right_before_the_routers_cpu() -> None:
    names = list(instruments.REGISTRY)
    assert names[-2:] == ["host_cpu", "router_cpu"]
    assert RunRecord.model_fields["host_cpu"].annotation == HostCpuPart | None


def _recorded() -> HostCpu:
    """The capture's run's host_cpu record, as meta.json keeps it."""
    got = read_meta(LOCAL).instrument(HostCpu)
    assert got is not None
    return got


def _part(raw: Path, ins: HostCpu) -> tuple[HostCpuPart, RawDir]:
    rd = RawDir(raw)
    got = ins.summary_part(rd, load_spec(raw))
    assert got.reasons == []
    return HostCpuPart.model_validate(got.value), rd


def test_local_service_demand_recomputed_from_raw() -> None:
    """One kernel: the figures are the iperf3 processes'. CPU time = each process's %
    of one CPU × the seconds iperf3 measured (the client's end.sum_sent.seconds); µs
    of it per KB the servers counted."""
    part, rd = _part(LOCAL, _recorded())
    assert rd.problems == []
    assert part.scope == MACHINE and "machine" in part.note
    kb = _kb_delivered()
    for role, side in (("sender", "host_total"), ("receiver", "remote_total")):
        ends = [_iperf3(k, "iperf3")["end"] for k in (1, 2)]
        cpu_s = sum(e["cpu_utilization_percent"][side] / 100 * e["sum_sent"]["seconds"]
                    for e in ends)  # fmt: skip
        r = getattr(part, role)
        assert r.source == "iperf3_process" and r.counters is None
        assert r.kb_delivered == pytest.approx(kb)
        assert r.sd_us_per_kb == pytest.approx(cpu_s * 1e6 / kb)
        # the machine's 2 CPUs over the 4 s window
        assert r.cpus == 2 and r.cpu_pct == pytest.approx(100 * cpu_s / (2 * 4.0))
        assert r.busiest_cpu_pct is None  # the machine's busiest is no host's
    # the receivers' servers copy every byte: they cost more per KB than the senders
    assert part.receiver.sd_us_per_kb > 3 * part.sender.sd_us_per_kb  # type: ignore[operator]
    # every host's shares are the machine's, and say so
    s1, r2 = part.hosts["s1"], part.hosts["r2"]
    assert s1.machine and s1.source == "proc_stat" and s1.all_cpus == r2.all_cpus
    assert s1.all_cpus is not None and s1.all_cpus.busy_pct == pytest.approx(100 * 877 / 879)


def test_hosts_of_their_own_service_demand_from_their_counters(tmp_path: Path) -> None:
    """FreeBSD senders (4 CPUs, busy 2135 of 5080 ticks) and Linux receivers (2 CPUs,
    busy 597 of 603): CPU time = busy share × CPUs × the traffic window (4 s), summed
    over the role's hosts (netperf: utilization × elapsed × CPUs)."""
    raw = _raw_with_flows(tmp_path)
    tb = FakeTestbed("ssh", senders_os="freebsd")
    ins = HostCpu.for_run(tb, _spec())  # type: ignore[arg-type]
    assert ins is not None
    rec = Recording(tb, _spec(), raw)  # type: ignore[arg-type]
    ins.start(rec)
    ins.stop(rec)
    part, rd = _part(raw, ins)
    assert rd.problems == [] and part.scope == "hosts"
    kb = _kb_delivered()
    snd, rcv = part.sender, part.receiver
    assert (snd.source, rcv.source) == ("kern_cp_time", "proc_stat")
    assert (snd.cpus, rcv.cpus) == (8, 4)
    snd_s = 2 * (2135 / 5080) * 4 * 4.0
    rcv_s = 2 * (597 / 603) * 2 * 4.0
    assert snd.sd_us_per_kb == pytest.approx(snd_s * 1e6 / kb)
    assert rcv.sd_us_per_kb == pytest.approx(rcv_s * 1e6 / kb)
    assert snd.cpu_pct == pytest.approx(100 * 2135 / 5080)
    assert snd.busiest_cpu_pct == pytest.approx(100 * 1230 / 1270)
    # the processes' figure is there too, named as such
    assert snd.process is not None and snd.process.source == "iperf3_process"
    assert part.hosts["s1"].all_cpus is not None
    assert part.hosts["s1"].all_cpus.softirq_pct is None  # FreeBSD's is inside irq
    assert not part.hosts["s1"].machine


def test_missing_or_garbled_counters_are_problems(tmp_path: Path) -> None:
    raw = _raw_with_flows(tmp_path)
    ins = HostCpu(
        nodes={"s1": "sender", "s2": "sender", "r1": "receiver", "r2": "receiver"},
        node_os={"s1": "freebsd", "s2": "freebsd", "r1": "linux", "r2": "linux"},
    )
    for node in ("s2", "r1", "r2"):
        for w in (BEFORE, AFTER):
            shutil.copy(CAP / f"procstat-{w}.txt", raw / file(node, w))
    (raw / file("s1", BEFORE)).write_text("sysctl: unknown oid 'kern.cp_times'\n")
    (raw / file("s1", AFTER)).write_text("sysctl: unknown oid 'kern.cp_times'\n")
    (raw / file("s2", AFTER)).unlink()
    rd = RawDir(raw)
    got = HostCpuPart.model_validate(ins.summary_part(rd, load_spec(raw)).value)
    assert damaged_files(rd.problems) == [
        "host-cpu-s1-before.txt/host-cpu-s1-after.txt", "host-cpu-s2-after.txt"]  # fmt: skip
    # a role with a host unread has no counters figure: its processes' stands
    assert got.sender.counters is None and got.sender.source == "iperf3_process"
    assert got.receiver.source == "proc_stat"


def test_a_run_from_before_it_gets_its_processes_figures() -> None:
    ins = HostCpu.without_record(RawDir(LOCAL), _spec())
    assert ins is not None and ins.counters is False
    part, rd = _part(LOCAL, ins)
    assert part.scope == "not read" and rd.problems == []
    assert part.hosts["s1"].os is None and part.hosts["s1"].all_cpus is None
    assert part.sender.sd_us_per_kb is not None and part.sender.cpu_pct is None


def _record(host_cpu: dict[str, Any] | None) -> RunRecord:
    base = {"run_id": "x", "scenario": "s", "variant": "v", "repetition": 1, "spec": {},
            "started_unix": None, "flows": [], "throughput_sum_bps": None,
            "utilization_pct": None, "jain": None, "bottleneck": {"drops": None},
            "calibration": {}, "valid": True, "reasons": []}  # fmt: skip
    return RunRecord.from_dict({**base, "host_cpu": host_cpu})


def test_the_runs_table_columns() -> None:
    part = _recorded().summary_part(RawDir(LOCAL), _spec()).value
    cols = aggregate._cpu_columns(_record(part))
    assert cols["sender_sd_us_per_kb"] == part["sender"]["sd_us_per_kb"]
    assert cols["receiver_cpu_pct"] == part["receiver"]["cpu_pct"]
    assert cols["sender_cpu_source"] == cols["receiver_cpu_source"] == "iperf3_process"
    assert math.isnan(cols["sender_busiest_cpu_pct"])
    none = aggregate._cpu_columns(_record(None))
    assert math.isnan(none["sender_cpu_pct"]) and none["receiver_cpu_source"] == ""
