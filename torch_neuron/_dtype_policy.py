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


def set_complex_decompose(on: bool) -> None:
    """True (default, as TorchNeuron on PyTorch >= 2.13): ops on complex64 tensors run on the
    device, decomposed into real arithmetic. False: every op on complex tensors falls back to
    the CPU. TORCH_NEURONX_COMPLEX_DECOMPOSE=0 selects False at startup."""
    _C._set_complex_decompose(bool(on))


def get_complex_decompose() -> bool:
    return _C._complex_decompose()
