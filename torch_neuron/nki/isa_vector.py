"""More Vector Engine instructions of `nki.isa`: `scalar_tensor_tensor`, `tensor_scalar_reduce`,
`tensor_scalar_cumulative`, `tensor_copy_predicated`, `max8`, `nc_find_index8`,
`nc_match_replace8`, `range_select` (NeuronCore-v3)
and `exponential` (NeuronCore-v4); and the Scalar Engine's `activate2` (NeuronCore-v4).

Signatures and rules from the current release's stub, aws-neuron-sdk `nki/api/nki/isa/__init__.py`
(the snapshot docs/nki.md names); each instruction checks its operands, computes in float32 as the
engine does (Note [Rounding to narrow floats] for the write) inside the thunk predict-only skips
(Note [Predict-only instructions]) and appends its record. The Vector Engine's accumulator
registers are shared by its accumulating instructions ("The accumulator registers are shared
across Vector Engine accumulation instructions", tensor_scalar_reduce's page), so
`tensor_scalar_reduce`, `exponential` and `select_reduce` use the same per-program registers.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import (DtypeError, MemorySpaceError, NkiValidationError,
                                     ShapeError, TileSizeError, UninitializedReadError)
from torch_neuron.nki.instruction import _Instruction, _scalar_regs, _vector_regs, reduce_cmd

_CMD = reduce_cmd  # the enum, where a parameter of the same name (as in the stub) hides it
from torch_neuron.nki.ops import apply
from torch_neuron.nki.tensor import MemoryRegion, NkiTensor

# The identity each reduction's accumulators reset to (tensor_scalar_reduce's page).
_IDENTITY = {"add": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def _reduce_rows(op_name: str, x: np.ndarray) -> np.ndarray:
    if op_name == "add":
        return x.sum(axis=1, dtype=np.float32)
    if op_name == "multiply":
        return x.prod(axis=1, dtype=np.float32)
    return (x.max if op_name == "maximum" else x.min)(axis=1)


def _accumulate(ins: _Instruction, cmd, op_name: str, P: int, rows, reduce_init, reduce_res):
    """The shared accumulator registers: reset (to op's identity), reduce onto them, or load
    `reduce_init` first; then `reduce_res`, when given, receives them."""
    regs = _vector_regs(ins.run)
    key = ins.run.program_id
    if cmd is _CMD.load_reduce:
        if reduce_init is None:
            raise ins.error(NkiValidationError, "reduce_cmd=load_reduce needs reduce_init")
        init = ins.scalar_or_vector(reduce_init, "reduce_init", P, float32=True)
        regs[key] = np.full(ins.target.partitions, np.nan, np.float32)
        if ins.compute:
            regs[key][:P] = np.broadcast_to(init, (P, 1))[:, 0]
    elif reduce_init is not None and not (np.isscalar(reduce_init) and reduce_init == 0):
        raise ins.error(NkiValidationError, "reduce_init is only used with "
                                            "reduce_cmd=load_reduce")
    if cmd is _CMD.reset_reduce:
        regs[key] = np.full(ins.target.partitions, _IDENTITY[op_name], np.float32)
    if cmd in (_CMD.reset_reduce, _CMD.reduce, _CMD.load_reduce):
        if key not in regs:
            raise ins.error(UninitializedReadError, "reduce_cmd=reduce on Vector Engine "
                                                    "accumulators never reset; use reset_reduce")
        if ins.compute:
            both = np.stack([regs[key][:P], _reduce_rows(op_name, rows().reshape(P, -1))],
                            axis=1)
            regs[key][:P] = _reduce_rows(op_name, both)
    if reduce_res is not None:
        ins.registers_result(reduce_res, P, regs, key, "Vector Engine accumulators")
    return regs, key


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False,
                         reverse1=False, name=None):
    """dst = (data <op0> operand0) <op1> operand1: a tensor_scalar step then a tensor_tensor
    step in one instruction."""
    ins = _Instruction("scalar_tensor_tensor")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.tile(operand1, "operand1")
    ins.same_layout(dst, "dst", data, "data")
    ins.same_layout(operand1, "operand1", data, "data")
    ins.not_both_psum(data, "data", operand1, "operand1")
    op0 = ins.operator(op0, "op0", kinds=("arith",))
    op1 = ins.operator(op1, "op1", kinds=("arith",))
    v0 = ins.scalar_or_vector(operand0, "operand0", data.shape[0])
    x, y = ins.f32(data, "data"), ins.f32(operand1, "operand1")

    def result():
        t = apply(op0, v0, x) if reverse0 else apply(op0, x, v0)
        return apply(op1, y, t) if reverse1 else apply(op1, t, y)

    ins.write(dst, result)
    ins.record("VectorE", op0=op0.name, op1=op1.name)


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                         reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None,
                         reduce_res_negate=False, name=None):
    """dst = data <op0> operand0, and the rows of dst reduced with reduce_op into the
    accumulators (and reduce_res)."""
    ins = _Instruction("tensor_scalar_reduce")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    # op0 "can only be arithmetic operation in nki-aluop", its semantics tensor_scalar's (stub):
    # a unary one (nl.abs, AWS's rmsnorm_quant) ignores operand0, which must be None or 0.
    op0 = ins.operator(op0, "op0", kinds=("arith",), unary_ok=True)
    rop = ins.operator(reduce_op, "reduce_op", kinds=("arith",), reduction=True)
    if rop.name not in _IDENTITY:
        raise ins.error(NkiValidationError, f"reduce_op=nl.{rop.name}: tensor_scalar_reduce "
                                            f"reduces with nl.add, nl.multiply, nl.max or "
                                            f"nl.min")
    P = data.shape[0]
    x = ins.f32(data, "data")
    if op0.arity == 1:
        if operand0 not in (None, 0, 0.0):
            raise ins.error(NkiValidationError, f"operand0 must be None or 0 for the unary "
                                                f"operator nl.{op0.name}")
        y = (lambda: apply(op0, x))
    else:
        v0 = ins.scalar_or_vector(operand0, "operand0", P, float32=True)
        y = (lambda: apply(op0, v0, x) if reverse0 else apply(op0, x, v0))
    cache = {}

    def values():
        if "y" not in cache:
            cache["y"] = np.asarray(y(), dtype=np.float32)
        return cache["y"]

    regs, key = _accumulate(ins, reduce_cmd, rop.name, P, values, reduce_init, reduce_res)
    ins.write(dst, values)
    if reduce_res is not None:
        ins.write(reduce_res, lambda: -regs[key][:P] if reduce_res_negate else regs[key][:P])
    ins.record("VectorE", op0=op0.name, reduce_op=rop.name)


def tensor_copy_predicated(dst, src, predicate, reverse_pred=False, name=None):
    """dst = src where predicate (or where not, with reverse_pred); dst keeps its values
    elsewhere."""
    ins = _Instruction("tensor_copy_predicated")
    ins.tile(dst, "dst", read=False)
    ins.tile(predicate, "predicate")
    ins.same_layout(dst, "dst", predicate, "predicate")
    if predicate.dtype not in ("uint8", "uint16", "uint32"):
        raise ins.error(DtypeError, f"predicate is {predicate.dtype}; it must be uint8, uint16 "
                                    f"or uint32")
    if isinstance(src, NkiTensor):
        ins.tile(src, "src")
        ins.same_layout(dst, "dst", src, "src")
        ins.not_both_psum(src, "src", predicate, "predicate")
        ins.same_dtype(src, "src", dst, "dst")
        s = ins.values(src, "src")
    elif isinstance(src, (int, float, np.integer, np.floating, bool)):
        s = src
    else:
        raise ins.error(ShapeError, f"src={src!r} must be a tile or a number")
    p = ins.values(predicate, "predicate")
    pf = ins.pf(dst)
    # Elements of dst outside the predicate keep their values, so dst counts as read too
    # (only where the predicate is false; all of it is checked written here, as an assumption).
    ins.reads.append(dst)

    def result():
        mask = p.reshape(pf) != 0
        mask = ~mask if reverse_pred else mask
        new = np.broadcast_to(s, pf) if not isinstance(s, np.ndarray) else s.reshape(pf)
        old = dst._data.reshape(pf)
        return np.where(mask, new, old)

    if ins.run.uninitialized == "error" and not dst._written.all():
        raise ins.error(UninitializedReadError, f"dst {dst!r} keeps its values where the "
                                                f"predicate is false: write all of it first")
    ins.write(dst, result)
    ins.record("VectorE")


def max8(dst, src, name=None):
    """The 8 largest values of each partition, in descending order."""
    ins = _Instruction("max8")
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    P, F = ins.pf(src)
    if src.ndim > 3:
        raise ins.error(ShapeError, f"src {src.shape} may have at most 3 dimensions")
    if not 8 <= F <= 16384:
        raise ins.error(TileSizeError, f"src has {F} elements per partition; max8 reads 8 to "
                                       f"16384")
    if dst.ndim != 2 or dst.shape != (P, 8):
        raise ins.error(ShapeError, f"dst {dst.shape} must be ({P}, 8)")
    x = ins.f32(src, "src")
    ins.write(dst, lambda: -np.sort(-x, axis=1)[:, :8])
    ins.record("VectorE")


def _eight_values_operands(ins, dst, data, vals, dst_role="dst"):
    """Checks shared by nc_find_index8 and nc_match_replace8: data has 8 to 16,384 elements per
    partition and up to 3 dims, vals exactly 8 per partition on the same partitions."""
    ins.tile(data, "data")
    ins.tile(vals, "vals")
    P, F = ins.pf(data)
    if data.ndim > 3 or vals.ndim > 3:
        raise ins.error(ShapeError, "data and vals may have at most 3 dimensions")
    if not 8 <= F <= 16384:
        raise ins.error(TileSizeError, f"data has {F} elements per partition; it must have 8 "
                                       f"to 16384")
    if ins.pf(vals) != (P, 8):
        raise ins.error(ShapeError, f"vals {vals.shape} must have {P} partitions of 8 elements")
    return P, F


def _first_unused(row: np.ndarray, value, used: np.ndarray) -> int:
    """Index of the first element equal to `value` not matched yet, or -1."""
    hits = np.flatnonzero((row == value) & ~used)
    return int(hits[0]) if hits.size else -1


def nc_find_index8(dst, data, vals, name=None):
    """dst[p, i] = index of the first occurrence of vals[p, i] in data[p] (all ones where it
    does not occur); equal vals take successive occurrences in ascending order."""
    ins = _Instruction("nc_find_index8")
    ins.tile(dst, "dst", read=False)
    P, F = _eight_values_operands(ins, dst, data, vals)
    if ins.pf(dst) != (P, 8) or dst.ndim != 2:
        raise ins.error(ShapeError, f"dst {dst.shape} must be ({P}, 8)")
    if dst.dtype not in ("uint16", "uint32"):
        raise ins.error(DtypeError, f"dst is {dst.dtype}; the indices are uint16 or uint32")
    x, v = ins.f32(data, "data"), ins.f32(vals, "vals")
    missing = 0xFFFF if dst.dtype == "uint16" else 0xFFFFFFFF  # "an all-ones sentinel"

    def result():
        out = np.full((P, 8), missing, dtype=np.uint64)
        for p in range(P):
            used = np.zeros(F, dtype=bool)
            for i in range(8):
                j = _first_unused(x[p], v[p, i], used)
                if j >= 0:
                    used[j], out[p, i] = True, j
        return out

    ins.write(dst, result)
    ins.record("VectorE")


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, name=None):
    """dst = data with the first occurrence of each of vals[p] replaced by imm, vals taken in
    reverse order (i = 7 .. 0, so equal vals take successive occurrences from the highest
    slot down); their indices go to dst_idx if given."""
    ins = _Instruction("nc_match_replace8")
    ins.tile(dst, "dst", read=False)
    P, F = _eight_values_operands(ins, dst, data, vals)
    ins.same_layout(dst, "dst", data, "data")
    if dst_idx is not None:
        ins.tile(dst_idx, "dst_idx", read=False)
        if ins.pf(dst_idx) != (P, 8):
            raise ins.error(ShapeError, f"dst_idx {dst_idx.shape} must be ({P}, 8)")
    x, v = ins.f32(data, "data"), ins.f32(vals, "vals")
    found = {}

    def indices():
        if "idx" not in found:
            idx = np.full((P, 8), 0xFFFFFFFF, dtype=np.uint64)
            for p in range(P):
                used = np.zeros(F, dtype=bool)
                for i in range(7, -1, -1):
                    j = _first_unused(x[p], v[p, i], used)
                    if j >= 0:
                        used[j], idx[p, i] = True, j
            found["idx"] = idx
        return found["idx"]

    def replaced():
        out = x.copy()
        for p, row in enumerate(indices()):
            hit = row[row != 0xFFFFFFFF].astype(np.int64)
            out[p, hit] = imm
        return out

    ins.write(dst, replaced)
    if dst_idx is not None:
        ins.write(dst_idx, indices)
    ins.record("VectorE")


def exponential(dst, src, max_value=0.0, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                reduce_init=0.0, name=None):
    """dst = exp(src - max_value) on the Vector Engine (NeuronCore-v4 and newer), optionally
    summing the rows into the accumulators."""
    ins = _Instruction("exponential")
    ins.needs_core(4)
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    ins.same_layout(dst, "dst", src, "src")
    if src.ndim > 4 or dst.ndim > 4:
        raise ins.error(ShapeError, "src and dst may have at most 4 dimensions")
    for role, t in (("dst", dst), ("src", src)):
        if t.buffer not in (MemoryRegion.sbuf, MemoryRegion.psum):
            raise ins.error(MemorySpaceError, f"{role} must be in SBUF or PSUM")
    P = src.shape[0]
    m = ins.scalar_or_vector(max_value, "max_value", P, float32=True)
    x = ins.f32(src, "src")
    cache = {}

    def values():
        if "y" not in cache:
            with np.errstate(over="ignore"):
                cache["y"] = np.exp(x - m).astype(np.float32)
        return cache["y"]

    regs, key = _accumulate(ins, reduce_cmd, "add", P, values,
                            reduce_init if reduce_cmd is _CMD.load_reduce else None,
                            reduce_res)
    ins.write(dst, values)
    if reduce_res is not None:
        ins.write(reduce_res, lambda: regs[key][:P])
    ins.record("VectorE", reduce_cmd=reduce_cmd, reduce_res=reduce_res is not None)


_CUMULATIVE = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum,
               "minimum": np.minimum}


def tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
                             reduce_cmd=reduce_cmd.reset_reduce, name=None):
    """Along each partition's free elements: reg = op1(op0(src[i], imm0), reg), dst[i] = reg,
    the register starting from op1's identity (reset_reduce), imm1 (load_reduce) or where the
    last accumulating instruction left it (reduce)."""
    ins = _Instruction("tensor_scalar_cumulative")
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    ins.same_layout(dst, "dst", src, "src")
    for role, t in (("dst", dst), ("src", src)):
        if t.dtype in ("int32", "uint32"):
            raise ins.error(DtypeError, f"{role} is {t.dtype}; tensor_scalar_cumulative takes "
                                        f"no 32-bit integer tiles")
    op0 = ins.operator(op0, "op0", kinds=("arith",))
    op1 = ins.operator(op1, "op1", kinds=("arith",), reduction=True)
    if op1.name not in ("add", "subtract", "multiply", "maximum", "minimum"):
        raise ins.error(NkiValidationError, f"op1=nl.{op1.name}: the cumulative operator is add, "
                                            f"subtract, multiply, maximum or minimum")
    P, F = ins.pf(src)
    v0 = ins.scalar_or_vector(imm0, "imm0", P, float32=True)
    regs = _vector_regs(ins.run)
    key = ins.run.program_id
    identity = 0.0 if op1.name == "subtract" else _IDENTITY[op1.name]
    start = None
    if reduce_cmd is _CMD.load_reduce:
        if imm1 is None:
            raise ins.error(NkiValidationError, "reduce_cmd=load_reduce needs imm1")
        start = ins.scalar_or_vector(imm1, "imm1", P, float32=True)
    elif reduce_cmd is _CMD.reduce:
        if key not in regs:
            raise ins.error(UninitializedReadError, "reduce_cmd=reduce on Vector Engine "
                                                    "accumulators never reset; use reset_reduce")
    elif reduce_cmd is not _CMD.reset_reduce:
        raise ins.error(NkiValidationError, f"reduce_cmd={reduce_cmd}: use reset_reduce, reduce "
                                            f"or load_reduce")
    x = ins.f32(src, "src")
    if key not in regs:
        regs[key] = np.full(ins.target.partitions, identity, np.float32)

    def result():
        if start is not None:
            reg = np.broadcast_to(start, (P, 1))[:, 0].astype(np.float32)
        elif reduce_cmd is _CMD.reset_reduce:
            reg = np.full(P, identity, np.float32)
        else:
            reg = regs[key][:P].copy()
        y = apply(op0, x, v0).astype(np.float32)
        fn = _CUMULATIVE.get(op1.name)
        if fn is not None:   # op1(t, reg) commutes: a running accumulate, sequential in fp32
            out = fn.accumulate(np.concatenate([reg[:, None], y], axis=1), axis=1,
                                dtype=np.float32)[:, 1:]
        else:                # subtract: reg = t - reg, element by element
            out = np.empty((P, F), np.float32)
            for i in range(F):
                reg = y[:, i] - reg
                out[:, i] = reg
        regs[key][:P] = out[:, -1]
        return out

    ins.write(dst, result)
    ins.record("VectorE", op0=op0.name, op1=op1.name)


def activate2(dst, op, data, imm0, imm1, op0, op1, relu_param=0.0, reverse0=False,
              reverse1=False, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
              name=None):
    """Scalar Engine (NeuronCore-v4): op((data <op0> imm0) <op1> imm1), optionally summed per
    partition into the Scalar Engine's reduce registers (as activation's)."""
    from torch_neuron.nki.ops import OPERATORS, Operator

    ins = _Instruction("activate2")
    ins.needs_core(4)
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    if not (isinstance(op, Operator) and op.activation):
        raise ins.error(NkiValidationError, f"op={op!r} is not an activation function")
    op0 = ins.operator(op0, "op0", kinds=("arith",))
    op1 = ins.operator(op1, "op1", kinds=("arith",))
    pairs = {("multiply", "add"), ("multiply", "subtract"), ("multiply", "bypass"),
             ("add", "bypass"), ("subtract", "bypass"), ("bypass", "bypass")}
    if (op0.name, op1.name) not in pairs:
        raise ins.error(NkiValidationError, f"(op0, op1) = (nl.{op0.name}, nl.{op1.name}); "
                                            f"activate2 takes {sorted(pairs)}")
    P = data.shape[0]
    v0 = ins.scalar_or_vector(imm0, "imm0", P)
    v1 = ins.scalar_or_vector(imm1, "imm1", P)
    # "parameter for parameterized activation functions (e.g., PReLU)": the others ignore it.
    slope = ins.scalar_or_vector(relu_param, "relu_param", P)
    x = ins.f32(data, "data")
    regs = _scalar_regs(ins.run)
    key = ins.run.program_id
    if reduce_op is not None:
        reduce_op = ins.operator(reduce_op, "reduce_op", reduction=True)
        if reduce_op.name != OPERATORS["add"].name:
            raise ins.error(NkiValidationError, f"reduce_op=nl.{reduce_op.name}: the Scalar "
                                                f"Engine reduces with nl.add")
    if reduce_cmd in (_CMD.reset, _CMD.reset_reduce):
        regs[key] = np.zeros(ins.target.partitions, np.float32)
    if reduce_cmd in (_CMD.reduce, _CMD.reset_reduce) and key not in regs:
        raise ins.error(UninitializedReadError, "reduce_cmd=reduce on Scalar Engine registers "
                                                "never reset; use reset_reduce")
    if reduce_res is not None:
        ins.registers_result(reduce_res, P, regs, key, "Scalar Engine reduce registers")
    cache = {}

    def values():
        if "y" not in cache:
            t = apply(op0, v0, x) if reverse0 else apply(op0, x, v0)
            t = apply(op1, v1, t) if reverse1 else apply(op1, t, v1)
            t = np.asarray(t, np.float32)
            cache["y"] = (np.where(t > 0, t, slope * t) if op.name == "prelu" else
                          apply(op, t)).astype(np.float32)
            if reduce_cmd in (_CMD.reduce, _CMD.reset_reduce):
                regs[key][:P] += cache["y"].sum(axis=1, dtype=np.float32)
        return cache["y"]

    ins.write(dst, values)
    if reduce_res is not None:
        ins.write(reduce_res, lambda: (values(), regs[key][:P])[1])
    ins.record("ScalarE", op=op.name, reduce_cmd=reduce_cmd,
               reduce_res=reduce_res is not None)


_FP32_MIN = float(np.finfo(np.float32).min)
_RANGE_COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")


def range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
                 reduce_cmd=reduce_cmd.reset_reduce, reduce_res=None, reduce_op=None,
                 range_start=0, on_false_value=..., name=None):
    """dst = on_true_tile where comp_op0(index, bound0) and comp_op1(index, bound1) hold for
    the element's free index (plus range_start), else FP32_MIN; the rows' maxima go to the
    Vector Engine's accumulators (NeuronCore-v3 and newer)."""
    from torch_neuron.nki.ops import OPERATORS

    ins = _Instruction("range_select")
    ins.needs_core(3)
    ins.tile(dst, "dst", read=False)
    ins.tile(on_true_tile, "on_true_tile")
    ins.same_layout(dst, "dst", on_true_tile, "on_true_tile")
    if not on_true_tile.dt.is_float:
        raise ins.error(DtypeError, f"on_true_tile is {on_true_tile.dtype}; it must be a float "
                                    f"tile")
    cmp0 = ins.operator(comp_op0, "comp_op0", kinds=("arith",))
    cmp1 = ins.operator(comp_op1, "comp_op1", kinds=("arith",))
    for role, op in (("comp_op0", cmp0), ("comp_op1", cmp1)):
        if op.name not in _RANGE_COMPARISONS:
            raise ins.error(NkiValidationError, f"{role}=nl.{op.name}: range_select compares "
                                                f"with {', '.join(_RANGE_COMPARISONS)}")
    rop = ins.operator(reduce_op if reduce_op is not None else OPERATORS["maximum"],
                       "reduce_op", reduction=True)
    if rop.name != "maximum":
        raise ins.error(NkiValidationError, "range_select reduces with nl.maximum only")
    if on_false_value is not ... and np.float32(on_false_value) != np.float32(_FP32_MIN):
        raise ins.error(NkiValidationError, f"on_false_value={on_false_value}: the hardware "
                                            f"fills with FP32_MIN ({_FP32_MIN}) only")
    P, F = ins.pf(on_true_tile)
    b0 = ins.scalar_or_vector(bound0, "bound0", P, float32=True)
    b1 = ins.scalar_or_vector(bound1, "bound1", P, float32=True)
    x = ins.f32(on_true_tile, "on_true_tile")
    cache = {}

    def values():
        if "y" not in cache:
            index = (np.float32(range_start) + np.arange(F, dtype=np.float32))[None, :]
            mask = (apply(cmp0, index, b0) != 0) & (apply(cmp1, index, b1) != 0)
            cache["y"] = np.where(mask, x, np.float32(_FP32_MIN)).astype(np.float32)
        return cache["y"]

    regs, key = _accumulate(ins, reduce_cmd, "maximum", P, values, None, reduce_res)
    ins.write(dst, values)
    if reduce_res is not None:
        ins.write(reduce_res, lambda: regs[key][:P])
    ins.record("VectorE", reduce_cmd=reduce_cmd, reduce_res=reduce_res is not None)
