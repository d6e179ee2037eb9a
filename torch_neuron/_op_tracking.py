"""Which ops ran on neuron and which fell back to the CPU (TorchNeuron's tracking API)."""

from torch_neuron import _C


def get_executed_ops() -> dict[str, int]:
    """Operator name ("aten::add.Tensor") -> times it ran with neuron tensors, on the device or
    through CPU fallback, since the last clear_op_tracking()."""
    return dict(_C._executed_ops())


def get_fallback_ops() -> dict[str, int]:
    """Operator name -> times it had no neuron kernel and ran on the CPU instead."""
    return dict(_C._fallback_ops())


def clear_op_tracking() -> None:
    """Resets the counts of get_executed_ops() and get_fallback_ops()."""
    _C._clear_op_tracking()


def set_fallback_error(enabled: bool) -> None:
    """When enabled, an op that would fall back to the CPU raises RuntimeError naming the op.
    TORCH_NEURON_FALLBACK=error enables it at startup."""
    _C._set_fallback_error(bool(enabled))
