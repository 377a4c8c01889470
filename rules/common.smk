# Validation, the run matrix and small helpers shared by every rule file.
import json
import os
import subprocess
import sys

from snakemake.utils import min_version

from ccbench.testbed.kinds import kind as testbed_kind

min_version("8.0")


# Validation is `ccbench matrix`'s (config/schema.yaml, with the package's checks beyond
# what a schema says): a bad config is one line naming the field, printed first.
# The config files are read again strictly there (duplicate keys, encoding, size), and
# the config goes on stdin, not the command line (argv has a size limit).
def _expand_matrix(cfg, files):
    """The run matrix from `ccbench matrix` (one clear line and exit 1 on bad config)."""
    sources = [a for f in files for a in ("--source", str(f))]
    cp = subprocess.run(
        ["ccbench", "matrix", "--json", "--config-json", "-", *sources],
        input=json.dumps(cfg),
        capture_output=True,
        text=True,
    )
    if cp.returncode != 0:
        sys.stderr.write(cp.stderr)
        sys.exit(1)
    return json.loads(cp.stdout)


MATRIX = _expand_matrix(config, workflow.configfiles)
RESULTS = MATRIX["results_dir"]
RUNS = MATRIX["order"]
TESTBEDS = sorted(MATRIX["testbeds"])
REPORT_PDF = f"reports/{MATRIX['report_name']}.pdf"
REPORT_HTML = f"reports/{MATRIX['report_name']}.html"


wildcard_constraints:
    run="[A-Za-z0-9_.+-]+",
    tb="[a-z0-9]+",


# Rules call the `ccbench` CLI in `shell:` with nothing from the config in the command
# line: only file paths and ids (wildcards constrained above), each quoted with `:q`;
# `ccbench run`/`testbed up` read their specs from results/matrix.json by id.


# --- Runs waiting for a kernel (a variant's `kernel: {label, match}`) -------------
# `ccbench run` reads the senders' kernel first; when none runs the kernel the variant
# needs, it records the run as waiting (attempts.json and raw/skipped.json hold
# "waiting", with the time of the check), measures nothing, and the report lists it as
# waiting. Every invocation checks such runs again, and reading the workflow changes no
# file: a waiting run's `kernel_check` param is the time of its last check, so it
# differs from the one Snakemake recorded when the run last executed (params are a
# rerun trigger: profiles/default), and the run (and only it, besides the tables and
# the report) is due. When the run is measured at last, its attempts.json keeps that
# time (`rechecked_from`), so its param stays what Snakemake recorded and it is never
# redone. A run that never waited has a param Snakemake cannot represent and so does
# not record: the same (no) params as before the param existed, so results made by an
# older ccbench are not redone either. (A missing output is not needed, and a missing
# input token would not do: Snakemake does not remake a missing input of a job whose
# output exists.) The regex lives beside the run's spec, not in it: a changed regex
# changes no run id and reruns nothing that is done.


def read_json(path):
    """The JSON in `path`, or None if it is missing or unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


class _NotRecorded:
    # Not a builtin type: Snakemake leaves such a param out of its records.
    def __repr__(self):
        return "never waited"


NEVER_WAITED = _NotRecorded()


def kernel_check(wc):
    att = read_json(f"{RESULTS}/runs/{wc.run}/attempts.json")
    if not isinstance(att, dict):
        return NEVER_WAITED
    last = att.get("waiting") or att.get("rechecked_from")
    if isinstance(last, dict) and "checked_unix" in last:
        return f"kernel checked at {last['checked_unix']!r}"
    return NEVER_WAITED


def is_waiting(run):
    att = read_json(f"{RESULTS}/runs/{run}/attempts.json")
    return isinstance(att, dict) and "waiting" in att


WAITING = {r for r in RUNS if is_waiting(r)}


def run_matrix(wc):
    # Snakemake does not look at the params of a job downstream of one it must run
    # (the matrix, after a config change) when the file between them is ancient(): a
    # waiting run therefore takes the matrix as a plain input, and runs after it.
    path = f"{RESULTS}/matrix.json"
    return path if wc.run in WAITING else ancient(path)


# Runs still to do wait for the one before them in the seeded order of their testbed,
# so they execute in that order. Finished runs take no part in the chain (a chain
# through them would make Snakemake redo them when a run before them is new), and the
# profile leaves "input" out of the rerun triggers, so a changed order reruns nothing.
PREV = {}
for _tb in TESTBEDS:
    _todo = [
        r
        for r in RUNS
        if MATRIX["runs"][r]["testbed_id"] == _tb
        and (r in WAITING or not os.path.exists(f"{RESULTS}/runs/{r}/attempts.json"))
    ]
    PREV.update({rid: (_todo[i - 1] if i else None) for i, rid in enumerate(_todo)})


def previous_run(wc):
    prev = PREV.get(wc.run)
    return ancient(f"{RESULTS}/runs/{prev}/attempts.json") if prev else []


def results_of(matrix_path):
    """The results directory, from the path of its matrix.json."""
    return os.path.dirname(matrix_path)


def testbed_of(run_id):
    return MATRIX["runs"][run_id]["testbed_id"]


def lane_of(tb):
    """The one-job-at-a-time resource testbed `tb`'s jobs take: its dumbbell's, or the
    first where a kind's dumbbells share hosts (a lab's sender sets, one receiver)."""
    k = testbed_kind(MATRIX["testbeds"][tb]["testbed"]["kind"])
    return 1 if k.caps.dumbbells_share_hosts else MATRIX["testbeds"][tb]["dumbbell"]


def dumbbell_of(run_id):
    return lane_of(testbed_of(run_id))


# --- Testbeds that could not be calibrated (rules/testbed.smk) --------------------
# Their calibration.json holds the tries, "skipped" (the reason) and "retry": true;
# their runs are recorded as not run. Rerunning the workflow tries exactly those again:
# the testbed because its params (calibration_failures) changed, its runs because their
# calibration input is then not ancient (run_cal) and is made again.


def calibration_path(tb):
    return f"{RESULTS}/testbeds/{tb}/calibration.json"


def calibration_failures(tb):
    """How many times `up` of this testbed failed calibration in every try (a line each
    in calibration-failures.jsonl beside calibration.json, which then records the not
    run). A params of testbed_up: when it grows, the failed testbed is due again; after
    it came up, it stays the same and nothing reruns."""
    try:
        with open(f"{RESULTS}/testbeds/{tb}/calibration-failures.jsonl") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0


def testbed_threads(wc):
    # Calibration times pings to a millisecond: on a kind calibrated on this machine's
    # CPU (local namespaces), no other job (e.g. the parse of the previous testbed's
    # last run) may run beside it, so it takes every core; a remote testbed is
    # calibrated on its own hosts.
    k = testbed_kind(MATRIX["testbeds"][wc.tb]["testbed"]["kind"])
    return workflow.cores if k.caps.exclusive_calibration else 1


# --- One job at a time per dumbbell ------------------------------------------------
# Runs (and the rate probe of a testbed's calibration) on one dumbbell share its
# bottleneck: a resource per dumbbell the matrix uses, of which each such job takes
# one; the workflow has one of each. The most dumbbells a config may ask for is the
# testbed kind's (ccbench.testbed.kinds), checked when the matrix is made.
DUMBBELLS = sorted({lane_of(tb) for tb in MATRIX["testbeds"]})
workflow.global_resources.update({f"dumbbell_{d}": 1 for d in DUMBBELLS})


def _on_dumbbell(d, dumbbell_of_job):
    return lambda wc: int(dumbbell_of_job(wc) == d)


TESTBED_RESOURCES = {
    f"dumbbell_{d}": _on_dumbbell(d, lambda wc: lane_of(wc.tb)) for d in DUMBBELLS
}
RUN_RESOURCES = {
    f"dumbbell_{d}": _on_dumbbell(d, lambda wc: dumbbell_of(wc.run)) for d in DUMBBELLS
}


def _parse_on_dumbbell(d):
    # A run's traffic on this machine's CPU (local namespaces): its parse waits for
    # the dumbbell, so no parse runs beside a run's traffic. It is cheap: `ccbench run`
    # kept what it judged and parse moves it into place.
    def needs(wc):
        kind = testbed_kind(MATRIX["testbeds"][testbed_of(wc.run)]["testbed"]["kind"])
        return int(kind.caps.senders_here and dumbbell_of(wc.run) == d)

    return needs


PARSE_RESOURCES = {f"dumbbell_{d}": _parse_on_dumbbell(d) for d in DUMBBELLS}


def not_run_to_retry(run):
    """True if the run was recorded as not run because its testbed's calibration
    failed (rules/testbed.smk), so the workflow should try it again. A run skipped
    for what this kernel lacks stays skipped."""
    att = read_json(f"{RESULTS}/runs/{run}/attempts.json")
    if not att or "skipped" not in att:
        return False
    cal = read_json(calibration_path(testbed_of(run)))
    return not cal or "skipped" not in cal or bool(cal.get("retry"))


def run_cal(wc):
    # ancient(): a rebuilt testbed or rewritten matrix must not make finished runs
    # look stale; a run's id already changes with everything that affects it. A run
    # not run for a failed calibration follows its testbed when that comes up again.
    path = calibration_path(testbed_of(wc.run))
    return path if not_run_to_retry(wc.run) else ancient(path)


def testbeds_down():
    # Called at the end and on failure: no namespaces or processes stay behind.
    # A failed `down` is said (it would leave namespaces or processes for the next run).
    for tb in TESTBEDS:
        cp = subprocess.run(
            ["ccbench", "testbed", "down", "--id", tb], capture_output=True, text=True
        )
        if cp.returncode != 0:
            lines = (cp.stderr.strip() or "no message").splitlines()
            print(
                f"ccbench: testbed down --id {tb} failed: {lines[-1]}", file=sys.stderr
            )


onsuccess:
    testbeds_down()


onerror:
    testbeds_down()
