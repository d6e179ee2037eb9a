"""The machinery every `nki.isa` instruction shares: the ISA's enums and `_Instruction`, which
holds an executing instruction's name, kernel source line and operands, checks them, writes
results (or, predict-only, skips computing them) and appends the instruction's record
(Note [Instruction records]). The instructions themselves are in isa.py and isa_vector.py.
"""

from __future__ import annotations

import enum

import numpy as np

from torch_neuron.nki.errors import (DtypeError, MemorySpaceError, NkiValidationError,
                                     OutOfBoundsError, PartitionLimitError, ReleasedTileError,
                                     ShapeError, UninitializedReadError, UnsupportedError,
                                     kernel_source_line)
from torch_neuron.nki.ops import OPERATORS, REDUCTION_ALIASES, Operator
from torch_neuron.nki.records import InstructionRecord, Operand
from torch_neuron.nki.tensor import MemoryRegion, NkiTensor, current_run


class engine(enum.Enum):
    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    dma = 4
    sync = 6
    unknown = 0


tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown


class reduce_cmd(enum.Enum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dge_mode(enum.Enum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(enum.Enum):
    error = 0
    skip = 1


class dma_engine(enum.Enum):
    dma = 1          # the shared DMA engines (the default)
    gpsimd_dma = 2   # GpSimd's internal DMA, for SBUF-to-SBUF swaps between cores at LNC=2


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):   # ordered: kernels test `get_nc_version() >= nc_version.gen3`
    gen2 = 2
    gen3 = 3
    gen4 = 4


def get_nc_version() -> nc_version:
    return nc_version(current_run("nisa.get_nc_version").target.nc_version)


def get_nc_sub_version() -> int:
    return 0


# Note [Results of unwritten memory]
# AWS's simulator fills new tensors with NaN and lets a kernel compute on them; the NaN reaches
# the output if it matters (nki/guides/nki_simulator.rst, "Uninitialized Memory Detection").
# This simulator's default (uninitialized="error") raises instead, at the instruction that
# reads memory never written. Production kernels legitimately compute on such memory when the
# results are thrown away: aws-neuron/nki-library's find_nonzero_indices transposes a tile of
# which it wrote 1 column in 16, through a matmul, and keeps only the transposed rows it wrote.
# So the instructions below, whose every result element comes from known input elements, may
# read unwritten elements: the results computed from them are left unwritten (the NaN they
# hold stays), and the error comes from whichever instruction or kernel output reads those
# results. Element maps: elementwise copies and arithmetic, result element = the same
# element of each input (a [P, 1] operand or bias: its partition's element); dma_copy, the
# same position in element order; nc_transpose, the transposed element; nc_matmul (and
# nc_matmul_mx), result [i, j] from stationary column i and moving column j;
# nc_stream_shuffle, the partition its mask names; local_gather, the element it gathers;
# sendrecv (isa_cores.py), the same element on the other core. Every other instruction still
# raises. Not tracked: a matmul accumulating onto such results marks them written (their
# values keep the NaN, as in AWS's simulator).
_PROPAGATES = frozenset({"tensor_copy", "tensor_tensor", "tensor_scalar", "activation",
                         "dma_copy", "nc_transpose", "nc_matmul", "nc_matmul_mx",
                         "nc_stream_shuffle", "local_gather"})
# The operands mapped element to element (not an index, nor a tile an instruction accumulates
# into or reduces to registers).
_PROPAGATED_ROLES = frozenset({"src", "data", "data1", "data2", "stationary", "moving",
                               "operand0", "operand1", "bias", "src_buffer"})


def _result_unwritten(ins, dst) -> np.ndarray:
    """Which elements of dst (as dst's [partitions, free] layout) came from unwritten input
    elements (Note [Results of unwritten memory])."""
    shape = ins.pf(dst)
    masks = {role: mask for role, _, mask in ins.unwritten}
    if ins.name in ("nc_matmul", "nc_matmul_mx"):
        out = np.zeros(shape, dtype=bool)
        if "stationary" in masks:
            out |= masks["stationary"].reshape(masks["stationary"].shape[0], -1).any(0)[:, None]
        if "moving" in masks:
            out |= masks["moving"].reshape(masks["moving"].shape[0], -1).any(0)[None, :]
        return out
    if ins.name == "nc_transpose":
        (mask,) = masks.values()
        return mask.reshape(mask.shape[0], -1).T
    if ins.name == "dma_copy":
        (mask,) = masks.values()
        return mask.reshape(shape)
    if ins.name == "nc_stream_shuffle":   # one dst partition, from one src partition
        return ins.shuffle_row_unwritten.reshape(shape)
    if ins.name == "local_gather":        # the gathered elements' own marks
        return ins.gather_unwritten.reshape(shape)
    out = np.zeros(shape, dtype=bool)
    for mask in masks.values():
        rows = mask.reshape(mask.shape[0] if dst.on_chip else 1, -1)
        out |= rows if rows.shape == shape else rows.any(1, keepdims=True)  # a [P, 1] operand
    return out


_ENGINE_NAMES = {engine.tensor: "TensorE", engine.vector: "VectorE", engine.scalar: "ScalarE",
                 engine.gpsimd: "GpSimdE"}


# -- shared checks -------------------------------------------------------------------------------

# Note [Predict-only instructions]
# A kernel called on neuron tensors with execution off (torch_neuron.set_execute(False)) runs
# every instruction's checks (shapes, partitions, tile sizes, memory spaces, dtypes, PSUM banks,
# SBUF/PSUM capacity at allocation, reads of memory never written, the matmul accumulation
# rule) and appends the same record as an executed run, so trnsim schedules the same program
# and charges the same time (test_nki_predict_only.py checks record for record). What it skips
# is the arithmetic: each instruction hands `_Instruction.write` a thunk computing its values,
# which predict-only never calls (the destination is only marked written); `f32` returns a
# zero-copy broadcast instead of converting the operand, and new tensors are not filled with
# NaN. What stays is bookkeeping whose cost does not grow with the math: the written masks
# (the uninitialized-read rule and `accumulate=None` need them) and the records. NKI control
# flow never depends on tensor values (loops and indices are static), which is what makes
# this exact; values the engines produce (the outputs) are unspecified.

class _Instruction:
    """The instruction being executed: its name, source line and operands, for errors and the
    record."""

    def __init__(self, name: str):
        self.name = name
        self.source = kernel_source_line()
        self.run = current_run(f"nisa.{name}")
        self.run.instructions += 1
        self.target = self.run.target
        # Predict-only (Note [Predict-only instructions]): every check and the record, no
        # arithmetic.
        self.compute = not self.run.predict_only
        self.operands: list[tuple[str, NkiTensor]] = []
        self.reads: list[NkiTensor] = []
        self.writes: list[NkiTensor] = []
        # Operands read with unwritten parts, and which (taken when read: an in-place write
        # marks them written before the result's mask is made).
        self.unwritten: list[tuple[str, NkiTensor, np.ndarray]] = []
        self.control = list(self.run.control_sources)   # the running dynamic loops' bounds

    def error(self, cls, message):
        return cls(message, instruction=self.name, source=self.source)

    def tile(self, t, role: str, *, on_chip=True, spaces=None, read=True) -> NkiTensor:
        if not isinstance(t, NkiTensor):
            raise self.error(ShapeError, f"{role} must be an NkiTensor (nl.ndarray), got "
                                         f"{type(t).__name__}")
        if t.is_indirect() and self.name not in ("dma_copy", "dma_compute", "dma_transpose"):
            raise self.error(UnsupportedError, f"{role} {t!r} is addressed through run-time "
                                               f"offsets (.ap with vector_offset or "
                                               f"scalar_offset), which only dma_copy, "
                                               f"dma_compute and dma_transpose take")
        if t.out_of_range:
            raise self.error(OutOfBoundsError, f"{role}: {t.out_of_range}")
        storage = t._storage
        storage.sync()   # Note [Dtype views]
        self.run.used(storage.root)   # Note [Tiles freed at their last use]
        if storage.released is not None and not self.run.revive(storage.root):
            if storage.root.revivable:
                raise self.error(ReleasedTileError,
                                 f"{role} {t!r} was allocated in the last iteration of "
                                 f"{storage.released} and is used after it, but a tile "
                                 f"allocated since took its bytes; allocate it before the loop "
                                 f"to keep it (Note [Tile lifetimes])")
            raise self.error(ReleasedTileError,
                             f"{role} {t!r} was allocated inside an iteration of "
                             f"{storage.released}, and its buffer was released (the next "
                             f"iteration's tiles reuse it) when that iteration ended; allocate "
                             f"it before the loop to keep it (Note [Tile lifetimes])"
                             if storage.released != "the kernel's end" else
                             f"{role} {t!r} was released at the kernel's end")
        if on_chip and not storage.on_chip:
            raise self.error(MemorySpaceError,
                             f"{role} {t!r} is in HBM; compute engines read and write only "
                             f"SBUF and PSUM: dma_copy it into an nl.sbuf tile first")
        if spaces and storage.buffer.value not in spaces:
            raise self.error(MemorySpaceError,
                             f"{role} {t!r} is in {t.buffer.space}; {self.name} needs it in "
                             f"{' or '.join(spaces)}")
        if storage.on_chip and t._data.shape[0] > self.target.partitions:
            raise self.error(PartitionLimitError, f"{role} {t!r} spans {t.shape[0]} partitions "
                                                  f"(max {self.target.partitions})")
        self.operands.append((role, t))
        (self.reads if read else self.writes).append(t)
        return t

    def values(self, t: NkiTensor, role: str) -> np.ndarray:
        """The view's values (checked written). Predict-only: the stand-in array, which the
        instruction only computes with inside the thunk it gives `write`. An instruction that
        maps elements to elements (Note [Results of unwritten memory]) may read unwritten
        elements: its results from them stay unwritten instead."""
        try:
            return t.read()
        except UninitializedReadError as e:
            if self.name in _PROPAGATES and role in _PROPAGATED_ROLES:
                self.unwritten.append((role, t, ~t._written))
                return t._data
            raise self.error(UninitializedReadError, f"{role}: {e.detail}") from None

    def f32(self, t: NkiTensor, role: str) -> np.ndarray:
        """Values as the engines see them: cast to float32, laid out [partitions, free].
        Predict-only: a zero-copy broadcast of 0 of that shape (nothing is computed)."""
        if t.dt.kind == "mx":
            raise self.error(DtypeError, f"{role} is {t.dtype}, packed MX data: only copies, "
                                         f"nisa.quantize_mx and nisa.nc_matmul_mx take it "
                                         f"(Note [MX data types])")
        values = self.values(t, role)
        if not self.compute:
            return np.broadcast_to(np.float32(0), self.pf(t))
        return values.astype(np.float32).reshape(self.pf(t))

    def needs_core(self, version: int) -> None:
        """UnsupportedError unless the target's NeuronCore is `version` or newer."""
        if self.target.nc_version < version:
            raise self.error(UnsupportedError, f"nisa.{self.name} needs NeuronCore-v{version} or "
                                               f"newer; the target is {self.target.core}")

    def same_dtype(self, a: NkiTensor, a_role: str, b: NkiTensor, b_role: str,
                   why: str = "they must share the data type") -> None:
        if a.dtype != b.dtype:
            raise self.error(DtypeError, f"{a_role} is {a.dtype} but {b_role} is {b.dtype}: "
                                         f"{why}")

    @staticmethod
    def pf(t: NkiTensor) -> tuple[int, int]:
        return (t.shape[0], t.free_size) if t.on_chip else (1, t.size)

    def same_layout(self, a: NkiTensor, a_role: str, b: NkiTensor, b_role: str):
        if self.pf(a) != self.pf(b):
            raise self.error(ShapeError,
                             f"{a_role} {a.shape} and {b_role} {b.shape} must have the same "
                             f"partition count and elements per partition "
                             f"({self.pf(a)} vs {self.pf(b)})")

    def expect_pf(self, t: NkiTensor, role: str, partitions: int, free: int):
        """ShapeError unless `t` is `partitions` x `free` elements."""
        if t.shape[0] != partitions or t.free_size != free:
            raise self.error(ShapeError, f"{role} {t.shape} must be ({partitions}, {free})")

    def registers_result(self, reduce_res: NkiTensor, partitions: int, regs: dict, key,
                         registers: str):
        """Checks `reduce_res`, the (partitions, 1) tile that receives an engine's reduce
        registers (`registers` names them in messages), and that they were written."""
        self.tile(reduce_res, "reduce_res", read=False)
        self.expect_pf(reduce_res, "reduce_res", partitions, 1)
        if key not in regs:
            raise self.error(UninitializedReadError, f"reduce_res reads {registers} never "
                                                     f"written")

    def engine(self, requested, allowed: tuple, default: str) -> str:
        if requested in (None, engine.unknown):
            return default
        if not isinstance(requested, engine):
            raise self.error(NkiValidationError, f"engine={requested!r}: use nisa.engine.*")
        name = _ENGINE_NAMES.get(requested)
        if name not in allowed:
            raise self.error(NkiValidationError, f"engine={requested.name} cannot run "
                                                 f"{self.name}; allowed: {', '.join(allowed)}")
        return name

    def no_psum_on_gpsimd(self, eng: str):
        if eng == "GpSimdE":
            for role, t in self.operands:
                if t.buffer is MemoryRegion.psum:
                    raise self.error(MemorySpaceError,
                                     f"{role} {t!r} is in PSUM, which GpSimd Engine cannot "
                                     f"access; use the Vector or Scalar Engine")

    def not_both_psum(self, a, a_role, b, b_role):
        if a.buffer is MemoryRegion.psum and b.buffer is MemoryRegion.psum:
            raise self.error(MemorySpaceError, f"{a_role} and {b_role} cannot both be in PSUM")

    def operator(self, op, role: str, *, kinds=("arith", "bitvec"), unary_ok=False,
                 reduction=False) -> Operator:
        if isinstance(op, Operator) and reduction and op.name in REDUCTION_ALIASES:
            op = OPERATORS[REDUCTION_ALIASES[op.name]]
        if isinstance(op, str) and op in OPERATORS:
            op = OPERATORS[op]
        if not isinstance(op, Operator):
            raise self.error(NkiValidationError, f"{role}={op!r} is not an nki.language "
                                                 f"operator (nl.add, nl.maximum, ...)")
        if op.alu not in kinds or (op.arity == 1 and not unary_ok) or (
                reduction and not op.reducible):
            what = "a reduction" if reduction else "an ALU"
            raise self.error(NkiValidationError, f"{role}=nl.{op.name} is not {what} operator "
                                                 f"{self.name} accepts (see the ALU operator "
                                                 f"table, nki.api.shared.rst)")
        return op

    def bitvec_ints(self, op: Operator, *tiles):
        if op.bitvec:
            for t in tiles:
                if not t.dt.is_int:
                    raise self.error(DtypeError, f"bitvec operator nl.{op.name} needs integer "
                                                 f"tiles; {t!r} is {t.dtype}")

    def scalar_or_vector(self, value, role: str, partitions: int, *, float32=False):
        """A compile-time scalar, or an [N, 1] tile (one value per partition) as [N, 1]."""
        if isinstance(value, NkiTensor):
            t = self.tile(value, role)
            if t.shape[0] != partitions or t.free_size != 1:
                raise self.error(ShapeError, f"{role} {t!r} must have shape ({partitions}, 1)")
            if float32 and t.dtype != "float32":
                raise self.error(DtypeError, f"{role} {t!r} must be float32, not {t.dtype}")
            return self.f32(t, role)
        if isinstance(value, (int, float, np.integer, np.floating, bool)):
            return np.float32(value)
        raise self.error(ShapeError, f"{role}={value!r} must be a scalar or an NkiTensor")

    def write(self, t: NkiTensor, values) -> None:
        """Writes `values` into t; `values` may be a thunk computing them, which predict-only
        never calls (t is only marked written)."""
        if self.compute:
            if callable(values):
                values = values()
            t.write(np.asarray(values).reshape(t.shape))
        else:
            t.mark_written()
        if self.unwritten:
            # Note [Results of unwritten memory]
            t._written[...] &= ~_result_unwritten(self, t).reshape(t.shape)

    def record(self, eng: str, core=None, name=None, **attrs) -> None:
        """Appends the instruction's record; `core`: the program that issued it, when another
        program's thread completes it (cores.py); `name`: a record named otherwise than the
        instruction (sendrecv's wait)."""
        run = self.run
        queue = run.next_dma_queue() if eng == "DMA" else None
        operands = tuple(Operand(role, t._data.shape, t._storage.dt.name, t._storage.space,
                                 t.partitions, t.free_size,
                                 tuple(s // t._data.itemsize for s in t._data.strides))
                         for role, t in self.operands)
        run.records.append(InstructionRecord(
            len(run.records), eng, name or self.name, operands,
            tuple(t.region() for t in self.reads + self.control),
            tuple(t.region() for t in self.writes),
            self.source, run.program_id if core is None else core, queue,
            tuple((k, v.name if isinstance(v, enum.Enum) else v) for k, v in attrs.items())))


def _vector_regs(run):
    """The Vector Engine's accumulator registers, per logical-core program."""
    return run.__dict__.setdefault("_vector_regs", {})


def _scalar_regs(run):
    """The Scalar Engine's reduce registers, per logical-core program."""
    return run.__dict__.setdefault("_scalar_regs", {})

