#!/usr/bin/env bash
# The whole test suite: lint, format, types, workflow lint, unit and integration tests.
# Integration tests build real namespaces, so run as root: 'sudo ./test.sh'.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff (lint + format)"
ruff check src tests bench scripts
ruff format --check src tests bench scripts
echo "== mypy"
mypy src/ccbench
echo "== snakefmt --check"
snakefmt --check Snakefile rules/
echo "== snakemake --lint"
snakemake --lint --cores 1 >/dev/null
echo "== pytest"
# The slowest tests listed at the end: CI must stay under 30 minutes on 2 cores.
python -m pytest -q --durations=15 "$@"
