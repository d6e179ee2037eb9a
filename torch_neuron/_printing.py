"""Printing a neuron tensor formats its values from a CPU copy.

PyTorch's tensor printing (torch/_tensor_str.py) works out the number format on the tensor's
own device, in float64 (MPS and XPUs without float64 excepted). On neuron that would run a
dozen device ops per print, each charged to the simulated clock, in float64, which neuron
computes in float32 with a warning (the dtype policy, csrc/aten/DtypePolicy.h): a
`print(loss)` in a training loop would add simulated time and warn, and with warnings as
errors it would raise.
A print reads the data back to the host, as it does on real hardware, so the values are
formatted from `.cpu()`: the same digits as the CPU prints; the suffixes (device, dtype,
grad_fn) still come from the neuron tensor. This wraps `_tensor_str`, a PyTorch internal
(test_printing.py fails if it moves).
"""

import torch
import torch._tensor_str as _tensor_str_module

_format_values = _tensor_str_module._tensor_str


def _tensor_str(self, indent):
    if self.device.type == "neuron":
        with torch.no_grad():
            self = self.cpu()
    return _format_values(self, indent)


def install():
    _tensor_str_module._tensor_str = _tensor_str
