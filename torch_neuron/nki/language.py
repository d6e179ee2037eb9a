"""`nki.language`: dtypes, memory spaces, tensor creation, loops, tile sizes and operators.

Follows the current NKI release's stub, aws-neuron-sdk `nki/api/nki/language/__init__.py`.
The tile-level functions (`nl.add(x, y)`, `nl.exp(x)`, `nl.sum(x, axis)`, `nl.load`,
`nl.store`, ...) allocate an SBUF result and issue the `nki.isa` instruction that computes it,
so they are checked and recorded like the instructions themselves.
"""

from __future__ import annotations

import builtins

import numpy as np

from torch_neuron.nki import isa as _isa
from torch_neuron.nki import target as _target
from torch_neuron.nki import tensor as _tensor_module
from torch_neuron.nki.errors import ShapeError as _ShapeError
from torch_neuron.nki.handles import NkiInstruction as _NkiInstruction
from torch_neuron.nki.errors import UnsupportedError as _UnsupportedError
from torch_neuron.nki.ops import OPERATORS as _OPERATORS
from torch_neuron.nki.ops import Operator as _Operator
from torch_neuron.nki.scopes import scoped as _scoped
from torch_neuron.nki.tensor import _RUNS
from torch_neuron.nki.tensor import DynamicSlice as _DynamicSlice
from torch_neuron.nki.tensor import MemoryRegion, NkiTensor
from torch_neuron.nki.tensor import allocate as _allocate
from torch_neuron.nki.tensor import current_run as _current_run

# -- dtypes (strings, as in the current release: `DType = str`) --------------------------------
DType = str
bool_, int8, int16, int32 = "bool_", "int8", "int16", "int32"
uint8, uint16, uint32 = "uint8", "uint16", "uint32"
float16, float32, bfloat16, tfloat32 = "float16", "float32", "bfloat16", "tfloat32"
float8_e4m3, float8_e4m3fn, float8_e5m2 = "float8_e4m3", "float8_e4m3fn", "float8_e5m2"
# The microscaling (MX) formats are named so kernels can refer to them; the simulator does not
# store them (torch_neuron/nki/dtypes.py), so a tensor of one is refused when it is made.
float8_e8m0fnu = "float8_e8m0fnu"
float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4 = (
    "float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")


class _NKIObjectType(type):
    """Lets a subclass take any of its attributes as keyword arguments, even when
    @dataclass gave it an __init__ without them: AWS's NKI library declares
    `@dataclass class SectionParams(nl.NKIObject): section_idx = None` (no annotation, so not
    a dataclass field) and builds it with SectionParams(section_idx=...). A dataclass field
    the call leaves out is None: the library builds `MLPTKGConstants` without its
    `remainderIFused` field, which nothing reads, and runs it on hardware (nki-library
    d2ad3a5, mlp_tkg_constants.py)."""

    def __call__(cls, *args, **kwargs):
        import inspect

        obj = cls.__new__(cls)
        params = inspect.signature(cls.__init__).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            cls.__init__(obj, *args, **kwargs)
            return obj
        if hasattr(cls, "__dataclass_fields__"):
            named = list(params)[1 + len(args):]   # after self and the positional arguments
            for name in named:
                p = params[name]
                if p.default is p.empty and name not in kwargs and p.kind in (
                        p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                    kwargs[name] = None
        extra = {k: kwargs.pop(k) for k in list(kwargs) if k not in params}
        for name in extra:
            if not hasattr(cls, name):
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
        cls.__init__(obj, *args, **kwargs)
        for name, value in extra.items():
            setattr(obj, name, value)
        return obj


class NKIObject(metaclass=_NKIObjectType):
    """Base class of NKI kernel dataclasses and configuration objects: keyword arguments
    set attributes."""

    def __init__(self, **kwargs):
        for name, value in kwargs.items():
            setattr(self, name, value)

# -- memory spaces -------------------------------------------------------------------------------
sbuf = MemoryRegion.sbuf
psum = MemoryRegion.psum
private_hbm = MemoryRegion.private_hbm
hbm = MemoryRegion.private_hbm          # "HBM - Alias of private_hbm"
shared_hbm = MemoryRegion.shared_hbm


def is_hbm(buffer) -> bool:
    return buffer in (private_hbm, shared_hbm)


def is_on_chip(buffer) -> bool:
    return buffer in (sbuf, psum)


def is_psum(buffer) -> bool:
    return buffer is psum


def is_sbuf(buffer) -> bool:
    return buffer is sbuf


# -- tile sizes of the target NeuronCore ---------------------------------------------------------

class _TileSize:
    """Hardware tile-size constants of the kernel's target (the simulated instance's NeuronCore
    outside a kernel); values and sources in torch_neuron/nki/target.py."""

    @property
    def _t(self):
        return _RUNS[-1].target if _RUNS else _target.resolve(None)

    pmax = property(lambda self: self._t.partitions)
    psum_fmax = property(lambda self: self._t.psum_bank_bytes // 4)
    psum_bank_fmax = property(lambda self: self._t.psum_bank_bytes // 4)
    psum_bank_fmax_bytes = property(lambda self: self._t.psum_bank_bytes)
    psum_num_banks = property(lambda self: self._t.psum_banks)
    gemm_stationary_fmax = property(lambda self: self._t.gemm_stationary_fmax)
    gemm_moving_fmax = property(lambda self: self._t.gemm_moving_fmax)
    bn_stats_fmax = property(lambda self: self._t.bn_stats_fmax)
    sbuf_size_bytes = property(lambda self: self._t.sbuf_partition_bytes * self._t.partitions)
    # The whole partition is usable here; the compiler's reserved bytes are not modelled.
    sbuf_fmax_bytes = property(lambda self: self._t.sbuf_partition_bytes)
    sbuf_fmax = property(lambda self: self._t.sbuf_partition_bytes // 4)
    total_available_sbuf_size = property(lambda self: self._t.sbuf_partition_bytes)


tile_size = _TileSize()


# -- tensor creation -----------------------------------------------------------------------------

def ndarray(shape, dtype, buffer=sbuf, name="", address=None) -> NkiTensor:
    return _allocate(shape, dtype, buffer, name, address=address)


def _filled(shape, value, dtype, buffer, name):
    t = ndarray(shape, dtype, buffer, name)
    if t.on_chip:
        _isa.memset(dst=t, value=value)
    else:
        # HBM initialised by the runtime: no instruction (predict-only: no values)
        if _RUNS[-1].predict_only:
            t.mark_written()
        else:
            t.write(np.full(t.shape, value))
    return t


def zeros(shape, dtype, buffer=sbuf, name="") -> NkiTensor:
    return _filled(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer=sbuf, name="") -> NkiTensor:
    return _filled(shape, 1, dtype, buffer, name)


def full(shape, fill_value, dtype, buffer=sbuf, name="") -> NkiTensor:
    return _filled(shape, fill_value, dtype, buffer, name)


def rand(shape, dtype, buffer=sbuf, name="") -> NkiTensor:
    """A new tensor of uniform values in [0, 1): the recipe of nisa.rng's docstring, 16 random
    bits (the Vector Engine's generator, Note [Engine random number generators] in
    isa_random.py) scaled by 2^-16, in SBUF, then stored if the tensor is elsewhere."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    bits = ndarray(shape, uint16, sbuf)
    _isa.rng(dst=bits)
    t = ndarray(shape, dtype, buffer if buffer is psum else sbuf, name)
    _isa.tensor_scalar(dst=t, data=bits, op0=_OPERATORS["multiply"], operand0=2.0 ** -16)
    if buffer in (sbuf, psum):
        return t
    out = ndarray(shape, dtype, buffer, name)
    _isa.dma_copy(dst=out, src=t)
    return out


def random_seed(seed) -> None:
    """Seeds the generator nl.rand draws from (nisa.set_rng_seed)."""
    _isa.set_rng_seed(src_seeds=seed)


def zeros_like(x, dtype=None, buffer=None, name="") -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or sbuf, name)


def empty_like(x, dtype=None, buffer=None, name="") -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def ds(start, size) -> _DynamicSlice:
    return _DynamicSlice(start, size)


# -- loops (all unrolled: the simulator runs the Python loop) ------------------------------------

def _scopes():
    if not _RUNS:
        return None
    run = _RUNS[-1]
    return run.scopes, run.release


def affine_range(start, stop=None, step=1):
    """Each iteration is a scope: the on-chip tiles it allocates are released when it ends,
    unless something outliving it holds them (Note [Tile lifetimes] in scopes.py)."""
    r = range(start, stop, step) if stop is not None else range(start)
    return _scoped(r, _scopes)


sequential_range = static_range = affine_range


def _range_scope(iterable):
    """What a kernel's `for ... in range(...)` iterates through (range_loops.py)."""
    return _scoped(iterable, _scopes)


from torch_neuron.nki.registers import dynamic_range, fori_loop, while_loop  # noqa: E402,F401


# -- logical NeuronCores -------------------------------------------------------------------------

def program_id(axis=0) -> int:
    if axis != 0:
        raise _ShapeError(f"program_id(axis={axis}): the launch grid has one axis (the LNC "
                          f"degree, kernel[n])")
    return _current_run("nl.program_id").program_id


def num_programs(axes=0) -> int:
    return _current_run("nl.num_programs").lnc


def program_ndim() -> int:
    return 1 if _current_run("nl.program_ndim").lnc > 1 else 0


def device_print(print_prefix, tensor):
    tensor._storage.sync()   # Note [Dtype views]
    print(print_prefix, tensor._data)


# -- tile-level functions ------------------------------------------------------------------------

def _result(like: NkiTensor, dtype, shape=None) -> NkiTensor:
    return ndarray(shape or like.shape, dtype or like.dtype, buffer=sbuf)


def load(src, dtype=None) -> NkiTensor:
    dst = _result(src, dtype)
    _isa.dma_copy(dst=dst, src=src)
    return dst


def store(dst, value):
    _isa.dma_copy(dst=dst, src=value)


def load_transpose2d(src, dtype=None) -> NkiTensor:
    """src [P, F] in HBM loaded transposed into a new [F, P] SBUF tile: one nisa.dma_transpose
    (the instruction the DMA transposes with), then a cast if `dtype` differs."""
    if src.ndim != 2:
        raise _ShapeError(f"nl.load_transpose2d: src {src.shape} must be 2-d")
    staged = ndarray((src.shape[1], src.shape[0]), src.dtype, buffer=sbuf)
    _isa.dma_transpose(dst=staged, src=src)
    if dtype is None or dtype == src.dtype:
        return staged
    out = ndarray(staged.shape, dtype, buffer=sbuf)
    _isa.tensor_copy(dst=out, src=staged)
    return out


def gather_flattened(data, indices, axis=0, dtype=None) -> NkiTensor:
    """out[p, j] = data[p] (free dims flattened) at indices[p, j]: nisa.nc_n_gather, the
    instruction that gathers within partitions, then a cast if `dtype` differs."""
    if axis not in (0, -data.ndim):
        raise _UnsupportedError(f"nl.gather_flattened(axis={axis}): only axis=0 (indices into "
                                f"each partition's flattened free dims) is implemented")
    out = ndarray(indices.shape, data.dtype, buffer=sbuf)
    _isa.nc_n_gather(dst=out, data=data, indices=indices)
    if dtype is None or dtype == data.dtype:
        return out
    cast = ndarray(indices.shape, dtype, buffer=sbuf)
    _isa.tensor_copy(dst=cast, src=out)
    return cast


class no_reorder:
    """`with nl.no_reorder():` the instructions issued inside run in program order: each waits
    for the one before it (a depends_on chain, handles.py)."""

    def __enter__(self):
        self._run = _current_run("nl.no_reorder")
        self._first = len(self._run.records)
        # A dynamic loop may not start inside (registers.py): "This is NOT supported and will
        # error" (nki/deep-dives/nki-dynamic-loops.rst, no_reorder around dynamic_range).
        self._run.no_reorder_depth = getattr(self._run, "no_reorder_depth", 0) + 1
        return self

    def __exit__(self, *exc):
        self._run.no_reorder_depth -= 1
        if exc[0] is None:
            run = self._run
            for i in range(self._first + 1, len(run.records)):
                _NkiInstruction(run, [i]).depends_on(_NkiInstruction(run, [i - 1]))
        return False


def _column(t):
    return isinstance(t, NkiTensor) and t.free_size == 1


def _binary_call(op: _Operator):
    def call(x, y, dtype=None):
        xt, yt = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
        if xt and yt and x.shape == y.shape:
            out = _result(x, dtype)
            _isa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
        elif xt and (not yt or (_column(y) and y.shape[0] == x.shape[0])):
            out = _result(x, dtype)
            _isa.tensor_scalar(dst=out, data=x, op0=op, operand0=y)
        elif yt and (not xt or (_column(x) and x.shape[0] == y.shape[0])):
            out = _result(y, dtype)
            _isa.tensor_scalar(dst=out, data=y, op0=op, operand0=x, reverse0=True)
        else:
            raise _ShapeError(f"nl.{op.name}: shapes {getattr(x, 'shape', x)} and "
                              f"{getattr(y, 'shape', y)} must match, or one must be a scalar "
                              f"or a [P, 1] column")
        return out
    return call


def _unary_call(op: _Operator):
    def call(x, dtype=None):
        out = _result(x, dtype)
        if op.activation:
            _isa.activation(dst=out, op=op, data=x)
        elif op.name == "negative":
            _isa.tensor_scalar(dst=out, data=x, op0=_OPERATORS["multiply"], operand0=-1.0)
        elif op.alu == "bitvec":
            _isa.tensor_scalar(dst=out, data=x, op0=op, operand0=None)
        else:
            _BUILT[op.name](out, x)
        return out
    return call


# nl functions no engine has as one instruction (neither an ALU operator nor an activation
# function), built from ones that are: an assumption, the stub gives only their NumPy
# meaning. cos(x) = sin(x + pi/2), one activation with a bias; tan = sin / cos; floor(x) =
# x - mod(x, 1) and trunc(x) = x - fmod(x, 1), each one scalar_tensor_tensor; ceil(x) =
# x + mod(-x, 1). All exact in float32 but for sin's own rounding.
def _cos(out, x):
    _isa.activation(dst=out, op=_OPERATORS["sin"], data=x, bias=float(np.pi / 2))


def _tan(out, x):
    s, c = ndarray(out.shape, float32, sbuf), ndarray(out.shape, float32, sbuf)
    _isa.activation(dst=s, op=_OPERATORS["sin"], data=x)
    _cos(c, x)
    _isa.tensor_tensor(dst=out, data1=s, data2=c, op=_OPERATORS["divide"])


def _minus_fraction(mod):
    def build(out, x):
        _isa.scalar_tensor_tensor(dst=out, data=x, op0=_OPERATORS[mod], operand0=1.0,
                                  op1=_OPERATORS["subtract"], operand1=x, reverse1=True)
    return build


def _ceil(out, x):
    m = ndarray(out.shape, float32, sbuf)
    _isa.tensor_scalar(dst=m, data=x, op0=_OPERATORS["multiply"], operand0=-1.0,
                       op1=_OPERATORS["mod"], operand1=1.0)
    _isa.tensor_tensor(dst=out, data1=x, data2=m, op=_OPERATORS["add"])


_BUILT = {"cos": _cos, "tan": _tan, "floor": _minus_fraction("mod"),
          "trunc": _minus_fraction("fmod"), "ceil": _ceil}


for _name, _op in _OPERATORS.items():
    if _op.fn is not None:
        _op._call = _binary_call(_op) if _op.arity == 2 else _unary_call(_op)
    globals()[_name] = _op
del _name, _op


def _reduction(name: str, alu: str):
    def call(x, axis, dtype=None, keepdims=False):
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(sorted(int(a) % x.ndim for a in axes))
        shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keepdims else \
            tuple(n for i, n in enumerate(x.shape) if i not in axes)
        if len(shape) < 2:
            shape = shape + (1,) * (2 - len(shape))
        out = _result(x, dtype, shape)
        _isa.tensor_reduce(dst=out, op=_OPERATORS[alu], data=x, axis=axes, keepdims=keepdims)
        if name == "mean":
            n = int(np.prod([x.shape[a] for a in axes]))
            _isa.tensor_scalar(dst=out, data=out, op0=_OPERATORS["multiply"],
                               operand0=1.0 / n)
        return out
    op = _Operator(name, None, alu=None, reducible=True)
    op._call = call
    return op


sum = _reduction("sum", "add")
max = _reduction("max", "maximum")
min = _reduction("min", "minimum")
mean = _reduction("mean", "add")
prod = _reduction("prod", "multiply")


def _copy(x, dtype=None) -> NkiTensor:
    out = _result(x, dtype)
    _isa.tensor_copy(dst=out, src=x)
    return out


# nl.copy is both the identity activation (nisa.activation(op=nl.copy)) and a function that
# copies a tile into a new SBUF tile (tensor_copy).
copy = _OPERATORS["copy"]
copy._call = _copy


def transpose(x, dtype=None) -> NkiTensor:
    """Tensor Engine transpose of an SBUF tile into PSUM, then copied back to SBUF."""
    P, F = x.shape[0], x.free_size
    staged = ndarray((F, P), x.dtype, buffer=psum)
    _isa.nc_transpose(dst=staged, data=x)
    out = ndarray((F, P), dtype or x.dtype, buffer=sbuf)
    _isa.tensor_copy(dst=out, src=staged)
    return out


def matmul(x, y, transpose_x=False) -> NkiTensor:
    """x @ y (or x.T @ y) on the Tensor Engine; the result is an fp32 SBUF tile."""
    stationary = x if transpose_x else transpose(x)
    acc = ndarray((stationary.free_size, y.free_size), float32, buffer=psum)
    _isa.nc_matmul(dst=acc, stationary=stationary, moving=y)
    out = ndarray(acc.shape, float32, buffer=sbuf)
    _isa.tensor_copy(dst=out, src=acc)
    return out


def broadcast_to(x, shape, dtype=None) -> NkiTensor:
    """numpy-style broadcast of a tile into a new SBUF tile (AWS's example of it stores the
    result straight to HBM: aws-neuron-sdk nki/test/test_nki_nl_broadcast.py). Free dims: a
    VectorE copy of a broadcast view. The partition dim (1 -> P): TensorE's ones-matmul into
    PSUM (_partition_broadcast), copied out to SBUF bank by bank."""
    shape, src = _broadcast_source(x, shape)
    out_dtype = dtype or x.dtype
    if shape == x.shape and out_dtype == x.dtype:
        return x
    out = ndarray(shape, out_dtype, buffer=sbuf)
    if x.shape[0] == shape[0]:
        _isa.tensor_copy(dst=out, src=src)
        return out
    row = _moving_row(src)
    bank = tile_size.psum_bank_fmax
    flat_out = out.reshape((shape[0], row.free_size))
    for start in range(0, row.free_size, bank):
        n = builtins.min(bank, row.free_size - start)
        acc = ndarray((shape[0], n), float32, buffer=psum)
        _partition_broadcast(row[:, start:start + n], acc)
        _isa.tensor_copy(dst=flat_out[:, start:start + n], src=acc)
    return out


def _tile_broadcast_to(x, shape) -> NkiTensor:
    """`tile.broadcast_to(shape)`, the tile method of the NKI of the Neuron 2.20 era ("Return a
    new view of the tensor, no copy will occur": aws-neuron-sdk@ce3668bf, Neuron 2.20.0,
    general/nki/api/nki/__init__.py). Free dims: a view. Across partitions only TensorE can
    broadcast, and the architecture guide says NKI invokes its ones-matmul when this method is
    called; so the result is that matmul's float32 PSUM tile, read in place by the instruction
    that uses it (a tensor_tensor with one PSUM input costs N, not 2N: ISA stub). To store it
    or feed TensorE, copy it to SBUF first (nl.copy): DMA and TensorE do not read PSUM."""
    shape, src = _broadcast_source(x, shape)
    if x.shape[0] == shape[0]:
        return src
    row = _moving_row(src)
    acc = ndarray(shape, float32, buffer=psum)
    flat = acc.reshape((shape[0], row.free_size))
    bank = tile_size.psum_bank_fmax
    for start in range(0, row.free_size, bank):
        n = builtins.min(bank, row.free_size - start)
        _partition_broadcast(row[:, start:start + n], flat[:, start:start + n])
    return acc


def _broadcast_source(x, shape):
    """The target shape, checked, and x broadcast along its free dims (a view)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) != x.ndim or any(a != b and a != 1 for a, b in zip(x.shape, shape)):
        raise _ShapeError(f"broadcast_to: {x.shape} cannot broadcast to {shape} (same rank; "
                          f"each dim equal or 1)")
    src = x
    for dim in range(1, x.ndim):
        if x.shape[dim] != shape[dim]:
            src = src.broadcast(dim, shape[dim])
    return shape, src


def _moving_row(src) -> NkiTensor:
    """src, a one-partition tile, as a [1, F] SBUF row TensorE can take as its moving operand:
    src itself when it is one, else a float32 copy (a free-dim broadcast, PSUM, other dtypes)."""
    if src.buffer is not sbuf or src.dtype not in _isa.MATMUL_DTYPES or not src.is_contiguous():
        copy = ndarray(src.shape, float32, buffer=sbuf)
        _isa.tensor_copy(dst=copy, src=src)
        src = copy
    return src.reshape((1, src.free_size))


def _partition_broadcast(row, dst) -> None:
    """dst [P, n] (PSUM) = the row [1, n] on every partition: one nc_matmul of a [1, P] ones
    stationary by the row as moving, the matmul the architecture guide's "Partition
    Broadcast" says NKI invokes (aws-neuron-sdk nki/guides/architecture/
    trainium_inferentia2_arch.rst)."""
    ones = _partition_ones(dst.shape[0], float32 if row.dtype in (float32, tfloat32)
                           else row.dtype)
    _isa.nc_matmul(dst=dst, stationary=ones, moving=row)


_tensor_module.TILE_BROADCAST_TO = _tile_broadcast_to


def _partition_ones(partitions: int, dtype) -> NkiTensor:
    """The [1, partitions] ones tile of `dtype` a partition broadcast multiplies by, a
    constant of the kernel (the guide's "compile-time constant matrix"): set once per program
    and kept to its end (Note [Tile lifetimes], scopes.py), outside the kernel's SBUF."""
    run = _current_run("nl.broadcast_to")
    ones = run.constants.get(("ones", partitions, dtype))
    if ones is None:
        ones = _allocate((1, partitions), dtype, sbuf, "ones", constant=True)
        _isa.memset(dst=ones, value=1.0)
        run.constants[("ones", partitions, dtype)] = ones
    return ones


def shared_identity_matrix(n, dtype=uint8, dst=None) -> NkiTensor:
    """The n x n identity in SBUF, a constant of the kernel: "the compiler will reuse all the
    identity matrices of the same dtype" (the release's stub), so one per (n, dtype) per
    program, loaded with the program (no instruction) and outside the kernel's SBUF, as the
    partition-broadcast ones are. With `dst`, copied into it (a tensor_copy)."""
    run = _current_run("nl.shared_identity_matrix")
    key = ("identity", int(n), dtype)
    identity = run.constants.get(key)
    if identity is None:
        identity = _allocate((int(n), int(n)), dtype, sbuf, "identity", constant=True)
        _load_constant(identity, np.eye(int(n)))
        run.constants[key] = identity
    if dst is not None:
        _isa.tensor_copy(dst=dst, src=identity)
        return dst
    return identity


def shared_constant(constant) -> NkiTensor:
    """A shared_hbm tensor holding `constant` (a NumPy array, or the path of a .npy file),
    "embedded in the compiled binary and loaded to HBM at model load time" (the release's
    stub): no instruction."""
    array = np.load(constant) if isinstance(constant, (str, bytes)) else np.asarray(constant)
    t = _allocate(array.shape, array.dtype, shared_hbm, "constant")
    _load_constant(t, array)
    return t


def _load_constant(t: NkiTensor, values) -> None:
    if _RUNS[-1].predict_only:
        t.mark_written()
    else:
        t.write(values)


# -- composite functions (the stub marks them experimental) --------------------------------------
# Which instructions the compiler emits for them is not documented; these are the instruction
# sequences the NKI tutorials describe for the same math (an assumption).

def _free_axes(x, axis, what):
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(a) % x.ndim for a in axes))
    if axes != tuple(range(1, x.ndim)):
        raise _UnsupportedError(f"nl.{what}(axis={axis}) on a {x.ndim}-d tile: only all free "
                                f"dims at once (axis={tuple(range(1, x.ndim))}) is implemented")


def softmax(x, axis=-1, dtype=None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) over the free dims: the negated row maximum
    (tensor_reduce), exp and row sums in one activation_reduce, reciprocal, scale."""
    _free_axes(x, axis, "softmax")
    P = x.shape[0]
    neg_max = ndarray((P, 1), float32, buffer=sbuf)
    _isa.tensor_reduce(dst=neg_max, op=_OPERATORS["maximum"], data=x,
                       axis=tuple(range(1, x.ndim)), negate=True)
    e = ndarray(x.shape, float32, buffer=sbuf)
    total = ndarray((P, 1), float32, buffer=sbuf)
    _isa.activation_reduce(dst=e, op=_OPERATORS["exp"], data=x, bias=neg_max,
                           reduce_op=_OPERATORS["add"], reduce_res=total)
    inv = ndarray((P, 1), float32, buffer=sbuf)
    _isa.reciprocal(dst=inv, data=total)
    out = _result(x, dtype)
    _isa.tensor_scalar(dst=out, data=e, op0=_OPERATORS["multiply"], operand0=inv)
    return out


def rms_norm(x, w, axis, n, epsilon=1e-06, dtype=None, compute_dtype=None) -> NkiTensor:
    """x / sqrt(sum(x^2) / n + epsilon) * w: squares summed in one activation_reduce, the mean
    plus epsilon through rsqrt, the rows scaled, times w (a tile of x's shape)."""
    _free_axes(x, axis, "rms_norm")
    if not isinstance(w, NkiTensor) or w.shape != x.shape:
        raise _ShapeError(f"nl.rms_norm: w must be a tile of x's shape {x.shape}, got "
                          f"{getattr(w, 'shape', w)}")
    P = x.shape[0]
    work = compute_dtype or float32
    squares = ndarray(x.shape, work, buffer=sbuf)
    total = ndarray((P, 1), float32, buffer=sbuf)
    _isa.activation_reduce(dst=squares, op=_OPERATORS["square"], data=x,
                           reduce_op=_OPERATORS["add"], reduce_res=total)
    _isa.tensor_scalar(dst=total, data=total, op0=_OPERATORS["multiply"], operand0=1.0 / n,
                       op1=_OPERATORS["add"], operand1=epsilon)
    factor = ndarray((P, 1), float32, buffer=sbuf)
    _isa.activation(dst=factor, op=_OPERATORS["rsqrt"], data=total)
    scaled = ndarray(x.shape, work, buffer=sbuf)
    _isa.tensor_scalar(dst=scaled, data=x, op0=_OPERATORS["multiply"], operand0=factor)
    out = _result(x, dtype)
    _isa.tensor_tensor(dst=out, data1=scaled, data2=w, op=_OPERATORS["multiply"])
    return out


def where(condition, x, y, dtype=None) -> NkiTensor:
    """x where condition is nonzero, else y (tiles of condition's shape, or numbers): y copied
    (or set), condition turned into a uint8 predicate, x copied where it holds."""
    if not isinstance(condition, NkiTensor):
        raise _ShapeError("nl.where: condition must be a tile")
    like = x if isinstance(x, NkiTensor) else y if isinstance(y, NkiTensor) else condition
    out = ndarray(condition.shape, dtype or like.dtype, buffer=sbuf)
    if isinstance(y, NkiTensor):
        _isa.tensor_copy(dst=out, src=y)
    else:
        _isa.memset(dst=out, value=y)
    predicate = ndarray(condition.shape, uint8, buffer=sbuf)
    _isa.tensor_scalar(dst=predicate, data=condition, op0=_OPERATORS["not_equal"],
                       operand0=0.0)
    if isinstance(x, NkiTensor) and x.dtype != out.dtype:
        staged = ndarray(x.shape, out.dtype, buffer=sbuf)
        _isa.tensor_copy(dst=staged, src=x)
        x = staged
    _isa.tensor_copy_predicated(dst=out, src=x, predicate=predicate)
    return out


def var(x, axis, dtype=None, keepdims=False) -> NkiTensor:
    """Population variance over the last free dims, kept as [P, 1, ...] (the stub: "result
    always has keepdims=True shape"): the mean, the centred values squared on the Scalar
    Engine, their mean."""
    m = mean(x, axis, dtype=float32, keepdims=True)
    centred = ndarray(x.shape, float32, buffer=sbuf)
    _isa.tensor_scalar(dst=centred, data=x, op0=_OPERATORS["subtract"], operand0=m)
    squares = ndarray(x.shape, float32, buffer=sbuf)
    _isa.activation(dst=squares, op=_OPERATORS["square"], data=centred)
    return mean(squares, axis, dtype=dtype or x.dtype, keepdims=True)


def _all(x, axis, dtype=None) -> NkiTensor:
    """1 where every element along the axes is nonzero, else 0 (a logical_and reduction)."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(sorted(int(a) % x.ndim for a in axes))
    shape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    shape = shape + (1,) * (2 - len(shape)) if len(shape) < 2 else shape
    out = _result(x, dtype, shape)
    _isa.tensor_reduce(dst=out, op=_OPERATORS["logical_and"], data=x, axis=axes)
    return out


globals()["all"] = _all  # nl.all, without hiding the builtin from this module's code


def logical_not(x, dtype=None) -> NkiTensor:
    """1 - x for 0/1 tiles: the release implements it as XOR with 1 (its stub's docstring)."""
    out = _result(x, dtype)
    _isa.tensor_scalar(dst=out, data=x, op0=_OPERATORS["logical_xor"], operand0=1.0)
    return out


def dropout(x, rate, dtype=None) -> NkiTensor:
    """x with elements zeroed at probability `rate` (nisa.dropout into a new tile)."""
    out = _result(x, dtype)
    if out.dtype != x.dtype:
        staged = _result(x, None)
        _isa.dropout(dst=staged, data=x, prob=rate)
        _isa.tensor_copy(dst=out, src=staged)
        return out
    _isa.dropout(dst=out, data=x, prob=rate)
    return out


def expand_dims(x, axis) -> NkiTensor:
    """A view of x with a new dim of size 1 at `axis` (not the partition dim)."""
    return x.expand_dim(int(axis) % (x.ndim + 1))
