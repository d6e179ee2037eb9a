"""NKI data types: names, sizes, how the simulator stores them, and rounding to them.

The current NKI release names dtypes by string (`nl.float32 == "float32"`, aws-neuron-sdk
`nki/api/nki/language/__init__.py`, `DType = str`). Values are kept in NumPy arrays: float32,
float16 and the integer types natively; bfloat16, tfloat32 and the float8 types in float32 arrays
holding only values representable in the narrow type (Note [Rounding to narrow floats]); the MX
types (the 4-packed `_x4` data types and the `float8_e8m0fnu` scale) as their bits
(Note [MX data types]). Sizes in bytes (for SBUF/PSUM capacity and the buffer regions of the
instruction records) are those of the NKI dtype, not of the storage; to_bytes/from_bytes give
a tensor's device bytes, which dtype views reinterpret (Note [Dtype views] in tensor.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class DType:
    name: str
    itemsize: int          # bytes on the device
    storage: type          # NumPy dtype of the simulator's array
    kind: str              # "float" | "int" | "uint" | "bool" | "mx" (bits, Note [MX data types])
    # Narrow floats (stored in float32): mantissa bits, smallest normal exponent, largest
    # finite value, and whether the format has infinities (else overflow gives NaN).
    mantissa: int = 0
    emin: int = 0
    max_finite: float = 0.0
    has_inf: bool = True

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint", "bool")

    @property
    def narrow(self) -> bool:
        return self.mantissa > 0


# Formats from the "Supported Data Types" table of aws-neuron-sdk `nki/api/nki.api.shared.rst`
# (sign/exponent/mantissa bits). Largest finite values follow from the bit layouts: IEEE-like
# float8_e4m3 (bias 7, max 1.875 * 2^7 = 240, has inf); OCP float8_e4m3fn (no inf, 1.75 * 2^8 =
# 448); float8_e5m2 (IEEE-like, 1.75 * 2^15 = 57344).
_TABLE = [
    DType("float32", 4, np.float32, "float"),
    DType("float16", 2, np.float16, "float"),
    DType("bfloat16", 2, np.float32, "float", 7, -126, (2 - 2.0**-7) * 2.0**127),
    DType("tfloat32", 4, np.float32, "float", 10, -126, (2 - 2.0**-10) * 2.0**127),
    DType("float8_e4m3", 1, np.float32, "float", 3, -6, 240.0),
    DType("float8_e4m3fn", 1, np.float32, "float", 3, -6, 448.0, has_inf=False),
    DType("float8_e5m2", 1, np.float32, "float", 2, -14, 57344.0),
    DType("int8", 1, np.int8, "int"),
    DType("int16", 2, np.int16, "int"),
    DType("int32", 4, np.int32, "int"),
    DType("uint8", 1, np.uint8, "uint"),
    DType("uint16", 2, np.uint16, "uint"),
    DType("uint32", 4, np.uint32, "uint"),
    DType("bool_", 1, np.uint8, "bool"),
    DType("float8_e5m2_x4", 4, np.uint32, "mx"),
    DType("float8_e4m3fn_x4", 4, np.uint32, "mx"),
    DType("float4_e2m1fn_x4", 2, np.uint16, "mx"),
    DType("float8_e8m0fnu", 1, np.uint8, "mx"),
]
BY_NAME = {d.name: d for d in _TABLE}

_FROM_NUMPY = {np.dtype(np.float32): "float32", np.dtype(np.float16): "float16",
               np.dtype(np.int8): "int8", np.dtype(np.int16): "int16",
               np.dtype(np.int32): "int32", np.dtype(np.uint8): "uint8",
               np.dtype(np.uint16): "uint16", np.dtype(np.uint32): "uint32",
               np.dtype(np.bool_): "bool_"}


def _torch_names():
    import torch

    return {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
            torch.float8_e4m3fn: "float8_e4m3fn", torch.float8_e5m2: "float8_e5m2",
            torch.int8: "int8", torch.int16: "int16", torch.int32: "int32",
            torch.uint8: "uint8", torch.uint16: "uint16", torch.uint32: "uint32",
            torch.bool: "bool_", torch.float8_e8m0fnu: "float8_e8m0fnu"}


def torch_dtype(name: str):
    """The torch dtype a kernel output of NKI dtype `name` is returned as."""
    import torch

    for t, n in _torch_names().items():
        if n == name:
            return t
    if BY_NAME.get(name) is not None and BY_NAME[name].kind == "mx":
        raise TypeError(f"NKI dtype {name} (4 packed values) has no torch equivalent: return "
                        f"the tensor viewed as integers, t.view(nl.uint8)")
    raise TypeError(f"NKI dtype {name} has no torch equivalent to return a neuron tensor in; "
                    f"cast to float32, bfloat16, float16 or an integer type in the kernel")


def resolve(dtype) -> DType:
    """Accepts an NKI dtype name, a NumPy dtype or a torch dtype."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        name = {"bool": "bool_"}.get(dtype, dtype)
        if name in BY_NAME:
            return BY_NAME[name]
    else:
        try:
            return BY_NAME[_FROM_NUMPY[np.dtype(dtype)]]
        except (TypeError, KeyError):
            pass
        try:
            # ml_dtypes' bfloat16 and float8 NumPy dtypes, by name: the arrays AWS's simulator
            # takes for low-precision inputs (nki/guides/nki_simulator.rst).
            named = BY_NAME.get(np.dtype(dtype).name)
            if named is not None and named.narrow:
                return named
        except TypeError:
            pass
        name = _torch_names().get(dtype)
        if name:
            return BY_NAME[name]
    raise TypeError(f"unsupported NKI dtype {dtype!r}; use one of nl.{', nl.'.join(BY_NAME)}")


# Note [Rounding to narrow floats]
# The engines compute in float32 and round results to the destination dtype on write (the ISA
# pages: "The float32 results are cast to dst.dtype at no additional performance cost"). The
# rounding is IEEE round-to-nearest, ties-to-even, with gradual underflow: the value is scaled
# by the quantum of its binade (2^(exponent - mantissa bits), the exponent clamped at the
# smallest normal one for subnormals), rounded with np.rint (ties to even) and scaled back; all
# steps are exact in float64. Overflow beyond the largest finite value gives inf, or NaN for the
# formats without infinities (float8_e4m3fn), as the ml_dtypes conversions that AWS's simulator
# uses do (aws-neuron-sdk `nki/guides/nki_simulator.rst`, "Precise Floating-Point Mode"); the
# hardware's overflow behaviour is not documented (assumption). Results are exactly those of
# torch's float32 -> bfloat16 / float8_e4m3fn / float8_e5m2 conversions for in-range values,
# which the tests check.
def round_to(values: np.ndarray, dt: DType) -> np.ndarray:
    if not dt.narrow:
        return values
    if dt.name == "bfloat16":
        return _round_to_bfloat16(values)
    x = np.asarray(values, dtype=np.float64)
    mant, exp = np.frexp(x)  # x = mant * 2^exp, 0.5 <= |mant| < 1
    exp = np.maximum(exp - 1, dt.emin)
    quantum = np.ldexp(1.0, exp - dt.mantissa)
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.rint(x / quantum) * quantum
        out = np.where(np.isfinite(x), out, x)
        over = np.abs(out) > dt.max_finite
        out = np.where(over & np.isfinite(x),
                       np.copysign(np.inf, x) if dt.has_inf else np.nan, out)
        if not dt.has_inf:
            out = np.where(np.isinf(x), np.nan, out)
    return out.astype(np.float32)


def _round_to_bfloat16(values) -> np.ndarray:
    """The same rounding for bfloat16, on the bits: bfloat16 is float32's top 16 bits (same
    exponent range, so subnormals and overflow to inf need no special case), and adding
    0x7FFF plus the kept part's lowest bit before truncating rounds to nearest, ties to
    even. NaN keeps its payload's top bits (a truncation could turn it into inf)."""
    x = np.ascontiguousarray(values, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) \
        & np.uint32(0xFFFF0000)
    out = rounded.view(np.float32)
    nan = np.isnan(x)
    if nan.any():
        out = np.where(nan, x, out)
    return out


def convert(values: np.ndarray, dt: DType) -> np.ndarray:
    """Values (any NumPy array) written into a tile of dtype `dt`: float results are rounded as
    in Note [Rounding to narrow floats]; integer destinations take float values rounded to
    nearest even and saturated to the type's range (assumption: the ISA pages say only that
    results are cast to dst.dtype). MX data (Note [MX data types]) is only ever copied: its
    values are its bits, and no arithmetic result converts to it."""
    values = np.asarray(values)
    if dt.kind == "mx":
        if values.dtype != dt.storage:
            from torch_neuron.nki.errors import DtypeError

            raise DtypeError(f"{dt.name} holds packed MX bits: only a copy from {dt.name}, "
                             f"nisa.quantize_mx or a view of raw integers writes it, not "
                             f"{values.dtype} values")
        return values
    if dt.is_float:
        if dt.storage is np.float16:
            with np.errstate(over="ignore"):
                return values.astype(np.float16)
        return round_to(values.astype(np.float32), dt)
    if values.dtype.kind == "f":
        info = np.iinfo(dt.storage)
        with np.errstate(invalid="ignore"):
            values = np.clip(np.rint(np.nan_to_num(values)), info.min, info.max)
    if dt.kind == "bool":
        values = values != 0
    return values.astype(dt.storage)


# Note [MX data types]
# The OCP Microscaling formats (OCP MX v1.0) NeuronCore-v4 multiplies and quantizes: an MX value
# is a float8_e5m2, float8_e4m3fn or float4_e2m1fn element times a power-of-two scale shared by
# a group of 32 elements. NKI names them as 4-packed data types: "The float8_*_x4 types are
# 32-bits wide and physically contain four float8 elements. The float4_*_x4 type is 16-bits wide
# and physically contains four float4 elements" (aws-neuron-sdk nki/deep-dives/mxfp-matmul.rst),
# and the scale as float8_e8m0fnu (uint8 accepted), the biased exponent alone: 2^(bits - 127)
# (OCP MX v1.0, E8M0). The simulator keeps them as their bits (uint32, uint16, uint8 arrays):
# element j of an x4 value is byte j (float8) or nibble j (float4) from the least significant
# end, the order in which AWS's tutorial packs them from consecutive elements
# (nki-samples mxfp-matmul/mx_cpu_utils.py, pack_mx_data_into_x4). No engine computes with
# them except nisa.quantize_mx and nisa.nc_matmul_mx (isa_mx.py); copies move the bits.


def _float_format(dt: DType) -> tuple[int, int, int]:
    """(exponent bits, mantissa bits, bias) of a narrow float stored by value."""
    ebits = dt.itemsize * 8 - 1 - dt.mantissa
    return ebits, dt.mantissa, 1 - dt.emin


def encode_float(values: np.ndarray, ebits: int, mbits: int, bias: int,
                 special: str) -> np.ndarray:
    """The sign/exponent/mantissa codes of values exactly representable in the format (as the
    simulator stores them: rounded on write). `special` as decode_float's: NaN becomes the
    format's quiet NaN (all ones for "fn"), infinities the all-ones exponent ("ieee") or NaN
    (formats without them)."""
    exponent_ones = ((1 << ebits) - 1) << mbits
    nan_code = (1 << (ebits + mbits)) - 1 if special == "fn" else \
        exponent_ones | 1 << (mbits - 1)
    inf_code = exponent_ones if special == "ieee" else None
    payload = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.int64)
    x = np.asarray(values, dtype=np.float64)
    sign = np.signbit(x).astype(np.int64) << (ebits + mbits)
    a = np.abs(x)
    finite = np.isfinite(a) & (a > 0)
    mant, exp = np.frexp(np.where(finite, a, 1.0))      # a = mant * 2^exp, mant in [0.5, 1)
    e = exp - 1                                            # unbiased exponent
    emin = 1 - bias
    normal = e >= emin
    field = np.where(normal, e + bias, 0)
    frac = np.where(normal, a / np.ldexp(1.0, e) - 1.0, a / np.ldexp(1.0, emin))
    m = np.rint(np.where(finite, frac, 0.0) * (1 << mbits)).astype(np.int64)
    code = np.where(finite, (field.astype(np.int64) << mbits) | m, 0)
    # A NaN decode_float made keeps its code in the float32 payload (bits 0-7): a byte view
    # reads back the bytes it wrote.
    kept = payload & 0xFF
    own = (((kept >> mbits) & ((1 << ebits) - 1)) == (1 << ebits) - 1) & \
        ((payload & 0x7FC00000) == 0x7FC00000) & ((kept & ((1 << mbits) - 1)) != 0)
    code = np.where(np.isnan(x), np.where(own, kept & ((1 << (ebits + mbits + 1)) - 1),
                                          nan_code | sign), code | sign)
    if inf_code is not None:
        code = np.where(np.isinf(x), inf_code | sign, code)
    else:
        code = np.where(np.isinf(x), nan_code, code)
    return code


def decode_float(codes: np.ndarray, ebits: int, mbits: int, bias: int,
                 special: str) -> np.ndarray:
    """Float32 values of sign/exponent/mantissa codes. `special`: "ieee" (an all-ones
    exponent is inf or NaN), "fn" (only all-ones exponent and mantissa is NaN, OCP
    float8_e4m3fn), "none" (every code finite, OCP float4_e2m1fn)."""
    c = np.asarray(codes, dtype=np.int64)
    m = c & ((1 << mbits) - 1)
    field = (c >> mbits) & ((1 << ebits) - 1)
    negative = (c >> (ebits + mbits)) & 1
    value = np.where(field == 0, m * np.ldexp(1.0, 1 - bias - mbits),
                     (1.0 + m / (1 << mbits)) * np.ldexp(1.0, field - bias))
    top = (1 << ebits) - 1
    nan = np.zeros(c.shape, dtype=bool)
    if special == "ieee":
        value = np.where((field == top) & (m == 0), np.inf, value)
        nan = (field == top) & (m != 0)
    elif special == "fn":
        nan = (field == top) & (m == (1 << mbits) - 1)
    out = np.where(negative == 1, -value, value).astype(np.float32)
    if nan.any():   # quiet NaNs carrying their code (encode_float reads it back)
        bits = (np.uint32(0x7FC00000) | c.astype(np.uint32)).view(np.float32)
        out = np.where(nan, bits, out)
    return out


def _narrow_codec(dt: DType):
    """(exponent bits, mantissa bits, bias, special values) of a one-byte narrow float: IEEE-like
    with infinities, or "fn" (OCP float8_e4m3fn: no infinities, one NaN)."""
    return (*_float_format(dt), "ieee" if dt.has_inf else "fn")


def to_bytes(values: np.ndarray, dt: DType) -> np.ndarray:
    """The device bytes (little-endian, flat uint8) of values stored as dtype `dt`."""
    v = np.ascontiguousarray(values)
    if dt.name == "bfloat16":   # float32's top 16 bits (Note [Rounding to narrow floats])
        bits = (v.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
        return bits.reshape(-1).view(np.uint8)
    if dt.narrow and dt.itemsize == 1:
        return encode_float(v, *_narrow_codec(dt)).astype(np.uint8).reshape(-1)
    # tfloat32 is a float32 container; the rest are stored as themselves.
    return v.astype(dt.storage).reshape(-1).view(np.uint8)


def from_bytes(raw: np.ndarray, dt: DType) -> np.ndarray:
    """Values (flat, in `dt`'s storage) of device bytes read as dtype `dt`."""
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    if dt.name == "bfloat16":
        bits = raw.view(np.uint16).astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32)
    if dt.narrow and dt.itemsize == 1:
        return decode_float(raw, *_narrow_codec(dt))
    return raw.view(dt.storage).copy()
