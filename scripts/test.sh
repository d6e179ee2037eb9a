#!/usr/bin/env bash
# Runs every test suite: trnsim's and csrc's googletests (ctest), then pytest (the Python
# tests by feature folder and the fidelity suite against published Trainium measurements).
# test/README.md is the map: what each folder proves, its time, how to run one part. Every
# test must finish in 60 s (TORCH_NEURON_TEST_TIME_LIMIT, test/pytest_time_limit.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j2
python -m pytest test/python test/fidelity -q "$@"
