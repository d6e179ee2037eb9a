"""Backend metadata through FakeTensor conversion.

Neuron tensors carry backend metadata (csrc/runtime/BackendMeta.cpp: named boolean flags read
and set with torch._C._get_tensor_metadata / _set_tensor_metadata, kept by torch.save,
detach() and functionalization). PyTorch's FakeTensorConverter makes a fresh tensor and copies
no backend metadata for any device, so torch.compile's graphs would lose it. This wraps
FakeTensorConverter.from_real_tensor (a PyTorch internal: test_backend_meta.py fails if it
moves) to copy a neuron tensor's flags onto its fake tensor, whose device is neuron too. A
tensor under functionalization (FunctionalTensor, as torch.compile's AOT autograd makes them)
is a wrapper without flags of its own: the flags are read from the neuron tensor it wraps.
"""

from torch._subclasses import fake_tensor

_PYTORCH_KEYS = {"conj", "neg"}  # PyTorch's own entries of the same dict


def _unwrapped(t):
    """The tensor holding `t`'s data, under any functionalization wrappers."""
    import torch
    from torch._subclasses.functional_tensor import FunctionalTensor

    while True:
        if isinstance(t, FunctionalTensor):
            t = t.elem
        elif torch._is_functional_tensor(t):
            t = torch._from_functional_tensor(t)
        else:
            return t


def _copy_backend_meta(from_real_tensor):
    def wrapper(self, fake_mode, t, *args, **kwargs):
        out = from_real_tensor(self, fake_mode, t, *args, **kwargs)
        if getattr(t, "device", None) is not None and t.device.type == "neuron":
            import torch

            flags = {k: v for k, v in torch._C._get_tensor_metadata(_unwrapped(t)).items()
                     if k not in _PYTORCH_KEYS}
            if flags:
                torch._C._set_tensor_metadata(out, flags)
        return out

    wrapper.__wrapped__ = from_real_tensor
    return wrapper


def install():
    converter = fake_tensor.FakeTensorConverter
    if not hasattr(converter.from_real_tensor, "__wrapped__"):
        converter.from_real_tensor = _copy_backend_meta(converter.from_real_tensor)
