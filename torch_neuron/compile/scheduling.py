"""Inductor's C++ scheduling for neuron, with each generated kernel charged on the neuron stream.

Note [Fused kernel cost]
A kernel Inductor generates is charged on the current neuron stream, costed with the same
engine rules as eager ops (trnsim's cost model) but with what fusion changes:
  - HBM traffic is the kernel's argument buffers only (inputs and outputs once, buffers
    updated in place twice): the intermediates it fused away stay on chip. A buffer the
    kernel reaches only through an indirect (indexed) load or store, such as an embedding
    table read by a gather, moves only the elements the loop touches (one per iteration of
    each such access, at most the buffer), as the eager gather is charged for the rows it
    reads (trnsim's Gather work): the DMA fetches the indexed rows, not the table;
  - engine work is one streaming loop per loop nest (Inductor's SchedulerNode: one pointwise
    or reduction loop over its iteration space), described in trnsim's vocabulary (Note
    [Work descriptions] in trnsim/work.h) and costed by trnsim like an eager elementwise op
    on that engine. A loop with transcendental functions (exp, erf, tanh, rsqrt, ...) runs on
    ScalarE, one pass per function (an activation instruction applies one function, with a
    scale and a bias: nki.isa.activation), plus a VectorE tensor-tensor pass when it also
    combines two tensors, as eager charges such ops; one with an indirect (indexed) load or
    store on GpSimdE; any other on VectorE, tensor-tensor when it reads two buffers. The
    arithmetic a loop chains is one pass (assumption: the compiler folds scalar arithmetic
    into the activations' scale and bias and into tensor_scalar's two operators; a loop of
    dozens of arithmetic operations per element is charged too little);
  - the launch overhead once: alone, the kernel would take launch + max(engines, HBM), never
    below the roofline of what it still reads and writes.
The sizes are expressions of the graph's symbolic sizes, so a dynamic-shape kernel is charged for the shape it runs with. The charge is one line the wrapper
runs right after the kernel: _charge_kernel(device, name, bytes, [(engine, elements, two
inputs) per loop], 16-bit, fused ATen ops, [buffers read], [buffers written]). Inside the
compiled graph's region (Note [Compiled graph schedule] in csrc/aten/GraphSchedule.h), which is
where the generated wrapper runs it, the charge joins the graph's schedule instead of launching:
its buffers give its dependencies, and the graph pays the launch overhead once.
"""

import sympy
from torch._inductor.codegen.common import InplacedBuffer
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.dependencies import MemoryDep
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import V

_SIXTEEN_BIT = ("torch.bfloat16", "torch.float16")


# Loop-body operations a NeuronCore evaluates on ScalarE (its activation functions).
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sigmoid", "erf", "erfc",
    "erfinv", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
    "acosh", "atanh", "sqrt", "rsqrt", "pow", "lgamma", "digamma", "libdevice_exp",
    "libdevice_log", "libdevice_sqrt", "libdevice_rsqrt"})


def _op_name(aten) -> str:
    schema = aten._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def _buffer_bytes(name: str):
    return V.graph.get_numel(name) * V.graph.get_dtype(name).itemsize


def _moved_bytes(name: str, nodes) -> sympy.Expr:
    """The bytes of buffer `name` a kernel of `nodes` moves (Note [Fused kernel cost]): the
    whole buffer, unless every access to it is indirect; then one element per iteration of
    each access, at most the whole buffer."""
    whole = _buffer_bytes(name)
    touched = []
    for node in nodes:
        rw = node.read_writes
        for dep in [*rw.reads, *rw.writes]:
            if dep.name != name:
                continue
            if not (isinstance(dep, MemoryDep) and dep.is_indirect()):
                return whole
            touched.append(sympy_product(dep.size))
    if not touched:
        return whole
    return sympy.Min(whole, sympy.Add(*touched) * V.graph.get_dtype(name).itemsize)


def _engine(node) -> str:
    """The engine of one loop nest (Note [Fused kernel cost])."""
    counts = node._body.op_counts
    if counts.get("indirect_indexing", 0):
        return "gpsimd"
    if any(counts.get(op, 0) for op in TRANSCENDENTAL):
        return "scalar"
    return "vector"


class KernelWork:
    """The charge of one generated kernel, as sympy expressions of the graph's sizes."""

    def __init__(self, group):
        args = group.args
        nodes = group.scheduled_nodes
        terms = [_moved_bytes(n, nodes) for n in args.input_buffers]
        terms += [_moved_bytes(n, nodes) for n, v in args.output_buffers.items()
                  if isinstance(v, str)]
        inplaced = {id(v): v for v in args.inplace_buffers.values()
                    if isinstance(v, InplacedBuffer)}
        terms += [2 * _moved_bytes(v.other_names[-1], nodes) for v in inplaced.values()]
        self.bytes = sympy.Add(*terms) if terms else sympy.Integer(0)
        # The wrapper's names of its argument buffers, as its call passes them (KernelArgs.
        # python_argdefs): in-place ones by their last name (Note [Compiled graph schedule]).
        updated = [v.other_names[-1] for v in inplaced.values()]
        self.reads = [n for n in args.input_buffers if n not in args.inplace_buffers] + updated
        self.writes = [n for n, v in args.output_buffers.items()
                       if n not in args.inplace_buffers and isinstance(v, str)] + updated
        self.loops = []  # (engine, elements, two inputs)
        ops = set()
        sixteen_bit = False
        for node in group.scheduled_nodes:
            iteration, reduction = node.get_ranges()
            engine = _engine(node)
            two_inputs = engine != "gpsimd" and len({d.name for d in node.read_writes.reads}) >= 2
            elements = sympy_product(iteration) * sympy_product(reduction)
            self.loops.append((engine, elements, two_inputs))
            if engine == "scalar":
                # One ScalarE pass per activation function the loop applies.
                functions = sum(node._body.op_counts.get(op, 0) for op in TRANSCENDENTAL)
                self.loops += [("scalar", elements, False)] * (functions - 1)
            for origin in getattr(node.node, "origins", ()):
                aten = origin.meta.get("original_aten")
                if aten is not None and hasattr(aten, "_schema"):
                    ops.add(_op_name(aten).replace("aten::", ""))
            sixteen_bit = sixteen_bit or str(node.node.get_dtype()) in _SIXTEEN_BIT
        self.sixteen_bit = sixteen_bit
        self.ops = ", ".join(sorted(ops))

    def charge_line(self, device_index: int, kernel_name: str) -> str:
        size = V.graph.wrapper_code.codegen_python_sizevar
        loops = ", ".join(f"({engine!r}, {size(elements)}, {two})"
                          for engine, elements, two in self.loops)
        return (f"_charge_kernel({device_index}, {kernel_name!r}, {size(self.bytes)}, "
                f"[{loops}], {self.sixteen_bit}, {self.ops!r}, "
                f"[{', '.join(self.reads)}], [{', '.join(self.writes)}])")


class NeuronScheduling(CppScheduling):
    """CppScheduling whose kernels are charged on the neuron stream (Note [Fused kernel
    cost])."""

    _kernel_name = None

    def __init__(self, scheduler):
        super().__init__(scheduler)
        from torch_neuron.compile import recompiles

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
