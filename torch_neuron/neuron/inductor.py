"""What torch.compile's default backend, TorchInductor, finds for the neuron device.

Inductor asks a PrivateUse1 device module for its code generators (torch.neuron.Scheduling and
three wrapper generators). neuron has none: like TorchNeuron, it compiles with
its own Dynamo backend, torch.compile(model, backend="neuron"). Without an answer Inductor
fails deep inside with `KeyError: 'neuron'`; these stand-ins make it fail with the fix instead.
"""

MESSAGE = (
    "torch.compile's default backend (TorchInductor) has no code generator for the neuron "
    "device. Compile with TorchNeuron's backend instead: torch.compile(model, backend=\"neuron\").")


def no_inductor_codegen():
    """The stand-in code generator. Inductor also reads the device's op overrides before it
    builds the wrapper generator, so a placeholder is registered for them (Inductor is loaded
    by then: only Inductor asks for these names)."""
    from torch._inductor.codegen.common import DeviceOpOverrides, register_device_op_overrides

    register_device_op_overrides("neuron", DeviceOpOverrides())
    return NoInductorCodegen


class _Refusing(type):
    # Inductor reads class attributes (supports_caching, create, ...) before it builds a
    # generator: whichever it touches first raises the message.
    def __getattr__(cls, name):
        raise RuntimeError(MESSAGE)


class NoInductorCodegen(metaclass=_Refusing):
    """Registered as every Inductor code generator for neuron; refuses to be used."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(MESSAGE)
