"""The Python wrapper Inductor generates around the kernels of a neuron graph."""

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V


class _CallsHostKernels:
    """The generated kernels are CPU functions: PythonWrapperCodegen calls non-Triton kernels
    only for the cpu and mps devices (it raises "device neuron nyi" otherwise), so a neuron
    kernel call is written as the cpu one. The call's launch on the neuron stream is the
    charge line the scheduler writes after it (scheduling.py). Each kernel is defined as a
    NeuronKernel, which runs (and compiles) it only when execution is on (Note [Compiled kernels
    in predict-only mode] in kernels.py)."""

    def write_header(self) -> None:
        super().write_header()
        self.header.splice("from torch_neuron._C import _charge_kernel\n"
                           "from torch_neuron.compile.kernels import NeuronKernel")

    def define_kernel(self, kernel_name, kernel_body, metadata=None, gpu=True,
                      cpp_definition=None):
        from torch_neuron.compile.kernels import defer

        super().define_kernel(kernel_name, kernel_body if gpu else defer(kernel_body),
                              metadata=metadata, gpu=gpu, cpp_definition=cpp_definition)

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True,
                                     **kwargs):
        import torch

        device = device or V.graph.get_current_device_or_throw()
        if device.type == "neuron" and not triton:
            device = torch.device("cpu")
        return super()._generate_kernel_call_helper(kernel_name, call_args, device=device,
                                                    triton=triton, **kwargs)


class NeuronSubgraphWrapperCodegen(_CallsHostKernels, SubgraphPythonWrapperCodegen):
    def write_header(self) -> None:
        SubgraphPythonWrapperCodegen.write_header(self)  # a subgraph shares its parent's header


class NeuronWrapperCodegen(_CallsHostKernels, PythonWrapperCodegen):
    def generate_end(self, result) -> None:
        # The graph runs as one scheduled launch (Note [Compiled graph schedule]).
        super().generate_end(result)
        result.splice(_schedule_graph_lines())

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return NeuronSubgraphWrapperCodegen(subgraph_name, parent_wrapper,
                                                partition_signatures)
        return NeuronWrapperCodegen()


def _schedule_graph_lines() -> str:
    import torch

    index = min((i for i in V.graph.device_idxs if i is not None), default=0)
    compile_id = torch._guards.CompileContext.current_compile_id()
    phase = "backward" if V.graph.is_backward else "forward"
    name = f"compiled graph {compile_id} ({phase})"
    return ("from torch_neuron.compile.graph_region import _schedule_graph\n"
            f"call = _schedule_graph(call, {index}, {name!r})\n")


# torch.compile's C++ wrapper (cpp_wrapper=True) is not supported: its generator refuses with a
# message that says so (the default Python wrapper runs the same generated C++ kernels).
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
