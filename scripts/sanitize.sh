#!/usr/bin/env bash
# Builds trnsim, the backend and the googletests with AddressSanitizer and
# UndefinedBehaviorSanitizer in build-sanitize/ and runs the C++ tests under them.
#   scripts/sanitize.sh            # C++ tests (CI runs this)
#   scripts/sanitize.sh --python   # also a Python smoke (a training step, collectives-free
#                                  # ops) with the sanitized extension preloaded with libasan
set -euo pipefail
cd "$(dirname "$0")/.."
python_too=OFF
[ "${1:-}" = "--python" ] && python_too=ON
# -O1 and line tables only (-g1): what AddressSanitizer's reports need (file:line in every
# frame), and a third less compile time than -O2 -g (21 s -> 14 s for HostExecution.cpp on a
# 2-core machine); the build took 8 min 50 s of CI with -O2 -g.
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DTORCH_NEURON_SANITIZE=ON -DTORCH_NEURON_BUILD_PYTHON=$python_too >/dev/null
cmake --build build-sanitize
# libtorch is not instrumented: container-overflow checks need every party instrumented, and
# leaks at exit belong to PyTorch's and googletest's static state.
export ASAN_OPTIONS=detect_container_overflow=0:detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-sanitize --output-on-failure -j2
if [ "$python_too" = ON ]; then
  smoke=$(mktemp -d)
  mkdir -p "$smoke/torch_neuron/lib"
  # The Python package without its built files, then the sanitized ones.
  (cd torch_neuron && find . -name '*.py' -not -path '*/__pycache__/*' \
     -exec cp --parents {} "$smoke/torch_neuron/" \;)
  cp build-sanitize/_C*.so "$smoke/torch_neuron/"
  cp build-sanitize/libtorch_neuron.so "$smoke/torch_neuron/lib/"
  LD_PRELOAD="$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)" \
    PYTHONPATH="$smoke" TORCH_DEVICE_BACKEND_AUTOLOAD=0 \
    python -c "import sys; sys.argv = ['train.py', '--steps', '2']; import torch_neuron, runpy; runpy.run_path('examples/train.py', run_name='__main__')"
  rm -rf "$smoke"
fi
echo "sanitizers: no errors"
