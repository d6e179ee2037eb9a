"""Views and metadata ops (view, reshape, transpose, as_strided, ..., resize_, set_), reading
scalars (item, float, bool) and writing constants (fill_, zero_), compared with the CPU."""

import pytest
import torch

import torch_neuron

VIEWS = {
    "view": lambda t: t.view(6, 4),
    "view_flat": lambda t: t.view(-1),
    "view_dtype": lambda t: t.view(torch.int32),
    "reshape_contiguous": lambda t: t.reshape(2, 12),
    "transpose": lambda t: t.transpose(0, 1),
    "t": lambda t: t.t(),
    "as_strided": lambda t: t.as_strided((3, 3), (2, 1), 1),
    "as_strided_overlapping": lambda t: t.as_strided((4, 4), (1, 1)),
    "unfold": lambda t: t.unfold(1, 2, 2),
    "unfold_overlapping": lambda t: t.unfold(1, 3, 1),
    "narrow": lambda t: t.narrow(0, 1, 2),
    "narrow_columns": lambda t: t.narrow(1, 2, 3),
    "select": lambda t: t.select(1, 2),
    "select_negative": lambda t: t.select(0, -1),
    "expand": lambda t: t[:1].expand(3, 6),
    "expand_new_dim": lambda t: t.unsqueeze(0).expand(2, 4, 6),
    "squeeze": lambda t: t.unsqueeze(0).unsqueeze(2).squeeze(),
    "squeeze_dim": lambda t: t[:1].squeeze(0),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "permute": lambda t: t.view(2, 3, 4).permute(2, 0, 1),
    "slice_step": lambda t: t[::2, 1::3],
    "diagonal": lambda t: t.diagonal(),
    "unbind": lambda t: t.unbind(0)[2],
    "split": lambda t: t.split(4, dim=1)[1],
    "chunk": lambda t: t.chunk(2, dim=0)[1],
    "movedim": lambda t: t.view(2, 3, 4).movedim(0, 2),
    "flatten_contiguous": lambda t: t.flatten(),
    "nested": lambda t: t.t()[1:, ::2].unsqueeze(0).transpose(0, 2),
}


@pytest.fixture
def base():
    return torch.arange(24.0).reshape(4, 6)


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_matches_cpu_and_shares_storage(base, name):
    make = VIEWS[name]
    n = base.to("neuron")
    cpu_view = make(base)
    n_view = make(n)
    assert n_view.device == n.device
    assert n_view.shape == cpu_view.shape
    assert n_view.stride() == cpu_view.stride()
    assert n_view.storage_offset() == cpu_view.storage_offset()
    assert torch.equal(n_view.cpu(), cpu_view)
    # A view, not a copy: same storage as its base.
    assert n_view.untyped_storage().data_ptr() == n.untyped_storage().data_ptr()


# Views whose elements are distinct and of the base's dtype.
@pytest.mark.parametrize("name", [n for n in VIEWS
                                  if not any(k in n for k in ("overlapping", "expand", "dtype"))])
def test_write_through_view_reaches_base(base, name):
    make = VIEWS[name]
    n = base.to("neuron")
    cpu = base.clone()
    make(cpu).fill_(-1)
    make(n).fill_(-1)
    assert torch.equal(n.cpu(), cpu)
    # Copying into a view writes only the viewed elements.
    cpu = base.clone()
    n = base.to("neuron")
    src = torch.randn(make(cpu).shape)
    make(cpu).copy_(src)
    make(n).copy_(src)
    assert torch.equal(n.cpu(), cpu)


def test_views_do_not_fall_back(base):
    n = base.to("neuron")
    torch_neuron.clear_op_tracking()
    for make in VIEWS.values():
        make(n)
    assert torch_neuron.get_fallback_ops() == {}


def test_reshape_of_non_contiguous_copies():
    base = torch.arange(24.0).reshape(4, 6)
    n = base.to("neuron")
    got = n.t().reshape(24)
    assert torch.equal(got.cpu(), base.t().reshape(24))
    assert got.is_contiguous()
    # The copy is independent of its source.
    got.fill_(0)
    assert torch.equal(n.cpu(), base)


def test_contiguous_and_clone():
    base = torch.arange(24.0).reshape(4, 6)
    n = base.to("neuron").t()
    c = n.contiguous()
    assert c.is_contiguous() and torch.equal(c.cpu(), base.t())
    assert c.untyped_storage().data_ptr() != n.untyped_storage().data_ptr()
    k = n.clone(memory_format=torch.contiguous_format)
    assert k.is_contiguous() and torch.equal(k.cpu(), base.t())


def test_complex_views():
    z = torch.randn(3, 2, dtype=torch.complex64)
    n = z.to("neuron")
    r = torch.view_as_real(n)
    assert r.shape == (3, 2, 2)
    assert torch.equal(r.cpu(), torch.view_as_real(z))
    back = torch.view_as_complex(r)
    assert torch.equal(back.cpu(), z)


def test_invalid_view_raises_like_cpu(base):
    n = base.to("neuron")
    with pytest.raises(RuntimeError):
        base.t().view(24)
    with pytest.raises(RuntimeError):
        n.t().view(24)
    with pytest.raises(RuntimeError):
        n.view(5, 5)
    assert torch.equal(n.view(24).cpu(), base.view(24))


# resize_ and set_ ----------------------------------------------------------------------------


def test_resize_grow_keeps_data():
    cpu = torch.arange(6.0)
    n = cpu.to("neuron")
    n.resize_(3, 4)
    assert n.shape == (3, 4) and n.is_contiguous()
    assert torch.equal(n.flatten()[:6].cpu(), cpu)
    n.flatten()[6:].fill_(1)  # the new part is usable
    assert torch.equal(n.cpu().flatten(), torch.cat([cpu, torch.ones(6)]))


def test_resize_shrink_then_grow_within_storage():
    cpu = torch.arange(12.0)
    n = cpu.to("neuron")
    n.resize_(2, 2)
    assert torch.equal(n.cpu(), cpu[:4].view(2, 2))
    n.resize_(12)
    assert torch.equal(n.cpu(), cpu)


def test_resize_from_empty_and_to_zero():
    n = torch.empty(0, device="neuron:2")
    n.resize_(5).fill_(3)
    assert n.device.index == 2
    assert torch.equal(n.cpu(), torch.full((5,), 3.0))
    n.resize_(0)
    assert n.numel() == 0


def test_resize_negative_raises():
    n = torch.empty(2, device="neuron")
    with pytest.raises(RuntimeError):
        n.resize_(-1)


def test_resize_as_and_out_variant_resizing():
    n = torch.empty(0, device="neuron")
    n.resize_as_(torch.empty(2, 3))
    assert n.shape == (2, 3)
    # An op writing into a wrongly sized out= tensor resizes it (here through a CPU fallback).
    out = torch.empty(0, device="neuron")
    a = torch.randn(3, 4)
    torch.add(a.to("neuron"), 1, out=out)
    assert torch.equal(out.cpu(), a + 1)


def test_set_from_tensor():
    src = torch.arange(24.0).reshape(4, 6).to("neuron")[1:, ::2]
    t = torch.empty(0, device="neuron")
    t.set_(src)
    assert t.shape == src.shape and t.stride() == src.stride()
    assert t.storage_offset() == src.storage_offset()
    assert torch.equal(t.cpu(), src.cpu())
    t.fill_(0)  # shares the storage
    assert torch.equal(src.cpu(), torch.zeros(3, 3))


def test_set_from_storage():
    base = torch.arange(12.0)
    src = base.to("neuron")
    t = torch.empty(0, device="neuron")
    t.set_(src.untyped_storage())
    assert t.shape == (12,)
    assert torch.equal(t.cpu(), base)
    u = torch.empty(0, device="neuron")
    u.set_(src.untyped_storage(), 2, (2, 3), (4, 1))
    want = torch.empty(0).set_(base.untyped_storage(), 2, (2, 3), (4, 1))
    assert torch.equal(u.cpu(), want)
    u.zero_()
    want.zero_()
    assert torch.equal(src.cpu(), base)


def test_set_to_empty():
    t = torch.ones(3, device="neuron")
    t.set_()
    assert t.shape == (0,) and t.device.type == "neuron"


def test_set_from_other_device_raises():
    t = torch.empty(0, device="neuron:0")
    with pytest.raises(RuntimeError):
        t.set_(torch.ones(3, device="neuron:1").untyped_storage())
    assert torch.equal(torch.ones(2, device="neuron").cpu(), torch.ones(2))


# Scalars and constants -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                   torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_item_and_python_conversions(dtype):
    cpu = (torch.tensor([0.0, 2.75, -3.5, 1.0]) if dtype.is_floating_point
           else torch.tensor([0, 5, 1, 200]) if dtype != torch.bool
           else torch.tensor([False, True, True, False])).to(dtype)
    n = cpu.to("neuron")
    for i in range(4):
        assert n[i].item() == cpu[i].item()
        assert type(n[i].item()) is type(cpu[i].item())
        assert float(n[i]) == float(cpu[i])
        assert bool(n[i]) == bool(cpu[i])
        assert int(n[i]) == int(cpu[i])
    assert n.tolist() == cpu.tolist()


def test_item_of_views_and_multi_element():
    cpu = torch.arange(12.0).reshape(3, 4)
    n = cpu.to("neuron")
    assert n.t()[3, 2].item() == cpu.t()[3, 2].item()
    assert n[1:, 2:][1, 1].item() == cpu[1:, 2:][1, 1].item()
    assert torch.tensor(7.5, device="neuron").item() == 7.5
    with pytest.raises(RuntimeError):
        cpu.item()
    with pytest.raises(RuntimeError):
        n.item()
    with pytest.raises(RuntimeError):
        bool(n)


@pytest.mark.parametrize("dtype, value", [
    (torch.float32, 3.5), (torch.bfloat16, -1.25), (torch.float16, 65504.0),
    (torch.int64, 2**40 + 3), (torch.int32, -7), (torch.uint8, 255), (torch.bool, True),
    (torch.float32, float("inf")),
], ids=str)
def test_fill_and_zero(dtype, value):
    cpu = torch.ones(3, 5, dtype=dtype)
    n = cpu.to("neuron")
    cpu.fill_(value)
    n.fill_(value)
    assert torch.equal(n.cpu(), cpu)
    cpu.zero_()
    n.zero_()
    assert torch.equal(n.cpu(), cpu)


def test_fill_non_contiguous():
    cpu = torch.arange(20.0).reshape(4, 5)
    n = cpu.to("neuron")
    for make in (lambda t: t[:, 1], lambda t: t[::2, ::2], lambda t: t.t()[1:3]):
        make(cpu).fill_(-9)
        make(n).fill_(-9)
        assert torch.equal(n.cpu(), cpu)
    cpu[1].zero_()
    n[1].zero_()
    assert torch.equal(n.cpu(), cpu)


def test_fill_with_tensor_value():
    n = torch.empty(4, device="neuron")
    n.fill_(torch.tensor(2.5, device="neuron"))
    assert torch.equal(n.cpu(), torch.full((4,), 2.5))
    n.fill_(torch.tensor(-1.0))  # 0-dim CPU value
    assert torch.equal(n.cpu(), torch.full((4,), -1.0))
    with pytest.raises(RuntimeError):
        torch.empty(4).fill_(torch.ones(2))  # the CPU refuses too (reference)
    with pytest.raises(RuntimeError):
        n.fill_(torch.ones(2, device="neuron"))
    assert torch.equal(n.cpu(), torch.full((4,), -1.0))


def test_fill_empty_tensor():
    n = torch.empty(0, 3, device="neuron")
    n.fill_(1)
    n.zero_()
    assert n.shape == (0, 3)


def test_fill_and_zero_run_on_device():
    n = torch.empty(8, device="neuron")
    torch_neuron.clear_op_tracking()
    n.fill_(1)
    n.zero_()
    n[0].item()
    assert torch_neuron.get_fallback_ops() == {}
