#!/usr/bin/env bash
# Runs every test suite: trnsim's and csrc's googletests (ctest), then pytest (the Python
# tests by feature folder, with the fidelity suite's smoke subset in test/python/fidelity). The
# full fidelity suite against published Trainium measurements is ./scripts/fidelity.sh.
# test/README.md is the map: what each folder proves, its time, how to run one part. Every
# test must finish in 60 s (TORCH_NEURON_TEST_TIME_LIMIT, test/pytest_time_limit.py).
#
# Tests marked `extended` (4-rank and 2-D-mesh runs) are left out, to keep this command within
# its 12-minute budget; `./scripts/test.sh --extended` runs only them (CI runs both).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ "${1:-}" == "--extended" ]]; then
  shift
  exec python -m pytest test/python -q -m extended --durations=10 "$@"
fi
ctest --test-dir build --output-on-failure -j2
# The slowest tests are listed at the end: what to look at when the budget is missed.
python -m pytest test/python -q -m "not extended" --durations=15 "$@"
