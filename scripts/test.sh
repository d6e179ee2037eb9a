#!/usr/bin/env bash
# Runs every test suite: trnsim's and csrc's googletests (ctest), then pytest (the Python
# tests by feature folder, with the fidelity suite's smoke subset in test/python/fidelity). The
# full fidelity suite against published Trainium measurements is ./scripts/fidelity.sh.
# test/README.md is the map: what each folder proves, its time, how to run one part. Every
# test must finish in 60 s (TORCH_NEURON_TEST_TIME_LIMIT, test/pytest_time_limit.py).
#
# Tests marked `extended` (4-rank and 2-D-mesh runs) are left out, to keep this command within
# its 12-minute budget; `./scripts/test.sh --extended` runs only them (CI runs both).
#
# pytest runs the tests in two worker processes (pytest-xdist, `-n 2`): most tests use one
# core, so the two cores of the machine the budget is set for finish them in a little over half
# the time one process takes (test/README.md#speed). Tests marked `whole_machine` start enough
# processes to keep every core busy by themselves: they run one at a time, after the others.
# `-n 0` as an argument runs the first part in this process (for a debugger).
set -euo pipefail
cd "$(dirname "$0")/.."
run() {
  # $1: the marker expression; pytest exits 5 when no test matches it, which is no failure.
  local selected="$1"; shift
  python -m pytest test/python -q -m "$selected and not whole_machine" -n 2 "$@" || [ $? -eq 5 ]
  python -m pytest test/python -q -m "$selected and whole_machine" "$@" || [ $? -eq 5 ]
}
if [[ "${1:-}" == "--extended" ]]; then
  shift
  run extended --durations=10 "$@"
  exit
fi
ctest --test-dir build --output-on-failure -j2
# The slowest tests are listed at the end: what to look at when the budget is missed.
run "not extended" --durations=15 "$@"
