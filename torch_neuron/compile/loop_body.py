"""What one Inductor loop body compiles to on a NeuronCore: its ScalarE activations and its
VectorE instructions (the rules of Note [Fused kernel cost] in torch_neuron/compile/
scheduling.py), with the values it computes twice counted once and the chains of arithmetic
that are one of ScalarE's activation functions counted as that one activation."""

import functools

import torch


# Loop-body operations a NeuronCore evaluates on ScalarE (its activation functions).
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "tanh", "sigmoid", "erf", "erfc",
    "erfinv", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh",
    "acosh", "atanh", "sqrt", "rsqrt", "pow", "lgamma", "digamma", "libdevice_exp",
    "libdevice_log", "libdevice_sqrt", "libdevice_rsqrt"})


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
# Operations whose value follows from their operands alone (_same_values).
_PURE = frozenset(_EVALUATE) | {"load", "constant", "to_dtype"}


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
    for n in nodes:
        name = str(n.target)
        if name in ("store", "store_reduction"):  # later loads of the buffer read anew
            seen = {k: v for k, v in seen.items() if k[0] != "load" or k[1][0] != n.args[1]}
        if name not in _PURE:
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
        result = _evaluate_chain(root, chain, same, outputs[0])
        if result is not None and _is_activation_function(result):
            found.update({n: None for n in chain})
            found[outputs[0]] = outputs[0]
    return found


def _evaluate_chain(root, chain, same, output):
    """`output`'s values when the chain's root takes _SAMPLE's, float64; None when an
    operation is one the sample cannot follow (then it is no function we know)."""
    values = {n: _SAMPLE for n in [root, *chain] if same[n] is root}

    def value(a):
        if a in values:
            return values[a]
        if hasattr(a, "target") and str(a.target) == "constant":
            return torch.tensor(float(a.args[1]), dtype=torch.float64)
        return a  # a Python number or a dtype

    try:
        for n in chain:
            if n in values:
                continue
            args = [value(a) for a in n.args[1:]]
            if str(n.target) == "to_dtype":
                if not args[1].is_floating_point:
                    return None  # a cast to an integer type changes the values
                values[n] = args[0]
            else:
                values[n] = _EVALUATE[str(n.target)](*args)
    except (KeyError, TypeError, ValueError, OverflowError, RuntimeError):
        return None
    return values[output]


def instructions(body):
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
        if name == "constant" or (name == "load" and not changes[n]):
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
