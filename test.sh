#!/usr/bin/env bash
# The whole test suite: lint, format, types, workflow lint, unit and integration tests.
# Integration tests build real namespaces, so run as root: 'sudo ./test.sh'.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
export PATH="$PWD/.venv/bin:$PATH"
# each part's heading says when it began (seconds since the suite began): where the time goes
part() { echo "== $* [${SECONDS} s]"; }
lint() {
  part "ruff (lint + format)"
  ruff check src tests bench scripts || return
  ruff format --check src tests bench scripts || return
  part "mypy"
  mypy src/ccbench || return
  part "snakefmt --check"
  snakefmt --check Snakefile rules/ || return
  part "snakemake --lint"
  snakemake --lint --cores 1 >/dev/null
}
if [ "$#" -gt 0 ]; then
  # With arguments (./test.sh -k foo, ./test.sh -m slow, ./test.sh tests/unit/test_x.py):
  # the linters, then one serial pytest run with them, as before.
  lint
  part "pytest $*"
  python -m pytest -q --durations=15 "$@"
  exit
fi
# The slowest tests listed after each part: ./test.sh's goal is 7 minutes on 2 cores
# (docs/testing.md: where it stands). Three parts, each using what the one before left:
# 1. The integration tests marked shares_cpu, whose subject is not fidelity (a run the
#    host stalls is accepted as judged), three modules at a time (--dist loadfile: a
#    module's fixtures built once), alone: the part is bound by the CPU
#    (bench/shares_part.py).
# 2. The fidelity tests, one at a time. They time real traffic in namespaces, so nothing
#    may take the CPU from them, and they leave most of it idle. Beside them, one job at
#    idle priority (SCHED_IDLE: any other task on a core takes it at once), which sends
#    no traffic and starts no real-time process: the linters, then the unit tests on
#    every core (bench/fidelity_beside.py: what it costs the fidelity tests).
# 3. The tests marked quiet, which also need the CPU that job takes (test_ccdelay's
#    500 Mbit/s flows skip when the machine is busy; the 1-BDP dumbbell's drawn series):
#    after it, with nothing beside.
# Every part runs; the suite fails if any does. -rs: each skipped test's reason is
# printed (measure_fidelity skips only for hypervisor steal, and says so).
workers=$(nproc)
rc=0
unit_log=$(mktemp)
# an interrupted suite stops the linters and unit tests too, their xdist workers with
# them (setsid: a process group of their own), and its exit status stays its own
trap 'if [ -n "${unit:-}" ]; then kill -- -"$unit" 2>/dev/null || true; fi; rm -f "$unit_log"' EXIT
part "pytest tests/integration -m shares_cpu (3 workers)"
python -m pytest -q -rs --durations=15 -n 3 --dist loadfile -m "shares_cpu and not slow" \
  tests/integration || rc=$?
part "linters, then pytest tests/unit ($workers workers), at idle priority, beside the next part"
# (every part runs: a linter's failure is the job's status after the unit tests ran)
# shellcheck disable=SC2016
setsid chrt --idle 0 bash -c '
  start=$1; shift
  part() { echo "== $* [$(( $(date +%s) - start )) s]"; }
  '"$(declare -f lint)"'
  lint; lint_rc=$?
  part "pytest tests/unit"
  python -m pytest -q -rs --durations=15 -n "$1" --dist loadfile -p no:cacheprovider \
    tests/unit && exit "$lint_rc"' \
  _ "$(( $(date +%s) - SECONDS ))" "$workers" >"$unit_log" 2>&1 &
unit=$!
part "pytest tests/integration -m 'not shares_cpu and not quiet' (serial, beside only the idle job)"
python -m pytest -q -rs --durations=15 -m "not shares_cpu and not quiet and not slow" \
  tests/integration || rc=$?
wait "$unit" || rc=$?
unit=
part "the linters and pytest tests/unit: their output"
cat "$unit_log"
part "pytest tests/integration -m quiet (serial, nothing beside them)"
python -m pytest -q -rs --durations=15 -m "quiet and not slow" tests/integration || rc=$?
part "done"
exit "$rc"
