"""The Inductor decisions keyed on device.type == "cpu" that must also hold for neuron, whose
kernels are Inductor's C++ CPU kernels. Each patch is applied once, keeps PyTorch's behaviour
for every other device, and has a test (test/python/test_compile_inductor.py) that fails when
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


# The modules that bound get_current_backend by name when they were imported.
CURRENT_BACKEND_MODULES = ("torch._inductor.utils", "torch._inductor.codegen.common",
                           "torch._inductor.scheduler", "torch._inductor.kernel.mm_common")


@functools.cache
def apply() -> None:
    import importlib

    from torch._inductor import scheduler, utils

    patched = _current_backend(utils.get_current_backend)
    for name in CURRENT_BACKEND_MODULES:
        module = importlib.import_module(name)
        if not getattr(module.get_current_backend, PATCHED, False):
            module.get_current_backend = patched
    node = scheduler.BaseSchedulerNode
    if not getattr(node.is_cpu, PATCHED, False):
        node.is_cpu = _is_cpu(node.is_cpu)
