"""The generated C++ kernels of a neuron graph as its wrapper calls them.

Note [Compiled kernels in predict-only mode]
In predict-only mode (Note [Predict-only execution] in csrc/aten/PredictOnly.h) a compiled
graph's generated kernels are charged but not run, and not even compiled: the wrapper defines
each kernel as a NeuronKernel, which keeps the kernel's C++ source and compiles it (Inductor's
own C++ code cache, as the unchanged wrapper would at load time) only when a call finds
execution on. The charge is the line the scheduler writes after the call (scheduling.py), the
same in both modes; the buffers the kernel would write are neuron tensors over HBM that nothing
touches, so a full-size compiled model commits no host RAM for them.

The mode is read at each call, not when the graph compiles, so one compiled graph serves both
modes: its wrapper source is the same whatever the mode was when it compiled, Inductor's caches
(which key on that source's inputs) can never hand a predict-only graph's "no-op" kernels to
an executed run, and a graph compiled while predicting compiles its kernels on its first
executed call. A graph loaded while executing compiles its kernels at load time, as Inductor
does (in its compile workers when it has them), so an executed program pays its C++ compiles
where it always did.
"""

from torch._inductor.codecache import CodeCacheFuture

from torch_neuron import _C


class NeuronKernel:
    """One generated kernel: called with its buffers' arguments, it runs them only when
    execution is on (Note [Compiled kernels in predict-only mode])."""

    __slots__ = ("argtypes", "source", "_compiled")

    def __init__(self, async_compile, argtypes, source: str):
        self.argtypes = argtypes
        self.source = source
        # Executing now: compile as Inductor would (a future when it compiles in workers).
        self._compiled = (async_compile.cpp_pybinding(argtypes, source)
                          if _C._execute_enabled() else None)

    def __call__(self, *args):
        if not _C._execute_enabled():
            return None
        kernel = self._compiled
        if kernel is None:
            from torch._inductor.codecache import CppPythonBindingsCodeCache

            kernel = CppPythonBindingsCodeCache.load_pybinding(self.argtypes, self.source)
        elif isinstance(kernel, CodeCacheFuture):  # compiling in Inductor's workers
            kernel = kernel.result()
        self._compiled = kernel
        return kernel(*args)


KERNEL_DEFINITION = "async_compile.cpp_pybinding("
NEURON_KERNEL_DEFINITION = "NeuronKernel(async_compile, "


def defer(kernel_body: str) -> str:
    """A kernel definition of the wrapper, `async_compile.cpp_pybinding(argtypes, source)`,
    rewritten to define a NeuronKernel."""
    if kernel_body.startswith(KERNEL_DEFINITION):
        return NEURON_KERNEL_DEFINITION + kernel_body[len(KERNEL_DEFINITION):]
    return kernel_body
