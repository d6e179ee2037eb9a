"""Predict-only execution (Note [Predict-only execution] in csrc/aten/PredictOnly.h).

With execution off, every op on neuron tensors is charged on the simulated clock and allocates
simulated HBM as usual (peak memory, out-of-memory at the instance's capacity), but computes
nothing: results have the right shapes, dtypes and strides and undefined values. A forward and
backward pass of a full-size model is then predicted in seconds, with no RAM for its untouched
device memory. What needs values raises NotImplementedError naming this mode: an op whose
output shape depends on data (nonzero, unique, masked_select, ...), copies to the CPU, and
.item() of a non-float tensor; .item() of a floating-point tensor (a loss to print) is NaN.
"""

import contextlib

from torch_neuron import _C


def set_execute(enabled: bool) -> None:
    """Whether neuron ops compute their results (True, the default) or are only charged
    (False, predict-only). TORCH_NEURON_EXECUTE=0 turns execution off at startup."""
    _C._set_execute(bool(enabled))


def get_execute() -> bool:
    return _C._execute_enabled()


@contextlib.contextmanager
def predict_only():
    """A block whose neuron ops are charged but not computed."""
    before = get_execute()
    set_execute(False)
    try:
        yield
    finally:
        set_execute(before)
