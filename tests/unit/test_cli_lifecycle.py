"""ccbench.lifecycle, the work beneath `ccbench testbed` and `ccbench run`, without
namespaces: which testbed or run a command names, `testbed up` recording a skip, and
the testbed a run uses (kept one reused, else built for the run and taken down after).
The real testbeds are tests/integration's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, cast

import pytest

from ccbench import cli, lifecycle, record_load
from ccbench.errors import CalibrationFailed, CcbenchError, Unavailable
from ccbench.reasons import Code, Reason
from ccbench.spec import RunSpec
from ccbench.testbed import base, local, manage

REPO = Path(__file__).resolve().parents[2]
QDISC_CHECK = REPO / "tests" / "fixtures" / "matrix-qdisc-check.json"
MATRIX = json.loads(QDISC_CHECK.read_text())
RUN_ID = MATRIX["order"][0]
TB_ID = MATRIX["runs"][RUN_ID]["testbed_id"]
SMALL_RUN = REPO / "tests" / "fixtures" / "results-small" / "runs" / "two-flows-bbr-r1-3c359d7e"


class FakeTestbed:
    """Records what the lifecycle asks of a testbed."""

    kind = "local"

    def __init__(self, up: bool = False, fails: Exception | None = None) -> None:
        self.id = "fake1"
        self.calls: list[str] = []
        self._up = up
        self._fails = fails

    def is_up(self) -> bool:
        return self._up

    def up(self) -> dict[str, Any]:
        self.calls.append("up")
        if self._fails is not None:
            raise self._fails
        return {"idle_rtt": {}, "rate": {"ratio": 1.0}, "delay_method": "netem"}


def as_testbed(fake: FakeTestbed) -> base.Testbed:
    return cast("base.Testbed", fake)


@pytest.fixture(autouse=True)
def as_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """No testbed is touched here: the root check a local testbed makes passes."""
    from ccbench import privileges

    monkeypatch.setattr(privileges, "require_root", lambda: None)


@pytest.fixture
def downs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """manage.down, recorded instead of done."""
    done: list[str] = []

    def down(tb_id: str) -> str:
        done.append(tb_id)
        return "removed"

    monkeypatch.setattr(manage, "down", down)
    return done


# --- testbed up / down / status ------------------------------------------------------


def test_ids_to_remove(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local, "all_ids", lambda: ["a1", "b2"])
    assert lifecycle.ids_to_remove(True, None, None) == ["a1", "b2"]
    assert lifecycle.ids_to_remove(False, None, "tb7") == ["tb7"]
    with pytest.raises(CcbenchError, match="--id"):
        lifecycle.ids_to_remove(False, None, "../..")
    with pytest.raises(CcbenchError, match="^down: say which testbed: --id ID, --config"):
        lifecycle.ids_to_remove(False, None, None)


def test_named_testbed_from_a_matrix() -> None:
    tb = lifecycle.named_testbed(None, str(QDISC_CHECK), TB_ID, None)
    assert tb.id == TB_ID and tb.kind == "local"
    assert tb.topo.rtt_ms == MATRIX["testbeds"][TB_ID]["topology"]["rtt_ms"]
    renamed = lifecycle.named_testbed(None, str(QDISC_CHECK), TB_ID, "other1")
    assert renamed.id == "other1" and renamed.topo == tb.topo
    with pytest.raises(CcbenchError, match=r"no testbed 'nope' \(--testbed ID\)$"):
        lifecycle.named_testbed(None, str(QDISC_CHECK), "nope", None)
    with pytest.raises(CcbenchError, match="^--config FILE is needed$"):
        lifecycle.named_testbed(None, None, None, None)


def test_bring_up_writes_the_calibration(tmp_path: Path, downs: list[str]) -> None:
    tb = FakeTestbed()
    out = tmp_path / "tb" / "calibration.json"
    cal = lifecycle.bring_up(as_testbed(tb), False, str(out), False)
    assert json.loads(out.read_text()) == cal and "skipped" not in cal
    assert tb.calls == ["up"] and downs == []
    lifecycle.bring_up(as_testbed(tb), True, None, False)
    assert downs == ["fake1"]


def test_bring_up_records_what_cannot_be_built_here(tmp_path: Path, downs: list[str]) -> None:
    out = tmp_path / "tb" / "calibration.json"
    failures = out.with_name(lifecycle.FAILURES_LOG)
    missing = FakeTestbed(fails=Unavailable("no fq_codel here"))
    with pytest.raises(Unavailable):  # not asked to skip: the error stands
        lifecycle.bring_up(as_testbed(missing), False, str(out), False)
    with pytest.raises(Unavailable):  # nowhere to record the skip
        lifecycle.bring_up(as_testbed(missing), False, None, True)
    assert not out.exists()
    rec = lifecycle.bring_up(as_testbed(missing), False, str(out), True)
    assert rec == {"skipped": "no fq_codel here", "retry": False} == json.loads(out.read_text())
    assert not failures.exists()  # a missing qdisc is not retried
    stalled = FakeTestbed(fails=CalibrationFailed("RTT off", {"time": "t1", "tries": [1, 2]}))
    for _ in range(2):  # one line per failed `up`
        rec = lifecycle.bring_up(as_testbed(stalled), False, str(out), True)
    assert rec == {"time": "t1", "tries": [1, 2], "skipped": "RTT off", "retry": True}
    lines = failures.read_text().splitlines()
    assert [json.loads(x) for x in lines] == [{"time": "t1", "reason": "RTT off"}] * 2


def test_found_lists_testbeds_and_their_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for tb_id, state in (("ok1", '{"complete": true}'), ("half1", '{"complete": false}'),
                         ("bad1", "{"), ("list1", "[]"), ("none1", None)):  # fmt: skip
        (tmp_path / tb_id).mkdir()
        if state is not None:
            (tmp_path / tb_id / "state.json").write_text(state)
    monkeypatch.setattr(base, "STATE_ROOT", tmp_path)
    monkeypatch.setattr(local, "list_namespaces", lambda prefix="": [prefix + "s1"] * 3)
    monkeypatch.setattr(local, "tagged", lambda prefix="": [])  # no other test's processes
    found = {f.id: f for f in manage.found()}
    assert sorted(found) == ["bad1", "half1", "list1", "none1", "ok1"]
    assert [k for k, f in found.items() if f.complete] == ["ok1"]
    assert {f.namespaces for f in found.values()} == {3}


# --- run -------------------------------------------------------------------------------


def test_run_request_from_a_matrix(tmp_path: Path) -> None:
    req = lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID)
    spec = MATRIX["runs"][RUN_ID]["spec"]
    assert req.spec == RunSpec.from_dict(spec["run"]) and req.spec.run_id == RUN_ID
    assert req.testbed.id == TB_ID and req.attempts == spec["attempts"] and req.kernel is None
    assert lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID, 5).attempts == 5
    with_kernel = json.loads(QDISC_CHECK.read_text())
    with_kernel["runs"][RUN_ID]["spec"]["kernel"] = {"label": "k", "match": "^6"}
    (tmp_path / "matrix.json").write_text(json.dumps(with_kernel))
    req = lifecycle.run_request(None, str(tmp_path / "matrix.json"), RUN_ID)
    assert req.kernel == {"label": "k", "match": "^6"} and req.spec.run_id == RUN_ID
    with pytest.raises(CcbenchError, match="^--matrix needs --run-id$"):
        lifecycle.run_request(None, str(QDISC_CHECK), None)
    with pytest.raises(CcbenchError, match="no run 'x'$"):
        lifecycle.run_request(None, str(QDISC_CHECK), "x")


def test_a_kept_testbed_is_reused_and_left_up(
    monkeypatch: pytest.MonkeyPatch, downs: list[str]
) -> None:
    req = lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID)
    kept = FakeTestbed(up=True)
    monkeypatch.setattr(manage, "make", lambda cfg, topo: kept)
    with lifecycle.testbed_for_run(req.testbed, req.spec.topology, keep=False) as tb:
        assert tb is kept
    assert kept.calls == [] and downs == []


def test_a_testbed_built_for_a_run_is_taken_down_after_it(
    monkeypatch: pytest.MonkeyPatch, downs: list[str]
) -> None:
    req = lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID)
    built = FakeTestbed(up=False)
    monkeypatch.setattr(manage, "make", lambda cfg, topo: built)
    interrupted = pytest.raises(KeyboardInterrupt)  # also when the run is interrupted
    with interrupted, lifecycle.testbed_for_run(req.testbed, req.spec.topology, keep=False):
        assert built.calls == ["up"] and downs == ["fake1"]  # a stale one removed first
        raise KeyboardInterrupt
    assert downs == ["fake1", "fake1"]
    with lifecycle.testbed_for_run(req.testbed, req.spec.topology, keep=True):
        pass
    assert downs == ["fake1"] * 3  # --keep-testbed: only the stale one before it


def test_a_skipped_testbed_skips_its_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"skipped": "no fq_codel here", "retry": False}))

    def no_testbed(*args: Any) -> None:
        raise AssertionError("a skipped run needs no testbed")

    monkeypatch.setattr(manage, "make", no_testbed)
    out = tmp_path / "run"
    argv = ["run", "--matrix", str(QDISC_CHECK), "--run-id", RUN_ID, "--out", str(out),
            "--calibration", str(cal)]  # fmt: skip
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == f"{out}: skipped: no fq_codel here\n"
    assert json.loads((out / "raw" / "skipped.json").read_text()) == {"reason": "no fq_codel here"}
    assert json.loads((out / "attempts.json").read_text())["skipped"] == "no fq_codel here"


def test_a_run_waits_for_its_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, downs: list[str]
) -> None:
    from ccbench import attempts, run_senders

    req = dataclasses.replace(lifecycle.run_request(None, str(QDISC_CHECK), RUN_ID),
                              kernel={"label": "patched", "match": "^7"})  # fmt: skip
    monkeypatch.setattr(manage, "make", lambda cfg, topo: FakeTestbed(up=True))
    monkeypatch.setattr(run_senders, "kernel_identities", lambda tb, spec: {"s1": "6.8.0 #1"})

    def no_run(*args: Any, **kw: Any) -> None:
        raise AssertionError("nothing is measured under the wrong kernel")

    monkeypatch.setattr(attempts, "execute", no_run)
    done = lifecycle.run_on_testbed(req, tmp_path / "run", None, False, write_summary=False)
    assert isinstance(done, lifecycle.Waiting) and done.senders == {"s1": "6.8.0 #1"}
    skipped = json.loads((tmp_path / "run" / "raw" / "skipped.json").read_text())
    assert skipped["reason"] == done.reason and skipped["waiting"]["label"] == "patched"
    assert downs == []  # the kept testbed stays up


def test_the_cli_prints_what_the_run_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    argv = ["run", "--matrix", str(QDISC_CHECK), "--run-id", RUN_ID, "--out", str(out)]
    real = record_load.load(SMALL_RUN)
    f1 = real.flows[0].model_copy(update={"cc_used": "bbr", "throughput_bps": 94.2e6})
    f2 = real.flows[1].model_copy(update={"flow": 2, "cc_used": None, "cc_requested": "cubic",
                                          "throughput_bps": None})  # fmt: skip
    update = {"flows": [f1, f2], "valid": False, "reasons": [Reason.of(Code.UNCLASSIFIED, "a"),
              Reason.of(Code.UNCLASSIFIED, "b")], "utilization_pct": 94.2}  # fmt: skip
    done: Any = real.model_copy(update=update)
    seen: list[Any] = []

    def run_on_testbed(req: lifecycle.RunRequest, *args: Any, **kw: Any) -> Any:
        seen.append((req.attempts, *args, kw))
        return done

    monkeypatch.setattr(lifecycle, "run_on_testbed", run_on_testbed)
    assert cli.main([*argv, "--attempts", "4", "--raw-only"]) == 0
    assert seen == [(4, out, None, False, {"write_summary": False})]
    assert capsys.readouterr().out == (
        f"{out}: bbr 94.2 Mbit/s, flow 2 failed; utilization 94.2%; INVALID: a; b\n"
    )
    assert cli.main([*argv, "--fail-invalid"]) == 3
    done = real.model_copy(update={"flows": [], "valid": True, "reasons": [],
                                   "utilization_pct": None})  # fmt: skip
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{out}: valid"
    done = lifecycle.Waiting("waiting for kernel 'k'", {"s2": "6.8 #2", "s1": "6.8 #1"})
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == (
        f"{out}: not run: waiting for kernel 'k' (senders run: s1 6.8 #1; s2 6.8 #2)\n"
    )
