"""Op anchors timed through the NKI path: the project's kernels written from AWS's NKI
tutorials (examples/nki/), called on neuron tensors in predict-only mode, so the prediction is
trnsim's instruction-level schedule of the same tiling the tutorial measured (issue 27, item 7),
not a PyTorch op's cost. A kernel call is one launch on the stream (Note [NKI kernels on the
stream]), the same eagerly or compiled."""

import importlib
import sys
from pathlib import Path

from torch_neuron.fidelity.workloads import timed_ms


def example(name: str):
    """A module of examples/nki/ in the source checkout this package runs from."""
    import torch_neuron

    root = Path(torch_neuron.__file__).resolve().parents[1] / "examples" / "nki"
    if not (root / f"{name}.py").is_file():
        raise FileNotFoundError(f"the NKI anchors run the kernels of examples/nki/ ({root}), "
                                f"which an installed wheel does not have: run the fidelity "
                                f"suite from a source checkout (pip install -e .)")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return importlib.import_module(name)


def matmul_tutorial_ms(kernel: str, m: int, k: int, n: int, mode: str, dtype="bfloat16",
                       unless_spilled: bool = False, **options):
    """`kernel` of examples/nki/matmul_sequence.py on [m, k] @ [k, n] in `dtype` (lhsT given
    as [k, m], as the tutorial's kernels take it), the result stored in `dtype` as the
    tutorials do. unless_spilled: None when the kernel's tiles do not fit in SBUF (_kernel_ms)."""
    import torch

    kernels = example("matmul_sequence")
    lhsT = torch.empty(k, m, dtype=getattr(torch, dtype), device="neuron")
    rhs = torch.empty(k, n, dtype=getattr(torch, dtype), device="neuron")
    fn = getattr(kernels, kernel)
    return _kernel_ms(lambda: fn(lhsT, rhs, result_dtype=dtype, **options), unless_spilled)


def layernorm_tutorial_ms(version: str, rows: int, cols: int, mode: str) -> float:
    """examples/nki/layernorm.py's `layernorm_<version>` on a [rows, cols] float32 input."""
    import torch

    kernel = getattr(example("layernorm"), f"layernorm_{version}")
    x = torch.empty(rows, cols, device="neuron")
    gamma = torch.empty(cols, device="neuron")
    beta = torch.empty(cols, device="neuron")
    return timed_ms(lambda: kernel(x, gamma, beta))


def mamba_tutorial_ms(version: str, batch: int, channels: int, seq: int, states: int,
                      mode: str, unless_spilled: bool = False):
    """examples/nki/mamba.py's `mamba_<version>` on float32 inputs of the tutorial's layout:
    delta and u [batch, channels, seq], A [channels, states], B and C [batch, states, seq].
    unless_spilled: None when the kernel's tiles do not fit in SBUF (_kernel_ms)."""
    import torch

    kernel = getattr(example("mamba"), f"mamba_{version}")
    shapes = ((batch, channels, seq), (batch, channels, seq), (channels, states),
              (batch, states, seq), (batch, states, seq))
    args = [torch.empty(s, device="neuron") for s in shapes]
    return _kernel_ms(lambda: kernel(*args), unless_spilled)


def _kernel_ms(call, unless_spilled: bool):
    """The simulated time of call(), ms; None when unless_spilled and the kernel's tiles do
    not fit in SBUF: AWS's compiler spilled them to HBM, the simulator does not, so it has no
    time for the kernel."""
    from torch_neuron.nki import CapacityError

    try:
        return timed_ms(call)
    except CapacityError:
        if not unless_spilled:
            raise
        return None
