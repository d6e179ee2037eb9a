"""What TorchInductor finds for the neuron device when a program compiles with torch.compile's
default backend on neuron tensors.

Inductor asks a PrivateUse1 device module for its code generators (torch.neuron.Scheduling and
three wrapper generators) the first time it compiles for the device. The answer is
torch_neuron._inductor's: Inductor's C++ code generator on neuron memory, each kernel charged
on the simulated clock. The C++ wrapper (cpp_wrapper=True) is not supported: its generator
refuses with a message that says so.
"""

CPP_WRAPPER_MESSAGE = (
    "torch.compile's C++ wrapper (cpp_wrapper=True) is not supported for the neuron device; "
    "compile without it (the default Python wrapper runs the same generated C++ kernels).")


class _Refusing(type):
    # Inductor reads class attributes (supports_caching, create, ...) before it builds a
    # generator: whichever it touches first raises the message.
    def __getattr__(cls, name):
        raise RuntimeError(CPP_WRAPPER_MESSAGE)


class NoCppWrapperCodegen(metaclass=_Refusing):
    def __init__(self, *args, **kwargs):
        raise RuntimeError(CPP_WRAPPER_MESSAGE)


def inductor_codegen(name: str):
    """The code generator `name` Inductor looks up on torch.neuron."""
    from torch_neuron import _inductor

    _inductor.register()
    from torch_neuron._inductor.scheduling import NeuronScheduling
    from torch_neuron._inductor.wrapper import NeuronWrapperCodegen

    return {"Scheduling": NeuronScheduling, "PythonWrapperCodegen": NeuronWrapperCodegen,
            "CppWrapperCodegen": NoCppWrapperCodegen, "WrapperFxCodegen": None}[name]
