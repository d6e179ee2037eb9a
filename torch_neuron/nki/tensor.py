"""NKI tensors on the simulated NeuronCore: storage, views, allocation and the kernel run.

An `NkiTensor` is a view (NumPy basic indexing) of a `Storage`: one allocation in HBM, SBUF or
PSUM with its values, a mask of the elements ever written, a buffer id and, on chip, a
per-partition byte address from the run's allocator. Views share storage, as AWS's NkiTensor
views do (aws-neuron-sdk `nki/api/nki/language/__init__.py`, class NkiTensor).
"""

from __future__ import annotations

import enum
import math
import weakref
from typing import Optional

import numpy as np

from torch_neuron.nki import dtypes
from torch_neuron.nki.errors import (CapacityError, NkiValidationError, OutOfBoundsError,
                                     PartitionLimitError, ShapeError, UnsupportedError)
from torch_neuron.nki.records import Region
from torch_neuron.nki.scopes import LoopScopes
from torch_neuron.nki.virtual_register import VirtualRegister


class MemoryRegion(enum.Enum):
    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"

    @property
    def on_chip(self) -> bool:
        return self in (MemoryRegion.sbuf, MemoryRegion.psum)

    @property
    def space(self) -> str:
        """Name used in records and errors ("hbm" for private HBM)."""
        return "hbm" if self is MemoryRegion.private_hbm else self.value


def resolve_buffer(buffer) -> MemoryRegion:
    if isinstance(buffer, MemoryRegion):
        return buffer
    aliases = {"hbm": "private_hbm"}
    try:
        return MemoryRegion(aliases.get(buffer, buffer))
    except ValueError:
        raise NkiValidationError(f"unknown buffer {buffer!r}: use nl.sbuf, nl.psum, nl.hbm or "
                                 f"nl.shared_hbm") from None


# -- the kernel run ------------------------------------------------------------------------------

class _Allocator:
    """Next-fit allocator of one on-chip memory's per-partition address space.

    Every allocation spans all partitions from 0 (an assumption: NKI's allocator places tiles;
    its policy is not documented), so its bytes per partition are prod(shape[1:]) * itemsize.
    A tile goes in the first free gap at or after the end of the last allocation, wrapping
    around to address 0 when none fits before the end: like NKI's RING allocation mode
    (`nki.compiler.AllocationMode.RING`, "give each tile a fresh address, and reuse freed
    memory only after the allocation wraps around, so a DMA into a new tile seldom waits for
    compute that reads an earlier tile": https://awsdocs-neuron.readthedocs-hosted.com/en/
    latest/nki/api/generated/nki.compiler.AllocationMode.html; that neuronx-cc's default
    allocator behaves so is an assumption). Any gap that fits is found, so capacity is as for
    first-fit. PSUM allocations never straddle a bank boundary when they fit in one bank, and
    start at a bank boundary when they do not (assumption: matmul output must stay within a
    bank, see `nc_matmul`). Tiles end with their scope (Note [Tile lifetimes], scopes.py)."""

    def __init__(self, space: str, capacity: int, bank: int = 0):
        self.space, self.capacity, self.bank = space, capacity, bank
        self.live: dict[int, tuple[int, int]] = {}  # buffer id -> (start, end)
        self.cursor = 0
        self.constant_bytes = 0   # per partition, past the capacity (place_constant)
        self.in_use = 0   # bytes per partition of the live tiles
        self.peak = 0     # the most ever in use at once

    def used(self) -> int:
        return self.in_use

    def _search(self, start: int, nbytes: int, intervals) -> Optional[int]:
        for lo, hi in intervals:
            if hi <= start:
                continue
            start = self._fit(start, nbytes)
            if start + nbytes <= lo:
                return start
            start = max(start, hi)
        start = self._fit(start, nbytes)
        return start if start + nbytes <= self.capacity else None

    def place_constant(self, nbytes: int) -> int:
        """An address for a constant of the kernel (language._partition_ones): past the end
        of the kernel's bytes, in the compiler's constants (assumption: the compiler places
        such constants, as it shares nl.shared_identity_matrix's, outside the kernel's tiles;
        they are hundreds of bytes), so they take nothing from the kernel's capacity."""
        start = self.capacity + self.constant_bytes
        self.constant_bytes += nbytes
        return start

    def allocate(self, buffer_id: int, nbytes: int, what: str) -> int:
        intervals = sorted(self.live.values())
        start = self._search(self.cursor, nbytes, intervals)
        if start is None:
            start = self._search(0, nbytes, intervals)
        if start is None:
            raise CapacityError(
                f"{what} needs {nbytes} bytes per partition but {self.space.upper()} has "
                f"{self.capacity - self.used()} of {self.capacity} bytes per partition free "
                f"({len(self.live)} live tiles, {self.used()} bytes); tiles live until the "
                f"end of the loop iteration (or kernel) that allocated them: allocate inside "
                f"the loop, or use smaller tiles")
        self.live[buffer_id] = (start, start + nbytes)
        self.cursor = start + nbytes
        self.in_use += nbytes
        self.peak = max(self.peak, self.in_use)
        return start

    def place(self, buffer_id: int, start: int, nbytes: int, what: str) -> int:
        """A tile the kernel placed itself (nl.ndarray(address=...)): it takes the bytes it
        names, which later automatic allocations avoid; manual tiles may overlap each other
        (reusing an address is the kernel's own allocation policy)."""
        if start < 0 or start + nbytes > self.capacity:
            raise CapacityError(f"{what} placed at byte {start} needs {nbytes} bytes per "
                                f"partition, past the {self.capacity} bytes of a "
                                f"{self.space.upper()} partition")
        self.live[buffer_id] = (start, start + nbytes)
        self.in_use += nbytes
        self.peak = max(self.peak, self.in_use)
        return start

    def _fit(self, start: int, nbytes: int = 1) -> int:
        if not self.bank:
            return start
        if nbytes > self.bank:
            return -(-start // self.bank) * self.bank
        if start // self.bank != (start + nbytes - 1) // self.bank:
            return (start // self.bank + 1) * self.bank
        return start

    def free(self, buffer_id: int) -> None:
        span = self.live.pop(buffer_id, None)
        if span is not None:
            self.in_use -= span[1] - span[0]


class KernelRun:
    """One execution of a kernel: its target, its records and its memories."""

    def __init__(self, target, lnc: int = 1, uninitialized: str = "error", probe: bool = False,
                 dies: Optional[dict] = None):
        self.target, self.lnc, self.uninitialized = target, lnc, uninitialized
        self.records: list = []
        self.program_id = 0
        self.result = None
        self.predict_only = False   # inputs are zeros standing in (kernel.py)
        self.timing = None          # trnsim's schedule, when charged to a neuron stream
        self._next_buffer = 0
        self._dma_issued = 0
        self._shared: list = []          # shared_hbm storages in allocation order (LNC > 1)
        self._shared_seen = 0
        self.entry_frame = None     # Kernel.run's frame (scopes.py looks no further up)
        # Tensors the running dynamic loops' bounds were loaded from: every instruction in such
        # a loop reads them (registers.py).
        self.control_sources: list = []
        # Note [Tiles freed at their last use]: `probe`, a run with room for every tile that
        # records each allocation's last use; `dies`, such a record, to free tiles there.
        self.probe, self.dies = probe, dies
        self.last_use: dict[int, int] = {}
        self.instructions = 0        # instructions begun (_Instruction), a clock for the above
        self._allocations = 0
        self._dying: dict = {}       # buffer id -> (last use, weakref to its storage)
        self.start_program(0)

    def start_program(self, program_id: int) -> None:
        t = self.target
        self.program_id = program_id
        self._shared_seen = 0
        self.constants: dict = {}   # the program's constant tiles (language._partition_ones)
        room = _PROBE_ROOM if self.probe else 1
        self.allocators = {
            "sbuf": _Allocator("sbuf", t.sbuf_partition_bytes * room),
            "psum": _Allocator("psum", t.psum_partition_bytes * room, bank=t.psum_bank_bytes),
        }
        # Note [Tile lifetimes] (scopes.py): the program's body is the outermost scope.
        self.scopes = LoopScopes(self.entry_frame)
        self.scopes.open_body()

    def end_program(self) -> None:
        """The kernel body returned: every on-chip tile of this program is released."""
        self.scopes.close_body(self.release)

    def release(self, storage, where: str, revivable: bool = False) -> None:
        alloc = self.allocators[storage.buffer.value]
        storage.released = where
        storage.revivable = alloc.live.get(storage.id) if revivable else None
        alloc.free(storage.id)

    def revive(self, storage) -> bool:
        """Takes a revivable released tile's bytes back if no live tile occupies them (Note
        [Tile lifetimes], scopes.py); whether it did."""
        span = storage.revivable
        alloc = self.allocators[storage.buffer.value]
        if span is None or any(lo < span[1] and span[0] < hi for lo, hi in alloc.live.values()):
            return False
        alloc.live[storage.id] = span
        alloc.in_use += span[1] - span[0]
        alloc.peak = max(alloc.peak, alloc.in_use)
        storage.released = storage.revivable = None
        self.scopes.adopt(storage)
        return True

    # -- Note [Tiles freed at their last use] --
    def allocation_number(self) -> int:
        self._allocations += 1
        return self._allocations

    def used(self, storage) -> None:
        """An instruction uses `storage` (a root): the probe notes it as its last use so far."""
        number = getattr(storage, "allocation", None)
        if self.probe and number is not None:
            self.last_use[number] = self.instructions

    def free_dead(self, space: str) -> None:
        """Frees the tiles of `space` whose last use is behind (a run with `dies`)."""
        for buffer_id, (last, ref) in list(self._dying.items()):
            storage = ref()
            if storage is None or storage.released is not None:
                del self._dying[buffer_id]
            elif last <= self.instructions and storage.buffer.value == space:
                del self._dying[buffer_id]
                self.release(storage, "its last use (freed there, as the compiler frees it)")

    def track(self, storage) -> None:
        last = self.dies.get(storage.allocation)
        if last is not None:
            self._dying[storage.id] = (last, weakref.ref(storage))

    def new_buffer_id(self) -> int:
        self._next_buffer += 1
        return self._next_buffer

    def next_dma_queue(self) -> int:
        q = self._dma_issued % self.target.dma_queues
        self._dma_issued += 1
        return q


_RUNS: list[KernelRun] = []
# How many times the on-chip memories a probe run gives room for (Note [Tiles freed at their
# last use]): enough for any kernel whose tiles the compiler could fit.
_PROBE_ROOM = 1024

# Note [Tiles freed at their last use]
# The compiler allocates a tile for the span of the kernel in which it is used (Note [Tile
# lifetimes], scopes.py); the simulator, running the kernel eagerly, cannot see a tile's last
# use when it happens, so it frees a tile when its scope ends or Python drops it. A kernel
# whose dead tiles are still referenced (a PSUM tile kept in a variable until the iteration
# ends) can then run out of SBUF or PSUM where the compiler would have reused them: AWS's
# bwmm_shard_on_block asks for 8 PSUM banks while earlier tiles it no longer reads are still
# bound. So a CapacityError is not final: the kernel runs again with room for every tile (a
# probe), which records for each allocation (numbered in order: a kernel's Python control flow
# allocates the same tiles in the same order each run) the last instruction that used it; then
# it runs a third time, freeing each tile once that instruction is behind. A tile used after
# its recorded last use (a kernel whose runs differ) raises ReleasedTileError. Kernels that fit
# run once, as before.

# `t[key] = value`: nki.isa installs the instructions that do it (isa imports this module).
ASSIGN = None
# `t.broadcast_to(shape)`: nki.language installs it (language._tile_broadcast_to).
TILE_BROADCAST_TO = None


def current_run(what: str = "this call") -> KernelRun:
    if not _RUNS:
        raise NkiValidationError(f"{what} is only valid inside a kernel: call the kernel "
                                 f"(decorated with @nki.jit) or nki.simulate(kernel)(...)")
    return _RUNS[-1]


def push_run(run: KernelRun) -> None:
    _RUNS.append(run)


def pop_run() -> None:
    _RUNS.pop()


# -- storage and views ---------------------------------------------------------------------------

class Storage:
    def __init__(self, shape, dt: dtypes.DType, buffer: MemoryRegion, name: str,
                 data: Optional[np.ndarray] = None, constant: bool = False,
                 placement: Optional[tuple[int, int]] = None):
        self.dt, self.buffer, self.name = dt, buffer, name
        self.shape = tuple(shape)
        run = current_run("allocating a tensor")
        if data is None:
            if run.predict_only:
                # No instruction computes (Note [Predict-only instructions]): the values are
                # never read, so the pages are never touched.
                data = np.empty(self.shape, dtype=dt.storage)
            else:
                # AWS's simulator fills new tensors with NaN (floats) or 4 (integers)
                # (nki/guides/nki_simulator.rst, "Uninitialized Memory Detection"); so do we,
                # and reads of never-written elements are also flagged
                # (KernelRun.uninitialized).
                data = np.full(self.shape, np.nan if dt.is_float else 4, dtype=dt.storage)
            self.written = np.zeros(self.shape, dtype=bool)
        else:
            self.written = np.ones(self.shape, dtype=bool)
        self.data = data
        # Plain attributes for the per-instruction hot paths (item 6 of issue 27).
        self.on_chip, self.space = buffer.on_chip, buffer.space
        self.base_pointer = data.__array_interface__["data"][0]
        self.per_partition = math.prod(self.shape[1:])
        self.modified = False
        self.released: Optional[str] = None   # where its scope ended (Note [Tile lifetimes])
        # The bytes it held when its loop's last iteration released it (KernelRun.revive).
        self.revivable: Optional[tuple[int, int]] = None
        # PSUM elements whose last write was a matmul (None until a matmul writes): what a
        # later matmul may accumulate onto (see nc_matmul, "Accumulation mode").
        self.matmul_written: Optional[np.ndarray] = None
        self.id = run.new_buffer_id()
        self.address = 0
        self.partition_offset = 0   # the first partition it occupies (manual placement)
        # Note [Dtype views]: its views as other dtypes (by dtype name) and which members hold
        # the buffer's current bytes; None until the first view. (No reference to itself: a
        # cycle would keep a dropped tile's buffer allocated until the garbage collector ran.)
        self.aliases: Optional[dict] = None
        self.current: Optional[set] = None
        if buffer.on_chip:
            alloc = run.allocators[buffer.value]
            per_partition = math.prod(self.shape[1:]) * dt.itemsize
            what = f"{name or 'tensor'} {self.shape} {dt.name}"
            if placement is not None:
                self.partition_offset, start = placement
                self.address = alloc.place(self.id, start, per_partition, what)
                weakref.finalize(self, alloc.free, self.id)
                run.scopes.adopt(self)
            elif constant:
                self.address = alloc.place_constant(per_partition)
                run.scopes.keep_to_end(self)
            else:
                self.allocation = run.allocation_number()
                if run.dies is not None:
                    run.free_dead(buffer.value)
                self.address = alloc.allocate(self.id, per_partition, what)
                weakref.finalize(self, alloc.free, self.id)
                run.scopes.adopt(self)
                if run.dies is not None:
                    run.track(self)

    # -- Note [Dtype views] --
    @property
    def root(self) -> "Storage":
        """The storage allocated (an alias's root; else itself)."""
        return self

    def alias(self, dt: dtypes.DType) -> "Storage":
        """This buffer's bytes as dtype `dt`: the root, or an alias Storage of that dtype."""
        root = self.root
        if dt is root.dt:
            return root
        if root.aliases is None:
            root.aliases, root.current = {}, {root}
        alias = root.aliases.get(dt.name)
        if alias is None:
            alias = root.aliases[dt.name] = _Alias(root, dt)
        return alias

    def sync(self) -> None:
        """Brings this member's values up to the buffer's bytes, if another member was written
        since it last was (Note [Dtype views])."""
        root = self.root
        if root.current is None or self in root.current:
            return
        source = next(iter(root.current))
        if not current_run().predict_only:
            raw = dtypes.to_bytes(source.data, source.dt)
            self.data.reshape(-1)[...] = dtypes.from_bytes(raw, self.dt)
        byte_written = np.repeat(source.written.reshape(-1), source.dt.itemsize)
        self.written.reshape(-1)[...] = byte_written.reshape(-1, self.dt.itemsize).all(axis=1)
        root.current.add(self)

    def note_write(self) -> None:
        """An instruction wrote this member: it alone holds the buffer's current bytes."""
        root = self.root
        root.modified = True
        if root.current is not None:
            root.current = {self}


# Note [Dtype views]
# `t.view(dtype)` and `t.ap(..., dtype=)` read a tensor's bytes as another dtype ("No data is
# copied. Equivalent to numpy.ndarray.view(dtype)", the release's stub). The simulator keeps
# values, not bytes (dtypes.py: bfloat16 and float8 as float32 values), so a dtype view is a
# view of an alias: a Storage of the other dtype over the same buffer (the same id, address and
# partitions, so the schedule orders it as one buffer), whose values are converted from the
# bytes of the member last written (dtypes.to_bytes / from_bytes) when an instruction or the
# kernel's return touches it after another member was written (Storage.sync, from
# _Instruction.tile and NkiTensor.read). An element counts as written when all its bytes are.
# An on-chip alias is [partitions, bytes per partition / itemsize]; an HBM one is flat.
class _Alias(Storage):
    def __init__(self, root: Storage, dt: dtypes.DType):   # noqa: D107 (no allocation)
        self._root, self.dt, self.buffer, self.name = root, dt, root.buffer, root.name
        nbytes = (root.per_partition if root.on_chip else root.data.size) * root.dt.itemsize
        if nbytes % dt.itemsize:
            raise ShapeError(f"{root.name or 'the tensor'} {root.shape} {root.dt.name}: "
                             f"{nbytes} bytes {'per partition ' if root.on_chip else ''}is not "
                             f"a whole number of {dt.name} elements")
        self.shape = (root.shape[0], nbytes // dt.itemsize) if root.on_chip else \
            (nbytes // dt.itemsize,)
        self.data = np.empty(self.shape, dtype=dt.storage)
        self.written = np.zeros(self.shape, dtype=bool)
        self.on_chip, self.space = root.on_chip, root.space
        self.base_pointer = self.data.__array_interface__["data"][0]
        self.per_partition = math.prod(self.shape[1:])
        self.matmul_written = None
        self.id, self.address, self.partition_offset = root.id, root.address, \
            root.partition_offset
        self.aliases = self.current = None

    @property
    def root(self) -> Storage:
        return self._root

    @property
    def released(self):
        return self.root.released

    @property
    def modified(self):
        return self.root.modified

    @modified.setter
    def modified(self, value):
        self.root.modified = value


def _normalize_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if not shape or any(s <= 0 for s in shape):
        raise ShapeError(f"tensor shape {shape} must have at least one dimension, all positive")
    return shape


def allocate(shape, dtype, buffer, name: str = "", constant: bool = False,
             address=None) -> "NkiTensor":
    """A new tensor; `constant`: an on-chip constant of the program, kept until the kernel
    ends (Note [Tile lifetimes]) and outside the kernel's capacity (_Allocator.place_constant);
    `address`: (partition_offset, free_offset in bytes), an on-chip tile placed by the kernel."""
    shape = _normalize_shape(shape)
    dt = dtypes.resolve(dtype)
    region = resolve_buffer(buffer)
    run = current_run("nl.ndarray")
    placement = _placement(address, region, shape, run) if address is not None else None
    first = placement[0] if placement else 0
    if region.on_chip and first + shape[0] > run.target.partitions:
        raise PartitionLimitError(
            f"{region.value} tensor {name or ''}{shape}: partition dimension (dim 0) is "
            f"{shape[0]}{f' from partition {first}' if first else ''}, the maximum is "
            f"nl.tile_size.pmax = {run.target.partitions}; tile the tensor into blocks of at "
            f"most 128 rows")
    if region is MemoryRegion.shared_hbm and run.lnc > 1:
        # Every logical-core program allocates the kernel's shared outputs; the k-th shared
        # allocation of each program is the same tensor (the programs run one after the other).
        k = run._shared_seen
        run._shared_seen += 1
        if k < len(run._shared):
            storage = run._shared[k]
            if storage.shape != shape or storage.dt is not dt:
                raise ShapeError(f"shared_hbm allocation #{k} is {shape} {dt.name} in program "
                                 f"{run.program_id} but {storage.shape} {storage.dt.name} in "
                                 f"program 0: all programs must allocate the same outputs")
            return NkiTensor(storage, storage.data, storage.written)
        storage = Storage(shape, dt, region, name)
        run._shared.append(storage)
        return NkiTensor(storage, storage.data, storage.written)
    storage = Storage(shape, dt, region, name, constant=constant, placement=placement)
    return NkiTensor(storage, storage.data, storage.written)


def _placement(address, region: MemoryRegion, shape, run) -> tuple[int, int]:
    """nl.ndarray's `address`: "optional memory address (partition_offset, free_offset)" (the
    release's stub), the free offset in bytes within each partition."""
    if not region.on_chip:
        raise UnsupportedError("nl.ndarray(address=...) places SBUF and PSUM tiles; HBM "
                               "tensors are placed by the runtime")
    try:
        partition, offset = (int(a) for a in address)
    except (TypeError, ValueError):
        raise ShapeError(f"address={address!r} must be (partition_offset, free_offset)") from None
    if not 0 <= partition < run.target.partitions:
        raise ShapeError(f"address={address!r}: the partition offset must be in "
                         f"0..{run.target.partitions - 1}")
    return partition, offset


def wrap_input(array: np.ndarray, dt: dtypes.DType, buffer: MemoryRegion,
               name: str) -> "NkiTensor":
    storage = Storage(array.shape, dt, buffer, name, data=array)
    return NkiTensor(storage, storage.data, storage.written)


class DynamicSlice:
    """`nl.ds(start, size)`: `size` elements from `start`."""

    def __init__(self, start, size):
        self.start, self.size = int(start), int(size)

    def __repr__(self):
        return f"nl.ds({self.start}, {self.size})"


class NkiTensor:
    """A view of a tensor in HBM, SBUF or PSUM. Dim 0 of an on-chip tensor is its partition
    dimension."""

    def __init__(self, storage: Storage, data: np.ndarray, written: np.ndarray):
        self._storage, self._data, self._written = storage, data, written

    # -- properties (as AWS's NkiTensor) --
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> str:
        return self._storage.dt.name

    @property
    def buffer(self) -> MemoryRegion:
        return self._storage.buffer

    @property
    def name(self) -> str:
        return self._storage.name

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def on_chip(self) -> bool:
        return self._storage.on_chip

    @property
    def strides(self) -> tuple[int, ...]:
        """Element steps of each dimension over the storage (the stub's NkiTensor.strides)."""
        item = self._data.itemsize
        return tuple(s // item for s in self._data.strides)

    @property
    def offset(self) -> int:
        """The view's first element in its storage."""
        return self._first_element()

    def get_pattern(self) -> list[list[int]]:
        """The view as an access pattern, `[[stride, count], ...]` (for `.ap`)."""
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    @property
    def base_tensor(self) -> "NkiTensor":
        """The whole tensor this is a view of, in the dtype it was allocated with. Not in the
        release's stub, but AWS's kernels read it on views and on whole tensors alike
        (nki-library d2ad3a5, gate_up_projection_mx.py: `weight.base_tensor.buffer`)."""
        root = self._storage.root
        return NkiTensor(root, root.data, root.written)

    def __repr__(self):
        return f"NkiTensor({self.name or '#%d' % self._storage.id}, shape={self.shape}, " \
               f"dtype={self.dtype}, buffer={self.buffer.space})"

    def __len__(self):
        return self.shape[0]

    # Why this view cannot be used, for a view built outside its tensor (NkiTensor.ap); views
    # of it inherit it. Instructions raise it (_Instruction.tile).
    out_of_range: Optional[str] = None

    def _view(self, data, written) -> "NkiTensor":
        view = NkiTensor(self._storage, data, written)
        view.out_of_range = self.out_of_range
        return view

    # -- indexing --
    def __getitem__(self, key) -> "NkiTensor":
        if not isinstance(key, tuple):
            key = (key,)
        ellipses = [i for i, k in enumerate(key) if k is Ellipsis]
        if len(ellipses) > 1:
            raise OutOfBoundsError("an index may contain one Ellipsis")
        if ellipses:
            i = ellipses[0]
            key = key[:i] + (slice(None),) * (self.ndim - len(key) + 1) + key[i + 1:]
        if len(key) > self.ndim:
            raise OutOfBoundsError(f"{len(key)} indices for a {self.ndim}-d tensor {self.shape}")
        index = []
        for dim, k in enumerate(key):
            n = self.shape[dim]
            if isinstance(k, DynamicSlice):
                k = slice(k.start, k.start + k.size)
                if k.start < 0 or k.stop > n or k.stop <= k.start:
                    raise OutOfBoundsError(
                        f"nl.ds({k.start}, {k.stop - k.start}) on dim {dim} of size {n} of "
                        f"{self!r}: elements [{k.start}, {k.stop}) are outside [0, {n})")
            if isinstance(k, (int, np.integer)):
                i = int(k)
                if not -n <= i < n:
                    raise OutOfBoundsError(f"index {i} on dim {dim} of size {n} of {self!r}")
                i %= n
                index.append(slice(i, i + 1) if dim == 0 and self.on_chip else i)
            elif isinstance(k, slice):
                step = 1 if k.step is None else int(k.step)
                if step < 1:
                    raise OutOfBoundsError(f"slice step {step} on dim {dim}: must be >= 1")
                start = 0 if k.start is None else int(k.start)
                stop = n if k.stop is None else int(k.stop)
                start += n if start < 0 else 0
                stop += n if stop < 0 else 0
                if not 0 <= start < stop <= n:
                    raise OutOfBoundsError(
                        f"slice [{k.start}:{k.stop}] on dim {dim} of size {n} of {self!r}: "
                        f"elements [{start}, {stop}) are outside [0, {n}) or empty")
                index.append(slice(start, stop, step))
            else:
                raise UnsupportedError(f"index {k!r} (use ints, slices, nl.ds or ...); "
                                       f"nl.arange/nl.mgrid indexing was removed from NKI")
        index = tuple(index)
        data, written = self._data[index], self._written[index]
        # On chip a view keeps its partition dim and is at least 2-D; in HBM at least 1-D
        # (AWS's NkiTensor.__getitem__).
        want = 2 if self.on_chip else 1
        if data.ndim < want:
            shape = data.shape + (1,) * (want - data.ndim)
            data, written = data.reshape(shape), written.reshape(shape)
        return self._view(data, written)

    def __setitem__(self, key, value):
        """`t[...] = tile` is a tensor_copy, `t[...] = scalar` a memset (set by nki.isa)."""
        ASSIGN(self[key], value)

    # -- view operations (no data copied) --
    def _check_partition_dim(self, dim: int, what: str):
        if self.on_chip and dim == 0:
            raise ShapeError(f"{what} cannot change the partition dimension (dim 0) of an "
                             f"on-chip tensor {self!r}")

    def permute(self, dims) -> "NkiTensor":
        dims = tuple(dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ShapeError(f"permute{dims} is not a permutation of {self.ndim} dims")
        if self.on_chip and dims[0] != 0:
            raise ShapeError(f"permute{dims}: the partition dim of {self!r} must stay first")
        return self._view(self._data.transpose(dims), self._written.transpose(dims))

    def broadcast(self, dim: int, size: int) -> "NkiTensor":
        self._check_partition_dim(dim, "broadcast")
        if self.shape[dim] != 1:
            raise ShapeError(f"broadcast({dim}, {size}): dim {dim} of {self!r} is not 1")
        shape = list(self.shape)
        shape[dim] = size
        return self._view(np.broadcast_to(self._data, shape), np.broadcast_to(self._written,
                                                                               shape))

    def broadcast_to(self, shape) -> "NkiTensor":
        """The tile method of the Neuron 2.20-era NKI: free dims a view, the partition dim
        TensorE's broadcast into PSUM (language._tile_broadcast_to)."""
        return TILE_BROADCAST_TO(self, shape)

    def expand_dim(self, dim: int) -> "NkiTensor":
        self._check_partition_dim(dim, "expand_dim")
        return self._view(np.expand_dims(self._data, dim), np.expand_dims(self._written, dim))

    def squeeze_dim(self, dim: int) -> "NkiTensor":
        self._check_partition_dim(dim, "squeeze_dim")
        if self.shape[dim] != 1:
            raise ShapeError(f"squeeze_dim({dim}): dim {dim} of {self!r} is not 1")
        return self._view(np.squeeze(self._data, dim), np.squeeze(self._written, dim))

    def reshape(self, shape) -> "NkiTensor":
        shape = tuple(int(s) for s in (shape if not isinstance(shape, int) else (shape,)))
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if math.prod(shape) != self.size:
            raise ShapeError(f"reshape{shape} of {self!r}: {math.prod(shape)} elements, not "
                             f"{self.size}")
        if self.on_chip and shape[0] != self.shape[0]:
            raise ShapeError(f"reshape{shape} of {self!r}: the partition dim must stay "
                             f"{self.shape[0]}")
        data, written = self._data.view(), self._written.view()
        try:
            data.shape, written.shape = shape, shape
        except AttributeError:
            raise ShapeError(f"reshape{shape} of {self!r}: the view's layout is not "
                             f"contiguous enough to reshape without a copy") from None
        return self._view(data, written)

    def reshape_dim(self, dim: int, shape) -> "NkiTensor":
        shape = tuple(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.shape[dim] // known if s == -1 else s for s in shape)
        if len(shape) > 1:
            self._check_partition_dim(dim, "reshape_dim")
        return self.reshape(self.shape[:dim] + shape + self.shape[dim + 1:])

    def flatten_dims(self, start_dim: int, end_dim: int) -> "NkiTensor":
        self._check_partition_dim(start_dim, "flatten_dims")
        merged = math.prod(self.shape[start_dim:end_dim + 1])
        return self.reshape(self.shape[:start_dim] + (merged,) + self.shape[end_dim + 1:])

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> "NkiTensor":
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def select(self, dim: int, index) -> "NkiTensor":
        if isinstance(index, NkiTensor):
            # Dynamic select: the element along `dim` read from `index` when the DMA runs
            # (the stub's select; Note [Indirect DMA]), as .ap(scalar_offset=index).
            if self.on_chip and dim == 0:
                raise ShapeError("a dynamic select on an on-chip tensor cannot take the "
                                 "partition dimension (dim 0)")
            pattern = [[s, n] for d, (s, n) in enumerate(zip(self.strides, self.shape))
                       if d != dim]
            return self.ap(pattern, offset=0, scalar_offset=index, indirect_dim=dim)
        if not isinstance(index, (int, np.integer)):
            raise ShapeError(f"select index {index!r} must be an int or an NkiTensor")
        self._check_partition_dim(dim, "select")
        key = [slice(None)] * self.ndim
        key[dim] = int(index)
        return self[tuple(key)]

    def ap(self, pattern, offset=None, scalar_offset=None, vector_offset=None,
           indirect_dim=0, dtype=None) -> "NkiTensor":
        """An explicit access pattern `[[stride, count], ...]` over the storage, in elements
        from the view's start (plus `offset`), like torch.as_strided. On chip the first pair
        steps one partition (its stride the elements per partition, or the view's own free
        size). A pattern outside the storage makes a view that instructions refuse."""
        pattern = [(int(stride), int(count)) for stride, count in pattern]
        if not pattern or any(count <= 0 for _, count in pattern):
            raise ShapeError(f".ap({pattern}): counts must be positive")
        target = self._storage
        if dtype is not None and dtypes.resolve(dtype) is not self.dt:
            # In elements of the new dtype, from the view's first byte (Note [Dtype views]).
            target = self._storage.alias(dtypes.resolve(dtype))
        first_byte = self._first_element() * self.dt.itemsize
        if first_byte % target.dt.itemsize:
            raise ShapeError(f".ap(dtype={target.dt.name}) on {self!r}: the view starts at byte "
                             f"{first_byte}, not a multiple of {target.dt.itemsize}")
        if isinstance(scalar_offset, (int, np.integer)) and vector_offset is None:
            # A compile-time offset (a dynamic_range loop's index, which this simulator knows):
            # the same elements as the run-time offset would address, a static view.
            step = self._data.strides[int(indirect_dim)] // self._data.itemsize \
                * self.dt.itemsize // target.dt.itemsize
            offset, scalar_offset = int(offset or 0) + int(scalar_offset) * step, None
        if scalar_offset is not None or vector_offset is not None:
            if target.dt.itemsize != self.dt.itemsize:
                raise UnsupportedError(f".ap(dtype={target.dt.name}) with an offset on "
                                       f"{self!r}: indirect access keeps the element size")
            origin = self if target is self._storage else self._same_offsets_in(target)
            return IndirectView.of(origin, pattern, int(offset or 0), scalar_offset,
                                   vector_offset, indirect_dim)
        base = target.data
        start = first_byte // target.dt.itemsize + int(offset or 0)
        per_partition = math.prod(base.shape[1:])
        if self.on_chip and pattern[0][0] == self.free_size * self.dt.itemsize \
                // target.dt.itemsize and pattern[0][0] != per_partition:
            # "the step of the first tuple in the AP must be equal to the number of elements in
            # the free dimension of the tensor" (nki/deep-dives/nki-aps.rst): of the view .ap
            # is called on, which steps one partition of the storage (AWS's TensorView builds
            # such patterns on column slices of a tile, nki-library mlp_tkg).
            pattern = [(per_partition, pattern[0][1])] + pattern[1:]
        lo = start + sum(min(0, (c - 1) * s) for s, c in pattern)
        hi = start + sum(max(0, (c - 1) * s) for s, c in pattern)
        if lo < 0 or hi >= base.size:
            # An error where an instruction uses it, not here: AWS's kernels build views they
            # use only under a condition (nki-library output_projection_tkg builds one per
            # packed PSUM slot and skips the slots past the end).
            return _out_of_range(target, [c for _, c in pattern],
                                 f".ap({[list(p) for p in pattern]}, offset={offset}) on "
                                 f"{self!r} addresses elements [{lo}, {hi}] of a storage of "
                                 f"{base.size}")
        if self.on_chip and pattern[0][0] != per_partition and pattern[0][1] > 1:
            # "the access on the partition dimension must be contiguous" (nki-aps.rst, which
            # gives reading every other partition as the illegal example).
            raise ShapeError(f".ap(): the first stride {pattern[0][0]} of an on-chip tensor "
                             f"must step one partition ({per_partition} elements, or the "
                             f"view's own free size {self.free_size})")
        return _strided(target, start, [c for _, c in pattern], [s for s, _ in pattern])

    def view(self, dtype) -> "NkiTensor":
        """The view's bytes as `dtype`, its last dimension scaled by the ratio of the sizes (the
        release's stub; Note [Dtype views])."""
        dt = dtypes.resolve(dtype)
        if dt is self.dt:
            return self
        if self.is_indirect():
            raise UnsupportedError(f"{self!r}.view({dt.name}): not supported after dynamic or "
                                   f"vector select")
        old, new = self.dt.itemsize, dt.itemsize
        item = self._data.itemsize
        strides = [s // item for s in self._data.strides]
        if self.shape[-1] > 1 and strides[-1] != 1:
            raise ShapeError(f"{self!r}.view({dt.name}): the last dimension must be contiguous "
                             f"(its stride is {strides[-1]} elements)")
        last_bytes = self.shape[-1] * old
        first_byte = self._first_element() * old
        steps = [s * old for s in strides[:-1]]
        if last_bytes % new or first_byte % new or any(b % new for b in steps):
            raise ShapeError(f"{self!r}.view({dt.name}): the last dimension ({last_bytes} "
                             f"bytes), the view's start (byte {first_byte}) and its other "
                             f"strides ({steps} bytes) must be multiples of {new} bytes")
        target = self._storage.alias(dt)
        shape = self.shape[:-1] + (last_bytes // new,)
        return _strided(target, first_byte // new, shape, [b // new for b in steps] + [1])

    def _first_element(self) -> int:
        """The view's first element, counted in its storage's flat array."""
        return (self._data.__array_interface__["data"][0]
                - self._storage.data.__array_interface__["data"][0]) // self._data.itemsize

    def _same_offsets_in(self, target: "Storage") -> "NkiTensor":
        """This view with the same element offsets in `target`, an alias of the same itemsize."""
        item = self._data.itemsize
        return _strided(target, self._first_element(), self.shape,
                        [s // item for s in self._data.strides])

    def vector_select(self, dim: int, vector_offset: "NkiTensor") -> "NkiTensor":
        """Each partition p reads the row vector_offset[p] along dim 0 of an HBM tensor (the
        stub's vector_select), as .ap(vector_offset=...)."""
        if dim != 0:
            raise ShapeError(f"vector_select(dim={dim}): dim must be 0")
        if self.on_chip:
            raise UnsupportedError(f"vector_select on {self!r}: only HBM tensors")
        pattern = [[self.strides[0], vector_offset.shape[0]]] + \
            [[s, n] for s, n in zip(self.strides[1:], self.shape[1:])]
        return self.ap(pattern, offset=0, vector_offset=vector_offset, indirect_dim=0)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None) -> "NkiTensor":
        """einops-style: split the grouped source dims, reorder, merge the grouped destination
        dims (the stub's rearrange), as a view: reshape, permute, reshape."""
        fixed = dict(fixed_sizes or {})

        def names(pattern):
            return [tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in pattern]

        src, dst = names(src_pattern), names(dst_pattern)
        if len(src) != self.ndim:
            raise ShapeError(f"rearrange{tuple(src_pattern)}: {len(src)} dims for a "
                             f"{self.ndim}-d tensor {self.shape}")
        sizes = {}
        for group, n in zip(src, self.shape):
            unknown = [g for g in group if g not in fixed]
            known = math.prod(fixed[g] for g in group if g in fixed)
            if len(unknown) > 1 or (not unknown and known != n) or n % known:
                raise ShapeError(f"rearrange: dims {group} cannot split {n} with sizes {fixed}")
            for g in group:
                sizes[g] = fixed.get(g, n // known)
        flat_src = [g for group in src for g in group]
        flat_dst = [g for group in dst for g in group]
        if sorted(flat_src) != sorted(flat_dst) or len(set(flat_src)) != len(flat_src):
            raise ShapeError(f"rearrange: {tuple(dst_pattern)} must name the dims of "
                             f"{tuple(src_pattern)} once each")
        if self.on_chip and (src[0] != dst[0] or len(src[0]) != 1):
            raise ShapeError(f"rearrange of {self!r}: the partition dim (dim 0) must stay "
                             f"first and whole")
        split = self.reshape(tuple(sizes[g] for g in flat_src))
        moved = split.permute(tuple(flat_src.index(g) for g in flat_dst))
        return moved.reshape(tuple(math.prod(sizes[g] for g in group) for group in dst))

    def _unsupported(self, *args, **kwargs):
        raise UnsupportedError("reinterpret_cast and tensor indirection (.indirect) are not "
                               "implemented yet (use .view(dtype) to reinterpret a tensor's "
                               "bytes)")

    reinterpret_cast = indirect = _unsupported

    def is_contiguous(self) -> bool:
        data = self._data[0] if self.on_chip else self._data
        return bool(data.flags.c_contiguous)

    def is_indirect(self) -> bool:
        return False

    # -- what the instructions use --
    @property
    def dt(self) -> dtypes.DType:
        return self._storage.dt

    @property
    def partitions(self) -> int:
        return self._data.shape[0] if self._storage.on_chip else 0

    @property
    def free_size(self) -> int:
        data = self._data
        return math.prod(data.shape[1:]) if self._storage.on_chip else data.size

    def region(self) -> Region:
        """The bytes of the buffer this view covers (Note [Instruction records]); a view's
        region never changes, so it is computed once."""
        cached = self.__dict__.get("_region")
        if cached is None:
            cached = self._region = self._compute_region()
        return cached

    def _compute_region(self) -> Region:
        storage, data = self._storage, self._data
        item = data.itemsize
        offset = (data.__array_interface__["data"][0] - storage.base_pointer) // item
        shape, strides = data.shape, data.strides
        size = storage.dt.itemsize
        if not storage.on_chip:
            lo = hi = offset
            for n, stride in zip(shape, strides):
                span = (n - 1) * (stride // item)
                if span < 0:
                    lo += span
                else:
                    hi += span
            return Region(storage.space, storage.id, None, (lo * size, (hi + 1) * size))
        per_partition = storage.per_partition
        p0, lo = divmod(offset, per_partition)
        p0 += storage.partition_offset
        hi = lo
        p_last = p0 + (shape[0] - 1) * (strides[0] // item) // per_partition
        for n, stride in zip(shape[1:], strides[1:]):
            span = (n - 1) * (stride // item)
            if span < 0:
                lo += span
            else:
                hi += span
        a = storage.address
        return Region(storage.space, storage.id, (p0, p_last + 1),
                      (a + lo * size, a + (hi + 1) * size))

    def contiguous_bytes(self) -> int:
        """Bytes of the longest contiguous run the view is made of (a DMA descriptor moves at
        most one run); partitions never merge into one run."""
        item = self._data.itemsize
        run, expected = 1, item
        dims = list(zip(self._data.shape, self._data.strides))
        stop = 1 if self.on_chip else 0
        for n, stride in reversed(dims[stop:]):
            if n == 1:
                continue
            if stride != expected:
                break
            run *= n
            expected *= n
        return run * self.dt.itemsize

    def read(self) -> np.ndarray:
        """The view's values, for an instruction that reads it."""
        self._storage.sync()
        if not self._written.all():
            run = current_run()
            if run.uninitialized == "error":
                from torch_neuron.nki.errors import UninitializedReadError

                missing = int(self._written.size - np.count_nonzero(self._written))
                raise UninitializedReadError(
                    f"{missing} of {self.size} elements of {self!r} were never written, or were "
                    f"computed from memory never written (AWS's simulator would read NaN "
                    f"there); write them first, or run with "
                    f"nki.simulate(kernel, uninitialized='nan') to read NaN like AWS's")
        return self._data

    def write(self, values) -> None:
        """Stores `values` (rounded to this tensor's dtype) into the view."""
        self.mark_written()
        values = np.asarray(values)
        if values.shape != self.shape:
            values = np.broadcast_to(values, self.shape)
        self._data[...] = dtypes.convert(values, self.dt)

    def mark_written(self) -> None:
        """What a write does besides storing values: the view's elements count as written
        (and, in PSUM, as last written by a non-matmul instruction)."""
        if not self._data.flags.writeable:
            raise ShapeError(f"{self!r} is a broadcast view and cannot be written")
        self._written[...] = True
        self._storage.note_write()
        if self._storage.matmul_written is not None:
            self.matmul_mask()[...] = False

    def matmul_mask(self) -> np.ndarray:
        """This view of its storage's matmul_written mask (created on first use; the view is
        kept, as the region is)."""
        mask = self.__dict__.get("_matmul_mask")
        if mask is not None:
            return mask
        storage = self._storage
        if storage.matmul_written is None:
            storage.matmul_written = np.zeros(storage.shape, dtype=bool)
        base = storage.written
        offset = (self._written.__array_interface__["data"][0]
                  - base.__array_interface__["data"][0])
        mask = self._matmul_mask = np.lib.stride_tricks.as_strided(
            storage.matmul_written.reshape(-1)[offset:], self._written.shape,
            self._written.strides)
        return mask


def _out_of_range(storage: Storage, shape, why: str) -> NkiTensor:
    """A view of `shape` that instructions refuse with `why` (NkiTensor.out_of_range)."""
    data = np.broadcast_to(np.zeros(1, dtype=storage.data.dtype), tuple(shape))
    view = NkiTensor(storage, data, np.broadcast_to(np.ones(1, dtype=bool), tuple(shape)))
    view.out_of_range = why
    return view


def _strided(storage: Storage, start: int, shape, strides) -> NkiTensor:
    """A view of `storage`: `shape` elements from flat element `start`, `strides` in elements."""
    flat_data, flat_written = storage.data.reshape(-1), storage.written.reshape(-1)
    data = np.lib.stride_tricks.as_strided(flat_data[start:], tuple(shape),
                                           tuple(s * flat_data.itemsize for s in strides))
    written = np.lib.stride_tricks.as_strided(flat_written[start:], tuple(shape),
                                              tuple(s * flat_written.itemsize for s in strides))
    return NkiTensor(storage, data, written)


# Note [Indirect DMA]
# `t.ap(pattern, offset, vector_offset=idx, indirect_dim=d)` and `scalar_offset=v` (dma_copy's
# docstring, "Indirect addressing (gather/scatter)") address t through values only known when
# the DMA runs. Element (i0, i1, ...) of the pattern is at
#   start + offset + sum_k i_k * stride_k                       (static)
#   start + offset + v * S_d + sum_k i_k * stride_k             (scalar: one offset for all)
#   start + offset + idx[i0] * S_d + sum_{k>=1} i_k * stride_k  (vector: the index of partition
#                                                                i0 replaces the first step)
# with S_d the stride of t's dim `indirect_dim`, as the docstring's gather reads row idx[p] of
# a [rows, F] tensor into partition p. The DMA instruction (isa.dma_copy) reads the offsets'
# values, gathers or scatters, and checks each address against the tensor (oob_mode). Until
# then the view has the pattern's shape; what it touches is not known statically, so its
# region is the whole tensor (a conservative dependency). The descriptor generation work of
# the software DGE (GpSimd) is not timed.

class IndirectView(NkiTensor):
    """A view addressed through run-time offsets (Note [Indirect DMA]); only DMA instructions
    take it."""

    @classmethod
    def of(cls, t: NkiTensor, pattern, offset: int, scalar_offset, vector_offset,
           indirect_dim: int) -> "IndirectView":
        if scalar_offset is not None and vector_offset is not None:
            raise ShapeError(".ap(): vector_offset and scalar_offset are mutually exclusive")
        index = vector_offset if vector_offset is not None else scalar_offset
        if t.on_chip:
            raise UnsupportedError(f".ap() with an offset on {t!r}: indirect access is "
                                   f"implemented for HBM tensors")
        if isinstance(index, VirtualRegister) and vector_offset is None:
            pass   # a sequencer register: one offset (registers.py)
        elif not isinstance(index, NkiTensor) or not index.on_chip:
            raise UnsupportedError(f".ap(): the offset {index!r} must be an SBUF tile, or a "
                                   f"VirtualRegister for scalar_offset")
        if isinstance(index, NkiTensor) and index.dt.is_float:
            raise ShapeError(f".ap(): the offset tile is {index.dtype}; offsets are integers")
        if not 0 <= int(indirect_dim) < t.ndim:
            raise ShapeError(f".ap(indirect_dim={indirect_dim}) on a {t.ndim}-d tensor")
        vector = vector_offset is not None
        if vector and index.size < pattern[0][1]:
            raise ShapeError(f".ap(): vector_offset {index.shape} has fewer offsets than the "
                             f"pattern's {pattern[0][1]} rows")
        if not vector and isinstance(index, NkiTensor) and index.size != 1:
            raise ShapeError(f".ap(): scalar_offset {index.shape} must be a single element")
        storage, item = t._storage, t._data.itemsize
        start = (t._data.__array_interface__["data"][0]
                 - storage.data.__array_interface__["data"][0]) // item + offset
        # The placeholder view: the pattern with the run-time step left out (0).
        strides = [0 if (vector and k == 0) else st for k, (st, _) in enumerate(pattern)]
        shape = tuple(c for _, c in pattern)
        flat, flat_written = storage.data.reshape(-1), storage.written.reshape(-1)
        if not 0 <= start < flat.size:
            raise OutOfBoundsError(f".ap(offset={offset}) on {t!r} starts outside its storage")
        data = np.lib.stride_tricks.as_strided(flat[start:], shape,
                                               tuple(st * item for st in strides))
        written = np.lib.stride_tricks.as_strided(
            flat_written[start:], shape, tuple(st * flat_written.itemsize for st in strides))
        view = cls(storage, data, written)
        view.index, view.vector, view.start = index, vector, start
        view.pattern = [(st, c) for st, c in zip(strides, shape)]
        view.step = t._data.strides[int(indirect_dim)] // item
        return view

    def is_indirect(self) -> bool:
        return True

    def _compute_region(self) -> Region:
        # Any element of the (HBM) tensor may be addressed (Note [Indirect DMA]).
        storage = self._storage
        return Region(storage.space, storage.id, None,
                      (0, storage.data.size * storage.dt.itemsize))

    def addresses(self, offsets: np.ndarray) -> np.ndarray:
        """Flat element addresses of the pattern, given the offsets' values."""
        grid = np.full(self.shape, self.start, dtype=np.int64)
        for k, (stride, count) in enumerate(self.pattern):
            if stride:
                shape = [1] * len(self.pattern)
                shape[k] = count
                grid = grid + (np.arange(count, dtype=np.int64) * stride).reshape(shape)
        values = offsets.astype(np.int64).reshape(-1)
        if self.vector:
            shape = [self.shape[0]] + [1] * (len(self.pattern) - 1)
            return grid + (values * self.step).reshape(shape)
        return grid + values[0] * self.step

    def in_bounds(self, addresses: np.ndarray) -> np.ndarray:
        """Per first-pattern index (partition), whether all its addresses are in the tensor."""
        ok = (addresses >= 0) & (addresses < self._storage.data.size)
        return ok.reshape(self.shape[0], -1).all(axis=1)
