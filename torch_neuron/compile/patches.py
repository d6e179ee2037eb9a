"""The Inductor decisions keyed on device.type == "cpu" that must also hold for neuron, whose
kernels are Inductor's C++ CPU kernels. Each patch is applied once, keeps PyTorch's behaviour
for every other device, and has a test (test/python/compile/test_compile.py) that fails when
PyTorch changes what it patches, so that it can be dropped or revisited."""

import functools

PATCHED = "_torch_neuron_patched"


def _current_backend(original):
    """utils.get_current_backend answers config.cuda_backend ("triton") for an unknown device;
    CSEProxy then skips the C++ code generator's dtype propagation and indirect loads
    (embedding) fail to compile (cpp.py: indirect_assert on a value without dtype). neuron's
    code generator is the C++ one: answer config.cpu_backend."""
    from torch._inductor import config
    from torch._inductor.virtualized import V

    @functools.wraps(original)
    def get_current_backend(device_type=None):
        if not device_type:
            device_type = V.graph.get_current_device_or_throw().type
        if device_type == "neuron":
            return config.cpu_backend
        return original(device_type)

    setattr(get_current_backend, PATCHED, True)
    return get_current_backend


def _is_cpu(original):
    """BaseSchedulerNode.is_cpu() keeps loop reordering and reindexing (written for Triton's
    (numel, rnumel) groups) away from CPU kernels; on neuron's C++ kernels they fail
    (TypeError multiplying CppScheduling's group tuples)."""

    @functools.wraps(original)
    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", "neuron")

    setattr(is_cpu, PATCHED, True)
    return is_cpu


def _two_step_variance(original):
    """lowering.use_two_step_variance picks the variance algorithm by device: the C++ kernels'
    threshold (config.cpp.use_two_step_variance_threshold) for "cpu", Welford above 8
    elements for any other non-Triton device. neuron's kernels are the C++ ones, and Welford
    makes a LayerNorm of 1024 columns about 20% slower there: decide as for the CPU."""

    import torch

    @functools.wraps(original)
    def use_two_step_variance(x, axis, keepdim, input_dtype):
        device = x.get_device()
        if device is None or device.type != "neuron":
            return original(x, axis, keepdim, input_dtype)
        # The node answers get_device() with the CPU for the length of the decision.
        x.get_device = lambda: torch.device("cpu")
        try:
            return original(x, axis, keepdim, input_dtype)
        finally:
            del x.get_device

    setattr(use_two_step_variance, PATCHED, True)
    return use_two_step_variance


def _device_need_guard(original):
    """utils.device_need_guard decides whether the wrapper enters a device guard around a
    device's kernels: only for GPUs (is_gpu). Without one, a graph on neuron:1 run while
    neuron:0 is current allocated its buffers on neuron:0 (device='neuron' has no index): a
    pointwise graph returned its result on the wrong device and a graph with a matmul raised.
    neuron needs the guard, as CUDA does (NeuronDeviceOpOverrides.device_guard)."""

    @functools.wraps(original)
    def device_need_guard(device: str) -> bool:
        return device == "neuron" or original(device)

    setattr(device_need_guard, PATCHED, True)
    return device_need_guard


# The modules that bound get_current_backend by name when they were imported.
CURRENT_BACKEND_MODULES = ("torch._inductor.utils", "torch._inductor.codegen.common",
                           "torch._inductor.scheduler", "torch._inductor.kernel.mm_common")


@functools.cache
def apply() -> None:
    import importlib

    from torch._inductor import lowering, scheduler, utils

    patched = _current_backend(utils.get_current_backend)
    for name in CURRENT_BACKEND_MODULES:
        module = importlib.import_module(name)
        if not getattr(module.get_current_backend, PATCHED, False):
            module.get_current_backend = patched
    if not getattr(lowering.use_two_step_variance, PATCHED, False):
        lowering.use_two_step_variance = _two_step_variance(lowering.use_two_step_variance)
    if not getattr(scheduler.device_need_guard, PATCHED, False):
        guard = _device_need_guard(utils.device_need_guard)
        utils.device_need_guard = guard
        scheduler.device_need_guard = guard  # bound by name at import
    node = scheduler.BaseSchedulerNode
    if not getattr(node.is_cpu, PATCHED, False):
        node.is_cpu = _is_cpu(node.is_cpu)
