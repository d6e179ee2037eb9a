"""torch.compile(backend="neuron"): TorchNeuron's compile backend name.

Dynamo captures the graph, AOTAutograd splits forward and backward, and TorchInductor compiles
each with its C++ code generator registered for the neuron device (torch_neuron.compile):
elementwise work and reductions are fused into generated kernels that run on neuron memory and
are charged by their loops (Note [Fused kernel cost]); matmuls, convolutions, attention
and ops Inductor does not generate stay neuron ops. The whole graph is one launch scheduled on
the core's engines (Note [Compiled graph schedule]). Plain
torch.compile(model) (Inductor, the default backend) compiles the same way on neuron tensors;
backend="neuron" adds TorchNeuron's contract below. options={"neuron.codegen": "eager"} runs
the captured ATen graphs op by op instead (for debugging a compiled program).

TorchNeuron's compile-path environment variables are read at each compilation, as TorchNeuron
reads them (through the settings table; docs/settings.md has the full list):
  TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION  1 (default): a graph that fails to compile raises;
                                            0: it runs eagerly instead, with a warning (forward
                                            and backward graphs alike). The compile option
                                            "fallback_execution" overrides it.
  TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY 1: a CPU tensor among a graph's inputs raises.
  TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS  1: the forward and backward ATen graphs and the
                                            generated code (Inductor's output module with its
                                            C++ kernels) are written under
                                            TORCH_NEURONX_DEBUG_DIR/fx_graphs/ and .../kernels/
                                            (every graph is compiled afresh, bypassing the
                                            compile caches, so that it has artifacts).
Other options are Inductor's config options (torch.compile(options=...)).

Registered through the `torch_dynamo_backends` entry point, so Dynamo is imported only when a
program compiles.
"""

import itertools
import os
import time
import warnings

import torch

from torch_neuron._C import _setting

_graph_ids = itertools.count()


def _fallback_execution(options) -> bool:
    """Whether a graph that fails to compile runs eagerly instead of raising."""
    if options and "fallback_execution" in options:
        return bool(options["fallback_execution"])
    return not _setting("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")


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


def _artifact_dir(kind: str) -> str:
    rank = _setting("RANK") or 0
    folder = os.path.join(_setting("TORCH_NEURONX_DEBUG_DIR"), kind, f"proc_{rank}")
    os.makedirs(folder, exist_ok=True)
    return folder


def _save_graph(graph_module: torch.fx.GraphModule, kind: str) -> int:
    """Writes one ATen graph where TorchNeuron keeps its FX graph artifacts; returns its id."""
    graph_id = next(_graph_ids)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    path = os.path.join(_artifact_dir("fx_graphs"), f"graph{graph_id}_{kind}_{stamp}.fx.txt")
    with open(path, "w") as f:
        f.write(graph_module.print_readable(print_output=False))
    return graph_id


def _save_kernels(compiled, graph_id: int, kind: str) -> None:
    """The generated code of a compiled graph: the wrapper module and its C++ kernels (what
    TorchNeuron's NEFF is to its graphs)."""
    source = getattr(compiled, "source_code", None)
    if source:
        path = os.path.join(_artifact_dir("kernels"), f"graph{graph_id}_{kind}.py")
        with open(path, "w") as f:
            f.write(source)


def _run_graph_eagerly(kind: str):
    def compile_graph(graph_module: torch.fx.GraphModule, example_inputs):
        if _setting("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"):
            _save_graph(graph_module, kind)
        return graph_module.forward

    return compile_graph


def _fallback_warning(kind: str, error: Exception) -> None:
    warnings.warn(f"torch.compile(backend='neuron') could not compile a {kind} graph "
                  f"({type(error).__name__}: {error}); running it eagerly because fallback "
                  "execution is on (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0 or the "
                  "fallback_execution option)")


def _inner_compile(fallback: bool):
    """Inductor's per-graph compiler, with TorchNeuron's artifacts and fallback. AOTAutograd
    compiles the backward graph on the first backward call, so the fallback has to be here
    (around each graph) rather than around torch.compile's first call."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.compile_fx import compile_fx_inner

    def inner_compile(graph_module, example_inputs, **kwargs):
        kind = "backward" if kwargs.get("is_backward") else "forward"
        artifacts = _setting("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS")
        graph_id = _save_graph(graph_module, kind) if artifacts else None
        try:
            if artifacts:  # compiled afresh, so that the generated code is there to save
                from torch._inductor import config

                with config.patch(fx_graph_cache=False):
                    compiled = compile_fx_inner(graph_module, example_inputs, **kwargs)
            else:
                compiled = compile_fx_inner(graph_module, example_inputs, **kwargs)
        except Exception as e:
            if not fallback:
                raise
            _fallback_warning(kind, e)
            return make_boxed_func(graph_module.forward)
        if artifacts:
            _save_kernels(compiled, graph_id, kind)
        return compiled

    return inner_compile


def neuron_backend(graph_module: torch.fx.GraphModule, example_inputs, options=None,
                   mode=None):
    from torch._dynamo.backends.common import aot_autograd

    if mode not in (None, "default"):
        # As TorchNeuron does: only the default mode exists.
        warnings.warn(f"torch.compile(backend='neuron') has only mode='default'; ignoring "
                      f"mode={mode!r}")
    options = dict(options or {})
    fallback = _fallback_execution(options)
    options.pop("fallback_execution", None)
    codegen = options.pop("neuron.codegen", "inductor")
    if codegen not in ("inductor", "eager"):
        raise ValueError(f"options['neuron.codegen']={codegen!r}: use 'inductor' (the default) "
                         "or 'eager'")
    if _setting("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY"):
        _check_no_cpu_inputs(example_inputs)
    from torch_neuron.compile import recompiles

    recompiles.track(compiling=True)
    try:
        if codegen == "eager":
            return aot_autograd(fw_compiler=_run_graph_eagerly("forward"),
                                bw_compiler=_run_graph_eagerly("backward"))(graph_module,
                                                                             example_inputs)
        from torch._inductor.compile_fx import compile_fx

        from torch._functorch import config as functorch_config

        from torch_neuron.compile import register

        register()
        # A cached graph skips the per-graph compiler, and with it the artifacts: when they are
        # asked for, the caches are bypassed.
        artifacts = _setting("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS")
        with functorch_config.patch(enable_autograd_cache=not artifacts and
                                    functorch_config.enable_autograd_cache):
            return compile_fx(graph_module, example_inputs,
                              inner_compile=_inner_compile(fallback),
                              config_patches=options or None)
    except Exception as e:
        if not fallback:
            raise
        _fallback_warning("forward", e)
        return graph_module.forward
