"""Copies into, out of and between neuron devices, compared with the same copy on the CPU."""

import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool, torch.complex64]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point or dtype.is_complex:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=g, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip(dtype):
    cpu = sample((5, 7), dtype)
    n = cpu.to("neuron")
    assert n.device == torch.device("neuron", 0)
    assert n.dtype == dtype
    assert n.shape == cpu.shape
    back = n.cpu()
    assert back.device.type == "cpu"
    assert torch.equal(back, cpu)


def test_int64_extremes_round_trip():
    # Storage keeps all 64 bits even though Trainium computes narrow integers.
    cpu = torch.tensor([torch.iinfo(torch.int64).min, -1, 0, 1, torch.iinfo(torch.int64).max])
    assert torch.equal(cpu.to("neuron").cpu(), cpu)


def test_special_float_values_round_trip():
    cpu = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-45])
    back = cpu.to("neuron").cpu()
    assert torch.equal(back.isnan(), cpu.isnan())
    assert torch.equal(back[1:], cpu[1:])
    assert torch.signbit(back[3])


@pytest.mark.parametrize("make_view", [
    lambda t: t.t(),
    lambda t: t[::2, 1::3],
    lambda t: t[:, 2],
    lambda t: t.unsqueeze(1).expand(6, 3, 8),
    lambda t: t.as_strided((3, 3), (5, 2), 1),
], ids=["transpose", "step-slices", "column", "expand", "as_strided"])
def test_non_contiguous_source(make_view):
    base = torch.randn(6, 8)
    src = make_view(base)
    n = src.to("neuron")
    assert torch.equal(n.cpu(), src)
    # And back out of a non-contiguous neuron view.
    n_view = make_view(base.to("neuron"))
    assert torch.equal(n_view.cpu(), src)


def test_non_contiguous_destinations():
    src = torch.randn(4, 6)
    # Transposed destination.
    dst = torch.zeros(6, 4, device="neuron").t()
    dst.copy_(src)
    assert torch.equal(dst.cpu(), src)
    # Strided slice of a larger tensor: the elements between must stay untouched.
    big = torch.zeros(4, 12, device="neuron")
    big[:, ::2].copy_(src.to("neuron"))
    want = torch.zeros(4, 12)
    want[:, ::2] = src
    assert torch.equal(big.cpu(), want)
    # Non-contiguous CPU destination from a neuron source.
    cpu_big = torch.zeros(12, 4)
    cpu_big[1::2].copy_(src.t().to("neuron"))
    want = torch.zeros(12, 4)
    want[1::2] = src.t()
    assert torch.equal(cpu_big, want)


@pytest.mark.parametrize("src_dtype, dst_dtype", [
    (torch.float32, torch.bfloat16), (torch.float32, torch.float16), (torch.float64, torch.float32),
    (torch.float32, torch.int32), (torch.int64, torch.float32), (torch.float32, torch.bool),
    (torch.uint8, torch.float16), (torch.bfloat16, torch.float32),
], ids=str)
def test_dtype_converting_copies(src_dtype, dst_dtype):
    cpu = sample((3, 5), src_dtype)
    want = cpu.to(dst_dtype)
    # Upload and convert in one step.
    assert torch.equal(cpu.to("neuron", dst_dtype).cpu(), want)
    # Convert on the device.
    assert torch.equal(cpu.to("neuron").to(dst_dtype).cpu(), want)
    # Download and convert.
    assert torch.equal(cpu.to("neuron").to("cpu", dst_dtype), want)
    # copy_ between dtypes on the device.
    dst = torch.empty(3, 5, dtype=dst_dtype, device="neuron")
    dst.copy_(cpu.to("neuron"))
    assert torch.equal(dst.cpu(), want)


@pytest.mark.parametrize("src, dst", [(0, 3), (3, 0), (1, 2), (2, 2)])
def test_device_to_device(src, dst):
    cpu = torch.randn(5, 9)
    a = cpu.to(f"neuron:{src}")
    b = a.to(f"neuron:{dst}")
    assert b.device == torch.device("neuron", dst)
    assert torch.equal(b.cpu(), cpu)
    # copy_ between devices, into a non-contiguous destination, converting dtype.
    out = torch.zeros(9, 5, dtype=torch.bfloat16, device=f"neuron:{dst}").t()
    out.copy_(a)
    assert torch.equal(out.cpu(), cpu.to(torch.bfloat16))
    assert torch.equal(a.cpu(), cpu)  # source unchanged


def test_copy_does_not_depend_on_current_device():
    cpu = torch.randn(10)
    with torch.neuron.device(2):
        b = cpu.to("neuron:1").to("neuron:3")
    assert b.device.index == 3
    assert torch.equal(b.cpu(), cpu)


def test_zero_size_tensors():
    for shape in [(0,), (0, 3), (4, 0, 2)]:
        cpu = torch.empty(shape)
        n = cpu.to("neuron")
        assert n.shape == cpu.shape and n.device.type == "neuron"
        assert n.cpu().shape == cpu.shape
        assert n.to("neuron:1").shape == cpu.shape
        n.copy_(cpu)


def test_scalar_tensor_round_trip():
    cpu = torch.tensor(3.25)
    n = cpu.to("neuron")
    assert n.dim() == 0
    assert torch.equal(n.cpu(), cpu)


def test_broadcasting_copy():
    row = torch.arange(6.0)
    dst = torch.zeros(4, 6, device="neuron")
    dst.copy_(row)                              # from the CPU
    assert torch.equal(dst.cpu(), row.expand(4, 6))
    col = torch.arange(4.0).reshape(4, 1).to("neuron")
    dst.copy_(col)                              # on the device
    assert torch.equal(dst.cpu(), torch.arange(4.0).reshape(4, 1).expand(4, 6))
    dst.copy_(torch.tensor(2.5, device="neuron"))  # 0-dim
    assert torch.equal(dst.cpu(), torch.full((4, 6), 2.5))


@pytest.mark.parametrize("src_shape", [(4, 3), (3, 5), (2, 3, 4), (5,)])
def test_wrong_shape_copy_raises_and_device_still_works(src_shape):
    dst = torch.zeros(3, 4, device="neuron")
    cpu_dst = torch.zeros(3, 4)
    with pytest.raises(RuntimeError):
        cpu_dst.copy_(torch.ones(src_shape))  # the CPU refuses too (reference)
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(src_shape))
    with pytest.raises(RuntimeError):
        dst.copy_(torch.ones(src_shape, device="neuron"))
    x = torch.randn(3, 4)
    dst.copy_(x)
    assert torch.equal(dst.cpu(), x)


def test_copy_to_self():
    cpu = torch.randn(8)
    n = cpu.to("neuron")
    n.copy_(n)
    assert torch.equal(n.cpu(), cpu)


def test_pinned_memory_non_blocking():
    src = torch.randn(1 << 16).pin_memory()
    assert src.is_pinned()
    n = src.to("neuron", non_blocking=True)
    out = torch.empty(1 << 16).pin_memory()
    out.copy_(n, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(n.cpu(), src)
    assert torch.equal(out, src)
    assert torch.equal(n.to("cpu", non_blocking=True), src)
    # Pinned memory asked for explicitly by device.
    pinned = torch.empty(16, pin_memory=True)
    assert pinned.is_pinned()


def test_non_blocking_from_pageable_memory():
    src = torch.randn(1000)
    n = src.to("neuron", non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(n.cpu(), src)


def test_tensor_factories_with_data():
    data = [[1.5, -2.0], [3.0, 4.25]]
    n = torch.tensor(data, device="neuron:1")
    assert n.device == torch.device("neuron", 1)
    assert torch.equal(n.cpu(), torch.tensor(data))
    assert torch.equal(torch.as_tensor(data, device="neuron").cpu(), torch.tensor(data))
    assert torch.equal(torch.ones(2, 3, device="neuron").cpu(), torch.ones(2, 3))
    assert torch.equal(torch.full((2, 2), 7, device="neuron").cpu(), torch.full((2, 2), 7))
    assert torch.equal(torch.zeros(3, dtype=torch.int64, device="neuron").cpu(),
                       torch.zeros(3, dtype=torch.int64))
    assert torch.equal(torch.arange(10, device="neuron").cpu(), torch.arange(10))
    like = torch.zeros_like(n)
    assert like.device == n.device and torch.equal(like.cpu(), torch.zeros(2, 2))
    assert torch.equal(n.new_ones(3).cpu(), torch.ones(3))
    assert torch.equal(n.clone().cpu(), torch.tensor(data))
