#!/usr/bin/env bash
# Sets up a fresh Debian machine and builds torch_neuron in place (editable install).
# Safe to rerun: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Build tools and googletest from Debian (cmake, a C++ compiler and Python are assumed).
need_apt=()
command -v ninja >/dev/null || need_apt+=(ninja-build)
command -v ccache >/dev/null || need_apt+=(ccache)
[ -f /usr/include/gtest/gtest.h ] || need_apt+=(libgtest-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${need_apt[@]}"
fi

# torch first, pinned: an unpinned or isolated install would pull a multi-GB CUDA build.
python -m pip install -q "torch==2.13.0" numpy pytest "pytest-xdist==3.8.0" expecttest matplotlib
# Hugging Face libraries for the Hugging Face tests, pinned to versions that run on torch 2.13
# (the same pins as the `hf` extra in pyproject.toml).
python -m pip install -q "transformers==5.24.0" "accelerate==1.16.0" "safetensors==0.8.0" \
  "peft==0.21.2" "diffusers==0.42.1" "trl==1.16.0" "datasets==5.2.0"
# --no-build-isolation: build against the torch installed above.
python -m pip install -q --no-build-isolation -e .
# The opt-in torch_neuronx alias (compat/torch_neuronx), for the accelerate/Trainer tests.
python -m pip install -q --no-build-isolation -e compat/torch_neuronx
# The opt-in nki alias (compat/nki): `import nki` is torch_neuron.nki, for kernels written
# against AWS's NKI API.
python -m pip install -q --no-build-isolation -e compat/nki
echo "torch_neuron is installed; try: python examples/quickstart.py"
