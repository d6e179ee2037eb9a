#!/usr/bin/env bash
# Runs every test suite: trnsim's and csrc's googletests (ctest), then pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
ctest --test-dir build --output-on-failure -j2
python -m pytest test/python -q "$@"
