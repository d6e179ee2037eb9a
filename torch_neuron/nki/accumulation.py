"""How a matmul's product meets what its PSUM destination holds: nc_matmul's "Accumulation
mode" (the release's stub), shared by nisa.nc_matmul and nisa.nc_matmul_mx."""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import NkiValidationError, UninitializedReadError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.tensor import NkiTensor


def matmul_accumulation(ins: _Instruction, dst: NkiTensor, accumulate, M: int, N: int):
    """Which [M, N] elements of a matmul's PSUM `dst` the product adds to. "accumulate: if None
    (default), auto-detect based on whether this PSUM location was previously written" (stub
    of nc_matmul_mx; nc_matmul's: "first write overwrites, subsequent writes accumulate"); True
    requires it written, False overwrites. On NeuronCore-v2 and -v3, where accumulating onto a
    location a non-matmul instruction wrote is undefined, the inferred first write is the first
    matmul's: AWS's kernels zero a PSUM tile with memset, then let the matmuls that follow
    overwrite it (nki-library depthwise_conv1d, attention_bwd), which they run on Trainium2."""
    t = ins.target
    written = dst._written.reshape(M, N) if dst._written.flags.c_contiguous else \
        np.ascontiguousarray(dst._written).reshape(M, N)
    if accumulate is None:
        acc = written
        if t.nc_version < 4 and acc.any():
            acc = acc & np.ascontiguousarray(dst.matmul_mask()).reshape(M, N)
    elif accumulate:
        if not written.all():
            raise ins.error(UninitializedReadError,
                            f"accumulate=True into {dst!r} whose {int((~written).sum())} "
                            f"elements no matmul has written (undefined on hardware); use "
                            f"accumulate=False for the first matmul")
        acc = written
    else:
        acc = np.zeros_like(written)
    if t.nc_version < 4 and acc.any():
        # "On NeuronCore-v2 and NeuronCore-v3, matmul accumulating into a PSUM location that
        # was value-initialized by a non-matmul instruction (e.g., memset, tensor_copy) is not
        # supported and is undefined behavior on hardware."
        by_matmul = np.ascontiguousarray(dst.matmul_mask()).reshape(M, N)
        if (acc & ~by_matmul).any():
            raise ins.error(NkiValidationError,
                            f"accumulating into {int((acc & ~by_matmul).sum())} elements of "
                            f"{dst!r} last written by a non-matmul instruction (memset, "
                            f"tensor_copy, ...): undefined on {t.core}; start the accumulation "
                            f"with a matmul (accumulate=False) instead of zeroing PSUM")
    return np.array(acc, copy=True)   # not a view of the mask the write will set


def accumulated(dst: NkiTensor, acc, product, M: int, N: int):
    """A thunk of dst's new [M, N] values: `product()` (float32) added where `acc` is set."""
    old = dst._data

    def result():
        p = product()
        if not acc.any():
            return p
        return np.where(acc, old.reshape(M, N).astype(np.float32), np.float32(0)) + p

    return result
