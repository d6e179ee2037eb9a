"""How neuron treats dtypes Trainium does not compute natively (see docs/design.md)."""

from torch_neuron import _C


def set_float64_mode(mode: str) -> None:
    """"narrow" (default): device ops compute float64 in float32 and cast back, as Trainium
    and TorchNeuron do. "exact": compute float64 exactly on the host.
    TORCH_NEURON_FLOAT64=exact selects "exact" at startup."""
    if mode not in ("narrow", "exact"):
        raise ValueError(f"float64 mode must be 'narrow' or 'exact', got {mode!r}")
    _C._set_float64_exact(mode == "exact")


def get_float64_mode() -> str:
    return "exact" if _C._float64_is_exact() else "narrow"
