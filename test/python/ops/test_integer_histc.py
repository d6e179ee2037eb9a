"""torch.histc of integer tensors, which CUDA computes and ATen's CPU kernel refuses.

Code written for accelerators relies on it (transformers' MoE routing counts tokens per expert
with an integer histc on every device but the CPU). The reference is the CPU's histc of the
same values as float32, which is exact for these small integers.
"""

import pytest
import torch

import torch_neuron


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8, torch.int16])
@pytest.mark.parametrize("bins,low,high", [(4, 0, 3), (7, 0, 6), (3, 2, 9), (5, 0, 0)])
def test_integer_histc_matches_cpu_float_histc(dtype, bins, low, high):
    values = torch.randint(0, 12, (257,), generator=torch.Generator().manual_seed(bins))
    values = values.to(dtype)
    torch_neuron.clear_op_tracking()
    got = torch.histc(values.to("neuron"), bins=bins, min=low, max=high)
    assert got.device.type == "neuron" and got.dtype == dtype
    want = torch.histc(values.float(), bins=bins, min=low, max=high).to(dtype)
    assert torch.equal(got.cpu(), want)
    assert not torch_neuron.get_fallback_ops()


def test_integer_histc_of_constant_data_widens_the_range_like_cuda():
    values = torch.full((10,), 5, dtype=torch.int32)
    got = torch.histc(values.to("neuron"), bins=3)
    assert torch.equal(got.cpu(), torch.histc(values.float(), bins=3).int())


def test_integer_histc_of_an_empty_tensor_is_all_zeros():
    got = torch.histc(torch.empty(0, dtype=torch.int64, device="neuron"), bins=4, min=0, max=3)
    assert torch.equal(got.cpu(), torch.zeros(4, dtype=torch.int64))


def test_integer_histc_rejects_an_inverted_range():
    with pytest.raises(RuntimeError, match="max must be larger than min"):
        torch.histc(torch.arange(4, device="neuron"), bins=2, min=3, max=1)


def test_floating_histc_still_runs_the_cpu_kernel():
    values = torch.randn(1000)
    got = torch.histc(values.to("neuron"), bins=10, min=-2, max=2)
    assert torch.equal(got.cpu(), torch.histc(values, bins=10, min=-2, max=2))
