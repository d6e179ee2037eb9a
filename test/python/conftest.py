"""Shared helpers of the Python tests: a clean subprocess runner, and restoring the process-wide
neuron state (current device, current streams, fallback mode) after every test so that tests
do not depend on their order."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

# Variables that select the simulated machine or change the back end's behaviour (every one
# docs/environment.md lists as honoured). Subprocesses start without them unless a test sets
# them, so they see the default trn2.3xlarge.
NEURON_ENV_VARS = (
    "TORCH_NEURON_INSTANCE", "TORCH_NEURON_FALLBACK", "TORCH_NEURON_FLOAT64",
    "NEURON_RT_VISIBLE_CORES", "NEURON_RT_NUM_CORES", "NEURON_LOGICAL_NC_CONFIG",
    "TORCH_NEURONX_COMPLEX_DECOMPOSE", "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
    "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS",
    "TORCH_NEURONX_DEBUG_DIR",
)


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter; returns the CompletedProcess (text output)."""
    full_env = {k: v for k, v in os.environ.items() if k not in NEURON_ENV_VARS}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_python_json(code, env=None):
    """Runs `code`, which must print one JSON document as its last line, and returns it."""
    result = run_python(code, env)
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return json.loads(result.stdout.strip().splitlines()[-1])


def simulated_elapsed_ns(fn):
    """Simulated device time that `fn` adds to the current neuron device's clock."""
    import torch

    torch.neuron.synchronize()
    start = torch.neuron.simulated_time_ns()
    fn()
    torch.neuron.synchronize()
    return torch.neuron.simulated_time_ns() - start


@pytest.fixture(autouse=True)
def _restore_neuron_state():
    yield
    import torch
    import torch_neuron

    torch_neuron.set_fallback_error(False)
    if torch.neuron.is_available():
        for i in range(torch.neuron.device_count()):
            torch.neuron.set_stream(torch.neuron.default_stream(i))
        torch.neuron.set_device(0)
