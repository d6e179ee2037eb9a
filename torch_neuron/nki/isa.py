"""`nki.isa`: the NeuronCore instructions, executed functionally with the hardware's rules.

Signatures follow the current NKI release's stub, aws-neuron-sdk `nki/api/nki/isa/__init__.py`
(destination first: `nisa.nc_matmul(dst, stationary, moving, ...)`); each rule checked below
cites that file's docstring of the instruction unless it says otherwise. Every instruction
checks its operands, computes with NumPy in float32 (as the engines do; Note [Rounding to
narrow floats] for the write to the destination dtype), writes its destination and appends one
record to the kernel run (Note [Instruction records]); what they share, and what predict-only
skips, is in instruction.py (Note [Predict-only instructions]).
"""

from __future__ import annotations

import enum
import math

import numpy as np

from torch_neuron.nki.errors import (DtypeError, MemorySpaceError, NkiValidationError,
                                     PsumBankError, ShapeError, TileSizeError,
                                     UninitializedReadError, UnsupportedError)
from torch_neuron.nki.ops import OPERATORS, Operator, apply
from torch_neuron.nki import dtypes as _dtypes
from torch_neuron.nki import tensor as _tensor_module
from torch_neuron.nki.accumulation import accumulated, matmul_accumulation
from torch_neuron.nki.indirect import Rows, indirect_copy
from torch_neuron.nki.tensor import MemoryRegion, NkiTensor
from torch_neuron.nki.instruction import (  # noqa: F401  (the enums are nki.isa's API)
    _Instruction, _scalar_regs, _vector_regs, dge_mode, dma_engine, engine, get_nc_sub_version,
    get_nc_version, gpsimd_engine, matmul_perf_mode, nc_version, oob_mode, reduce_cmd,
    scalar_engine, tensor_engine, unknown_engine, vector_engine)


def _copy_values(ins: _Instruction, src: NkiTensor, dst: NkiTensor):
    """A thunk of the copied values. Same dtype: a bit-exact copy; else through float32
    (dma_copy and tensor_copy docs)."""
    if src.dtype != dst.dtype and "mx" in (src.dt.kind, dst.dt.kind):
        # "Casting with DMAs is not supported for MXFP4 and MXFP8 datatypes" (DMA overview).
        raise ins.error(DtypeError, f"src is {src.dtype} and dst {dst.dtype}: MX data is copied "
                                    f"as it is, not cast; view raw bytes with .view(dtype)")
    values = ins.values(src, "src")
    if src.dtype == dst.dtype:
        return lambda: values
    return lambda: values.astype(np.float32)


# -- data movement -------------------------------------------------------------------------------

def dma_copy(dst, src, priority=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown,
             engine=engine.unknown, name=None):
    ins = _Instruction("dma_copy")
    # "Both src and dst tiles can be in HBM or SBUF": PSUM is not a DMA endpoint.
    ins.tile(dst, "dst", on_chip=False, spaces=("sbuf", "private_hbm", "shared_hbm"),
             read=False)
    ins.tile(src, "src", on_chip=False, spaces=("sbuf", "private_hbm", "shared_hbm"))
    _dge_rules(ins, _dge(dge_mode), engine, src.is_indirect() or dst.is_indirect())
    if dst.size != src.size:
        raise ins.error(ShapeError, f"src {src.shape} has {src.size} elements, dst {dst.shape} "
                                    f"has {dst.size}: they must match")
    if src.is_indirect() or dst.is_indirect():
        indirect_copy(ins, dst, src, oob_mode)
    else:
        values = _copy_values(ins, src, dst)
        ins.write(dst, lambda: values().reshape(dst.shape))
    # Descriptor size: the longest run contiguous on both sides (the DMA cost depends on it,
    # nki/deep-dives/nki-dma-bandwidth-guide.rst).
    nbytes = dst.size * dst.dt.itemsize
    run = min(src.contiguous_bytes() * dst.dt.itemsize // src.dt.itemsize,
              dst.contiguous_bytes())
    ins.record("DMA", bytes=nbytes, descriptor_bytes=run, descriptors=-(-nbytes // run))


# The permutation dma_transpose applies, by the source's rank (its docstring: "For 2-d input
# tile, the permutation will be [1, 0]", 3-d [2, 1, 0], 4-d [3, 1, 2, 0]).
_DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


_DGE = dge_mode   # dma_transpose's argument of the same name hides the enum


def _dge_rules(ins: _Instruction, mode, trigger, indirect: bool) -> None:
    """A dma_copy's descriptor generation (nki/deep-dives/nki-dge.rst, "Mode Selection
    Summary"): hardware DGE from NeuronCore-v3, triggered by the Scalar or Sync Engine, and
    neither it nor precomputed descriptors (none) serve an indirect access."""
    if mode is _DGE.hwdge:
        if ins.target.nc_version < 3:
            raise ins.error(UnsupportedError, f"dge_mode=hwdge needs NeuronCore-v3 or newer "
                                              f"(a hardware DGE block); the target is "
                                              f"{ins.target.core}")
        if trigger not in (None, engine.unknown, engine.scalar, engine.sync):
            raise ins.error(NkiValidationError, f"engine={trigger}: with dge_mode=hwdge only "
                                                f"nisa.engine.scalar and nisa.engine.sync "
                                                f"trigger the DGE")
    if indirect and mode in (_DGE.hwdge, _DGE.none):
        raise ins.error(NkiValidationError, f"dge_mode={mode.name} does not serve an indirect "
                                            f"(vector_offset / scalar_offset) access: use "
                                            f"swdge or unknown")


def _dge(mode) -> dge_mode:
    """A dge_mode argument as the enum (AWS's kernels also pass its int value)."""
    return mode if isinstance(mode, dge_mode) else dge_mode(int(mode))


def dma_transpose(dst, src, axes=None, priority=None, dge_mode=dge_mode.unknown,
                  oob_mode=oob_mode.error, name=None):
    """dst = src transposed by the DMA engines, from HBM or SBUF into SBUF (the Trainium2
    architecture guide's "DMA Transpose": HBM2SBUF and SBUF2SBUF); with an indirect src, the
    rows the offsets select, gathered and transposed (the docstring's "DMA Indirect
    Transpose")."""
    ins = _Instruction("dma_transpose")
    mode = _dge(dge_mode)
    ins.tile(dst, "dst", on_chip=False, spaces=("sbuf",), read=False)
    ins.tile(src, "src", on_chip=False, spaces=("sbuf", "private_hbm", "shared_hbm"))
    perm = _DMA_TRANSPOSE_AXES.get(src.ndim)
    if perm is None:
        raise ins.error(ShapeError, f"src {src.shape} has {src.ndim} dims; dma_transpose takes "
                                    f"2-d, 3-d or 4-d tiles")
    if axes is not None and tuple(axes) != perm:
        raise ins.error(NkiValidationError, f"axes={tuple(axes)}: a {src.ndim}-d transpose "
                                            f"permutes by {perm}")
    # The Trainium2 guide: "bit-accurate transposition for both 2-byte and 4-byte data types";
    # the hardware-DGE and indirect forms take 2-byte ones only (docstring).
    two_bytes_only = mode is _DGE.hwdge or src.is_indirect()
    if src.dt.itemsize not in ((2,) if two_bytes_only else (2, 4)):
        raise ins.error(DtypeError, f"src is {src.dtype}; dma_transpose moves 2-byte dtypes, "
                                    f"or 4-byte ones in a direct transpose without "
                                    f"dge_mode=hwdge")
    ins.same_dtype(dst, "dst", src, "src", "a transpose keeps the dtype")
    if src.shape[-1] > ins.target.partitions:
        raise ins.error(TileSizeError, f"src {src.shape}: its last dim becomes the partition "
                                       f"dim, at most {ins.target.partitions}")
    want = tuple(src.shape[i] for i in perm)
    if dst.shape != want:
        raise ins.error(ShapeError, f"dst {dst.shape} must be {want} for src {src.shape}")
    if src.is_indirect():
        values = _gather_for_transpose(ins, src, dst, perm, mode, oob_mode)
    else:
        _direct_transpose_rules(ins, src, mode)
        values = ins.values(src, "src")
    ins.write(dst, lambda: np.transpose(values() if callable(values) else values, perm))
    # Cost: a DMA copy into the same destination tile (its partitions' runs as descriptors).
    # The 16 DMA engines write the transposed tile together, and the guide gives "up to 90%
    # DMA throughput utilization given hardware-friendly tensor access patterns, compared to
    # up to 100% ... for a DMA copy", with no figure for other patterns; neither difference
    # is modelled, nor the software DGE's descriptor work for an indirect one.
    nbytes = src.size * src.dt.itemsize
    run = dst.contiguous_bytes()
    ins.record("DMA", bytes=nbytes, descriptor_bytes=run, descriptors=-(-nbytes // run))


def _direct_transpose_rules(ins: _Instruction, src: NkiTensor, mode) -> None:
    if mode is _DGE.hwdge:
        # Hardware DGE transpose (docstring, "DMA Direct Transpose Constraints").
        ok = (src.shape[0] == 16 if src.ndim == 2 else
              src.shape[0] in (1, 2, 4, 8, 16) and (src.shape[0] * src.shape[-2]) % 16 == 0)
        if not ok:
            raise ins.error(ShapeError, f"src {src.shape}: a hardware-DGE transpose needs "
                                        f"src.shape[0] == 16 (2-d) or in (1, 2, 4, 8, 16) with "
                                        f"src.shape[0] * src.shape[-2] a multiple of 16")
    elif mode not in (_DGE.unknown, _DGE.none):
        raise ins.error(NkiValidationError, f"dge_mode={mode.name}: a direct transpose "
                                            f"takes dge_mode unknown or hwdge")


def _gather_for_transpose(ins: _Instruction, src, dst, perm, mode, oob):
    """A thunk of src's rows as the offsets select them, src's shape ("DMA Indirect Transpose
    Constraints": flat_indices = indices.T.flatten()[:src.shape[0]], gathered =
    src[flat_indices, :]); rows skipped (oob_mode.skip) keep what dst holds."""
    ins.needs_core(3)
    if mode not in (_DGE.unknown, _DGE.swdge):
        raise ins.error(NkiValidationError, f"dge_mode={mode.name}: an indirect transpose "
                                            f"takes dge_mode unknown or swdge")
    index = src.index
    if not src.vector or not isinstance(index, NkiTensor) or index.ndim != 2:
        raise ins.error(ShapeError, "an indirect transpose takes a 2-d vector_offset tile")
    rows, (ip, icols) = src.shape[0], index.shape
    if rows % 16 or not (16 <= ip <= 128 and ip % 16 == 0) or (icols > 1 and ip != 128) \
            or ip * icols < rows:
        raise ins.error(ShapeError, f"indirect transpose of {rows} rows by indices {index.shape}: "
                                    f"rows must be a multiple of 16, indices [16..128 (a "
                                    f"multiple of 16), N] (128 rows when N > 1) covering them")
    if index.dtype != "uint32":
        raise ins.error(DtypeError, f"indices are {index.dtype}; an indirect transpose takes "
                                    f"uint32")
    if src.ndim == 4 and 1 not in src.shape[1:3]:
        raise ins.error(ShapeError, f"src {src.shape}: a 4-d indirect transpose needs dim 1 or "
                                    f"2 of size 1")
    gathered = Rows(ins, src, oob, column_major=True)
    old = dst._data

    def values():
        rows_values, ok = gathered.gather("src")
        kept = np.transpose(old, np.argsort(perm)).reshape(rows_values.shape)
        return np.where(ok[:, None], rows_values, kept).reshape(src.shape)

    return values


def _copy_engine_choices(ins: _Instruction, dst: NkiTensor, src: NkiTensor) -> tuple:
    """The engines the compiler may place a tensor_copy given no engine on (Note [Engine
    choice] in trnsim/kernel_schedule.h; the tensor_copy page): VectorE; ScalarE from
    NeuronCore-v3 on ("On NeuronCore v2, tensor_copy is not supported on the Scalar Engine"),
    when its copy through FP32 gives the same values; GpSimdE unless an operand is in PSUM
    ("GpSimd Engine cannot access PSUM")."""
    choices = ["VectorE"]
    through_fp32_exact = src.dtype != dst.dtype or src.dt.is_float or src.dt.itemsize <= 2
    if ins.target.nc_version >= 3 and through_fp32_exact:
        choices.append("ScalarE")
    if MemoryRegion.psum not in (dst.buffer, src.buffer):
        choices.append("GpSimdE")
    return tuple(choices)


def tensor_copy(dst, src, engine=engine.unknown, name=None, dtype=None):
    """`dtype`: not in the stub's signature, but AWS's samples pass it (nki-samples
    mxfp-matmul/mx_kernels.py, and matrix_multiplication's hoisted kernel with a bfloat16
    dtype into a float32 dst), a leftover of the earlier API whose result tile had no dst.
    The copy writes dst's dtype; a different dtype= gets a warning, not an error."""
    ins = _Instruction("tensor_copy")
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    if dtype is not None and _dtypes.resolve(dtype) is not dst.dt:
        import warnings

        warnings.warn(f"{ins.source}: tensor_copy(dtype={_dtypes.resolve(dtype).name}) into a "
                      f"{dst.dtype} dst: the current API has no dtype=; the copy writes "
                      f"{dst.dtype}", stacklevel=3)
    ins.same_layout(dst, "dst", src, "src")
    eng = ins.engine(engine, ("VectorE", "ScalarE", "GpSimdE"), "VectorE")
    if eng == "ScalarE" and ins.target.nc_version == 2:
        raise ins.error(NkiValidationError, "tensor_copy does not run on the Scalar Engine of "
                                            "NeuronCore-v2; use nisa.activation(op=nl.copy)")
    ins.no_psum_on_gpsimd(eng)
    ins.write(dst, _copy_values(ins, src, dst))
    if engine in (None, unknown_engine):
        choices = _copy_engine_choices(ins, dst, src)
        if len(choices) > 1:
            ins.record(eng, engines=choices)
            return
    ins.record(eng)


def memset(dst, value, engine=engine.unknown, name=None):
    ins = _Instruction("memset")
    ins.tile(dst, "dst", read=False)
    eng = ins.engine(engine, ("VectorE", "GpSimdE"), "VectorE")
    ins.no_psum_on_gpsimd(eng)
    fill = _mx_fill(ins, dst, value) if dst.dt.kind == "mx" else value
    ins.write(dst, lambda: np.full(dst.shape, fill, dtype=dst.dt.storage
                                   if dst.dt.kind == "mx" else None))
    ins.record(eng, zero=bool(value == 0))


def _mx_fill(ins: _Instruction, dst: NkiTensor, value) -> int:
    """The bits memset writes into MX data: "For x4 packed types ... only value=0 is supported"
    (memset docstring); a float8_e8m0fnu scale is a power of two, 2^(bits - 127)."""
    if dst.dtype != "float8_e8m0fnu":
        if value != 0:
            raise ins.error(DtypeError, f"memset of {dst.dtype} (packed MX data) takes only "
                                        f"value=0, not {value}")
        return 0
    exponent = math.log2(value) if value > 0 else math.nan
    if not exponent == int(exponent) or not -127 <= exponent <= 127:
        raise ins.error(DtypeError, f"memset of float8_e8m0fnu takes a power of two from "
                                    f"2^-127 to 2^127, not {value}")
    return int(exponent) + 127


# -- Tensor Engine -------------------------------------------------------------------------------

MATMUL_DTYPES = {"float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32"}
_FP8 = {"float8_e4m3", "float8_e5m2", "float8_e4m3fn"}


def nc_matmul(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
              is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
              perf_mode=matmul_perf_mode.none, name=None):
    ins = _Instruction("nc_matmul")
    t = ins.target
    ins.tile(stationary, "stationary", spaces=("sbuf",))
    ins.tile(moving, "moving", spaces=("sbuf",))
    ins.tile(dst, "dst", spaces=("psum",), read=False)
    perf = matmul_perf_mode(perf_mode.value if isinstance(perf_mode, enum.Enum) else perf_mode)

    # dtypes ("Data types" section)
    allowed = MATMUL_DTYPES | ({"float8_e4m3fn"} if t.nc_version >= 4 else set())
    for role, x in (("stationary", stationary), ("moving", moving)):
        if x.dtype not in allowed:
            raise ins.error(DtypeError, f"{role} is {x.dtype}; TensorE takes "
                                        f"{', '.join(sorted(allowed))} on {t.core}")
    wide = {"float32", "tfloat32"}
    if (stationary.dtype in wide) != (moving.dtype in wide):
        raise ins.error(DtypeError, f"stationary {stationary.dtype} and moving {moving.dtype}: "
                                    f"if one input is float32/tfloat32 the other must be too")
    dst_ok = ("float32", "bfloat16") if t.nc_version >= 4 else ("float32",)
    if is_transpose and t.nc_version >= 3 and stationary.dtype in ("bfloat16", "float16"):
        # "FP16/BF16 PSUM output for FP16/BF16 transpose" (Trainium2 architecture guide,
        # "Built-in Transpose Support").
        dst_ok = dst_ok + (stationary.dtype,)
    if dst.dtype not in dst_ok:
        raise ins.error(DtypeError, f"dst is {dst.dtype}; the PSUM result of a matmul must be "
                                    f"{' or '.join(dst_ok)} on {t.core} (TensorE accumulates "
                                    f"in float32)")

    # layout and tile sizes ("Layout", "Tile size", "Performance mode", "Tiling mode")
    if perf is matmul_perf_mode.double_row:
        if not t.double_row_fp8:
            raise ins.error(UnsupportedError, f"perf_mode=double_row needs NeuronCore-v3 or "
                                              f"newer; the target is {t.core}")
        for role, x in (("stationary", stationary), ("moving", moving)):
            if x.dtype not in _FP8:
                raise ins.error(DtypeError, f"perf_mode=double_row needs float8 inputs; {role} "
                                            f"is {x.dtype}")
            if x.ndim != 3 or x.shape[1] != 2:
                raise ins.error(ShapeError, f"perf_mode=double_row: {role} {x.shape} must be "
                                            f"[K, 2, free] (the contraction split over the "
                                            f"partition dim and a first free dim of 2)")
        if tile_position or tile_size:
            raise ins.error(NkiValidationError, "perf_mode=double_row cannot be combined with "
                                                "Tensor Engine tiling (tile_position/size)")
    rows, cols = t.partitions, t.gemm_stationary_fmax
    if bool(tile_position) != bool(tile_size):
        raise ins.error(NkiValidationError, "tile_position and tile_size must be set together")
    if tile_size:
        rows, cols = (int(v) for v in tile_size)
        sizes = (32, 64, 128) if t.nc_version >= 3 else (64, 128)
        if rows not in sizes or cols not in sizes:
            raise ins.error(TileSizeError, f"tile_size={tuple(tile_size)}: row and column tile "
                                           f"sizes must be one of {sizes} on {t.core}")
        r0, c0 = (int(v) for v in tile_position)
        if r0 % rows or c0 % cols or r0 + rows > 128 or c0 + cols > 128:
            raise ins.error(TileSizeError, f"tile_position={tuple(tile_position)} must be "
                                           f"multiples of tile_size={tuple(tile_size)} inside "
                                           f"the 128x128 array")
    K = stationary.shape[0]
    M = stationary.free_size // (2 if perf is matmul_perf_mode.double_row else 1)
    N = moving.free_size // (2 if perf is matmul_perf_mode.double_row else 1)
    if moving.shape[0] != K:
        raise ins.error(ShapeError, f"stationary {stationary.shape} and moving {moving.shape} "
                                    f"must have the same partition (contraction) size")
    if K > rows:
        raise ins.error(TileSizeError, f"contraction (partition) size {K} exceeds {rows} PE "
                                       f"rows")
    if M > cols:
        raise ins.error(TileSizeError, f"stationary free size {M} exceeds {cols} "
                                       f"(nl.tile_size.gemm_stationary_fmax = "
                                       f"{t.gemm_stationary_fmax}): stationary is at most "
                                       f"128x128; tile M")
    moving_max = t.moving_fmax_fp32_dst * (2 if dst.dtype == "bfloat16" else 1)
    if N > moving_max:
        raise ins.error(TileSizeError, f"moving free size {N} exceeds {moving_max} "
                                       f"(nl.tile_size.gemm_moving_fmax = "
                                       f"{t.gemm_moving_fmax}): moving is at most 128x"
                                       f"{moving_max} on {t.core}; tile N")
    if dst.shape[0] != M or dst.free_size != N:
        raise ins.error(ShapeError, f"dst {dst.shape} must be [{M}, {N}]: stationary's free "
                                    f"size by moving's free size")
    region = dst.region()
    bank = t.psum_bank_bytes
    if t.nc_version < 4 and region.address[0] // bank != (region.address[1] - 1) // bank:
        raise ins.error(PsumBankError,
                        f"dst {dst!r} covers PSUM bytes [{region.address[0]}, "
                        f"{region.address[1]}) of each partition, crossing a {bank}-byte bank "
                        f"boundary; a matmul accumulates in float32 within one bank (at most "
                        f"512 float32 per partition): split N or allocate the tile per bank")

    # compute: dst = stationary.T @ moving, accumulated in float32 ("Accumulation mode")
    # double_row pairs the first free dim with the partitions: contraction over both
    st = ins.values(stationary, "stationary")
    mv = ins.values(moving, "moving")
    acc = matmul_accumulation(ins, dst, accumulate, M, N)

    def product():
        a, b = st.astype(np.float32).reshape(-1, M), mv.astype(np.float32).reshape(-1, N)
        if is_transpose and t.nc_version >= 3 and b.shape[0] == N and \
                np.array_equal(b, np.eye(N, dtype=np.float32)):
            # Transpose mode: "bit-accurate data transpose, which can transpose tensors with
            # NaN/Inf values properly" (stub), where a matmul would spread them.
            return a.T.copy()
        return a.T @ b

    ins.write(dst, accumulated(dst, acc, product, M, N))
    dst.matmul_mask()[...] = True
    ins.record("TensorE", perf_mode=perf, is_transpose=bool(is_transpose),
               accumulate=bool(acc.any()), is_stationary_onezero=bool(is_stationary_onezero),
               is_moving_onezero=bool(is_moving_onezero))


def nc_transpose(dst, data, engine=engine.unknown, name=None):
    ins = _Instruction("nc_transpose")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    t = ins.target
    default = "TensorE" if (data.buffer is MemoryRegion.sbuf
                            and dst.buffer is MemoryRegion.psum) else "VectorE"
    eng = ins.engine(engine, ("TensorE", "VectorE"), default)
    P, F = ins.pf(data)
    if eng == "TensorE":
        if data.buffer is not MemoryRegion.sbuf or dst.buffer is not MemoryRegion.psum:
            raise ins.error(MemorySpaceError, "Tensor Engine transpose reads SBUF and writes "
                                              "PSUM")
        limit = t.partitions
    else:
        limit = t.vector_transpose_max
    if P > limit or F > limit:
        raise ins.error(TileSizeError, f"data {data.shape} is {P}x{F}; {eng} transposes at "
                                       f"most {limit}x{limit}")
    ins.same_dtype(dst, "dst", data, "data", "a transpose keeps the dtype")
    if ins.pf(dst) != (F, P):
        raise ins.error(ShapeError, f"dst {dst.shape} must be [{F}, {P}] for data "
                                    f"{data.shape}")
    x = ins.values(data, "data")
    ins.write(dst, lambda: x.reshape(P, F).T)
    ins.record(eng)


# -- Vector / Scalar / GpSimd engines -----------------------------------------------------------

_QUADRANT = 32  # partitions a stream shuffle permutes within (nc_stream_shuffle docstring)
_SHUFFLE_KEEP = 255  # "shuffle_mask[i]=255 means the output tensor in partition [i] will be
#                      unmodified"


def nc_stream_shuffle(dst, src, shuffle_mask, name=None):
    """Within each quadrant of 32 partitions, partition i of dst takes partition
    shuffle_mask[i] of src (255: dst's partition i is left as it is); Vector Engine."""
    ins = _Instruction("nc_stream_shuffle")
    ins.tile(dst, "dst", read=False)
    ins.tile(src, "src")
    ins.same_dtype(dst, "dst", src, "src")
    if dst.free_size != src.free_size:
        raise ins.error(ShapeError, f"dst {dst.shape} and src {src.shape} must have the same "
                                    f"elements per partition")
    mask = [int(m) for m in shuffle_mask]
    if len(mask) != _QUADRANT or any(not (0 <= m < _QUADRANT or m == _SHUFFLE_KEEP)
                                     for m in mask):
        raise ins.error(NkiValidationError, f"shuffle_mask {mask} must have 32 entries, each a "
                                            f"partition 0..31 of the quadrant or 255 (keep)")
    active = -(-max(src.shape[0], dst.shape[0]) // _QUADRANT) * _QUADRANT
    allowed = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    for role, t in (("src", src), ("dst", dst)):
        start = t.region().partitions[0]
        if start not in allowed:
            raise ins.error(NkiValidationError, f"{role} starts at partition {start}; with "
                                                f"{active} active partitions it must start at "
                                                f"{' or '.join(map(str, allowed))}")
    P, F = ins.pf(dst)
    source = [None if mask[p % _QUADRANT] == _SHUFFLE_KEEP
              else p - p % _QUADRANT + mask[p % _QUADRANT] for p in range(P)]
    for p, q in enumerate(source):
        if q is not None and q >= src.shape[0]:
            raise ins.error(ShapeError, f"dst partition {p} takes src partition {q}, but src "
                                        f"has {src.shape[0]}")
    x = ins.values(src, "src")
    # Snapshots first: the shuffle may be in place (dst is src).
    rows = x.reshape(src.shape[0], -1).copy() if ins.compute else None
    unwritten = ~src._written.reshape(src.shape[0], -1)
    # Partitions whose mask entry is 255 are left as they are: only the others are written.
    for p, q in enumerate(source):
        if q is not None:
            ins.shuffle_row_unwritten = unwritten[q]   # Note [Results of unwritten memory]
            ins.write(dst[p:p + 1], lambda q=q: rows[q])
    ins.record("VectorE")


def tensor_tensor(dst, data1, data2, op, engine=engine.unknown, name=None):
    ins = _Instruction("tensor_tensor")
    ins.tile(dst, "dst", read=False)
    ins.tile(data1, "data1")
    ins.tile(data2, "data2")
    ins.same_layout(data1, "data1", data2, "data2")
    ins.same_layout(dst, "dst", data1, "data1")
    ins.not_both_psum(data1, "data1", data2, "data2")
    op = ins.operator(op, "op")
    ins.bitvec_ints(op, dst, data1, data2)
    ints32 = all(t.dtype in ("int32", "uint32") for t in (dst, data1, data2))
    any_psum = any(t.buffer is MemoryRegion.psum for t in (dst, data1, data2))
    default = "GpSimdE" if (op.name == "power" or (ints32 and not any_psum)) else "VectorE"
    eng = ins.engine(engine, ("VectorE", "GpSimdE"), default)
    ins.no_psum_on_gpsimd(eng)
    if op.bitvec or ints32:
        a, b = ins.values(data1, "data1"), ins.values(data2, "data2")
        ins.write(dst, lambda: apply(op, a.reshape(ins.pf(data1)), b.reshape(ins.pf(data2))))
    else:
        a, b = ins.f32(data1, "data1"), ins.f32(data2, "data2")
        ins.write(dst, lambda: apply(op, a, b))
    ins.record(eng, op=op.name)


_SCALAR_ENGINE_PAIRS = {("multiply", "add"), ("multiply", None), ("add", None)}


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine=engine.unknown, name=None):
    ins = _Instruction("tensor_scalar")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    op0 = ins.operator(op0, "op0", unary_ok=True)
    if op1 is None and operand1 is not None:
        raise ins.error(NkiValidationError, "operand1 is given without op1")
    op1 = ins.operator(op1, "op1", unary_ok=True) if op1 is not None else None
    if op1 is not None and op0.bitvec != op1.bitvec:
        raise ins.error(NkiValidationError, f"op0=nl.{op0.name} and op1=nl.{op1.name} must both "
                                            f"be bitvec or both arithmetic operators")
    ins.bitvec_ints(op0, dst, data)
    eng = ins.engine(engine, ("VectorE", "ScalarE", "GpSimdE"), "VectorE")
    pair = (op0.name, op1.name if op1 else None)
    if eng == "ScalarE" and pair not in _SCALAR_ENGINE_PAIRS:
        raise ins.error(NkiValidationError, f"the Scalar Engine runs tensor_scalar only as "
                                            f"multiply(+add) or add; got {pair}")
    if eng == "GpSimdE" and op0.name != "rsqrt":
        raise ins.error(NkiValidationError, "tensor_scalar runs on GpSimd only for nl.rsqrt")
    if op0.bitvec and eng != "VectorE":
        raise ins.error(NkiValidationError, "bitvec tensor_scalar runs on the Vector Engine")
    ins.no_psum_on_gpsimd(eng)
    P = data.shape[0]

    def operand(op, value, role):
        if op.arity == 1:
            if value not in (None, 0, 0.0):
                raise ins.error(NkiValidationError, f"{role} must be None or 0 for the unary "
                                                    f"operator nl.{op.name}")
            return None
        return ins.scalar_or_vector(value, role, P, float32=not op.bitvec)

    steps = [(op0, operand(op0, operand0, "operand0"), reverse0)]
    if op1 is not None:
        steps.append((op1, operand(op1, operand1, "operand1"), reverse1))
    x = (ins.values(data, "data").reshape(ins.pf(data)) if op0.bitvec
         else ins.f32(data, "data"))

    def result():
        y = x
        for op, v, reverse in steps:
            if op.arity == 1:
                y = apply(op, y)
                continue
            if op.bitvec:
                v = np.asarray(v).astype(y.dtype)
            y = apply(op, v, y) if reverse else apply(op, y, v)
        return y

    ins.write(dst, result)
    ins.record(eng, op0=op0.name, op1=op1.name if op1 else None)


def _reduce(op: Operator, x: np.ndarray, axis) -> np.ndarray:
    if isinstance(op.fn, np.ufunc):
        return op.fn.reduce(x, axis=axis)
    x = np.moveaxis(x, axis, 0) if isinstance(axis, int) else x
    out = x[0]
    for i in range(1, x.shape[0]):
        out = apply(op, out, x[i])
    return out


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    ins = _Instruction("tensor_reduce")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    op = ins.operator(op, "op", reduction=True)
    ins.bitvec_ints(op, dst, data)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(a) % data.ndim for a in axes))
    if not axes or 0 in axes or axes != tuple(range(data.ndim - len(axes), data.ndim)):
        raise ins.error(ShapeError, f"axis={axis} for data {data.shape}: the reduced axes must "
                                    f"be the last contiguous free dims (never the partition "
                                    f"dim 0); use nc_transpose or a matmul with ones to reduce "
                                    f"across partitions")
    kept = data.shape[:data.ndim - len(axes)]
    if dst.shape[0] != data.shape[0] or dst.free_size != math.prod(kept[1:]):
        raise ins.error(ShapeError, f"dst {dst.shape} does not hold the reduction of "
                                    f"{data.shape} over axes {axes}")
    if negate and op.bitvec:
        raise ins.error(NkiValidationError, "negate applies to arithmetic reductions only")
    x = ins.values(data, "data")

    def result():
        y = x if op.bitvec else x.astype(np.float32)
        out = _reduce(op, y.reshape(kept + (-1,)), -1)
        return -out if negate else out

    ins.write(dst, result)
    ins.record("VectorE", op=op.name, negate=bool(negate))


def tensor_partition_reduce(dst, op, data, name=None):
    ins = _Instruction("tensor_partition_reduce")
    ins.tile(dst, "dst", spaces=("sbuf",), read=False)
    ins.tile(data, "data", spaces=("sbuf",))
    op = ins.operator(op, "op", reduction=True)
    if op.name not in ("add", "average", "maximum", "bitwise_or", "bitwise_and"):
        raise ins.error(NkiValidationError, f"op=nl.{op.name}: tensor_partition_reduce takes "
                                            f"add, average, maximum, bitwise_or, bitwise_and")
    if dst.shape[0] != 1 or dst.free_size != data.free_size:
        raise ins.error(ShapeError, f"dst {dst.shape} must be one partition of "
                                    f"{data.free_size} elements")
    ins.bitvec_ints(op, dst, data)
    x = ins.values(data, "data").reshape(ins.pf(data))

    def result():
        if op.name == "average":
            return x.astype(np.float32).mean(axis=0, dtype=np.float32)
        return op.fn.reduce(x if op.bitvec else x.astype(np.float32), axis=0)

    ins.write(dst, result)
    ins.record("GpSimdE", op=op.name)


def _activation(ins, dst, op, data, bias, scale, reduce_op, reduce_res, cmd):
    t = ins.target
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    if not (isinstance(op, Operator) and op.activation):
        raise ins.error(NkiValidationError, f"op={op!r} is not an activation function (see the "
                                            f"activation table, nki.api.shared.rst)")
    P = data.shape[0]
    s = ins.scalar_or_vector(scale, "scale", P, float32=True)
    if bias is None:
        b = np.float32(0)
    else:
        if not isinstance(bias, NkiTensor) and t.nc_version == 2:
            raise ins.error(ShapeError, "bias must be a [N, 1] tile on NeuronCore-v2 (a "
                                        "scalar bias needs NeuronCore-v3 or newer)")
        if isinstance(bias, NkiTensor) and bias.dtype == "tfloat32":
            raise ins.error(DtypeError, "bias cannot be tfloat32")
        b = ins.scalar_or_vector(bias, "bias", P)
    x = ins.f32(data, "data")
    if ins.unwritten and cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        # The registers keep no written mask (Note [Results of unwritten memory]).
        role, bad, _ = ins.unwritten[0]
        raise ins.error(UninitializedReadError, f"{role}: {bad!r} has elements never written, "
                                                f"which the reduce registers would sum")
    y = apply(op, x * s + b).astype(np.float32) if ins.compute else None
    regs = _scalar_regs(ins.run)
    key = ins.run.program_id
    if reduce_op is not None:
        reduce_op = ins.operator(reduce_op, "reduce_op", reduction=True)
        if reduce_op.name != "add" and t.nc_version < 4:
            raise ins.error(NkiValidationError, f"reduce_op=nl.{reduce_op.name}: the Scalar "
                                                f"Engine reduces with nl.add only")
    if cmd in (reduce_cmd.reset, reduce_cmd.reset_reduce):
        regs[key] = np.zeros(t.partitions, np.float32)
    if cmd in (reduce_cmd.reduce, reduce_cmd.reset_reduce):
        if key not in regs:
            raise ins.error(UninitializedReadError, "reduce_cmd=reduce on Scalar Engine "
                                                    "registers never reset; use reset_reduce")
        if ins.compute:
            regs[key][:P] += y.sum(axis=1, dtype=np.float32)
    if reduce_res is not None:
        ins.registers_result(reduce_res, P, regs, key, "Scalar Engine reduce registers")
    ins.write(dst, y)
    if reduce_res is not None:
        ins.write(reduce_res, regs[key][:P])
    ins.record("ScalarE", op=op.name, reduce_cmd=cmd, reduce_res=reduce_res is not None)


def activation(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
               reduce_cmd=reduce_cmd.idle, name=None):
    ins = _Instruction("activation")
    _activation(ins, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd)


def activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    ins = _Instruction("activation_reduce")
    if reduce_op is None:
        raise ins.error(NkiValidationError, "activation_reduce needs reduce_op (nl.add)")
    _activation(ins, dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd.reset_reduce)


def _affine_values(ins, dst, pattern, offset, channel_multiplier) -> np.ndarray:
    pattern = [(int(step), int(num)) for step, num in pattern]
    if len(pattern) > 4:
        raise ins.error(ShapeError, f"pattern {pattern} has more than 4 dimensions")
    total = math.prod(num for _, num in pattern)
    if total != dst.free_size:
        raise ins.error(ShapeError, f"pattern {pattern} generates {total} elements per "
                                    f"partition but dst {dst.shape} has {dst.free_size}")
    values = np.full((dst.shape[0], 1), int(offset), dtype=np.int64)
    values = values + np.arange(dst.shape[0], dtype=np.int64)[:, None] * int(channel_multiplier)
    free = np.zeros(1, dtype=np.int64)
    for step, num in pattern:
        free = (free[:, None] + np.arange(num, dtype=np.int64)[None, :] * step).reshape(-1)
    # 32-bit integer arithmetic ("The generated values are computed in 32-bit integer")
    return (values + free[None, :]).astype(np.int32)


def iota(dst, pattern, offset=0, channel_multiplier=0, name=None):
    ins = _Instruction("iota")
    ins.tile(dst, "dst", spaces=("sbuf",), read=False)
    values = _affine_values(ins, dst, pattern, offset, channel_multiplier)
    ins.write(dst, values)
    ins.record("GpSimdE")


def affine_select(dst, pattern, channel_multiplier, on_true_tile, on_false_value,
                  cmp_op=OPERATORS["equal"], offset=0, name=None):
    ins = _Instruction("affine_select")
    ins.tile(dst, "dst", spaces=("sbuf",), read=False)
    ins.tile(on_true_tile, "on_true_tile", spaces=("sbuf",))
    ins.same_layout(dst, "dst", on_true_tile, "on_true_tile")
    cmp = ins.operator(cmp_op, "cmp_op", kinds=("arith",))
    affine = _affine_values(ins, dst, pattern, offset, channel_multiplier)
    src = ins.values(on_true_tile, "on_true_tile")

    def result():
        predicate = apply(cmp, affine.astype(np.float32), np.float32(0)) != 0
        x = src.reshape(ins.pf(dst))
        if on_true_tile.dtype != dst.dtype:
            x = x.astype(np.float32)
        return np.where(predicate, x, np.float32(on_false_value))

    ins.write(dst, result)
    ins.record("GpSimdE", cmp_op=cmp.name)


def bn_stats(dst, data, name=None):
    ins = _Instruction("bn_stats")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    P, F = ins.pf(data)
    if F > ins.target.bn_stats_fmax:
        raise ins.error(TileSizeError, f"data has {F} elements per partition; bn_stats takes at "
                                       f"most nl.tile_size.bn_stats_fmax = "
                                       f"{ins.target.bn_stats_fmax}: call it per 512-element "
                                       f"slice and aggregate with bn_aggr")
    ins.expect_pf(dst, "dst", P, 6)
    x = ins.f32(data, "data")

    def result():
        out = np.zeros((P, 6))
        for j, part in enumerate((x[:, 0::2].astype(np.float64), x[:, 1::2].astype(np.float64))):
            n = part.shape[1]
            if n:
                mean = part.mean(axis=1)
                out[:, 3 * j:3 * j + 3] = np.stack(
                    [np.full(P, n), mean, ((part - mean[:, None]) ** 2).sum(axis=1)], axis=1)
        return out.astype(np.float32)

    ins.write(dst, result)
    ins.record("VectorE")


def bn_aggr(dst, data, name=None):
    ins = _Instruction("bn_aggr")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    P, F = ins.pf(data)
    if F % 3:
        raise ins.error(ShapeError, f"data has {F} elements per partition: bn_aggr takes "
                                    f"(count, mean, variance*count) triples, a multiple of 3")
    ins.expect_pf(dst, "dst", P, 2)
    x = ins.f32(data, "data")

    def result():
        t = x.astype(np.float64).reshape(P, F // 3, 3)
        count, mean, m2 = t[..., 0], t[..., 1], t[..., 2]
        total = count.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mu = (count * mean).sum(axis=1) / total
            var = (m2 + count * (mean - mu[:, None]) ** 2).sum(axis=1) / total
        return np.stack([mu, var], axis=1).astype(np.float32)

    ins.write(dst, result)
    ins.record("VectorE")


def select_reduce(dst, predicate, on_true, on_false, reduce_res=None,
                  reduce_cmd=reduce_cmd.idle, reduce_op=OPERATORS["maximum"],
                  reverse_pred=False, name=None):
    ins = _Instruction("select_reduce")
    ins.tile(dst, "dst", read=False)
    ins.tile(predicate, "predicate")
    ins.tile(on_true, "on_true")
    ins.same_layout(dst, "dst", on_true, "on_true")
    ins.same_layout(predicate, "predicate", on_true, "on_true")
    ins.not_both_psum(on_true, "on_true", predicate, "predicate")
    if on_true.dtype in ("tfloat32", "int32", "uint32"):
        raise ins.error(DtypeError, f"on_true is {on_true.dtype}; select_reduce takes any dtype "
                                    f"but tfloat32, int32, uint32")
    if predicate.dtype not in ("int8", "uint8", "int16", "uint16"):
        raise ins.error(DtypeError, f"predicate is {predicate.dtype}; it must be int8, uint8, "
                                    f"int16 or uint16")
    op = ins.operator(reduce_op, "reduce_op", reduction=True)
    if op.name != "maximum":
        raise ins.error(NkiValidationError, "select_reduce reduces with nl.maximum only")
    P = on_true.shape[0]
    pred = ins.values(predicate, "predicate")
    false_values = ins.scalar_or_vector(on_false, "on_false", P)
    true_values = ins.f32(on_true, "on_true")
    result = None
    if ins.compute:
        pred = pred.reshape(ins.pf(predicate)) != 0
        pred = ~pred if reverse_pred else pred
        result = np.where(pred, true_values, false_values).astype(np.float32)
    regs = _vector_regs(ins.run)
    key = ins.run.program_id
    if reduce_cmd is reduce_cmd.reset_reduce:
        regs[key] = np.full(ins.target.partitions, -np.inf, np.float32)
    if reduce_cmd in (reduce_cmd.reset_reduce, reduce_cmd.reduce):
        if key not in regs:
            raise ins.error(UninitializedReadError, "reduce_cmd=reduce on Vector Engine "
                                                    "accumulators never reset; use reset_reduce")
        if ins.compute:
            regs[key][:P] = np.maximum(regs[key][:P], result.max(axis=1))
    if reduce_res is not None:
        ins.tile(reduce_res, "reduce_res", read=False)
        if not reduce_res.dt.is_float or reduce_res.shape[0] != P or reduce_res.free_size != 1:
            raise ins.error(ShapeError, f"reduce_res {reduce_res!r} must be a float ({P}, 1) "
                                        f"tile")
        if key not in regs:
            raise ins.error(UninitializedReadError, "reduce_res reads accumulators never "
                                                    "written; use reduce_cmd=reset_reduce")
    ins.write(dst, result)
    if reduce_res is not None:
        ins.write(reduce_res, regs[key][:P])
    ins.record("VectorE", reduce_cmd=reduce_cmd, reduce_res=reduce_res is not None)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False,
                       name=None):
    ins = _Instruction("tensor_tensor_scan")
    ins.tile(dst, "dst", read=False)
    ins.tile(data0, "data0")
    ins.tile(data1, "data1")
    ins.same_layout(data0, "data0", data1, "data1")
    ins.same_layout(dst, "dst", data0, "data0")
    ins.not_both_psum(data0, "data0", data1, "data1")
    op0 = ins.operator(op0, "op0", kinds=("arith",))
    op1 = ins.operator(op1, "op1", kinds=("arith",))
    P, F = ins.pf(data0)
    a, b = ins.f32(data0, "data0"), ins.f32(data1, "data1")
    initial = ins.scalar_or_vector(initial, "initial", P)

    def result():
        state = np.broadcast_to(initial, (P, 1))[:, 0]
        out = np.empty((P, F), np.float32)
        for i in range(F):
            t = apply(op0, state, a[:, i]) if reverse0 else apply(op0, a[:, i], state)
            state = apply(op1, b[:, i], t) if reverse1 else apply(op1, t, b[:, i])
            out[:, i] = state
        return out

    ins.write(dst, result)
    ins.record("VectorE", op0=op0.name, op1=op1.name)


def dropout(dst, data, prob, name=None):
    ins = _Instruction("dropout")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    ins.same_dtype(dst, "dst", data, "data", "dropout keeps the dtype")
    if isinstance(prob, NkiTensor) and data.dt.is_int and prob.dtype != "float32":
        raise ins.error(DtypeError, "prob must be float32 when data is an integer tile")
    P, F = ins.pf(data)
    p = np.broadcast_to(ins.scalar_or_vector(prob, "prob", P), (P, 1))
    if np.any((p < 0) | (p > 1)):
        raise ins.error(NkiValidationError, f"drop probability {prob} must be in [0, 1]")
    x = ins.values(data, "data")

    def result():
        generator = ins.run.__dict__.get("_rng")
        if generator is None:
            import torch

            # Seeded from torch's default generator: torch.manual_seed makes kernels
            # reproducible.
            generator = ins.run._rng = np.random.default_rng(
                int(torch.randint(0, 2**62, (1,)).item()))
        keep = generator.random((P, F)) >= p
        # The ISA page says kept elements keep "their original values" (no 1/(1-p) scaling).
        return np.where(keep, x.reshape(P, F), np.zeros((), x.dtype))

    ins.write(dst, result)
    ins.record("VectorE")


def reciprocal(dst, data, name=None):
    ins = _Instruction("reciprocal")
    ins.tile(dst, "dst", read=False)
    ins.tile(data, "data")
    ins.same_layout(dst, "dst", data, "data")
    with np.errstate(divide="ignore"):
        x = ins.f32(data, "data")
        ins.write(dst, lambda: np.float32(1) / x)
    ins.record("VectorE")


def _assign(dst, value):
    if isinstance(value, NkiTensor):
        tensor_copy(dst=dst, src=value)
    else:
        memset(dst=dst, value=value)


_tensor_module.ASSIGN = _assign

from torch_neuron.nki import isa_constants as constants  # noqa: E402,F401  (nki.isa.constants)
from torch_neuron.nki.isa_dma_compute import dma_compute  # noqa: E402,F401
from torch_neuron.nki.isa_cores import core_barrier, sendrecv  # noqa: E402,F401
from torch_neuron.nki.isa_gpsimd import (local_gather, nc_n_gather,  # noqa: E402,F401
                                         nonzero_with_count, sequence_bounds, topk)
from torch_neuron.nki.isa_mx import nc_matmul_mx, quantize_mx  # noqa: E402,F401
from torch_neuron.nki.isa_random import (rand2, rand_get_state,  # noqa: E402,F401
                                         rand_set_state, rng, set_rng_seed)
from torch_neuron.nki.registers import (VirtualRegister, register_alloc,  # noqa: E402,F401
                                        register_load, register_move, register_store)

from torch_neuron.nki.isa_vector import (activate2, exponential, max8,  # noqa: E402
                                         nc_find_index8, nc_match_replace8,
                                         range_select, scalar_tensor_tensor,
                                         tensor_copy_predicated, tensor_scalar_cumulative,
                                         tensor_scalar_reduce)


from torch_neuron.nki.handles import NkiInstruction, returning_handles  # noqa: E402

# Every instruction returns its NkiInstruction (handles.py), except the two that complete in
# another program's thread (cores.py).
for _name in ("dma_copy", "dma_transpose", "dma_compute", "tensor_copy", "memset", "nc_matmul",
              "nc_transpose", "tensor_tensor", "tensor_scalar", "tensor_reduce",
              "tensor_partition_reduce", "activation", "activation_reduce", "iota",
              "affine_select", "bn_stats", "bn_aggr", "select_reduce", "tensor_tensor_scan",
              "dropout", "reciprocal", "scalar_tensor_tensor", "tensor_scalar_reduce",
              "tensor_scalar_cumulative", "tensor_copy_predicated", "max8", "range_select",
              "exponential", "activate2", "nc_find_index8", "nc_match_replace8",
              "nc_stream_shuffle", "nc_n_gather", "local_gather", "nonzero_with_count",
              "register_load", "register_store", "nc_matmul_mx", "quantize_mx",
              "sequence_bounds", "rng", "rand2", "set_rng_seed", "rand_set_state",
              "rand_get_state", "topk"):
    globals()[_name] = returning_handles(globals()[_name])
del _name
