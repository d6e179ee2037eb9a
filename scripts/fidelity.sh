#!/usr/bin/env bash
# The fidelity suite as CI runs it (docs/fidelity.md): every anchor predicted by
# `python -m torch_neuron fidelity` but the virtual Llama jobs that run only on request (one of
# them, about a minute of wall time, is in this set; `--kind scale` runs them all, tens of minutes on 2
# cores), the table and the goals written to build/fidelity.txt, then
# test/fidelity checks that run (every anchor predicted and printed, the exit status agrees with
# the goals, docs/fidelity.md lists every anchor).
#
# The goals are not met yet (docs/fidelity.md says which). Until they are, this script records
# the CLI's exit status and does not fail on it, so CI stays green; it fails when the suite
# itself is broken (a workload raises, a row is missing). `--strict` also fails on unmet goals:
# CI switches to it once they are met. The goals themselves are never relaxed here.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build
status=0
python -m torch_neuron fidelity --sources --json > build/fidelity.txt || status=$?
head -n -1 build/fidelity.txt
echo "fidelity goals: python -m torch_neuron fidelity exited with status $status" \
     "(0: every goal met; 1: not met; recorded, not failing CI until met)"
FIDELITY_RESULT=build/fidelity.txt FIDELITY_STATUS=$status TORCH_NEURON_TEST_TIME_LIMIT=0 \
  python -m pytest test/fidelity -q
if [[ "${1:-}" == "--strict" ]]; then
  exit "$status"
fi
