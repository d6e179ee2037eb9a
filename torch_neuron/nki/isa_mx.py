"""`nki.isa.quantize_mx` and `nki.isa.nc_matmul_mx`: NeuronCore-v4's OCP microscaling (MX)
instructions. How MX data is kept: Note [MX data types] in dtypes.py.

Note [MX layout]
An MX matrix in SBUF is a data tile of 4-packed elements and a scale tile (the stubs of both
instructions; aws-neuron-sdk nki/guides/architecture/trainium3_arch.rst, "Quad-MXFP8/MXFP4
Matmul Performance"; nki/deep-dives/mxfp-matmul.rst). The contraction runs over the partitions
and over the 4 values of each x4 element; a scaling group of 32 values is 8 partitions by one x4
element (4 values). Group g = p // 8 of a data tile's partitions has its scales in partition
32 * (g // 4) + g % 4 of the scale tile, so the scales of a quadrant of 32 data partitions sit
in the first 4 partitions of the same quadrant ("Scales must be placed in the quadrant from
which the corresponding scaling group originated"), at the data element's free index. A scale
tile of a data tile of at most 32 partitions is P // 8 partitions; a larger one spans the
quadrants. A scale tile is addressed from its own first partition, so a slice starting at
partition 4, 8 or 12 packs another matrix's scales into the unused partitions (the deep dive's
"Packing Scale Values"). Element j of an x4 value is 128 contraction indices from element j - 1
in the unpacked matrix, which no instruction needs to know: the matmul multiplies equal
positions of stationary and moving.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki import dtypes
from torch_neuron.nki.errors import DtypeError, NkiValidationError, ShapeError, TileSizeError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.accumulation import accumulated, matmul_accumulation

# Element formats of the x4 types: (exponent bits, mantissa bits, bias, special values, bits
# per element). OCP MX v1.0: E5M2 (IEEE-like inf/NaN), E4M3 ("fn": only S.1111.111 is NaN),
# E2M1 (no inf or NaN).
_ELEMENT = {"float8_e5m2_x4": (5, 2, 15, "ieee", 8),
            "float8_e4m3fn_x4": (4, 3, 7, "fn", 8),
            "float4_e2m1fn_x4": (2, 1, 1, "none", 4)}
# The element dtype quantize_mx rounds to, and its E_max, "the maximum unbiased exponent of the
# destination element data type: 8 for float8_e4m3fn and 15 for float8_e5m2" (quantize_mx
# docstring).
_QUANTIZED = {"float8_e4m3fn_x4": ("float8_e4m3fn", 8), "float8_e5m2_x4": ("float8_e5m2", 15)}
_SCALE_DTYPES = ("float8_e8m0fnu", "uint8")
_SCALE_BIAS = 127          # E8M0: 2^(bits - 127); 0 encodes 2^-127 (quantize_mx docstring)
_SCALE_NAN = 255           # E8M0's NaN code (OCP MX v1.0)
_GROUP_PARTITIONS = 8      # "each group consists of 8 partitions x 4 elements per partition"
_QUADRANT = 32
_SCALES_PER_QUADRANT = _QUADRANT // _GROUP_PARTITIONS


def unpack(bits: np.ndarray, dtype: str) -> np.ndarray:
    """Float32 values [..., F * 4] of x4 words [..., F] (element j in bits j*width upward)."""
    ebits, mbits, bias, special, width = _ELEMENT[dtype]
    words = np.asarray(bits).astype(np.int64)
    shifts = np.arange(4, dtype=np.int64) * width
    codes = (words[..., None] >> shifts) & ((1 << width) - 1)
    values = dtypes.decode_float(codes, ebits, mbits, bias, special)
    return values.reshape(words.shape[:-1] + (words.shape[-1] * 4,))


def pack(values: np.ndarray, dtype: str) -> np.ndarray:
    """x4 words [..., F] of values [..., F * 4] exactly representable in the element format."""
    ebits, mbits, bias, special, width = _ELEMENT[dtype]
    codes = dtypes.encode_float(values, ebits, mbits, bias, special)
    codes = codes.reshape(codes.shape[:-1] + (-1, 4))
    shifts = np.arange(4, dtype=np.int64) * width
    words = (codes << shifts).sum(axis=-1)
    return words.astype(dtypes.BY_NAME[dtype].storage)


def scale_partition(group: int) -> int:
    """The scale tile partition of data partitions 8*group .. 8*group+7 (Note [MX layout])."""
    return _QUADRANT * (group // _SCALES_PER_QUADRANT) + group % _SCALES_PER_QUADRANT


def _scale_rows(partitions: int) -> np.ndarray:
    return np.array([scale_partition(g) for g in range(partitions // _GROUP_PARTITIONS)])


def _check_data_partitions(ins: _Instruction, t, role: str) -> int:
    P = t.shape[0]
    if P % _QUADRANT or P > ins.target.partitions:
        raise ins.error(ShapeError, f"{role} {t.shape}: the partition dim must be a multiple of "
                                    f"32, at most {ins.target.partitions} (MX scaling groups "
                                    f"are 8 partitions within a 32-partition quadrant)")
    return P


def _check_scale(ins: _Instruction, scale, role: str, P: int, F: int) -> None:
    """A scale tile for P data partitions of F x4 elements each (Note [MX layout])."""
    ins.tile(scale, role, spaces=("sbuf",), read=role != "dst_scale")
    if scale.dtype not in _SCALE_DTYPES:
        raise ins.error(DtypeError, f"{role} is {scale.dtype}; MX scales are float8_e8m0fnu "
                                    f"or uint8")
    rows = int(_scale_rows(P)[-1]) + 1
    if scale.shape[0] < rows or scale.free_size < F:
        raise ins.error(ShapeError, f"{role} {scale.shape}: data of {P} partitions by {F} x4 "
                                    f"elements needs scales in partitions 0..{rows - 1} (4 per "
                                    f"32-partition quadrant) and at least {F} elements each")


def quantize_mx(dst, src, dst_scale, name=None):
    """dst, dst_scale = src quantized to MXFP8: per group of 8 partitions x 4 elements, the
    scale X = 2^(floor(log2(max |v|)) - (E_max - 1)) and the elements v / X rounded to the
    float8 type (quantize_mx docstring, "Scale calculation"; 2^-127 for an all-zero group)."""
    ins = _Instruction("quantize_mx")
    ins.needs_core(4)
    ins.tile(src, "src", spaces=("sbuf",))
    ins.tile(dst, "dst", spaces=("sbuf",), read=False)
    if src.dtype not in ("bfloat16", "float16"):
        raise ins.error(DtypeError, f"src is {src.dtype}; quantize_mx takes bfloat16 or "
                                    f"float16")
    if dst.dtype not in _QUANTIZED:
        raise ins.error(DtypeError, f"dst is {dst.dtype}; quantize_mx writes float8_e4m3fn_x4 "
                                    f"or float8_e5m2_x4 (float4 is not supported)")
    P = _check_data_partitions(ins, src, "src")
    F = src.free_size
    if F % 4:
        raise ins.error(ShapeError, f"src {src.shape}: the free size {F} must be a multiple "
                                    f"of 4")
    ins.expect_pf(dst, "dst", P, F // 4)
    _check_scale(ins, dst_scale, "dst_scale", P, F // 4)
    element, e_max = _QUANTIZED[dst.dtype]
    element_dt = dtypes.BY_NAME[element]
    v = ins.values(src, "src")

    def quantized():
        x = v.astype(np.float64).reshape(P // 8, 8, F // 4, 4)
        amax = np.abs(x).max(axis=(1, 3))                       # [groups, F // 4]
        with np.errstate(divide="ignore", invalid="ignore"):
            exponent = np.floor(np.log2(np.where(amax > 0, amax, 1.0)))
        code = np.clip(exponent - (e_max - 1) + _SCALE_BIAS, 0, 254)
        code = np.where(amax > 0, code, 0)
        code = np.where(np.isfinite(amax), code, _SCALE_NAN)
        factor = np.ldexp(1.0, np.where(code == _SCALE_NAN, 0, code).astype(np.int64)
                          - _SCALE_BIAS)
        scaled = np.clip(x / factor[:, None, :, None], -element_dt.max_finite,
                         element_dt.max_finite)
        return dtypes.round_to(scaled, element_dt).reshape(P, F), code.astype(np.uint8)

    values, codes = quantized() if ins.compute else (None, None)
    ins.write(dst, lambda: pack(values, dst.dtype).reshape(dst.shape))
    for g, row in enumerate(_scale_rows(P)):
        ins.write(_scale_row(dst_scale, row, F // 4), lambda g=g: codes[g].reshape(1, -1))
    ins.record("VectorE")


def _scale_row(scale, row: int, F: int):
    """The first F scales of partition `row` of a scale tile, as a [1, F] view."""
    return scale[int(row):int(row) + 1, :].reshape((1, scale.free_size))[:, :F]


def _scale_factors(ins: _Instruction, scale, role: str, P: int, F: int) -> np.ndarray:
    """Each data partition's scale factors [P, F], 2^(bits - 127) (NaN for 255), from the
    partitions of the scale tile its group uses (Note [MX layout])."""
    bits = np.stack([ins.values(_scale_row(scale, row, F), role).reshape(F)
                     for row in _scale_rows(P)])
    factor = np.ldexp(1.0, bits.astype(np.int64) - _SCALE_BIAS)
    factor = np.where(bits == _SCALE_NAN, np.nan, factor)
    return np.repeat(factor, _GROUP_PARTITIONS, axis=0)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None,
                 tile_size=None, accumulate=None, name=None):
    """dst[M, N] (+)= sum over partitions k and x4 lanes q of stationary[k, M, q] *
    moving[k, N, q], each value times its group's scale (nc_matmul_mx docstring; the
    tutorial's golden, nki-samples mxfp-matmul/mx_cpu_utils.py nc_matmul_mx_golden)."""
    ins = _Instruction("nc_matmul_mx")
    t = ins.target
    ins.needs_core(4)
    ins.tile(stationary, "stationary", spaces=("sbuf",))
    ins.tile(moving, "moving", spaces=("sbuf",))
    ins.tile(dst, "dst", spaces=("psum",), read=False)
    for role, x in (("stationary", stationary), ("moving", moving)):
        if x.dtype not in _ELEMENT:
            raise ins.error(DtypeError, f"{role} is {x.dtype}; nc_matmul_mx takes "
                                        f"{', '.join(_ELEMENT)} (view raw integers with "
                                        f".view(dtype) or .ap(..., dtype=))")
    if dst.dtype not in ("float32", "bfloat16"):
        raise ins.error(DtypeError, f"dst is {dst.dtype}; nc_matmul_mx writes float32 or "
                                    f"bfloat16")
    K = _check_data_partitions(ins, stationary, "stationary")
    if moving.shape[0] != K:
        raise ins.error(ShapeError, f"stationary {stationary.shape} and moving {moving.shape} "
                                    f"must have the same partition (contraction) size")
    M, N = stationary.free_size, moving.free_size
    if M % 2 or M > t.gemm_stationary_fmax:
        raise ins.error(TileSizeError, f"stationary free size {M} must be even and at most "
                                       f"{t.gemm_stationary_fmax}")
    moving_max = t.moving_fmax_fp32_dst * (2 if dst.dtype == "bfloat16" else 1)
    if N > moving_max:
        raise ins.error(TileSizeError, f"moving free size {N} exceeds {moving_max} for a "
                                       f"{dst.dtype} dst (the whole PSUM)")
    rows = t.partitions
    if (tile_position is None) != (tile_size is None):
        raise ins.error(NkiValidationError, "tile_position and tile_size must be set together")
    if tile_size is not None:
        # "Tensor Engine supports only row tiling mode": (row_size, 128) at (start_row, 0).
        rows, cols = (int(v) for v in tile_size)
        r0, c0 = (int(v) for v in tile_position)
        if rows not in (32, 64, 128) or cols != 128 or c0 != 0 or r0 % rows or r0 + rows > 128:
            raise ins.error(TileSizeError, f"tile_size={tuple(tile_size)}, tile_position="
                                           f"{tuple(tile_position)}: row tiles are (32, 64 or "
                                           f"128, 128) at (a multiple of the row size, 0)")
    if K > rows:
        raise ins.error(TileSizeError, f"contraction (partition) size {K} exceeds the row tile "
                                       f"of {rows}")
    ins.expect_pf(dst, "dst", M, N)
    _check_scale(ins, stationary_scale, "stationary_scale", K, M)
    _check_scale(ins, moving_scale, "moving_scale", K, N)
    st = ins.values(stationary, "stationary")
    mv = ins.values(moving, "moving")
    st_scale = _scale_factors(ins, stationary_scale, "stationary_scale", K, M)
    mv_scale = _scale_factors(ins, moving_scale, "moving_scale", K, N)
    acc = matmul_accumulation(ins, dst, accumulate, M, N)

    def product():
        a = unpack(st.reshape(K, M), stationary.dtype).reshape(K, M, 4)
        b = unpack(mv.reshape(K, N), moving.dtype).reshape(K, N, 4)
        a = a * st_scale[:, :, None]
        b = b * mv_scale[:, :, None]
        return np.einsum("kiq,kjq->ij", a, b).astype(np.float32)

    ins.write(dst, accumulated(dst, acc, product, M, N))
    dst.matmul_mask()[...] = True
    ins.record("TensorE", accumulate=bool(acc.any()))
