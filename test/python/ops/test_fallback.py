"""Device ops and CPU-fallback ops: CPU-identical results, tracking with
get_executed_ops()/get_fallback_ops(), and the switch that makes fallback an error.

Ops without a dedicated neuron kernel run ATen's CPU kernel on the device memory (Note [Host
execution] in csrc/aten/HostExecution.cpp) and count as device ops. Only the ops that the
policy table (csrc/aten/OpPolicy.cpp) says Trainium cannot run -- matrix factorizations,
solvers, inverses, determinants, FFTs -- are fallback ops: counted in get_fallback_ops() (and
in get_executed_ops()), charged as a host round trip, and refused when fallback is an error.

Keys are ATen operator names with their overload ("aten::add.Tensor"); which overload the
dispatcher reaches the backend with is an implementation detail, so the tests compare operator
names without the overload."""

import re

import pytest
import torch

import torch_neuron
from conftest import run_python_json

KEY = re.compile(r"aten::\w+(\.\w+)?")


def op_names(counts):
    """{"aten::mm.out": 1, "aten::mm": 2} -> {"mm": 3}: counts per operator, overloads merged."""
    merged = {}
    for key, count in counts.items():
        assert KEY.fullmatch(key), key
        name = key[len("aten::"):].split(".")[0]
        merged[name] = merged.get(name, 0) + count
    return merged


def spd(n):
    """A well-conditioned symmetric positive definite matrix (for inverses and Cholesky)."""
    a = torch.randn(n, n)
    return a @ a.t() + n * torch.eye(n)


# Device ops: (callable on tensors, the operator it runs on the device) ------------------------

DEVICE_OPS = {
    "mm": (lambda a, b: torch.mm(a, b.t()), "mm"),
    "matmul": (lambda a, b: a @ b.t(), "mm"),
    "relu": (lambda a, b: torch.relu(a), "relu"),
    "sum": (lambda a, b: a.sum(), "sum"),
    "sum_dim": (lambda a, b: a.sum(dim=1, keepdim=True), "sum"),
    "add": (lambda a, b: a + b, "add"),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=-2.5), "add"),
    "add_scalar": (lambda a, b: a + 3, "add"),
    "sub": (lambda a, b: a - b, "sub"),
    "mul_cpu_scalar_tensor": (lambda a, b: a * torch.tensor(1.5), "mul"),
    "cat": (lambda a, b: torch.cat([a, b], dim=0), "cat"),
    "max_dim": (lambda a, b: a.max(dim=1), "max"),
}

# Fallback ops: (callable on one square matrix, the operator the policy table sends to the CPU)
FALLBACK_OPS = {
    "linalg_inv": (lambda a: torch.linalg.inv(a), "linalg_inv_ex"),
    "linalg_svd": (lambda a: torch.linalg.svd(a), "_linalg_svd"),
    "det": (lambda a: torch.det(a), "_linalg_det"),
    "fft": (lambda a: torch.fft.fft(a), "_fft_r2c"),
    "linalg_solve": (lambda a: torch.linalg.solve(a, a[:, :2]), "_linalg_solve_ex"),
    "cholesky": (lambda a: torch.linalg.cholesky(a), "linalg_cholesky_ex"),
}


def run_on_both(fn, *cpu_args):
    """Result of `fn` on the CPU and on neuron."""
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


@pytest.mark.parametrize("name", list(DEVICE_OPS))
def test_device_op_matches_cpu_and_is_not_a_fallback(name):
    fn, op = DEVICE_OPS[name]
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    torch_neuron.clear_op_tracking()
    want, got = run_on_both(fn, a, b)
    assert_same(got, want)
    assert op_names(torch_neuron.get_executed_ops())[op] == 1
    assert torch_neuron.get_fallback_ops() == {}


@pytest.mark.parametrize("name", list(FALLBACK_OPS))
def test_policy_fallback_op_matches_cpu_and_is_counted(name):
    fn, op = FALLBACK_OPS[name]
    a = spd(4)
    torch_neuron.clear_op_tracking()
    want, got = run_on_both(fn, a)
    assert_same(got, want)
    fallback = torch_neuron.get_fallback_ops()
    assert op_names(fallback) == {op: 1}
    executed = torch_neuron.get_executed_ops()
    for key, count in fallback.items():  # fallback ops count as executed too
        assert executed[key] == count


def test_fallback_op_is_charged_to_the_clock():
    n = spd(64).to("neuron")
    torch.neuron.synchronize()
    before = torch.neuron.simulated_time_ns()
    torch.linalg.inv(n)
    assert torch.neuron.simulated_time_ns() > before


def test_key_format():
    a = torch.randn(3, 3).to("neuron")
    torch_neuron.clear_op_tracking()
    torch.mm(a, a)
    torch.relu(a)
    a.sum()
    torch.det(a)
    executed, fallback = torch_neuron.get_executed_ops(), torch_neuron.get_fallback_ops()
    assert all(KEY.fullmatch(k) for k in executed)
    assert {"mm", "relu", "sum", "_linalg_det"} <= set(op_names(executed))
    assert op_names(fallback) == {"_linalg_det": 1}


def test_counts_accumulate():
    a = spd(3).to("neuron")
    torch_neuron.clear_op_tracking()
    for _ in range(3):
        torch.relu(a)
        torch.det(a)
    assert op_names(torch_neuron.get_executed_ops())["relu"] == 3
    assert op_names(torch_neuron.get_fallback_ops()) == {"_linalg_det": 3}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32],
                         ids=str)
def test_device_op_dtypes(dtype):
    a = (torch.randn(4, 6) * 10).to(dtype)
    b = (torch.randn(4, 6) * 10).to(dtype)
    torch_neuron.clear_op_tracking()
    want, got = run_on_both(lambda x, y: (x + y, x * y, torch.maximum(x, y), x.sum()), a, b)
    assert_same(got, want)
    assert torch_neuron.get_fallback_ops() == {}


def test_result_stays_on_input_device():
    a = spd(3)
    with torch.neuron.device(0):
        got = torch.mm(a.to("neuron:2"), a.to("neuron:2"))
        inv = torch.linalg.inv(a.to("neuron:2"))
    assert got.device == torch.device("neuron", 2)
    assert inv.device == torch.device("neuron", 2)
    assert torch.equal(got.cpu(), torch.mm(a, a))
    assert torch.equal(inv.cpu(), torch.linalg.inv(a))


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
    a = spd(4)
    torch.mm(a, a).relu().sum()
    torch.linalg.inv(a)
    assert torch_neuron.get_executed_ops() == {}
    assert torch_neuron.get_fallback_ops() == {}


def test_clear_op_tracking_resets():
    a = spd(3).to("neuron")
    torch.relu(a)
    torch.linalg.inv(a)
    assert torch_neuron.get_executed_ops() and torch_neuron.get_fallback_ops()
    torch_neuron.clear_op_tracking()
    assert torch_neuron.get_executed_ops() == {}
    assert torch_neuron.get_fallback_ops() == {}


def test_tracking_returns_copies():
    a = spd(3).to("neuron")
    torch_neuron.clear_op_tracking()
    torch.linalg.inv(a)
    fallback, executed = torch_neuron.get_fallback_ops(), torch_neuron.get_executed_ops()
    assert isinstance(fallback, dict) and isinstance(executed, dict)
    want_fallback, want_executed = dict(fallback), dict(executed)
    for snapshot in (fallback, executed):
        for key in snapshot:
            snapshot[key] = 100
        snapshot["made::up"] = 1
    assert torch_neuron.get_fallback_ops() == want_fallback
    assert torch_neuron.get_executed_ops() == want_executed


# Fallback as an error ------------------------------------------------------------------------


def test_set_fallback_error_raises_naming_the_op():
    a = spd(3)
    n = a.to("neuron")
    torch_neuron.clear_op_tracking()
    torch_neuron.set_fallback_error(True)
    try:
        with pytest.raises(RuntimeError, match=r"linalg_inv"):
            torch.linalg.inv(n)
        with pytest.raises(RuntimeError, match=r"fft"):
            torch.fft.fft(n)
        with pytest.raises(RuntimeError, match=r"TORCH_NEURON_FALLBACK"):
            torch.det(n)
        # Device ops still run, with and without a dedicated kernel.
        assert torch.equal(torch.mm(n, n).cpu(), torch.mm(a, a))
        m = a.to("neuron:1")
        m.fill_(2)
        assert torch.equal(m.cpu(), torch.full((3, 3), 2.0))
    finally:
        torch_neuron.set_fallback_error(False)
    assert torch_neuron.get_fallback_ops() == {}  # refused ops did not run
    assert torch.equal(torch.linalg.inv(n).cpu(), torch.linalg.inv(a))
    assert op_names(torch_neuron.get_fallback_ops()) == {"linalg_inv_ex": 1}


def test_fallback_error_leaves_tensors_intact():
    a = spd(4)
    n = a.to("neuron")
    out = torch.zeros(4, 4, device="neuron")
    torch_neuron.set_fallback_error(True)
    try:
        with pytest.raises(RuntimeError, match=r"linalg_inv"):
            torch.linalg.inv(n, out=out)
        n.add_(1)  # an in-place device op is allowed
    finally:
        torch_neuron.set_fallback_error(False)
    assert torch.equal(out.cpu(), torch.zeros(4, 4))
    assert torch.equal(n.cpu(), a + 1)


def test_fallback_error_from_environment():
    out = run_python_json("""
        import json, torch, torch_neuron
        a = torch.randn(3, 3) + 3 * torch.eye(3)
        n = a.to("neuron")          # a copy is a device op: allowed
        mm_ok = torch.equal(torch.mm(n, n).cpu(), torch.mm(a, a))
        try:
            torch.linalg.inv(n)
            error = None
        except RuntimeError as e:
            error = str(e)
        refused = torch_neuron.get_fallback_ops()
        torch_neuron.set_fallback_error(False)
        ok = torch.equal(torch.linalg.inv(n).cpu(), torch.linalg.inv(a))
        print(json.dumps({"mm_ok": mm_ok, "error": error, "refused": refused, "ok_after": ok,
                          "fallback": torch_neuron.get_fallback_ops()}))
    """, env={"TORCH_NEURON_FALLBACK": "error"})
    assert out["mm_ok"]
    assert out["error"] is not None and "linalg_inv" in out["error"]
    assert out["refused"] == {}
    assert out["ok_after"]
    assert op_names(out["fallback"]) == {"linalg_inv_ex": 1}
