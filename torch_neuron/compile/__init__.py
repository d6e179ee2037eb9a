"""TorchInductor for the neuron device: Inductor's C++ (CPU) code generator on neuron memory.

Simulated HBM is host memory (Note [Host execution]), so the C++ kernels Inductor generates for
the CPU run unchanged on neuron tensors' data pointers. This package registers that code
generator for the device "neuron" (register_backend_for_device, as PyTorch's OpenReg reference
backend does), with three additions:
  - every generated kernel is charged on the current neuron stream, and the whole graph runs
    as one launch scheduled on the core's engines (Note [Fused kernel cost] in scheduling.py,
    Note [Compiled graph schedule]);
  - the wrapper calls those kernels as CPU functions (wrapper.py);
  - the few Inductor decisions keyed on device.type == "cpu" that must hold for neuron too are
    patched, each in patches.py with the reason and a test.
Matmuls, convolutions, attention and every op Inductor does not generate code for stay neuron
ops (extern kernels and fallbacks), charged as in eager mode.

register() runs only when a program compiles: from torch.compile(backend="neuron") (backend.py)
and when Inductor asks the torch.neuron module for its code generators (plain torch.compile on
neuron tensors, codegen_for below). The package itself imports nothing of Inductor, so importing
torch_neuron stays cheap.
"""

import functools


@functools.cache
def register() -> None:
    """Registers the neuron device with Dynamo and Inductor (once per process)."""
    from torch._dynamo.device_interface import register_interface_for_device
    from torch._inductor.codegen.common import (register_backend_for_device,
                                                register_device_op_overrides)

    from torch_neuron.compile import patches, recompiles
    from torch_neuron.compile.device import NeuronDeviceOpOverrides, NeuronInterface
    from torch_neuron.compile.scheduling import NeuronScheduling
    from torch_neuron.compile.wrapper import NeuronWrapperCodegen, NoCppWrapperCodegen

    patches.apply()
    recompiles.track()
    register_interface_for_device("neuron", NeuronInterface)
    register_device_op_overrides("neuron", NeuronDeviceOpOverrides())
    register_backend_for_device("neuron", NeuronScheduling, NeuronWrapperCodegen,
                                NoCppWrapperCodegen)


def codegen_for(name: str):
    """The code generator `name` that Inductor looks up on the torch.neuron module the first
    time it compiles for the device (Scheduling and three wrapper generators)."""
    register()
    from torch_neuron.compile.scheduling import NeuronScheduling
    from torch_neuron.compile.wrapper import NeuronWrapperCodegen, NoCppWrapperCodegen

    return {"Scheduling": NeuronScheduling, "PythonWrapperCodegen": NeuronWrapperCodegen,
            "CppWrapperCodegen": NoCppWrapperCodegen, "WrapperFxCodegen": None}[name]
