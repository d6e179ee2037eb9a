"""`nki.isa.dma_compute`: the DMA engines' own arithmetic, dst = srcs[0] + srcs[1] + ...,
computed in float32 and cast to dst's dtype; with one source addressed through a vector_offset,
a read-modify-write of the indexed rows (scatter: dst(HBM)[idx] += src(SBUF); gather:
dst(SBUF) += src(HBM)[idx]).

Signature and rules from the current release's stub (aws-neuron-sdk
`nki/api/nki/isa/__init__.py`, the snapshot docs/nki.md names): only `nl.add`, scales all 1.0,
at most 16 sources of dst's element count, read-modify-write with exactly two sources and
unique indices. Costed as a DMA of the sources' bytes (timing.py): an assumption, the page
gives no cost.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import NkiValidationError, ShapeError
from torch_neuron.nki.indirect import Rows
from torch_neuron.nki.instruction import _Instruction, oob_mode
from torch_neuron.nki.ops import OPERATORS, REDUCTION_ALIASES

_MAX_SOURCES = 16
_SPACES = ("sbuf", "private_hbm", "shared_hbm")


def _same(a, b) -> bool:
    """Whether two views name the same elements (the source that "matches dst")."""
    return (a._storage is b._storage and a.shape == b.shape
            and a._data.__array_interface__["data"][0] == b._data.__array_interface__["data"][0]
            and a._data.strides == b._data.strides)


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=True,
                oob_mode=oob_mode.error, name=None):
    ins = _Instruction("dma_compute")
    srcs = list(srcs)
    op = OPERATORS.get(REDUCTION_ALIASES.get(getattr(reduce_op, "name", None), None)) \
        or reduce_op
    if op is not OPERATORS["add"]:
        raise ins.error(NkiValidationError, f"reduce_op={reduce_op!r}: dma_compute supports "
                                            f"nl.add only")
    if not 1 <= len(srcs) <= _MAX_SOURCES:
        raise ins.error(ShapeError, f"{len(srcs)} sources; dma_compute takes 1 to "
                                    f"{_MAX_SOURCES}")
    if scales is not None and (len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales)):
        raise ins.error(NkiValidationError, f"scales={list(scales)}: one per source, all 1.0")
    ins.tile(dst, "dst", on_chip=False, spaces=_SPACES, read=False)
    for k, s in enumerate(srcs):
        ins.tile(s, f"srcs[{k}]", on_chip=False, spaces=_SPACES)
        if s.size != dst.size:
            raise ins.error(ShapeError, f"srcs[{k}] {s.shape} has {s.size} elements, dst "
                                        f"{dst.shape} {dst.size}: they must match")
    indirect = [t for t in [dst] + srcs if t.is_indirect()]
    if indirect:
        _read_modify_write(ins, dst, srcs, unique_indices, oob_mode)
    else:
        values = [ins.values(s, f"srcs[{k}]") for k, s in enumerate(srcs)]
        ins.write(dst, lambda: sum(v.astype(np.float32).reshape(-1) for v in values))
    nbytes = dst.size * dst.dt.itemsize * len(srcs)
    run = min([dst.contiguous_bytes()] + [s.contiguous_bytes() for s in srcs])
    ins.record("DMA", bytes=nbytes, descriptor_bytes=run, descriptors=-(-nbytes // run))


def _read_modify_write(ins, dst, srcs, unique_indices, oob) -> None:
    if len(srcs) != 2 or not unique_indices:
        raise ins.error(NkiValidationError, "a read-modify-write (a source with vector_offset) "
                                            "takes exactly 2 sources and unique_indices=True")
    if dst.is_indirect():   # scatter: dst(HBM)[idx] = dst[idx] + src(SBUF)
        matching = [s for s in srcs if s.is_indirect() and s._storage is dst._storage]
        others = [s for s in srcs if not s.is_indirect()]
        if len(matching) != 1 or len(others) != 1:
            raise ins.error(NkiValidationError, "a scatter read-modify-write takes dst's own "
                                                "indexed view and one data source")
        rows = Rows(ins, dst, oob)
        data = ins.values(others[0], "srcs")
        if not ins.compute:
            rows.scatter(data)
            return
        current, _ = rows.gather("dst")
        rows.scatter(current + data.astype(np.float64).reshape(current.shape))
        return
    # gather: dst(SBUF) = dst + src(HBM)[idx]
    indexed = [s for s in srcs if s.is_indirect()]
    matching = [s for s in srcs if not s.is_indirect() and _same(s, dst)]
    if len(indexed) != 1 or len(matching) != 1:
        raise ins.error(NkiValidationError, "a gather read-modify-write takes one indexed HBM "
                                            "source and dst itself")
    rows = Rows(ins, indexed[0], oob)
    current = ins.values(matching[0], "srcs")

    def added():
        values, ok = rows.gather("srcs")
        out = current.astype(np.float64).reshape(values.shape).copy()
        out[ok] += values[ok]
        return out.reshape(dst.shape)

    ins.write(dst, added)
