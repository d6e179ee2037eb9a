"""torch.compile(backend="neuron"): TorchNeuron's compile backend name.

Dynamo captures the graph and AOTAutograd splits forward and backward, as for any backend;
the resulting ATen graphs then run op by op on the neuron device, where each op is a device
op with its simulated cost. This gives compiled programs the same results and the same
performance report as eager ones. (Graph-level fusion for the simulated device is future work.)

TorchNeuron's compile-path environment variables are read at each compilation, as TorchNeuron
reads them (docs/environment.md has the full mapping):
  TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION  1 (default): a graph that fails to compile raises;
                                            0: it runs eagerly instead, with a warning. The
                                            compile option "fallback_execution" overrides it.
  TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY 1: a CPU tensor among a graph's inputs raises.
  TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS  1: the forward and backward ATen graphs are
                                            written under TORCH_NEURONX_DEBUG_DIR/fx_graphs/.
There is no compiler here, so FX graphs are the only artifacts (no StableHLO, no NEFF).

Registered through the `torch_dynamo_backends` entry point, so Dynamo is imported only when a
program compiles.
"""

import itertools
import os
import time
import warnings

import torch

_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no", "")
_DEFAULT_DEBUG_DIR = "/tmp/neuron_backend"  # TorchNeuron's default
_graph_ids = itertools.count()


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ValueError(f"{name}={value!r} is not a boolean; set it to 1 or 0 (or unset it)")


def _fallback_execution(options) -> bool:
    """Whether a graph that fails to compile runs eagerly instead of raising."""
    if options and "fallback_execution" in options:
        return bool(options["fallback_execution"])
    return not _env_flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", True)


def _check_no_cpu_inputs(example_inputs) -> None:
    # TorchNeuron copies CPU inputs of a compiled graph to the device unless this variable asks
    # for an error. Here a compiled graph runs where its inputs are, as in eager mode, so only
    # the error half has a meaning.
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.Tensor) and x.device.type == "cpu":
            raise RuntimeError(
                f"Input tensor at index {i} is on cpu device, and "
                "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1 forbids CPU inputs to a graph "
                "compiled with backend='neuron'. Move the input to 'neuron' or unset the variable.")


def _save_graph(graph_module: torch.fx.GraphModule, kind: str) -> None:
    """Writes one ATen graph where TorchNeuron keeps its FX graph artifacts."""
    root = os.environ.get("TORCH_NEURONX_DEBUG_DIR") or _DEFAULT_DEBUG_DIR
    folder = os.path.join(root, "fx_graphs", f"proc_{os.environ.get('RANK', '0')}")
    os.makedirs(folder, exist_ok=True)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    path = os.path.join(folder, f"graph{next(_graph_ids)}_{kind}_{stamp}.fx.txt")
    with open(path, "w") as f:
        f.write(graph_module.print_readable(print_output=False))


def _run_graph_eagerly(kind: str):
    def compile_graph(graph_module: torch.fx.GraphModule, example_inputs):
        if _env_flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", False):
            _save_graph(graph_module, kind)
        return graph_module.forward

    return compile_graph


def neuron_backend(graph_module: torch.fx.GraphModule, example_inputs, options=None,
                   mode=None):
    from torch._dynamo.backends.common import aot_autograd

    if mode not in (None, "default"):
        # As TorchNeuron does: only the default mode exists.
        warnings.warn(f"torch.compile(backend='neuron') has only mode='default'; ignoring "
                      f"mode={mode!r}")
    fallback = _fallback_execution(options)
    if _env_flag("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", False):
        _check_no_cpu_inputs(example_inputs)
    try:
        return aot_autograd(fw_compiler=_run_graph_eagerly("forward"),
                            bw_compiler=_run_graph_eagerly("backward"))(graph_module,
                                                                         example_inputs)
    except Exception as e:
        if not fallback:
            raise
        warnings.warn(f"torch.compile(backend='neuron') could not compile a graph "
                      f"({type(e).__name__}: {e}); running it eagerly because fallback "
                      "execution is on (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 or the "
                      "fallback_execution option)")
        return graph_module.forward
