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
    to, each one pass over the loop's
    elements (_instructions): one ScalarE activation per transcendental function (exp, erf,
    tanh, rsqrt, ...), which also applies a scale and a bias (nki.isa.activation computes
    func(in * scale + bias)), so the one or two scalar multiplies and adds just before it cost
    nothing more; one VectorE tensor_tensor (two inputs) per operation on two tensors, which
    also applies one scalar operation to one of them just before (scalar_tensor_tensor); one
    VectorE tensor_scalar per operation on a tensor and scalars (constants, or values that do
    not change along the innermost dimension, such as a row's mean: per-partition scalars),
    two chained ones sharing an instruction (tensor_scalar applies op0 then op1), and none for
    arithmetic on scalars alone (one element per row); one VectorE pass per reduction. Loads,
    stores, constants, casts (the dtype an instruction writes) and arithmetic on the loop
    indices alone (addresses) are no instruction, nor is choosing by position between masked
    loads (concatenation, padding: each element comes from one place, which the DMA reads);
    a loop with no other instruction (a copy) is one VectorE pass. What the body repeats on the
    same values (Inductor loads one element, or recomputes one expression, several times) is
    computed once. A chain of operations that computes one of ScalarE's activation functions
    (nki.language's table, torch_neuron/nki/ops.py) of one value is that one activation,
    however it is written (_activation_chains: the chain is evaluated on 4097 points of
    [-8, 8] and compared with each function). Hugging Face's NewGELUActivation (ALBERT's and
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

import functools

import sympy
import torch
import torch.utils._pytree as pytree
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


# Loop-body operations that are no engine instruction: data movement, constants, indexing
# and casts (Note [Fused kernel cost]).
_NO_INSTRUCTION = frozenset({
    "load", "store", "store_reduction", "to_dtype", "to_dtype_bitcast", "index_expr", "masked",
    "output", "indirect_indexing", "check_bounds", "load_seed", "identity"})
# The scalar operations an activation's scale and bias apply.
_AFFINE = frozenset({"add", "sub", "mul", "truediv"})


def _index(body, load):
    """The index expression a load node reads at."""
    get_index = load.args[2]
    return body.indexing_exprs[get_index.args[0]]


# How a loop body's operations compute, for _activation_chains: float64 torch on a sample.
_EVALUATE = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "truediv": torch.div,
    "div": torch.div, "neg": torch.neg, "pow": torch.pow, "maximum": torch.maximum,
    "minimum": torch.minimum, "abs": torch.abs, "relu": torch.relu, "exp": torch.exp,
    "exp2": torch.exp2, "expm1": torch.expm1, "log": torch.log, "log1p": torch.log1p,
    "log2": torch.log2, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "erf": torch.erf,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal,
    "sin": torch.sin, "cos": torch.cos, "atan": torch.atan, "square": torch.square,
    "libdevice_exp": torch.exp, "libdevice_log": torch.log, "libdevice_sqrt": torch.sqrt,
    "libdevice_rsqrt": torch.rsqrt}
_SAMPLE = torch.linspace(-8.0, 8.0, 4097, dtype=torch.float64)


@functools.cache
def _scalare_functions() -> tuple:
    """ScalarE's activation functions (nki.language's table, torch_neuron.nki.ops) on _SAMPLE,
    float64; `copy` left out (a chain that computes its input is casts)."""
    import numpy as np

    from torch_neuron.nki.ops import OPERATORS

    with np.errstate(all="ignore"):
        return tuple(torch.as_tensor(np.asarray(op.fn(_SAMPLE.numpy()), dtype=np.float64))
                     for name, op in OPERATORS.items() if op.activation and name != "copy")


def _is_activation_function(values) -> bool:
    return any(torch.allclose(values, table, rtol=1e-4, atol=1e-5, equal_nan=True)
               for table in _scalare_functions())


def _same_values(body, nodes):
    """{node: the first node that computes the same value}: Inductor may load one element or
    repeat one operation several times in a loop body, which a compiler computes once."""
    same, seen = {}, {}
    pure = set(_EVALUATE) | {"load", "constant", "to_dtype"}
    for n in nodes:
        name = str(n.target)
        if name in ("store", "store_reduction"):  # later loads of the buffer read anew
            seen = {k: v for k, v in seen.items() if k[0] != "load" or k[1][0] != n.args[1]}
        if name not in pure:
            same[n] = n
            continue
        args = ((n.args[1], str(_index(body, n))) if name == "load" else
                tuple(same.get(a, a) for a in n.args[1:]))
        try:
            same[n] = seen.setdefault((name, args, tuple(n.kwargs.items())), n)
        except TypeError:  # an unhashable argument: left as its own value
            same[n] = n
    return same


def _activation_chains(nodes, same, changes):
    """{node: None} for the nodes of every chain of operations in the loop body that computes
    one of ScalarE's activation functions of one value, and {output: output} for each
    chain's result (Note [Fused kernel cost])."""
    constant, entry = object(), {}  # entry: the one value a node is a function of
    for n in nodes:
        name = str(n.target)
        if same[n] is not n:
            entry[n] = entry[same[n]]
        elif name == "constant":
            entry[n] = constant
        else:
            roots = {entry[a] for a in n.args[1:] if a in entry} - {constant}
            follows = name in _EVALUATE or name == "to_dtype"
            entry[n] = roots.pop() if len(roots) == 1 and follows else n
    chains = {}
    for n in nodes:
        if entry[n] is not n and entry[n] is not constant:
            chains.setdefault(entry[n], []).append(n)
    found = {}
    for root, chain in chains.items():
        members = set(chain)
        outputs = [n for n in chain if any(u not in members for u in n.users)]
        steps = {same[n] for n in chain if str(n.target) != "to_dtype"} - {root}
        if len(outputs) != 1 or len(steps) < 2 or not changes[root]:
            continue
        values = {n: _SAMPLE for n in [root, *chain] if same[n] is root}
        try:
            for n in chain:
                if n in values:
                    continue
                args = [values[a] if a in values else
                        torch.tensor(float(a.args[1]), dtype=torch.float64)
                        if hasattr(a, "target") and str(a.target) == "constant" else a
                        for a in n.args[1:]]
                if str(n.target) == "to_dtype":
                    if not args[1].is_floating_point:
                        raise KeyError(n.target)
                    values[n] = args[0]
                else:
                    values[n] = _EVALUATE[str(n.target)](*args)
        except (KeyError, TypeError, ValueError, OverflowError, RuntimeError):
            continue  # an operation the sample cannot follow: not a function we know
        if _is_activation_function(values[outputs[0]]):
            found.update({n: None for n in chain})
            found[outputs[0]] = outputs[0]
    return found


def _instructions(body):
    """(ScalarE activations, VectorE two-input instructions, VectorE one-input instructions)
    of one loop body (Note [Fused kernel cost])."""
    nodes = [n for n in body.get_nodes() if n.op == "call_method"]
    loop_vars = [*body.iter_vars, *body.reduce_vars]
    innermost = loop_vars[-1] if len(loop_vars) > 1 else None

    changes = {}  # value -> whether it changes along the innermost (free) dimension
    for n in nodes:
        changes[n] = (innermost is None or innermost in _index(body, n).free_symbols
                      if str(n.target) == "load" else
                      any(changes.get(a, False) for a in n.args[1:]))
    same = _same_values(body, nodes)
    chains = _activation_chains(nodes, same, changes)
    # Values the same along the innermost (free) dimension: constants, loads that do not move
    # along it (a row's mean) and arithmetic on them, which an instruction takes as a
    # per-partition scalar operand.
    scalars = set()
    positions = set()  # values computed from the loop indices alone (addresses, not data)
    activations, two_input = [], []
    instruction_of = {}  # value -> the one-input instruction that computes it
    operators = {}  # one-input instruction (its first node) -> its operator names
    for n in nodes:
        name = str(n.target)
        if n in chains:  # a chain that is one activation function: its output is that
            if chains[n] is not None:
                activations.append(n)
            continue
        if same[n] is not n:  # computed before: the same value, no instruction
            first = same[n]
            for values in (scalars, positions):
                if first in values:
                    values.add(n)
            if first in instruction_of:
                instruction_of[n] = instruction_of[first]
            continue
        operands = [a for a in n.args[1:] if hasattr(a, "op")]
        tensors = [a for a in operands if a not in scalars]
        if name == "constant" or (name == "load" and innermost is not None
                                  and innermost not in _index(body, n).free_symbols):
            scalars.add(n)
        elif (operands and all(a in scalars for a in operands)
              and name not in ("store", "store_reduction", "reduction")):
            scalars.add(n)  # arithmetic on per-partition scalars: one element per row
        elif name == "index_expr" or (tensors and all(a in positions for a in tensors)):
            positions.add(n)
        elif name == "where" and tensors[0] in positions and all(
                a.op == "call_module" for a in tensors[1:]):
            pass  # concatenation or padding: each element is loaded from one place (DMA)
        elif name in _NO_INSTRUCTION:
            # A cast is the dtype its producer writes: it passes that instruction on.
            if name.startswith("to_dtype") and tensors and tensors[0] in instruction_of:
                instruction_of[n] = instruction_of[tensors[0]]
        elif name in TRANSCENDENTAL:
            activations.append(n)
        elif name == "reduction":
            operators[n] = [name]  # tensor_reduce: one input; nothing chains into it
        elif len(tensors) >= 2:
            two_input.append(n)
        else:
            # tensor_scalar applies two operators: the second of a chain joins the first's
            # instruction when nothing else reads the value between them.
            source = instruction_of.get(tensors[0]) if tensors else None
            if (source is not None and len(operators[source]) == 1
                    and len(tensors[0].users) == 1):
                operators[source].append(name)
                instruction_of[n] = source
            else:
                operators[n] = [name]
                instruction_of[n] = n

    def absorb(consumer, most, applies):
        # Drops the one-input instruction that feeds only `consumer` when `consumer` applies
        # its operators itself (at most `most` of them, each passing `applies`).
        for value in consumer.args[1:]:
            source = instruction_of.get(value) if hasattr(value, "op") else None
            if (source in operators and len(value.users) == 1
                    and len(operators[source]) <= most and all(map(applies, operators[source]))):
                del operators[source]
                return

    for n in activations:  # func(in * scale + bias)
        absorb(n, 2, lambda op: op in _AFFINE)
    for n in two_input:  # scalar_tensor_tensor: (in0 op0 scalar) op1 in1
        absorb(n, 1, lambda op: op != "reduction")
    return len(activations), len(two_input), len(operators)


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
                activations, tensor_tensor, one_input = _instructions(node._body)
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
