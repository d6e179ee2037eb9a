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
  - engine work is, per loop nest (Inductor's SchedulerNode: one pointwise or reduction loop
    over its iteration space), passes over that space in trnsim's vocabulary (Note [Work
    descriptions] in trnsim/work.h), costed by trnsim at the eager engines' rates (its
    FusedKernel: one instruction stream per kind of pass). A loop with an indirect (indexed)
    load or store is one GpSimdE pass. Any other loop is the instructions its body compiles
    to, each one pass over the loop's elements (loop_body.py): one ScalarE activation per
    transcendental function (exp, erf, tanh, rsqrt, ...), which also applies a scale and a
    bias (nki.isa.activation computes func(in * scale + bias)), so the one or two scalar
    multiplies and adds just before it cost nothing more; one VectorE tensor_tensor (two
    inputs) per operation on two tensors, which also applies one scalar operation to one of
    them just before (scalar_tensor_tensor); one VectorE tensor_scalar per operation on a
    tensor and scalars (constants, or values that do not change along the innermost
    dimension, such as a row's mean: per-partition scalars), two chained ones sharing an
    instruction (tensor_scalar applies op0 then op1), and none for arithmetic on scalars
    alone (one element per row); one VectorE pass per reduction. Loads,
    stores, constants, casts (the dtype an instruction writes) and arithmetic on the loop
    indices alone (addresses) are no instruction, nor is choosing by position between masked
    loads (concatenation, padding: each element comes from one place, which the DMA reads);
    a loop with no other instruction (a copy) is one VectorE pass. What the body repeats on the
    same values (Inductor loads one element, or recomputes one expression, several times) is
    computed once. A chain of operations that computes one of ScalarE's activation functions
    (nki.language's table, torch_neuron/nki/ops.py) of one value is that one activation,
    however it is written (the chain is evaluated on 4097 points of [-8, 8] and compared with
    each function: loop_body._activation_chains). Hugging Face's NewGELUActivation (ALBERT's and
    GPT-2's "gelu_new") writes tanh-approximated GELU as arithmetic, an activation and four
    VectorE passes as instructions, yet AWS's trn1 tables time ALBERT-base no slower than
    BERT-base, whose layers differ only by that GELU (aws-neuron-sdk@337e6041
    about-neuron/benchmarks/trn1/latency_data_encoder.csv: 0.86 against 0.94 ms at batch 1;
    throughput_data_encoder.csv: 9.29 against 9.34 ms at batch 16);
  - no more engine time than the ATen ops fused into the kernel would take alone (their eager
    pass plans, sized by their FX nodes' example values: _fused_ops), where Inductor's
    decomposition (GELU into erf arithmetic, LayerNorm into reductions) makes more instructions
    than Trainium runs those ops with (Note [Fused kernel bound] in trnsim's work.cpp);
  - the launch overhead once: alone, the kernel would take launch + max(engines, HBM), never
    below the roofline of what it still reads and writes.
The sizes are expressions of the graph's symbolic sizes, so a dynamic-shape kernel is charged
for the shape it runs with. The charge is one line the wrapper runs right after the kernel:
_charge_kernel(device, name, bytes, [(engine, elements, two inputs) per pass], 16-bit, fused
ATen ops, [buffers read], [buffers written], [(ATen op, elements, two inputs) per fused call]).
Inside the compiled graph's region (Note [Compiled graph schedule] in
csrc/aten/GraphSchedule.h), which is where the generated wrapper runs it, the charge joins
the graph's schedule instead of launching: its buffers give its dependencies, and the graph
pays the launch overhead once.
"""

import sympy
import torch
import torch.utils._pytree as pytree
from torch._inductor.codegen.common import InplacedBuffer
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.dependencies import MemoryDep, StarDep, WeakDep
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import V

from torch_neuron.compile.loop_body import instructions

_SIXTEEN_BIT = ("torch.bfloat16", "torch.float16")




def _op_name(aten) -> str:
    schema = aten._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def _buffer_bytes(name: str):
    return V.graph.get_numel(name) * V.graph.get_dtype(name).itemsize


def _real_name(name: str) -> str:
    """The buffer a mutation writes into: Inductor names a node that mutates a buffer (an
    in-place `index_copy_` into a graph input, a static KV cache) apart from the buffer."""
    scheduler = getattr(V.graph, "scheduler", None)
    renames = scheduler.mutation_real_name if scheduler is not None else {}
    return renames.get(name, name)


def _moved_bytes(name: str, nodes) -> sympy.Expr:
    """The bytes of buffer `name` a kernel of `nodes` moves (Note [Fused kernel cost]): the
    whole buffer, unless every access to it is indirect; then one element per iteration of
    each access, at most the whole buffer. A mutation's StarDep on the whole buffer orders the
    kernel after the buffer's other users and moves no data: a KV cache updated in place at
    one position moves that position's elements, not the cache. A WeakDep moves none either:
    Inductor adds it only to order a node that mutates something after the nodes that read
    it (advancing a cache position after the cache updates that used it), and the node does
    not read the buffer the WeakDep names."""
    whole = _buffer_bytes(name)
    real = _real_name(name)
    touched = []
    for node in nodes:
        rw = node.read_writes
        deps = [d for d in [*rw.reads, *rw.writes]
                if _real_name(d.name) == real and not isinstance(d, WeakDep)]
        if deps and all(isinstance(d, StarDep) for d in deps):
            return whole  # no access named: assume the whole buffer
        for dep in deps:
            if isinstance(dep, StarDep):
                continue
            if not (isinstance(dep, MemoryDep) and dep.is_indirect()):
                return whole
            touched.append(sympy_product(dep.size))
    if not touched:
        return whole
    return sympy.Min(whole, sympy.Add(*touched) * V.graph.get_dtype(name).itemsize)


def _tensors(value):
    """The tensors in an FX node's example value (a tensor, or a tuple or list of them)."""
    return [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def _numel(t) -> sympy.Expr:
    n = t.numel()
    return n.node.expr if isinstance(n, torch.SymInt) else sympy.Integer(n)


def _fused_ops(nodes, symbols):
    """The ATen ops fused into a kernel of `nodes` as (name, elements, two inputs), each as
    an eager kernel of its own would be sized (describe_op in csrc/aten/OpWork.cpp), for
    Note [Fused kernel bound]; [] when an op cannot be sized by `symbols` (the kernel's own
    sizes) or was not a traced ATen op. Views are left out (eager runs no kernel for them).
    One eager call is decomposed into several FX nodes: they share its op and its autograd
    sequence number (backward) or its source node in Dynamo's graph (forward)."""
    calls = {}
    for node in nodes:
        for origin in getattr(node.node, "origins", ()):
            aten = origin.meta.get("original_aten")
            if aten is None or not hasattr(aten, "_schema"):
                return []
            schema = aten._schema
            if any(a.name == "kernel_size" for a in schema.arguments):
                return []  # a pooling window, which the bound would have to read
            if any(r.alias_info is not None and not r.alias_info.is_write
                   for r in schema.returns):
                continue  # a view (view, expand, slice, ...): no eager kernel, no work
            sources = origin.meta.get("from_node")
            source = sources[0].name if sources else None
            seq_nr = origin.meta.get("seq_nr")
            key = ((schema.name, seq_nr, source) if source is not None or seq_nr is not None
                   else origin)
            tensors = _tensors(origin.meta.get("val")) + [
                t for a in origin.args if isinstance(a, torch.fx.Node)
                for t in _tensors(a.meta.get("val"))]
            sizes = [_numel(t) for t in tensors]
            if not sizes or any(not e.free_symbols <= symbols for e in sizes):
                return []
            streamed = sum(str(a.type) in ("Tensor", "Optional[Tensor]")
                           for a in schema.arguments)
            name, elements, _ = calls.get(key, (schema.name, sympy.Integer(0), False))
            calls[key] = (name, sympy.Max(elements, *sizes), streamed >= 2)
    return list(calls.values())


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
            elements = sympy_product(iteration) * sympy_product(reduction)
            if node._body.op_counts.get("indirect_indexing", 0):
                self.loops.append(("gpsimd", elements, False))
            else:
                activations, tensor_tensor, one_input = instructions(node._body)
                passes = ([("scalar", elements, False)] * activations
                          + [("vector", elements, True)] * tensor_tensor
                          + [("vector", elements, False)] * one_input)
                self.loops += passes or [("vector", elements, False)]
            for origin in getattr(node.node, "origins", ()):
                aten = origin.meta.get("original_aten")
                if aten is not None and hasattr(aten, "_schema"):
                    ops.add(_op_name(aten).replace("aten::", ""))
            sixteen_bit = sixteen_bit or str(node.node.get_dtype()) in _SIXTEEN_BIT
        self.sixteen_bit = sixteen_bit
        self.ops = ", ".join(sorted(ops))
        symbols = self.bytes.free_symbols.union(*(e.free_symbols for _, e, _ in self.loops))
        self.fused_ops = _fused_ops(nodes, symbols)

    def charge_line(self, device_index: int, kernel_name: str) -> str:
        size = V.graph.wrapper_code.codegen_python_sizevar

        def rows(triples):  # [(engine or ATen op, elements, two inputs)] as Python source
            return ", ".join(f"({what!r}, {size(elements)}, {two})"
                             for what, elements, two in triples)

        return (f"_charge_kernel({device_index}, {kernel_name!r}, {size(self.bytes)}, "
                f"[{rows(self.loops)}], {self.sixteen_bit}, {self.ops!r}, "
                f"[{', '.join(self.reads)}], [{', '.join(self.writes)}], "
                f"[{rows(self.fused_ops)}])")


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
