"""print(tensor) on neuron: the CPU's digits and suffixes, no float64 warning, and only a copy
to the host charged (torch_neuron/_printing.py)."""

import warnings

import pytest
import torch

import torch_neuron


def with_device(cpu_text):
    """What the CPU prints, with the device suffix PyTorch adds for a neuron tensor."""
    if ", dtype=" in cpu_text:
        return cpu_text.replace(", dtype=", ", device='neuron:0', dtype=", 1)
    return cpu_text[:-1] + ", device='neuron:0')"


@pytest.mark.parametrize("make", [
    lambda: torch.randn(3, 4),
    lambda: torch.randn(5) * 1e8,
    lambda: torch.tensor(2.5),
    lambda: torch.randn(2, 3).to(torch.bfloat16),
    lambda: torch.randn(3).to(torch.float64),
    lambda: torch.arange(6).reshape(2, 3),
    lambda: torch.tensor([True, False]),
    lambda: torch.randn(2000),  # summarized with "..."
    lambda: torch.tensor([float("nan"), float("inf"), -1.0]),
], ids=["float", "large", "scalar", "bf16", "float64", "int64", "bool", "summarized", "nonfinite"])
def test_prints_as_the_cpu_does_without_warnings(make):
    x = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the float64 narrowing warning would raise here
        got = str(x.to("neuron"))
    # (PyTorch may wrap the longer suffix onto a line of its own: whitespace aside.)
    assert "".join(got.split()) == "".join(with_device(str(x)).split())


def test_suffixes_come_from_the_neuron_tensor():
    w = torch.randn(3, requires_grad=True)
    y = w.to("neuron") * 2
    text = str(y)
    assert "device='neuron:0'" in text and "grad_fn=<MulBackward0>" in text
    assert str(torch.ones(2, dtype=torch.float16, device="neuron")) == \
        "tensor([1., 1.], device='neuron:0', dtype=torch.float16)"


def test_printing_runs_only_a_copy_on_the_device():
    x = torch.randn(64, 64, device="neuron")
    torch.neuron.synchronize()
    torch_neuron.clear_op_tracking()
    str(x)
    ops = set(torch_neuron.get_executed_ops())
    assert ops and all("copy" in name for name in ops), ops
