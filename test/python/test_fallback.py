"""CPU fallback for ops without a neuron kernel: CPU-identical results, tracking with
get_fallback_ops()/get_executed_ops(), and the switch that makes fallback an error.

The ops used here (mm, relu, sum, add, ...) have no neuron kernel yet. Keys are ATen operator
names with their overload, as the dispatcher reaches the backend: structured ops arrive as their
out= overload ("aten::mm.out"), others under their own name ("aten::relu")."""

import re

import pytest
import torch

import torch_neuron
from conftest import run_python_json

# (callable on tensors, the fallback keys it produces)
OPS = {
    "mm": (lambda a, b: torch.mm(a, b.t()), {"aten::mm.out": 1}),
    "matmul": (lambda a, b: a @ b.t(), {"aten::mm.out": 1}),
    "relu": (lambda a, b: torch.relu(a), {"aten::relu": 1}),
    "sum": (lambda a, b: a.sum(), {"aten::sum.IntList_out": 1}),
    "sum_dim": (lambda a, b: a.sum(dim=1, keepdim=True), {"aten::sum.IntList_out": 1}),
    "add": (lambda a, b: a + b, {"aten::add.out": 1}),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-2.5), {"aten::add.out": 1}),
    "add_scalar": (lambda a, b: a + 3, {"aten::add.out": 1}),
    "sub": (lambda a, b: a - b, {"aten::sub.out": 1}),
    "mul_cpu_scalar_tensor": (lambda a, b: a * torch.tensor(1.5), {"aten::mul.out": 1}),
    "cat": (lambda a, b: torch.cat([a, b], dim=0), {"aten::cat.out": 1}),
    "max_dim": (lambda a, b: a.max(dim=1), {"aten::max.dim_max": 1}),
}


def run_on_both(fn, *cpu_args):
    """Result of `fn` on the CPU and on neuron (the neuron results moved back)."""
    want = fn(*cpu_args)
    got = fn(*(t.to("neuron") for t in cpu_args))
    return want, got


def assert_same(got, want):
    if isinstance(got, torch.Tensor):
        assert got.device.type == "neuron"
        assert got.dtype == want.dtype
        assert torch.equal(got.cpu(), want)
    else:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)


@pytest.mark.parametrize("name", list(OPS))
def test_fallback_result_matches_cpu_and_is_counted(name):
    fn, keys = OPS[name]
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    torch_neuron.clear_op_tracking()
    want, got = run_on_both(fn, a, b)
    assert_same(got, want)
    assert torch_neuron.get_fallback_ops() == keys
    executed = torch_neuron.get_executed_ops()
    for key, count in keys.items():  # fallback ops count as executed too
        assert executed[key] == count


def test_fallback_key_format():
    a = torch.randn(3, 3).to("neuron")
    torch_neuron.clear_op_tracking()
    torch.mm(a, a)
    torch.relu(a)
    a.sum()
    keys = torch_neuron.get_fallback_ops()
    assert keys == {"aten::mm.out": 1, "aten::relu": 1, "aten::sum.IntList_out": 1}
    assert all(re.fullmatch(r"aten::\w+(\.\w+)?", k) for k in keys)


def test_fallback_counts_accumulate():
    a = torch.randn(4).to("neuron")
    torch_neuron.clear_op_tracking()
    for _ in range(3):
        torch.relu(a)
    assert torch_neuron.get_fallback_ops() == {"aten::relu": 3}


def test_fallback_on_non_contiguous_inputs():
    a = torch.randn(6, 8)
    b = torch.randn(8, 6)
    want = torch.mm(a[::2].t(), b[:, ::2].t()) + a[::2].t()[:, :1]
    n_a, n_b = a.to("neuron"), b.to("neuron")
    got = torch.mm(n_a[::2].t(), n_b[:, ::2].t()) + n_a[::2].t()[:, :1]
    assert torch.equal(got.cpu(), want)


def test_in_place_fallback_updates_the_neuron_tensor():
    cpu = torch.randn(4, 5)
    n = cpu.to("neuron")
    ptr = n.data_ptr()
    cpu.add_(2).mul_(3)
    n.add_(2).mul_(3)
    assert n.data_ptr() == ptr
    assert torch.equal(n.cpu(), cpu)
    # ... also through a non-contiguous view.
    cpu.t()[1:3].relu_()
    n.t()[1:3].relu_()
    assert torch.equal(n.cpu(), cpu)


def test_fallback_with_out_argument():
    a, b = torch.randn(3, 4), torch.randn(4, 2)
    out = torch.empty(3, 2, device="neuron")
    torch.mm(a.to("neuron"), b.to("neuron"), out=out)
    assert torch.equal(out.cpu(), torch.mm(a, b))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32],
                         ids=str)
def test_fallback_dtypes(dtype):
    a = (torch.randn(4, 6) * 10).to(dtype)
    b = (torch.randn(4, 6) * 10).to(dtype)
    want, got = run_on_both(lambda x, y: (x + y, x * y, torch.maximum(x, y), x.sum()), a, b)
    assert_same(got, want)


def test_fallback_result_stays_on_input_device():
    a = torch.randn(3, 3)
    with torch.neuron.device(0):
        got = torch.mm(a.to("neuron:2"), a.to("neuron:2"))
    assert got.device == torch.device("neuron", 2)
    assert torch.equal(got.cpu(), torch.mm(a, a))


def test_autograd_through_fallback_ops():
    w = torch.randn(4, 3, requires_grad=True)
    x = torch.randn(5, 4)
    (torch.relu(x @ w).sum()).backward()
    want = w.grad.clone()
    wn = w.detach().to("neuron").requires_grad_()
    (torch.relu(x.to("neuron") @ wn).sum()).backward()
    assert wn.grad.device.type == "neuron"
    torch.testing.assert_close(wn.grad.cpu(), want)


# Executed-op tracking ------------------------------------------------------------------------


def test_executed_ops_count_native_ops():
    torch_neuron.clear_op_tracking()
    n = torch.randn(8).to("neuron")
    n.fill_(1)
    n[0].item()
    n.cpu()
    executed = torch_neuron.get_executed_ops()
    assert executed["aten::copy_"] == 2  # upload and download
    assert executed["aten::fill_"] == 1
    assert executed["aten::_local_scalar_dense"] == 1
    assert torch_neuron.get_fallback_ops() == {}


def test_cpu_only_work_is_not_tracked():
    torch_neuron.clear_op_tracking()
    a = torch.randn(4, 4)
    torch.mm(a, a).relu().sum()
    assert torch_neuron.get_executed_ops() == {}
    assert torch_neuron.get_fallback_ops() == {}


def test_clear_op_tracking_resets():
    a = torch.randn(3).to("neuron")
    torch.relu(a)
    assert torch_neuron.get_executed_ops() and torch_neuron.get_fallback_ops()
    torch_neuron.clear_op_tracking()
    assert torch_neuron.get_executed_ops() == {}
    assert torch_neuron.get_fallback_ops() == {}


def test_tracking_returns_copies():
    a = torch.randn(3).to("neuron")
    torch_neuron.clear_op_tracking()
    torch.relu(a)
    snapshot = torch_neuron.get_fallback_ops()
    snapshot["aten::relu"] = 100
    snapshot["made::up"] = 1
    assert torch_neuron.get_fallback_ops() == {"aten::relu": 1}


# Fallback as an error ------------------------------------------------------------------------


def test_set_fallback_error_raises_naming_the_op():
    a = torch.randn(3, 3)
    n = a.to("neuron")
    torch_neuron.clear_op_tracking()
    torch_neuron.set_fallback_error(True)
    try:
        with pytest.raises(RuntimeError, match=r"aten::mm"):
            torch.mm(n, n)
        with pytest.raises(RuntimeError, match=r"aten::relu"):
            torch.relu(n)
        # Ops with a neuron kernel still run.
        m = a.to("neuron:1")
        m.fill_(2)
        assert torch.equal(m.cpu(), torch.full((3, 3), 2.0))
    finally:
        torch_neuron.set_fallback_error(False)
    assert torch_neuron.get_fallback_ops() == {}  # refused ops did not run
    assert torch.equal(torch.mm(n, n).cpu(), torch.mm(a, a))
    assert torch_neuron.get_fallback_ops() == {"aten::mm.out": 1}


def test_fallback_error_leaves_tensors_intact():
    a = torch.randn(4)
    n = a.to("neuron")
    torch_neuron.set_fallback_error(True)
    try:
        with pytest.raises(RuntimeError):
            n.add_(1)
    finally:
        torch_neuron.set_fallback_error(False)
    assert torch.equal(n.cpu(), a)


def test_fallback_error_from_environment():
    out = run_python_json("""
        import json, torch, torch_neuron
        a = torch.randn(3, 3)
        n = a.to("neuron")          # a copy has a neuron kernel: allowed
        try:
            torch.mm(n, n)
            error = None
        except RuntimeError as e:
            error = str(e)
        torch_neuron.set_fallback_error(False)
        ok = torch.equal(torch.mm(n, n).cpu(), torch.mm(a, a))
        print(json.dumps({"error": error, "ok_after": ok,
                          "fallback": torch_neuron.get_fallback_ops()}))
    """, env={"TORCH_NEURON_FALLBACK": "error"})
    assert out["error"] is not None and "aten::mm" in out["error"]
    assert out["ok_after"]
    assert out["fallback"] == {"aten::mm.out": 1}
