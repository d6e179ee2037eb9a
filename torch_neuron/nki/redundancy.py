"""The compiler's removal of repeated computations from a kernel's instruction stream.

Note [Redundant instructions]
AWS's compiler unrolls a kernel's loops ("the loop instances will be unrolled by Neuron
Compiler", nki/guides/tutorials/fused_mamba.rst) and compiles the straight-line result, where an
instruction that repeats an earlier one on the same input values computes nothing new: the
compiler keeps the earlier result and drops the repeat, as compilers do with common
subexpressions. The fused Mamba tutorial's profiles show it happening: its v2 and v3 kernels
multiply delta by u once per state (16 times on the same tiles), yet the v3 profile at 8192
positions counts 39,695 VectorE events for 8,192 steps, fewer than the 5 VectorE instructions
each step's source issues (tutorial figure mamba_v3.png, "Selection Summary").

So before scheduling (Note [Kernel schedule]), an instruction is dropped when an earlier one
did the same thing to the same values: the same instruction, engine, options and operand
layouts, reading the same values (the same earlier writes, at the same offsets within them),
wherever its result goes. Readers of the dropped instruction's result then wait for the
earlier instruction instead, through a region that stands for that value (the compiler keeps
it alive elsewhere; the SBUF it takes is not counted). Only instructions whose record holds
everything that decides their result are candidates (`_PURE`: no immediate operands, no engine
registers, no randomness). Loads (dma_copy) never are: the matrix multiplication tutorial's
"Optimization 1: Removing Redundant Loads" gains by hoisting repeated loads by hand
(nki/guides/tutorials/matrix_multiplication.rst), so the compiler leaves most of them in
place, and which ones it drops (the Mamba tutorial's v1 profile reports delta and u reloaded
"around 7 times" for 16 loads in the source) depends on its SBUF allocation, which is not
documented. Values are tracked only in SBUF and PSUM.

The functional results are unaffected (each instruction still computes); only the schedule
changes. The profile keeps every record and gives a dropped one no time.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from torch_neuron.nki.errors import UnsupportedError
from torch_neuron.nki.records import Region

# Instructions whose record (name, engine, options, operand shapes, dtypes and views, read
# regions) determines their result.
_PURE = frozenset({"tensor_tensor", "tensor_copy", "nc_transpose"})
# HBM buffer ids from here on stand for kept values (trnsim's HBM regions are per buffer id,
# below 2^24: kernel_regions in kernel_schedule.cpp).
VALUE_BUFFER_BASE = 1 << 22


class _Write(NamedTuple):
    region: Region
    value: int          # id of the value these bytes hold
    kept: bool          # written by a dropped instruction: the value lives in a kept region


class Redundancy(NamedTuple):
    kept: list            # indices of the records to schedule, in order
    producer: dict        # dropped record index -> the record index whose result it repeats
    reads: dict           # record index -> extra regions it reads (kept values)
    writes: dict          # record index -> extra regions it writes (values it keeps)


def _contains(outer: Region, inner: Region) -> bool:
    (p0, p1), (q0, q1) = outer.partitions, inner.partitions
    return (p0 <= q0 and q1 <= p1 and outer.address[0] <= inner.address[0]
            and inner.address[1] <= outer.address[1])


def _value_region(value: int) -> Region:
    if value >= VALUE_BUFFER_BASE:
        raise UnsupportedError(f"a kernel that writes on-chip tiles more than "
                               f"{VALUE_BUFFER_BASE} times cannot be scheduled")
    return Region("hbm", VALUE_BUFFER_BASE + value, None, (0, 1))


class _Memory:
    """The values SBUF and PSUM hold: disjoint writes per (space, program)."""

    def __init__(self):
        self.spaces: dict = {}
        self.next_value = 0

    def new_value(self) -> int:
        self.next_value += 1
        return self.next_value

    def write(self, core: int, region: Region, value: int, kept: bool):
        live = self.spaces.setdefault((core, region.space), [])
        live[:] = [w for w in live if not w.region.overlaps(region)]
        live.append(_Write(region, value, kept))

    def overlapping(self, core: int, region: Region) -> list:
        return [w for w in self.spaces.get((core, region.space), ()) if w.region.overlaps(region)]

    def content(self, core: int, region: Region) -> Optional[tuple]:
        """The value `region` reads, as (value, offsets within its write), or None when it
        reads several writes or bytes never written."""
        ws = self.overlapping(core, region)
        if len(ws) != 1 or not _contains(ws[0].region, region):
            return None
        w = ws[0]
        p, a = w.region.partitions[0], w.region.address[0]
        return (w.value, region.partitions[0] - p, region.partitions[1] - p,
                region.address[0] - a, region.address[1] - a)


def find(records) -> Redundancy:
    """The records to schedule and how the dropped ones' readers reach the kept values."""
    memory = _Memory()
    seen: dict = {}             # key -> (record index, values of its writes)
    value_owner: dict = {}      # value -> record index that computed it
    kept, producer, reads, writes = [], {}, {}, {}
    for i, r in enumerate(records):
        on_chip_reads = [g for g in r.reads if g.partitions is not None]
        # Reads of values a dropped instruction would have written: wait for their producer.
        extra = []
        for g in on_chip_reads:
            for w in memory.overlapping(r.core, g):
                if w.kept:
                    region = _value_region(w.value)
                    extra.append(region)
                    owner = value_owner[w.value]
                    if region not in writes.setdefault(owner, []):
                        writes[owner].append(region)
        key = None
        if r.name in _PURE and all(g.partitions is not None for g in r.writes):
            contents = tuple(memory.content(r.core, g) for g in r.reads)
            if None not in contents:
                key = (r.name, r.engine, r.core, r.attrs,
                       tuple((o.role, o.shape, o.dtype, o.space, o.strides) for o in r.operands),
                       contents)
        earlier = seen.get(key) if key is not None else None
        if earlier is not None:
            index, values = earlier
            producer[i] = index
            for g, v in zip(r.writes, values):
                memory.write(r.core, g, v, kept=True)
            continue
        kept.append(i)
        if extra:
            reads[i] = extra
        values = []
        for g in r.writes:
            if g.partitions is None:
                continue
            v = memory.new_value()
            value_owner[v] = i
            memory.write(r.core, g, v, kept=False)
            values.append(v)
        if key is not None:
            seen[key] = (i, values)
    return Redundancy(kept, producer, reads, writes)
