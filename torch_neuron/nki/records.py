"""What each executed NKI instruction leaves behind for the engine-level scheduler.

Note [Instruction records]
Every instruction the simulator executes appends one `InstructionRecord` to the kernel run: the
engine whose in-order queue runs it ("TensorE", "VectorE", "ScalarE", "GpSimdE", or "DMA" with a
queue number), its ISA name, its operands (shape, dtype, partitions, elements per partition and
memory space: what the ISA cost formulas take), the buffer regions it reads and writes, and the
kernel source line that issued it. Timing hands them to trnsim's
scheduler (torch_neuron/nki/timing.py, Note [Kernel schedule] in trnsim/kernel_schedule.h):
dependencies follow from overlapping regions (read-after-write, write-after-read,
write-after-write), and `address` ranges also expose buffer reuse when the allocator gives a
freed tile's bytes to a new one.
"""

from __future__ import annotations

from typing import NamedTuple, Optional


# NamedTuples, not frozen dataclasses: a kernel makes one record, its operands and its regions
# per instruction, and a NamedTuple is several times cheaper to construct (issue 27, item 6).

class Region(NamedTuple):
    """Bytes of one buffer an instruction touches.

    On-chip (space "sbuf" or "psum"): partitions [partitions[0], partitions[1]) and, within each
    partition, bytes [address[0], address[1]) of that memory's per-partition address space
    (the allocation's base plus the view's offsets). HBM ("hbm", "shared_hbm"): `partitions`
    is None and `address` is the byte range within the buffer. Ranges are inclusive bounds of
    the access (a strided view's gaps are included)."""

    space: str
    buffer: int
    partitions: Optional[tuple[int, int]]
    address: tuple[int, int]

    def overlaps(self, other: "Region") -> bool:
        if self.space != other.space:
            return False
        if self.space in ("hbm", "shared_hbm") and self.buffer != other.buffer:
            return False
        if self.partitions and other.partitions and (
                self.partitions[1] <= other.partitions[0]
                or other.partitions[1] <= self.partitions[0]):
            return False
        return self.address[0] < other.address[1] and other.address[0] < self.address[1]


class Operand(NamedTuple):
    role: str                 # "dst", "src", "stationary", "moving", "data1", ...
    shape: tuple[int, ...]
    dtype: str
    space: str
    partitions: int           # shape[0] on chip; 0 for HBM operands
    elements_per_partition: int
    strides: tuple[int, ...] = ()   # the view's strides in elements (its layout in its region)


class InstructionRecord(NamedTuple):
    index: int                # position in the kernel's program order
    engine: str               # "TensorE" | "VectorE" | "ScalarE" | "GpSimdE" | "DMA"
    name: str                 # "nc_matmul", "dma_copy", ...
    operands: tuple[Operand, ...]
    reads: tuple[Region, ...]
    writes: tuple[Region, ...]
    source: str               # "file:line" of the kernel
    core: int = 0             # nl.program_id() of the logical-core program that issued it
    dma_queue: Optional[int] = None
    attrs: tuple = ()         # instruction options that change its cost: (("op", "add"), ...)

    def operand(self, role: str) -> Operand:
        return next(o for o in self.operands if o.role == role)
