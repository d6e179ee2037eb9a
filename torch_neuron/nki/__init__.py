"""NKI (Neuron Kernel Interface) kernels on the simulated NeuronCore.

    import torch_neuron.nki as nki
    import torch_neuron.nki.language as nl
    import torch_neuron.nki.isa as nisa

    @nki.jit
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, nl.add(x, nl.load(b)))
        return out

    add(np_a, np_b)                 # NumPy in, NumPy out
    nki.simulate(add)(t_a, t_b)     # torch (e.g. neuron) tensors in, same out

The API is that of the current NKI release (docs/nki.md); each instruction runs with NumPy,
enforces the hardware's rules (errors name the kernel line) and leaves an InstructionRecord
(Note [Instruction records]) in `kernel.last_run.records` / `nki.run(kernel, ...).records`.
With the optional `compat/nki` distribution installed, `import nki` is this package.
"""

from torch_neuron.nki import isa, language, typing
from torch_neuron.nki.errors import (CapacityError, DtypeError, MemorySpaceError,
                                     NkiValidationError, OutOfBoundsError, PartitionLimitError,
                                     PsumBankError, ReleasedTileError, ShapeError,
                                     TileSizeError, UninitializedReadError, UnsupportedError)
from torch_neuron.nki.kernel import Kernel, jit, run, simulate
from torch_neuron.nki.op import nki_op
from torch_neuron.nki.profile import KernelProfile, TimedInstruction, profile
from torch_neuron.nki.records import InstructionRecord, Operand, Region
from torch_neuron.nki.tensor import KernelRun, NkiTensor

dtype = language.DType  # `nki.dtype`, the type of a dtype (a name string) in annotations

__all__ = [
    "jit", "simulate", "run", "profile", "nki_op", "KernelProfile", "TimedInstruction", "Kernel", "KernelRun", "NkiTensor", "InstructionRecord",
    "Operand", "Region", "isa", "language", "typing", "dtype", "NkiValidationError",
    "PartitionLimitError", "TileSizeError", "CapacityError", "PsumBankError", "DtypeError",
    "MemorySpaceError", "ShapeError", "OutOfBoundsError", "UninitializedReadError",
    "UnsupportedError", "ReleasedTileError",
]
