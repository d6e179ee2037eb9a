"""Inductor's C++ scheduling for neuron, with each generated kernel charged as one launch.

Note [Fused kernel cost]
A kernel Inductor generates is one launch on the current neuron stream, costed as eager ops
are (trnsim's cost model, csrc/aten/OpCost.cpp) but with what fusion changes:
  - HBM traffic is the kernel's argument buffers only (inputs and outputs once, buffers
    updated in place twice): the intermediates it fused away stay on chip;
  - engine work is that of the ATen ops it fused, each once, over the largest iteration space
    it appears in, on the engine eager mode would use for it (the policy table and the
    composite pass plans, _C._op_passes). Inductor's own loop-body primitives are not counted:
    it expands gelu or layer_norm into many of them, where a NeuronCore runs one activation;
  - the launch overhead once.
The kernel's duration is therefore launch + max(engines, HBM), never below the roofline of what
it still reads and writes. The sizes are expressions of the graph's symbolic sizes, so a
dynamic-shape kernel is charged for the shape it runs with. The charge is one line the wrapper
runs right after the kernel: _charge_kernel(device, name, bytes, vector one-input elements,
vector two-input elements, scalar elements, gpsimd elements, 16-bit, fused ops).
"""

import sympy
import torch
from torch._inductor.codegen.common import InplacedBuffer
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import V

from torch_neuron import _C

_SIXTEEN_BIT = ("torch.bfloat16", "torch.float16")


def _op_name(aten) -> str:
    schema = aten._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def _is_view(aten) -> bool:
    return getattr(aten, "is_view", False)


def _two_tensor_operands(aten, fx_node) -> bool:
    """Whether the original op streams two tensors (a tensor-tensor instruction, as eager mode
    charges when two operands have more than one element): its schema takes two tensors and
    the node of its decomposition in this kernel combines two (`x + 1` is add.Tensor with a
    scalar: one)."""
    schema_tensors = sum(str(a.type) == "Tensor" for a in aten._schema.arguments)
    if schema_tensors < 2:
        return False
    operands = 0
    for arg in fx_node.args:
        val = arg.meta.get("val") if hasattr(arg, "meta") else None
        if isinstance(val, torch.Tensor):
            operands += int(val.dim() > 0)
    return operands >= 2


def _buffer_bytes(name: str):
    return V.graph.get_numel(name) * V.graph.get_dtype(name).itemsize


class KernelWork:
    """The charge of one generated kernel, as sympy expressions of the graph's sizes."""

    def __init__(self, group):
        args = group.args
        terms = [_buffer_bytes(n) for n in args.input_buffers]
        terms += [_buffer_bytes(n) for n, v in args.output_buffers.items()
                  if isinstance(v, str)]
        inplaced = {id(v): v for v in args.inplace_buffers.values()
                    if isinstance(v, InplacedBuffer)}
        terms += [2 * _buffer_bytes(v.other_names[-1]) for v in inplaced.values()]
        self.bytes = sympy.Add(*terms) if terms else sympy.Integer(0)
        # Each original ATen op once, over the largest iteration space it appears in.
        ops: dict[str, list] = {}
        sixteen_bit = False
        for node in group.scheduled_nodes:
            iteration, reduction = node.get_ranges()
            elements = sympy_product(iteration) * sympy_product(reduction)
            for origin in getattr(node.node, "origins", ()):
                aten = origin.meta.get("original_aten")
                if aten is None or not hasattr(aten, "_schema") or _is_view(aten):
                    continue
                name = _op_name(aten)
                entry = ops.setdefault(name, [elements, False])
                if entry[0] != elements:
                    entry[0] = sympy.Max(entry[0], elements)
                entry[1] = entry[1] or _two_tensor_operands(aten, origin)
            sixteen_bit = sixteen_bit or str(node.node.get_dtype()) in _SIXTEEN_BIT
        work = {"vector1": [], "vector2": [], "scalar": [], "gpsimd": []}
        for name, (elements, two_inputs) in ops.items():
            for engine, two_input_pass in _C._op_passes(name, two_inputs):
                key = {"VectorE": "vector2" if two_input_pass else "vector1",
                       "ScalarE": "scalar", "GpSimdE": "gpsimd"}[engine]
                work[key].append(elements)
        self.work = {k: sympy.Add(*v) if v else sympy.Integer(0) for k, v in work.items()}
        self.sixteen_bit = sixteen_bit
        self.ops = ", ".join(sorted(o.replace("aten::", "") for o in ops))

    def charge_line(self, device_index: int, kernel_name: str) -> str:
        size = V.graph.wrapper_code.codegen_python_sizevar
        values = ", ".join(size(self.work[k]) for k in ("vector1", "vector2", "scalar", "gpsimd"))
        return (f"_charge_kernel({device_index}, {kernel_name!r}, {size(self.bytes)}, {values}, "
                f"{self.sixteen_bit}, {self.ops!r})")


class NeuronScheduling(CppScheduling):
    """CppScheduling whose kernels are charged on the neuron stream (Note [Fused kernel
    cost])."""

    _kernel_name = None

    def __init__(self, scheduler):
        super().__init__(scheduler)
        from torch_neuron._inductor import recompiles

        # Plain torch.compile reaches torch_neuron first here (and again after a
        # torch._dynamo.reset(), which drops the callbacks).
        recompiles.track(compiling=True)

    def define_kernel(self, src_code, nodes, kernel_args=None):
        self._kernel_name = super().define_kernel(src_code, nodes, kernel_args)
        return self._kernel_name

    def flush(self):
        group = self.kernel_group
        work = KernelWork(group) if group.scheduled_nodes else None
        device = group.scheduled_nodes[0].get_device() if group.scheduled_nodes else None
        self._kernel_name = None
        super().flush()
        if work is not None and self._kernel_name is not None:
            index = device.index if device is not None and device.index is not None else 0
            V.graph.wrapper_code.writeline(work.charge_line(index, self._kernel_name))
