#!/usr/bin/env bash
# Builds torch_neuron's wheel and checks it as a user would install it: in a fresh virtual
# environment with torch==2.13.0 installed first (so pip resolves no CUDA build), then the
# wheel and its declared dependencies. Runs a device op, the quickstart, the main job under
# `python -m torch_neuron run`, and the C++ find_package(TorchNeuron) example, all against the
# installed wheel and from outside the source tree (so nothing imports the checkout).
#   scripts/check_wheel.sh            # CI runs this after install.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The wheel, built against the installed torch with the same build/ directory and ccache as
# the editable install (--no-build-isolation).
python -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" . >/dev/null
wheel=$(ls "$work"/dist/torch_neuron-*.whl)
echo "wheel: $(basename "$wheel") ($(du -h "$wheel" | cut -f1))"

python -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q "torch==2.13.0"
"$py" -m pip install -q "$wheel"

cp -r examples "$work/examples"
cd "$work"  # not the checkout: `import torch_neuron` must find the installed wheel
"$py" - <<'EOF'
import torch
import torch_neuron
assert torch_neuron.__file__.startswith(__import__("sys").prefix), torch_neuron.__file__
print("device op:", torch.ones(2).to("neuron") + 1)
EOF
"$py" examples/quickstart.py
"$py" -m torch_neuron run examples/train.py --steps 2
cmake -S examples/cpp -B build-example -G Ninja \
  -DCMAKE_PREFIX_PATH="$("$py" -m torch_neuron cmake-prefix-path)" >/dev/null
cmake --build build-example >/dev/null
./build-example/neuron_example
echo "wheel: installs and runs"
