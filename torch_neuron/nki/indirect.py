"""DMA through run-time offsets (Note [Indirect DMA] in tensor.py): dma_copy's gather and
scatter, and dma_compute's read-modify-write, both reading an IndirectView's rows."""

from __future__ import annotations

import numpy as np

from torch_neuron.nki import dtypes
from torch_neuron.nki.errors import OutOfBoundsError, ShapeError, UninitializedReadError
from torch_neuron.nki.instruction import _Instruction, oob_mode
from torch_neuron.nki.tensor import NkiTensor
from torch_neuron.nki.virtual_register import VirtualRegister


class Rows:
    """An IndirectView's addresses, one row per partition of its pattern, resolved when the
    instruction computes; rows outside the tensor are skipped with oob_mode.skip, else an
    error."""

    def __init__(self, ins: _Instruction, view: NkiTensor, oob, column_major: bool = False):
        """`column_major`: the offsets of a [P, N] vector_offset tile in the order
        index.T.flatten() (dma_transpose's gather); else one offset per partition."""
        self.ins, self.view, self.oob = ins, view, oob
        index = view.index
        rows = view.pattern[0][1]
        if view.vector and not column_major and (index.shape[0] != rows or
                                                 index.free_size != 1):
            raise ins.error(ShapeError, f"vector_offset {index.shape} must be ({rows}, 1), one "
                                        f"offset per partition of the pattern")
        if isinstance(index, VirtualRegister):
            if index._source is not None:
                ins.reads.append(index._source)   # the value's producer (registers.py)
            self.offsets = (np.array([index.value(f"{ins.name}'s scalar_offset")])
                            if ins.compute else np.zeros(1))
        else:
            ins.tile(index, "offset")
            self.offsets = ins.values(index, "offset")
            if column_major:
                self.offsets = self.offsets.reshape(index.shape[0], -1).T.reshape(-1)[:rows]
        storage = view._storage
        self.flat, self.flat_written = storage.data.reshape(-1), storage.written.reshape(-1)

    def resolve(self) -> tuple[np.ndarray, np.ndarray]:
        """(addresses [rows, elements per row], which rows are in the tensor)."""
        view, offsets = self.view, self.offsets
        addresses = view.addresses(offsets)
        ok = view.in_bounds(addresses)
        if not ok.all() and self.oob != oob_mode.skip:
            bad = int(np.flatnonzero(~ok)[0])
            raise self.ins.error(OutOfBoundsError, f"row {bad} of the indirect access reaches "
                                                   f"outside {view!r} (offsets "
                                                   f"{offsets.reshape(-1)[:8].tolist()}...); "
                                                   f"pass oob_mode=nisa.oob_mode.skip to skip "
                                                   f"such rows")
        return addresses.reshape(len(ok), -1), ok

    def gather(self, role: str, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
        """(the rows' values as `dtype` [rows, elements], which rows are in the tensor)."""
        addresses, ok = self.resolve()
        taken = addresses[ok]
        if not self.flat_written[taken].all():
            raise self.ins.error(UninitializedReadError, f"{role}: the gathered rows of "
                                                         f"{self.view!r} were never written")
        out = np.zeros(addresses.shape, dtype=dtype)
        out[ok] = self.flat[taken].astype(dtype)
        return out, ok

    def scatter(self, values: np.ndarray) -> None:
        """Writes [rows, elements] values into the rows in the tensor."""
        storage = self.view._storage
        if not self.ins.compute:
            self.flat_written[...] = True   # predict-only: where it lands is not known
            storage.note_write()
            return
        addresses, ok = self.resolve()
        self.flat[addresses[ok]] = dtypes.convert(values.reshape(len(ok), -1)[ok], storage.dt)
        self.flat_written[addresses[ok]] = True
        storage.note_write()


def indirect_copy(ins: _Instruction, dst: NkiTensor, src: NkiTensor, oob) -> None:
    """dma_copy's gather (indirect src) or scatter (indirect dst)."""
    if src.is_indirect() and dst.is_indirect():
        raise ins.error(ShapeError, "src and dst cannot both be addressed indirectly")
    # A copy of one dtype moves the stored values as they are (MX data: its bits); a cast goes
    # through float64.
    work = src._storage.data.dtype if src.dtype == dst.dtype else np.float64
    if src.is_indirect():
        rows = Rows(ins, src, oob)
        old = dst._data

        def gathered():
            values, ok = rows.gather("src", work)
            out = np.array(old, dtype=work).reshape(values.shape)
            out[ok] = values[ok]   # skipped rows keep dst's values
            return out.reshape(dst.shape)

        ins.write(dst, gathered)
        return
    rows = Rows(ins, dst, oob)
    values = ins.values(src, "src")
    rows.scatter(values.astype(work) if ins.compute else values)
