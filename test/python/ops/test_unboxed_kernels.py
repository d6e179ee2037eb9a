"""Typed host kernels (Note [Unboxed host execution] in csrc/aten/UnboxedHostKernels.cpp): the
most frequent ops skip the generic boxed kernel. They must behave exactly like it: same results
as the CPU, same errors, same charge on the simulated clock, and every call they do not handle
themselves (float64, complex, arguments sharing memory, mixed devices) handed to the boxed
kernel."""

import copy
import struct
import threading
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import torch_neuron
from conftest import simulated_elapsed_ns

def T(*shape):
    return torch.randn(*shape)


def pos(*shape):
    return torch.rand(*shape) + 0.5


# One call per typed op, on CPU tensors; every registered op must have one.
SAMPLES = {
    "aten::add.Tensor": lambda: torch.add(T(3, 4), T(4), alpha=2),
    "aten::add_.Tensor": lambda: T(3, 4).add_(T(3, 4)),
    "aten::sub.Tensor": lambda: torch.sub(T(3, 4), T(3, 1)),
    "aten::sub_.Tensor": lambda: T(3, 4).sub_(T(4), alpha=0.5),
    "aten::rsub.Tensor": lambda: torch.rsub(T(3, 4), T(3, 4)),
    "aten::mul.Tensor": lambda: torch.mul(T(3, 4), torch.tensor(2.5)),
    "aten::mul_.Tensor": lambda: T(3, 4).mul_(T(3, 4)),
    "aten::div.Tensor": lambda: torch.div(T(3, 4), pos(3, 4)),
    "aten::div_.Tensor": lambda: T(3, 4).div_(pos(4)),
    "aten::div.Tensor_mode": lambda: torch.div(T(3, 4) * 10, pos(3, 4), rounding_mode="floor"),
    "aten::pow.Tensor_Scalar": lambda: torch.pow(pos(3, 4), 3),
    "aten::pow.Tensor_Tensor": lambda: torch.pow(pos(3, 4), T(3, 4)),
    "aten::maximum": lambda: torch.maximum(T(3, 4), T(3, 4)),
    "aten::minimum": lambda: torch.minimum(T(3, 4), T(4)),
    "aten::clamp": lambda: torch.clamp(T(3, 4), -0.5, 0.5),
    "aten::lerp_.Scalar": lambda: T(3, 4).lerp_(T(3, 4), 0.3),
    "aten::addcmul_": lambda: T(3, 4).addcmul_(T(3, 4), T(3, 4), value=0.5),
    "aten::addcdiv_": lambda: T(3, 4).addcdiv_(T(3, 4), pos(3, 4), value=-2),
    "aten::where.self": lambda: torch.where(T(3, 4) > 0, T(3, 4), T(3, 4)),
    "aten::masked_fill_.Scalar": lambda: T(3, 4).masked_fill_(T(3, 4) > 0, -1.0),
    "aten::cat": lambda: torch.cat([T(2, 3), T(4, 3), T(0, 3), T(1, 3)]),
    "aten::index_select": lambda: T(5, 3).index_select(0, torch.tensor([4, 0, 4])),
    "aten::gather": lambda: torch.gather(T(3, 4), 1, torch.randint(4, (3, 2))),
    "aten::scatter_add": lambda: torch.scatter_add(T(3, 4), 0, torch.randint(3, (2, 4)), T(2, 4)),
    "aten::scatter_add_": lambda: T(5).scatter_add_(0, torch.tensor([1, 1, 3]), T(3)),
    "aten::index_add_": lambda: T(5, 2).index_add_(0, torch.tensor([4, 4]), T(2, 2), alpha=2),
    "aten::embedding_dense_backward": lambda: torch.ops.aten.embedding_dense_backward(
        T(3, 4), torch.tensor([1, 1, 0]), 5, -1, False),
    "aten::topk": lambda: torch.topk(T(3, 6), 2, dim=1),
    "aten::sort.stable": lambda: torch.sort(torch.randint(4, (3, 6)), dim=1, stable=True),
    "aten::bitwise_and.Tensor": lambda: torch.randint(9, (3, 4)) & torch.randint(9, (4,)),
    "aten::bitwise_or.Tensor": lambda: torch.randint(9, (3, 4)) | torch.randint(9, (3, 4)),
    "aten::bitwise_not": lambda: ~(T(3, 4) > 0),
    "aten::neg": lambda: torch.neg(T(3, 4)),
    "aten::exp": lambda: torch.exp(T(3, 4)),
    "aten::log": lambda: torch.log(pos(3, 4)),
    "aten::sqrt": lambda: torch.sqrt(pos(3, 4)),
    "aten::rsqrt": lambda: torch.rsqrt(pos(3, 4)),
    "aten::reciprocal": lambda: torch.reciprocal(pos(3, 4)),
    "aten::sin": lambda: torch.sin(T(3, 4)),
    "aten::cos": lambda: torch.cos(T(3, 4)),
    "aten::tanh": lambda: torch.tanh(T(3, 4)),
    "aten::sigmoid": lambda: torch.sigmoid(T(3, 4)),
    "aten::relu": lambda: torch.relu(T(3, 4)),
    "aten::relu_": lambda: torch.relu_(T(3, 4)),
    "aten::gelu": lambda: F.gelu(T(3, 4), approximate="tanh"),
    "aten::silu": lambda: F.silu(T(3, 4)),
    "aten::eq.Tensor": lambda: torch.eq(torch.randint(3, (3, 4)), torch.randint(3, (3, 4))),
    "aten::eq.Scalar": lambda: torch.eq(torch.randint(3, (3, 4)), 1),
    "aten::ne.Tensor": lambda: torch.ne(torch.randint(3, (3, 4)), torch.randint(3, (4,))),
    "aten::ne.Scalar": lambda: torch.ne(torch.randint(3, (3, 4)), 1),
    "aten::lt.Tensor": lambda: torch.lt(T(3, 4), T(3, 4)),
    "aten::lt.Scalar": lambda: torch.lt(T(3, 4), 0.1),
    "aten::le.Tensor": lambda: torch.le(T(3, 4), T(3, 4)),
    "aten::le.Scalar": lambda: torch.le(T(3, 4), 0.1),
    "aten::gt.Tensor": lambda: torch.gt(T(3, 4), T(3, 4)),
    "aten::gt.Scalar": lambda: torch.gt(T(3, 4), 0.1),
    "aten::ge.Tensor": lambda: torch.ge(T(3, 4), T(3, 4)),
    "aten::ge.Scalar": lambda: torch.ge(T(3, 4), 0.1),
    "aten::sum.dim_IntList": lambda: torch.sum(T(3, 4, 5), dim=(0, 2), keepdim=True),
    "aten::mean.dim": lambda: torch.mean(T(3, 4, 5), dim=1),
    "aten::amax": lambda: torch.amax(T(3, 4, 5), dim=-1),
    "aten::max": lambda: torch.max(T(3, 4)),
    "aten::max.dim": lambda: torch.max(T(3, 4, 5), dim=1, keepdim=True),
    "aten::argmax": lambda: torch.argmax(T(3, 4), dim=0),
    "aten::any": lambda: torch.any(T(3, 4) > 1),
    "aten::any.dim": lambda: torch.any(T(3, 4) > 1, dim=1),
    "aten::cumsum": lambda: torch.cumsum(T(3, 4), dim=1),
    "aten::native_layer_norm": lambda: torch.ops.aten.native_layer_norm(T(3, 4), [4], T(4), None,
                                                                        1e-5),
    "aten::native_layer_norm_backward": lambda: torch.ops.aten.native_layer_norm_backward(
        T(3, 4), T(3, 4), [4], T(3, 1), pos(3, 1), T(4), T(4), [True, True, True]),
    "aten::_softmax": lambda: torch.softmax(T(3, 4), dim=-1),
    "aten::_log_softmax": lambda: torch.log_softmax(T(3, 4), dim=0),
    "aten::mm": lambda: torch.mm(T(3, 4), T(4, 5)),
    "aten::bmm": lambda: torch.bmm(T(2, 3, 4), T(2, 4, 5)),
    "aten::addmm": lambda: torch.addmm(T(5), T(3, 4), T(4, 5), beta=0.5),
    "aten::threshold_backward": lambda: torch.ops.aten.threshold_backward(T(3, 4), T(3, 4), 0.0),
    "aten::gelu_backward": lambda: torch.ops.aten.gelu_backward(T(3, 4), T(3, 4)),
    "aten::silu_backward": lambda: torch.ops.aten.silu_backward(T(3, 4), T(3, 4)),
    "aten::sigmoid_backward": lambda: torch.ops.aten.sigmoid_backward(T(3, 4), T(3, 4)),
    "aten::tanh_backward": lambda: torch.ops.aten.tanh_backward(T(3, 4), T(3, 4)),
    "aten::_softmax_backward_data": lambda: torch.ops.aten._softmax_backward_data(
        T(3, 4), torch.softmax(T(3, 4), 1), 1, torch.float32),
    "aten::_log_softmax_backward_data": lambda: torch.ops.aten._log_softmax_backward_data(
        T(3, 4), torch.log_softmax(T(3, 4), 1), 1, torch.float32),
}


def run_recorded(sample, device):
    """Runs `sample` with its tensor factories producing tensors on `device` (same values)."""
    torch.manual_seed(0)
    factories = {name: getattr(torch, name) for name in ["randn", "rand", "randint", "tensor"]}
    for name, make in factories.items():
        setattr(torch, name, lambda *a, make=make, **k: make(*a, **k).to(device))
    try:
        return sample()
    finally:
        for name, make in factories.items():
            setattr(torch, name, make)


def test_the_typed_ops_are_registered():
    registered = torch_neuron._C._unboxed_host_ops()
    assert {"aten::add.Tensor", "aten::mul_.Tensor", "aten::relu", "aten::mm"} <= set(registered)
    assert set(registered) == set(SAMPLES), "every typed op needs a sample here"


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_typed_op_matches_cpu_and_runs_on_device(name):
    want = run_recorded(SAMPLES[name], "cpu")
    torch_neuron.clear_op_tracking()
    got = run_recorded(SAMPLES[name], "neuron")
    if isinstance(want, torch.Tensor):
        got, want = [got], [want]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == "neuron"
        assert g.dtype == w.dtype and g.shape == w.shape
        assert torch.equal(g.cpu(), w)  # the same CPU kernel: bit for bit
    assert torch_neuron.get_executed_ops().get(name, 0) >= 1
    assert torch_neuron.get_fallback_ops() == {}


def test_in_place_returns_its_argument():
    x = torch.ones(4, device="neuron")
    assert x.add_(1) is x
    assert x.relu_() is x
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))


def test_same_tensor_twice():
    x = torch.randn(5)
    n = x.to("neuron")
    assert torch.equal((n * n).cpu(), x * x)
    assert torch.equal(n.add_(n).cpu(), x.add_(x))


def test_cat_of_many_and_of_repeated_tensors():
    parts = [torch.randn(1, 3) for _ in range(20)]
    neuron_parts = [p.to("neuron") for p in parts]
    assert torch.equal(torch.cat(neuron_parts).cpu(), torch.cat(parts))
    x = torch.randn(2, 2)
    n = x.to("neuron")
    assert torch.equal(torch.cat([n, n, n[1:]]).cpu(), torch.cat([x, x, x[1:]]))
    assert torch.equal(torch.stack([n, n]).cpu(), torch.stack([x, x]))


def test_cpu_scalar_tensor_joins():
    x = torch.randn(5)
    assert torch.equal((x.to("neuron") * torch.tensor(3.0)).cpu(), x * torch.tensor(3.0))


def test_non_scalar_cpu_tensor_is_refused_as_before():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.add(torch.randn(3, device="neuron"), torch.randn(3))


def test_two_neuron_devices_are_refused():
    # The suite runs on the default trn2.3xlarge (4 devices), as test_host_execution.py does.
    with pytest.raises(RuntimeError, match="neuron:0 and neuron:1"):
        torch.add(torch.randn(3, device="neuron:0"), torch.randn(3, device="neuron:1"))


def test_overlapping_arguments_behave_as_on_cpu():
    # Views of one storage go to the boxed kernel, which shows the CPU kernel their overlap.
    base = torch.arange(8.0)
    nbase = base.to("neuron")
    with pytest.raises(RuntimeError, match="single memory location"):
        base[:-1].add_(base[1:])
    with pytest.raises(RuntimeError, match="single memory location"):
        nbase[:-1].add_(nbase[1:])
    assert torch.equal(torch.add(nbase[:-1], nbase[1:]).cpu(), base[:-1] + base[1:])


def test_float64_is_narrowed_like_every_other_op():
    x, y = torch.randn(6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = torch.add(x.to("neuron"), y.to("neuron"))
    assert got.dtype == torch.float64
    assert torch.equal(got.cpu(), (x.float() + y.float()).double())


def test_complex_runs_decomposed_or_falls_back():
    x = torch.randn(4, dtype=torch.complex64)
    n = x.to("neuron")
    torch_neuron.clear_op_tracking()
    assert torch.equal((n * n).cpu(), x * x)
    assert torch_neuron.get_fallback_ops() == {}
    torch_neuron.set_complex_decompose(False)
    try:
        assert torch.equal((n * n).cpu(), x * x)
        assert torch_neuron.get_fallback_ops() == {"aten::mul.Tensor": 1}
    finally:
        torch_neuron.set_complex_decompose(True)


def test_inference_mode():
    x = torch.randn(3, 3)
    with torch.inference_mode():
        got = torch.relu(x.to("neuron")) + 1
        assert got.is_inference()
    assert torch.equal(got.cpu(), torch.relu(x) + 1)


def test_autograd_through_typed_forward_and_backward_kernels():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                                torch.nn.SiLU(), torch.nn.Linear(4, 3))
    x, target = torch.randn(5, 8), torch.randint(3, (5,))
    grads = []
    for device in ["cpu", "neuron"]:
        m = copy.deepcopy(model).to(device)
        F.cross_entropy(torch.tanh(m(x.to(device))), target.to(device)).backward()
        grads.append([p.grad.to("cpu", copy=True) for p in m.parameters()])
    for cpu_grad, neuron_grad in zip(*grads):
        assert torch.equal(neuron_grad, cpu_grad)


def test_typed_and_boxed_kernels_charge_the_same_time():
    base = torch.randn(2, 256, 256, device="neuron")
    a, b = base[0], base[1]  # one storage: the boxed kernel runs
    c, d = a.clone(), b.clone()  # separate storages: the typed kernel runs
    elapsed = simulated_elapsed_ns
    assert elapsed(lambda: torch.mm(a, b)) == elapsed(lambda: torch.mm(c, d))
    assert elapsed(lambda: torch.add(a, b)) == elapsed(lambda: torch.add(c, d))


def test_typed_ops_are_traced_with_their_operands():
    torch_neuron._C._set_tracing(True)
    try:
        torch_neuron._C._take_trace()
        torch.mm(torch.randn(3, 4, device="neuron"), torch.randn(4, 5, device="neuron"))
        torch.neuron.synchronize()
        records = [r for r in torch_neuron._C._take_trace() if r["name"] == "aten::mm"]
    finally:
        torch_neuron._C._set_tracing(False)
    assert len(records) == 1
    assert records[0]["detail"] == "Float[3,4], Float[4,5]"


def tls_segment_size(path):
    """Size of the PT_TLS segment of a 64-bit little-endian ELF shared library."""
    data = Path(path).read_bytes()
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, = struct.unpack_from("<I", data, phoff + i * phentsize)
        if p_type == 7:  # PT_TLS
            return struct.unpack_from("<Q", data, phoff + i * phentsize + 0x28)[0]
    return 0


def test_thread_locals_stay_small():
    # Note [Per-op thread locals]: initial-exec TLS must fit glibc's static TLS reserve.
    library = Path(torch_neuron.__file__).parent / "lib" / "libtorch_neuron.so"
    assert 0 < tls_segment_size(library) <= 256


def test_threads_running_typed_ops_at_once():
    # Ops run without the GIL: spare views are per thread, the allocator and the queue clock are
    # shared, and each thread must still get the CPU's answers.
    errors = []

    def work(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            x, w = torch.randn(32, 32, generator=g), torch.randn(32, 32, generator=g)
            nx, nw = x.to("neuron"), w.to("neuron")
            index = torch.tensor([3, 1])
            for _ in range(100):
                got = torch.softmax(torch.relu(nx @ nw + 1) * 0.5, -1).sum(0)
                picked = torch.cat([nx.index_select(0, index.to("neuron")), nw[:1]])
                if not (torch.equal(got.cpu(), torch.softmax(torch.relu(x @ w + 1) * 0.5,
                                                             -1).sum(0)) and
                        torch.equal(picked.cpu(), torch.cat([x.index_select(0, index), w[:1]]))):
                    errors.append(f"thread {seed}: wrong result")
                    return
        except Exception as e:  # reported below, with the thread it came from
            errors.append(f"thread {seed}: {e!r}")

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def traced_durations(fn, names):
    """The simulated durations of the launches of ops `names` that `fn` makes, in order."""
    torch_neuron._C._set_tracing(True)
    try:
        torch_neuron._C._take_trace()
        fn()
        torch.neuron.synchronize()
        return [r["duration_ns"] for r in torch_neuron._C._take_trace() if r["name"] in names]
    finally:
        torch_neuron._C._set_tracing(False)


def test_memoized_op_times_equal_fresh_costing():
    # Note [Memoized op times]: a typed op repeated with the same shapes launches the time its
    # first call got, and new shapes or dtypes are costed anew. Predict-only mode takes the boxed
    # kernel, which costs every call from scratch: the two must give bit-identical times for
    # every typed op, for a repeat and after the shapes change back and forth.
    names = set(SAMPLES)

    def every_sample_twice():
        for sample in SAMPLES.values():
            run_recorded(sample, "neuron")
            run_recorded(sample, "neuron")

    def shapes_back_and_forth():
        for shape, dtype in [((3, 4), torch.float32), ((5, 30), torch.float32),
                             ((5, 30), torch.bfloat16), ((3, 4), torch.float32), ((700,), None)]:
            x = torch.ones(shape, dtype=dtype, device="neuron")
            torch.add(x, torch.ones(shape[:-1] + (1,), dtype=dtype, device="neuron"))
            torch.relu(x)

    typed = traced_durations(lambda: (every_sample_twice(), shapes_back_and_forth()), names)
    torch_neuron.set_execute(False)
    try:
        fresh = traced_durations(lambda: (every_sample_twice(), shapes_back_and_forth()), names)
    finally:
        torch_neuron.set_execute(True)
    assert len(typed) >= 2 * len(SAMPLES) + 10
    assert typed == fresh
