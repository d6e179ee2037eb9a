#!/usr/bin/env bash
# Runs every test suite: trnsim's and csrc's googletests (ctest), then pytest (the Python
# tests and the fidelity suite against published Trainium measurements).
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j2
python -m pytest test/python test/fidelity -q "$@"
