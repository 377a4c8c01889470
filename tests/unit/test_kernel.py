"""A variant's kernel: `kernel: {label, match}` (schema, regex check, stable run ids),
sender kernel identities (Linux build id, FreeBSD kern.version/ident), the validity
check of a run against its variant's regex, and what a delta's repetitions resolve."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ccbench import aggregate, kernel, matrix, metric_catalog
from ccbench.errors import CcbenchError
from ccbench.hosts.freebsd import FreeBSDHost
from ccbench.hosts.linux import LinuxHost
from ccbench.model import Variant
from ccbench.reasons import Code
from ccbench.report import tables
from ccbench.summarize import summarize
from tests.conftest import codes, damaged_files
from tests.unit.test_model import fixture_matrix

REPO = Path(__file__).resolve().parents[2]
FIXTURE_RUN = REPO / "tests/fixtures/results-small/runs/two-flows-cubic-r1-71654894"

# /sys/kernel/notes of this machine's kernel as `od -An -v -tx1` printed it (its first
# note is the GNU build id, then Linux and Xen notes).
NOTES_OD = """
 04 00 00 00 14 00 00 00 03 00 00 00 47 4e 55 00
 4a 5a 9b 0a ff b6 6c 43 7a bc d4 55 d2 73 8a f8
 79 98 5f a9 06 00 00 00 04 00 00 00 01 01 00 00
 4c 69 6e 75 78 00 00 00 00 00 00 00 06 00 00 00
"""
BUILD_ID = "4a5a9b0affb66c437abcd455d2738af879985fa9"
# FreeBSD: stock 14.2-RELEASE, and a kernel built with D49540 and KERNCONF=D49540.
STOCK = "FreeBSD 14.2-RELEASE releng/14.2-n269506-c8918d6c7412 GENERIC\n\nGENERIC\n"
PATCHED = ("FreeBSD 14.2-RELEASE #1 releng/14.2-n269506-c8918d6c7412-dirty: Tue Apr 1 2025\n"
           "    root@build:/usr/obj/usr/src/amd64.amd64/sys/D49540\n\nD49540\n")  # fmt: skip


def config(kernels: list[object]) -> dict:
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    for v, k in zip(cfg["variants"], kernels, strict=False):
        v["kernel"] = k
    return cfg


def test_object_form_keeps_the_run_ids_of_the_label_and_the_regex_is_beside_the_spec() -> None:
    plain = matrix.load(config(["before patch", "after patch"]))
    obj = matrix.load(config([{"label": "before patch", "match": "^6\\."},
                              {"label": "after patch", "match": "D49540"}]))  # fmt: skip
    other = matrix.load(config([{"label": "before patch", "match": "nothing"},
                                {"label": "after patch", "match": "^6\\."}]))  # fmt: skip
    assert sorted(plain.runs) == sorted(obj.runs) == sorted(other.runs)
    assert obj.variants[0].kernel == "before patch"
    assert obj.variants[0].kernel_match == "^6\\."
    assert obj.variants[2].kernel_match is None and plain.variants[0].kernel_match is None
    assert "kernel_match" not in obj.to_dict()["variants"][2]
    r = next(r for r in obj.runs.values() if r.variant == "reno")
    assert r.kernel == {"label": "after patch", "match": "D49540"}
    assert r.spec.to_dict()["extra"]["variant"]["kernel"] == "after patch"
    assert "kernel_match" not in r.spec.to_dict()["extra"]["variant"]
    assert "kernel" not in next(iter(plain.runs.values())).to_dict()["spec"]
    assert obj.resolve_target_pct == 2


def test_label_change_changes_the_ids() -> None:
    a = matrix.load(config([{"label": "before", "match": "x"}]))
    b = matrix.load(config([{"label": "before patch", "match": "x"}]))
    cubic = [sorted(r.id for r in m.runs.values() if r.variant == "cubic") for m in (a, b)]
    assert cubic[0] != cubic[1]


@pytest.mark.parametrize(
    ("kern", "message"),
    [
        ({"label": "after", "match": "D49540("}, r"variant reno: kernel.match: not a regular "
                                                 r"expression \(missing \), unterminated"),
        ({"label": "after"}, "'match' is a required property"),
        ({"label": "after", "match": "x", "regex": "y"}, "kernel"),
        ({"match": "x"}, "kernel"),
        ({"label": "", "match": "x"}, "kernel"),
    ],
)  # fmt: skip
def test_bad_kernel_is_one_clear_error(kern: dict, message: str) -> None:
    with pytest.raises(CcbenchError, match=message) as e:
        matrix.load(config(["", copy.deepcopy(kern)]))
    assert "\n" not in str(e.value)


def test_linux_identity_has_the_build_id() -> None:
    assert kernel.build_id_from_notes(NOTES_OD) == BUILD_ID
    assert kernel.build_id_from_notes("") is None
    assert kernel.build_id_from_notes("zz 01") is None
    assert kernel.build_id_from_notes(" 04 00 00 00 40 00 00 00 03 00 00 00") is None
    ident = kernel.identity("linux", {"kernel": "6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0\n",
                                      "build_id": NOTES_OD})  # fmt: skip
    assert ident == f"6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0 build-id {BUILD_ID}"
    assert kernel.short(ident) == "6.18.44-fc-v669 #1"
    assert kernel.identity("linux", {"kernel": "6.1.0 #1 SMP", "build_id": ""}) == "6.1.0 #1 SMP"


def test_freebsd_identity_and_short_names() -> None:
    stock = kernel.identity("freebsd", {"kernel": STOCK, "build_id": "ab" * 20 + "\n"})
    assert stock.startswith("FreeBSD 14.2-RELEASE releng/14.2-n269506-c8918d6c7412 GENERIC GENERIC")
    assert stock.endswith("build-id " + "ab" * 20)
    assert kernel.short(stock) == "14.2-RELEASE"
    patched = kernel.identity("freebsd", {"kernel": PATCHED, "build_id": "unknown oid"})
    assert "build-id" not in patched
    assert kernel.short(patched) == "14.2-RELEASE #1 D49540"
    # The regexes of the README's worked example (emulab-seed001-reboot.yaml) tell them
    # apart, with or without a build id.
    cfg = yaml.safe_load((REPO / "config/examples/emulab-seed001-reboot.yaml").read_text())
    need = {v["kernel"]["label"]: v["kernel"]["match"] for v in cfg["variants"]}
    before, after = need["before patch"], need["after patch (D49540)"]
    plain = kernel.identity("freebsd", {"kernel": STOCK})
    for ident in (stock, plain):
        assert kernel.matches(before, ident) and not kernel.matches(after, ident)
    assert kernel.matches(after, patched) and not kernel.matches(before, patched)


def test_driver_plans_are_argv_lists() -> None:
    assert LinuxHost().kernel_identity()["kernel"] == ["uname", "-r", "-v"]
    assert FreeBSDHost().kernel_identity()["kernel"] == [
        "sysctl", "-n", "kern.version", "kern.ident",
    ]  # fmt: skip


def test_identity_of_runs_made_before_from_uname_a() -> None:
    uname = ("Linux ccb 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) "
             "x86_64 GNU/Linux")  # fmt: skip
    facts = {"senders": {"s1": {"os": "linux", "uname": uname}}}
    assert kernel.of_facts(facts) == {
        "s1": "6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)"
    }
    assert kernel.of_facts(None) == {} and kernel.of_facts({"senders": []}) == {}


def _raw_with(tmp_path: Path, req: dict | None, ident: str) -> Path:
    raw = tmp_path / "raw"
    shutil.copytree(FIXTURE_RUN / "raw", raw)
    facts = json.loads((raw / "facts.json").read_text())
    facts["senders"]["s1"]["kernel"] = ident
    (raw / "facts.json").write_text(json.dumps(facts))
    if req is not None:
        (raw / "kernel.json").write_text(json.dumps(req))
    return raw


def test_a_run_on_the_wrong_kernel_is_invalid_with_the_reason(tmp_path: Path) -> None:
    ok = summarize(_raw_with(tmp_path / "a", {"label": "after", "match": "D49540"},
                             "6.1.0 #1 SMP D49540"))  # fmt: skip
    assert ok["kernel"] == {
        "label": "after", "match": "D49540",
        "senders": {"s1": {"identity": "6.1.0 #1 SMP D49540", "short": "6.1.0 #1"}},
    }  # fmt: skip
    assert Code.KERNEL_MISMATCH not in codes(ok["reasons"])
    bad = summarize(_raw_with(tmp_path / "b", {"label": "after", "match": "D49540"},
                              "6.1.0 #1 SMP"))  # fmt: skip
    assert not bad["valid"]
    assert [r.evidence for r in bad["reasons"] if r.code == Code.KERNEL_MISMATCH] == [
        {"node": "s1", "kernel": "6.1.0 #1 SMP", "match": "D49540"}]  # fmt: skip
    broken = tmp_path / "c"
    raw = _raw_with(broken, None, "6.1.0")
    (raw / "kernel.json").write_text('{"label": 3}')
    s = summarize(raw)
    assert "kernel.json" in damaged_files(s["reasons"])
    # Without a requirement the identity is provenance only.
    plain = summarize(_raw_with(tmp_path / "d", None, "6.1.0 #1"))
    assert plain["kernel"]["match"] is None
    assert Code.KERNEL_MISMATCH not in codes(plain["reasons"])


def _runs(values: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for var, vals in values.items():
        for rep, x in enumerate(vals, start=1):
            row = {c: x for c in metric_catalog.KEYS}
            short = "14.2-RELEASE" if var == "before" else "14.2-RELEASE #1 D49540"
            row.update(run_id=f"{var}-{rep}", scenario="s", variant=var, repetition=rep,
                       valid=True, skipped=False, status="valid", kernel_short=short)  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)


def test_smallest_resolvable_change_and_repetitions_for_the_target() -> None:
    runs = _runs({"before": [100.0, 100.0, 100.0], "after": [97.0, 99.0, 95.0]})
    flows = pd.DataFrame(columns=["run_id", "flow", "throughput_mbps", "cc_requested"])
    summ = aggregate.summarize_groups(runs, flows, "before", ["before", "after"], 2.0)
    after = summ.set_index("variant").loc["after"]
    # Paired deltas -3, -1, -5 %: mean -3, s = 2, half-width t(0.975, 2) * 2 / sqrt(3).
    half = 4.302652729911275 * 2 / math.sqrt(3)
    assert after["throughput_sum_mbps_delta_pct"] == pytest.approx(-3.0)
    assert after["throughput_sum_mbps_delta_ci95_pct"] == pytest.approx(half)
    # t(n-1) * 2 / sqrt(n) < 2 first at n = 7 (2.447 * 2 / 2.646 = 1.85; n = 6: 2.10).
    assert after["throughput_sum_mbps_delta_reps_to_resolve"] == 7
    assert after["kernel_short"] == "14.2-RELEASE #1 D49540"
    assert after["n_waiting"] == 0
    m = fixture_matrix(variants=(
        Variant.from_dict({"label": "before", "cc": "cubic", "kernel": "before patch"}),
        Variant.from_dict({"label": "after", "cc": "cubic", "kernel": "after patch"}),
    ), resolve_target_pct=2)  # fmt: skip
    d = tables.delta_table(summ, {}, m)
    assert d["rows"][0]["kernels"] == (
        "after patch (14.2-RELEASE #1 D49540) vs before patch (14.2-RELEASE)"
    )
    sum_col = [m.key for m in tables.DELTA_METRICS].index("throughput_sum_mbps")
    assert d["resolution"]["rows"][0]["cells"][sum_col]["text"] == "±5.0 · 7"
    assert d["target"] == "2.0"


def test_no_kernel_words_when_nothing_differs() -> None:
    base = pd.Series({"variant": "cubic", "kernel_short": "6.1 #1"})
    row = pd.Series({"variant": "reno", "kernel_short": "6.1 #1"})
    assert tables.kernels_compared(row, base, {}) == ""
    assert tables.kernel_text("", "") == ""


def test_the_variant_table_names_the_regex_finished_runs_were_judged_on() -> None:
    """After a reboot the config's regexes change; runs measured before keep the regex
    they were judged on (summary kernel.match -> runs.csv kernel_match), and the variant
    table says so when it is not the config's current one."""
    v = Variant.from_dict({"label": "before", "cc": "cubic", "kernel": "before patch",
                           "kernel_match": "^new$"})  # fmt: skip
    runs = pd.DataFrame(
        [
            {"variant": "before", "skipped": False, "status": "valid", "kernel": "s1: 6.1 #1",
             "kernel_match": "^6\\.1"},
            {"variant": "before", "skipped": False, "status": "valid", "kernel": "s1: 6.1 #1",
             "kernel_match": "^6\\.1"},
            {"variant": "before", "skipped": False, "status": "valid", "kernel": "s1: 6.2 #1",
             "kernel_match": "^new$"},
            {"variant": "before", "skipped": True, "status": "waiting", "kernel": "",
             "kernel_match": "^old-waiting$"},
        ]
    )  # fmt: skip
    cells = tables.variant_kernels(runs, v)
    assert cells["kernel_judged"] == ["/^6\\.1/ (2 runs)"]  # not the current one, not waiting
    assert tables.variant_kernels(runs.drop(columns="kernel_match"), v)["kernel_judged"] == []


def test_a_run_that_waited_keeps_its_last_check_when_it_is_recorded_again(tmp_path: Path) -> None:
    """The workflow's kernel_check param (rules/common.smk) reads `waiting.checked_unix`
    of a waiting run and `rechecked_from` of one that waited before: the record that
    replaces a waiting one keeps that time; a run that never waited has none."""
    from ccbench import attempts
    from ccbench.spec import Flow, RunSpec, Topology

    spec = RunSpec(topology=Topology(pairs=1), flows=(Flow(pair=1, cc="cubic"),))
    out = tmp_path / "run"
    assert attempts.rechecked_from(out) == {}  # nothing recorded yet
    attempts.record_wait(spec, out, {"label": "after patch", "match": "x"}, {"s1": "6.1"})
    waited = json.loads((out / "attempts.json").read_text())["waiting"]["checked_unix"]
    assert attempts.rechecked_from(out) == {"rechecked_from": {"checked_unix": waited}}
    attempts.record_skip(spec, out, "no fq_codel here")  # e.g. not run after all
    again = json.loads((out / "attempts.json").read_text())
    assert again["rechecked_from"] == {"checked_unix": waited} and "waiting" not in again
    attempts.record_skip(spec, out, "no fq_codel here")  # raw/ no longer says waiting
    assert "rechecked_from" not in json.loads((out / "attempts.json").read_text())
