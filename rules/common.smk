# Validation, the run matrix and small helpers shared by every rule file.
import json
import os
import subprocess
import sys

from snakemake.utils import min_version, validate

min_version("8.0")


validate(config, "../config/schema.yaml")


def _expand_matrix(cfg):
    """The run matrix from `ccbench matrix` (one clear line and exit 1 on bad config)."""
    cp = subprocess.run(
        ["ccbench", "matrix", "--json", "--config-json", json.dumps(cfg)],
        capture_output=True,
        text=True,
    )
    if cp.returncode != 0:
        sys.stderr.write(cp.stderr)
        sys.exit(1)
    return json.loads(cp.stdout)


MATRIX = _expand_matrix(config)
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
        and not os.path.exists(f"{RESULTS}/runs/{r}/attempts.json")
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


def dumbbell_of(run_id):
    return MATRIX["testbeds"][testbed_of(run_id)]["dumbbell"]


def testbeds_down():
    # Called at the end and on failure: no namespaces or processes stay behind.
    for tb in TESTBEDS:
        subprocess.run(["ccbench", "testbed", "down", "--id", tb], capture_output=True)


onsuccess:
    testbeds_down()


onerror:
    testbeds_down()
