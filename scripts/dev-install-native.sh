#!/usr/bin/env bash
# Developer shortcut after editing C++: rebuild and put the libraries into the editable package.
# Replaces files by rename, so processes that already loaded the old libraries keep running.
set -euo pipefail
cd "$(dirname "$0")/.."
ninja -C build
replace() { cp "$1" "$2.tmp" && mv "$2.tmp" "$2"; }
replace build/libtorch_neuron.so torch_neuron/lib/libtorch_neuron.so
for ext in build/_C*.so; do replace "$ext" "torch_neuron/$(basename "$ext")"; done
