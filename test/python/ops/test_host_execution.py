"""Host execution (Note [Host execution] in csrc/aten/HostExecution.cpp): ops without a
dedicated neuron kernel run ATen's CPU kernel on the device memory, with new outputs born in
simulated HBM. Results must be exactly what the CPU computes, whatever the calling convention
(out=, in-place, views, several outputs, tensor lists), the inputs (empty, non-contiguous, CPU
scalars and CPU indices) or the op (random, autograd, attention); outputs are accounted as
device memory and the work is charged to the simulated clock."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_neuron
from conftest import simulated_elapsed_ns


def assert_same(got, want):
    """`got` (neuron) equals `want` (CPU) exactly: values, dtype, shape, and on neuron."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.device.type == "neuron"
        assert got.dtype == want.dtype
        assert got.shape == want.shape
        assert torch.equal(got.cpu(), want)
    else:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w)


def run_on_both(fn, *cpu_args):
    """(result on the CPU, result on neuron) of `fn`; tensor arguments are moved to neuron."""
    want = fn(*cpu_args)
    got = fn(*(a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args))
    return want, got


def shares_storage(view, base):
    return view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


# out= ------------------------------------------------------------------------------------------


def test_out_empty_is_resized():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out = torch.empty(0, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # resizing an empty out= is silent, as on the CPU
        result = torch.add(a.to("neuron"), b.to("neuron"), out=out)
    assert result is out
    assert_same(out, a + b)


@pytest.mark.parametrize("op", ["add", "mm", "cat", "sum"])
def test_out_empty_is_resized_for_various_ops(op):
    fns = {
        "add": lambda x, y, out: torch.add(x, y, alpha=2, out=out),
        "mm": lambda x, y, out: torch.mm(x, y.t(), out=out),
        "cat": lambda x, y, out: torch.cat([x, y], dim=1, out=out),
        "sum": lambda x, y, out: torch.sum(x, dim=0, out=out),
    }
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    want = fns[op](a, b, torch.empty(0))
    out = torch.empty(0, device="neuron")
    fns[op](a.to("neuron"), b.to("neuron"), out)
    assert_same(out, want)


def test_out_wrong_size_is_resized_with_the_cpu_warning():
    a, b = torch.randn(3, 4), torch.randn(3, 4)

    def run(device):
        out = torch.empty(5, device=device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.add(a.to(device), b.to(device), out=out)
        return out, [str(w.message) for w in caught]

    want, cpu_warnings = run("cpu")
    got, neuron_warnings = run("neuron")
    assert_same(got, want)
    assert neuron_warnings == cpu_warnings
    assert any("resized" in w for w in cpu_warnings)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_out_that_outgrows_its_storage_keeps_sharing_it():
    # Growing an out= tensor grows its storage, which other tensors on it keep sharing (the
    # base of a view sees the result), as on the CPU.
    x = torch.arange(16.0).reshape(4, 4)

    def run(device):
        base = torch.zeros(2, 3, device=device)
        view = base[:, :1]
        torch.add(x.to(device), 1, out=view)
        assert view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
        return view, base

    (want_view, want_base), (view, base) = run("cpu"), run("neuron")
    assert_same(view, want_view)
    assert_same(base, want_base)
    assert view.untyped_storage().device.type == "neuron"
    assert view.untyped_storage().nbytes() >= view.nbytes


def test_out_into_a_strided_view():
    a = torch.randn(4, 4)
    want = torch.zeros(4, 8)
    torch.mul(a, 2, out=want[:, ::2])
    base = torch.zeros(4, 8, device="neuron")
    torch.mul(a.to("neuron"), 2, out=base[:, ::2])
    assert_same(base, want)


@pytest.mark.filterwarnings("ignore:neuron computes float64")
def test_out_with_other_dtype():
    a = torch.randn(5)
    out = torch.empty(5, dtype=torch.float64, device="neuron")
    torch.add(a.to("neuron"), 1, out=out)
    assert_same(out, (a + 1).double())
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(a.to("neuron"), 1, out=torch.empty(5, dtype=torch.int32, device="neuron"))


# In-place ------------------------------------------------------------------------------------

INPLACE = {
    "add_": lambda t: t.add_(torch.ones_like(t), alpha=2),
    "mul_": lambda t: t.mul_(3),
    "clamp_": lambda t: t.clamp_(-0.5, 0.5),
    "index_put_": lambda t: t.index_put_(
        (torch.tensor([0, 2], device=t.device), torch.tensor([1, 3], device=t.device)),
        torch.tensor([5.0, 6.0], device=t.device)),
    "masked_fill_": lambda t: t.masked_fill_(t > 0, 7.0),
    "scatter_": lambda t: t.scatter_(0, torch.tensor([[0, 1, 2, 0]], device=t.device),
                                     torch.full((1, 4), 9.0, device=t.device)),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace(name):
    cpu = torch.randn(3, 4)
    n = cpu.to("neuron")
    ptr = n.data_ptr()
    result = INPLACE[name](n)
    INPLACE[name](cpu)
    assert result is n
    assert n.data_ptr() == ptr
    assert_same(n, cpu)


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_through_a_non_contiguous_view(name):
    cpu = torch.randn(4, 6)
    n = cpu.to("neuron")
    INPLACE[name](n.t()[1:5])
    INPLACE[name](cpu.t()[1:5])
    assert_same(n, cpu)


def test_inplace_with_cpu_indices_and_cpu_scalar_value():
    cpu = torch.randn(4, 4)
    n = cpu.to("neuron")
    idx = torch.tensor([3, 1])
    cpu[idx] = torch.tensor(2.5)
    n[idx] = torch.tensor(2.5)
    cpu[:, idx] += 1
    n[:, idx] += 1
    assert_same(n, cpu)


# Views ---------------------------------------------------------------------------------------

# Views of neuron tensors that are not registered as neuron kernels (or are composites).
VIEWS = {
    "diagonal": lambda t: torch.diagonal(t),
    "diagonal_offset": lambda t: t.diagonal(offset=1),
    "split": lambda t: t.split(2, dim=1)[1],
    "split_with_sizes": lambda t: t.split([1, 3], dim=1)[1],
    "tensor_split": lambda t: t.tensor_split(2, dim=1)[1],
    "unbind": lambda t: t.unbind(0)[1],
    "chunk": lambda t: t.chunk(2, dim=1)[1],
    "movedim": lambda t: t.movedim(0, 1),
    "narrow": lambda t: t.narrow(1, 1, 2),
    "select": lambda t: t.select(0, 1),
    "unflatten": lambda t: t.unflatten(1, (2, 2)),
    "swapaxes": lambda t: t.swapaxes(0, 1),
    "expand": lambda t: t[:1].expand(3, 4),
    "slice": lambda t: t[1:, ::2],
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_view_aliases_the_neuron_storage(name):
    cpu = torch.randn(3, 4)
    n = cpu.to("neuron")
    view = VIEWS[name](n)
    want_view = VIEWS[name](cpu)
    assert_same(view, want_view)
    assert view._base is n
    assert shares_storage(view, n)
    # Writes through the view reach the base, as on the CPU (an expanded view overlaps
    # itself, which in-place ops refuse, so only the base is written there).
    if name != "expand":
        view.mul_(-2)
        want_view.mul_(-2)
        assert_same(n, cpu)
    n.add_(1)
    cpu.add_(1)
    assert_same(view, want_view)


@pytest.mark.parametrize("part", ["real", "imag"])
def test_real_and_imag_alias_the_complex_storage(part):
    cpu = torch.randn(5, dtype=torch.complex64)
    n = cpu.to("neuron")
    view = getattr(torch, part)(n)
    want = getattr(torch, part)(cpu)
    assert_same(view, want)
    assert shares_storage(view, n)
    view.fill_(3.0)
    want.fill_(3.0)
    assert_same(n, cpu)


def test_view_as_real_aliases_the_complex_storage():
    cpu = torch.randn(4, dtype=torch.complex64)
    n = cpu.to("neuron")
    view = torch.view_as_real(n)
    assert shares_storage(view, n)
    view[:, 1] = 0
    assert_same(n, torch.complex(cpu.real, torch.zeros(4)))


def test_lazy_conjugate_and_negative_views():
    c = torch.randn(3, 3, dtype=torch.complex64)
    d = torch.randn(3, 3, dtype=torch.complex64)
    n, m = c.to("neuron"), d.to("neuron")
    assert n.conj().is_conj()
    assert_same(n.conj(), c.conj())
    assert_same(n.conj().imag, c.conj().imag)  # a negative view
    assert_same(torch.mm(n.conj(), m), torch.mm(c.conj(), d))
    assert_same(n.mH @ m, c.mH @ d)
    assert_same(n.conj() + 1, c.conj() + 1)
    dst = torch.zeros(3, 3, dtype=torch.complex64, device="neuron")
    dst.conj().copy_(n)
    assert_same(dst, c.conj())


# Arguments that share memory -------------------------------------------------------------------

# f(x) on x = arange(8): outputs or in-place targets that overlap an input. ATen refuses partial
# overlaps and handles full ones; neuron tensors on one storage must look the same to it.
OVERLAPPING = {
    "add_out_shifted": lambda x: torch.add(x[:-1], 1, out=x[1:]),
    "copy_shifted": lambda x: x[1:].copy_(x[:-1]),
    "addcmul_shifted": lambda x: x[1:].addcmul_(x[:-1], x[:-1]),
    "cumsum_out_shifted": lambda x: torch.cumsum(x[:4], 0, out=x[2:6]),
    "index_put_values_alias": lambda x: x.index_put_((torch.tensor([1, 2], device=x.device),),
                                                     x[5:7]),
}
SHARING = {
    "mul_out_self": lambda x: torch.mul(x, x, out=x),
    "cat_out_disjoint": lambda x: torch.cat([x[:2], x[2:4]], out=x[4:]),
    "mm_out_input": lambda x: torch.mm(x.view(2, 4)[:, :2], x.view(2, 4)[:, 2:],
                                       out=x.view(2, 4)[:, :2]),
    "sort_out_disjoint": lambda x: torch.sort(
        x[:4], descending=True, out=(x[4:], torch.empty(4, dtype=torch.long, device=x.device))),
    "copy_flipped_self": lambda x: x.copy_(x.flip(0)),
    "add_views_of_one_tensor": lambda x: x[::2].add_(x[1::2]),
}


@pytest.mark.parametrize("name", list(OVERLAPPING))
def test_partial_overlap_is_refused_as_on_cpu(name):
    cpu, n = torch.arange(8.0), torch.arange(8.0, device="neuron")
    with pytest.raises(RuntimeError, match="refer to a single memory location") as cpu_error:
        OVERLAPPING[name](cpu)
    with pytest.raises(RuntimeError) as neuron_error:
        OVERLAPPING[name](n)
    assert str(neuron_error.value) == str(cpu_error.value)
    assert_same(n, torch.arange(8.0))


@pytest.mark.parametrize("name", list(SHARING))
def test_arguments_sharing_storage(name):
    cpu, n = torch.arange(8.0), torch.arange(8.0, device="neuron")
    SHARING[name](cpu)
    SHARING[name](n)
    assert_same(n, cpu)


# Several outputs -----------------------------------------------------------------------------

MULTI = {
    "max_dim": lambda t: t.max(dim=1),
    "min_dim_keepdim": lambda t: t.min(dim=0, keepdim=True),
    "sort": lambda t: t.sort(dim=1, descending=True),
    "topk": lambda t: t.topk(2, dim=1),
    "unique": lambda t: torch.unique(t.round(), return_counts=True, return_inverse=True),
    "unique_dim": lambda t: torch.unique((t > 0).int(), dim=0, return_counts=True),
    "aminmax": lambda t: torch.aminmax(t, dim=0),
    "split": lambda t: t.split(3, dim=1),
    "unbind": lambda t: t.unbind(1),
    "chunk": lambda t: t.chunk(3, dim=0),
    "meshgrid": lambda t: torch.meshgrid(t[0], t[1], indexing="ij"),
}


@pytest.mark.parametrize("name", list(MULTI))
def test_several_outputs(name):
    a = torch.randn(6, 7) * 3
    want, got = run_on_both(MULTI[name], a)
    assert type(got) is type(want) or isinstance(got, tuple) and isinstance(want, tuple)
    assert_same(got, want)


# Zero-size and non-contiguous inputs ---------------------------------------------------------

ZERO_SIZE = {
    "add": lambda z, a: z + 1,
    "exp": lambda z, a: z.exp(),
    "sum_all": lambda z, a: z.sum(),
    "sum_dim0": lambda z, a: z.sum(dim=0),
    "mean_dim1": lambda z, a: z.mean(dim=1),
    "mm_empty_k": lambda z, a: torch.mm(z.t(), torch.randn(0, 3, device=z.device)),
    "mm_empty_m": lambda z, a: torch.mm(z, a.t()),
    "cat": lambda z, a: torch.cat([z, a]),
    "index_empty": lambda z, a: a[torch.tensor([], dtype=torch.long, device=a.device)],
    "nonzero": lambda z, a: z.nonzero(),
    "sort": lambda z, a: z.sort(dim=0),
    "cumsum": lambda z, a: z.cumsum(dim=0),
}


@pytest.mark.parametrize("name", list(ZERO_SIZE))
def test_zero_size(name):
    z, a = torch.randn(0, 4), torch.randn(3, 4)
    want, got = run_on_both(ZERO_SIZE[name], z, a)
    assert_same(got, want)


def test_zero_size_reduction_error_matches_cpu():
    with pytest.raises(IndexError) as cpu_error:
        torch.randn(0, 4).max(dim=0)
    with pytest.raises(IndexError) as neuron_error:
        torch.randn(0, 4, device="neuron").max(dim=0)
    assert str(neuron_error.value) == str(cpu_error.value)


NON_CONTIGUOUS = {
    "exp_strided": lambda a, b: a[::2, 1::3].exp(),
    "add_transposed": lambda a, b: a.t() + b.t(),
    "add_broadcast_expand": lambda a, b: a + b[:1].expand(6, 8),
    "mm_transposed": lambda a, b: torch.mm(a[::2].t(), b[::2, ::2]),
    "sum_transposed": lambda a, b: a.t().sum(dim=1),
    "cumsum_strided": lambda a, b: a[:, ::2].cumsum(dim=0),
    "where_strided": lambda a, b: torch.where(a[::2] > 0, a[::2], b[1::2]),
    "contiguous": lambda a, b: a.t().contiguous(),
    "softmax_transposed": lambda a, b: torch.softmax(a.t(), dim=-1),
}


@pytest.mark.parametrize("name", list(NON_CONTIGUOUS))
def test_non_contiguous_inputs(name):
    a, b = torch.randn(6, 8), torch.randn(6, 8)
    want, got = run_on_both(NON_CONTIGUOUS[name], a, b)
    assert_same(got, want)


def test_channels_last_layout_is_kept():
    x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
    want, got = run_on_both(lambda t: t * 2 + 1, x)
    assert_same(got, want)
    assert got.stride() == want.stride()


# CPU tensors next to neuron tensors ------------------------------------------------------------

PROMOTION = {
    "int_times_double_scalar": (torch.int64, lambda n: n * torch.tensor(2.5, dtype=torch.float64)),
    "int32_plus_float_scalar": (torch.int32, lambda n: n + torch.tensor(1.5)),
    "bf16_times_float_scalar": (torch.bfloat16, lambda n: n * torch.tensor(3.0)),
    "float_plus_int_scalar": (torch.float32, lambda n: n + torch.tensor(2)),
    "scalar_first": (torch.float32, lambda n: torch.tensor(2.0) - n),
    "where_scalar": (torch.float32, lambda n: torch.where(n > 1, n, torch.tensor(0.0))),
    "bool_and_scalar": (torch.bool, lambda n: n & torch.tensor(True)),
}


@pytest.mark.parametrize("name", list(PROMOTION))
def test_type_promotion_with_cpu_scalar_tensors(name):
    dtype, fn = PROMOTION[name]
    a = (torch.arange(12).reshape(3, 4) % 5).to(dtype)
    want, got = run_on_both(fn, a)
    assert_same(got, want)


CPU_NON_SCALAR = {
    "add": lambda n, c: n + c,
    "add_cpu_first": lambda n, c: c + n,
    "mul_": lambda n, c: n.mul_(c),
    "mm": lambda n, c: torch.mm(n, c.t()),
    "cat": lambda n, c: torch.cat([n, c]),
    "where": lambda n, c: torch.where(n > 0, n, c),
    "one_element_1d": lambda n, c: n + c[0, :1],
}


@pytest.mark.parametrize("name", list(CPU_NON_SCALAR))
def test_cpu_non_scalar_tensors_are_refused(name):
    n = torch.randn(3, 4, device="neuron")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        CPU_NON_SCALAR[name](n, torch.randn(3, 4))


def test_tensors_on_two_neuron_devices_are_refused():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.randn(3, device="neuron:0") + torch.randn(3, device="neuron:1")


INDEXING = {
    "long": lambda t, i, m: t[i],
    "long_dim1": lambda t, i, m: t[:, i],
    "two_indices": lambda t, i, m: t[i, i],
    "bool_mask": lambda t, i, m: t[m],
}


@pytest.mark.parametrize("name", list(INDEXING))
def test_cpu_index_tensors_are_allowed(name):
    a = torch.randn(4, 4)
    idx, mask = torch.tensor([3, 0, 3]), a > 0
    want = INDEXING[name](a, idx, mask)
    got = INDEXING[name](a.to("neuron"), idx, mask)
    assert_same(got, want)


# Random ops that have no dedicated neuron kernel -----------------------------------------------

RANDOM = {
    "randperm": lambda g: torch.randperm(50, device="neuron", generator=g),
    "normal_tensors": lambda g: torch.normal(torch.arange(8.0, device="neuron"),
                                             torch.full((8,), 2.0, device="neuron"), generator=g),
    "normal_tensor_mean": lambda g: torch.normal(torch.zeros(8, device="neuron"), 3.0,
                                                 generator=g),
    "multinomial": lambda g: torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4], device="neuron"),
                                               16, replacement=True, generator=g),
    "multinomial_no_replacement": lambda g: torch.multinomial(
        torch.arange(1.0, 21.0, device="neuron").repeat(3, 1), 5, generator=g),
    "geometric_": lambda g: torch.empty(32, device="neuron").geometric_(0.3, generator=g),
    "log_normal_": lambda g: torch.empty(32, device="neuron").log_normal_(generator=g),
    "cauchy_": lambda g: torch.empty(32, device="neuron").cauchy_(generator=g),
}


@pytest.fixture
def restore_rng():
    states = torch.neuron.get_rng_state_all()
    cpu_state = torch.get_rng_state()
    yield
    torch.neuron.set_rng_state_all(states)
    torch.set_rng_state(cpu_state)


@pytest.mark.usefixtures("restore_rng")
@pytest.mark.parametrize("name", list(RANDOM))
def test_random_op_reproducible_with_neuron_manual_seed(name):
    torch.neuron.manual_seed(7)
    first = RANDOM[name](None)
    assert first.device.type == "neuron"
    torch.randn(100)  # moves the CPU generator, which must not matter
    torch.neuron.manual_seed(7)
    assert torch.equal(RANDOM[name](None).cpu(), first.cpu())
    # The generator state advanced: the next draw differs.
    assert not torch.equal(RANDOM[name](None).cpu(), first.cpu())


@pytest.mark.usefixtures("restore_rng")
@pytest.mark.parametrize("name", list(RANDOM))
def test_random_op_reproducible_with_neuron_generator(name):
    g = torch.Generator("neuron")
    g.manual_seed(11)
    first = RANDOM[name](g).cpu()
    torch.neuron.manual_seed(0)  # the default generator must not matter
    g.manual_seed(11)
    assert torch.equal(RANDOM[name](g).cpu(), first)
    g.manual_seed(12)
    assert not torch.equal(RANDOM[name](g).cpu(), first)


def test_random_op_refuses_a_cpu_generator():
    with pytest.raises(RuntimeError, match="neuron generator"):
        torch.randperm(10, device="neuron", generator=torch.Generator())


# Memory ----------------------------------------------------------------------------------------


def test_outputs_are_counted_in_hbm():
    x = torch.randn(256, 256, device="neuron")
    before = torch.neuron.memory_allocated()
    y = x + 1
    grown = torch.neuron.memory_allocated() - before
    assert x.nbytes <= grown <= x.nbytes + 4096
    assert y.untyped_storage().device.type == "neuron"
    del y
    assert torch.neuron.memory_allocated() == before


def test_fallback_op_outputs_are_counted_in_hbm():
    x = torch.randn(128, 128) + 128 * torch.eye(128)
    n = x.to("neuron")
    before = torch.neuron.memory_allocated()
    inv = torch.linalg.inv(n)
    assert torch.neuron.memory_allocated() - before >= inv.nbytes
    del inv
    assert torch.neuron.memory_allocated() == before


def test_temporaries_do_not_leak():
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32).to("neuron")
    x = torch.randn(16, 64, device="neuron")

    def forward():
        return torch.softmax(torch.relu(model(x)), dim=-1).sum()

    forward()  # first-call allocations (if any) happen here
    before = torch.neuron.memory_allocated()
    for _ in range(200):
        result = forward()  # with autograd: the graph and its saved tensors go with `result`
    del result
    assert torch.neuron.memory_allocated() == before


def test_training_steps_do_not_leak():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16, device="neuron"), torch.randint(0, 4, (8,), device="neuron")

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step()
    before = torch.neuron.memory_allocated()
    for _ in range(30):
        step()
    assert torch.neuron.memory_allocated() == before


# Autograd --------------------------------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x, target):
        return F.cross_entropy(self.fc2(torch.relu(self.fc1(x))), target)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.LayerNorm([4, 6, 6])
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x, target):
        h = F.gelu(self.norm(self.conv(x)))
        return F.cross_entropy(self.fc(h.flatten(1)), target)


class Recurrent(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(4, 6, batch_first=True)

    def forward(self, x, target):
        return F.mse_loss(self.rnn(x)[0][:, -1], target)


# (model builder, input builder), as pytest params.
AUTOGRAD = [
    pytest.param(MLP, lambda: (torch.randn(10, 8), torch.randint(0, 4, (10,))), id="mlp"),
    pytest.param(ConvNet, lambda: (torch.randn(2, 3, 6, 6), torch.randint(0, 5, (2,))),
                 id="conv_layer_norm"),
    # On accelerators nn.LSTM/GRU run ATen's fused cells, which neuron implements itself
    # (csrc/aten/RecurrentCells.cpp).
    pytest.param(lambda: Recurrent(torch.nn.LSTM),
                 lambda: (torch.randn(2, 5, 4), torch.randn(2, 6)), id="lstm"),
    pytest.param(lambda: Recurrent(torch.nn.GRU),
                 lambda: (torch.randn(2, 5, 4), torch.randn(2, 6)), id="gru"),
]


def gradients(model, inputs, device):
    model = model.to(device)
    model.zero_grad()
    inputs = [t.to(device) for t in inputs]
    x = inputs[0].detach().requires_grad_()
    loss = model(x, *inputs[1:])
    loss.backward()
    return [loss.detach(), x.grad] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("build, make_inputs", AUTOGRAD)
def test_autograd_matches_cpu(build, make_inputs):
    torch.manual_seed(0)
    model, inputs = build(), make_inputs()
    want = gradients(copy.deepcopy(model), inputs, "cpu")
    got = gradients(model, inputs, "neuron")
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.device.type == "neuron"
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention_matches_cpu(causal):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8) for _ in range(3))
    grad = torch.randn(2, 3, 16, 8)

    def run(device):
        qkv = [t.to(device).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*qkv, is_causal=causal)
        out.backward(grad.to(device))
        return [out.detach()] + [t.grad for t in qkv]

    for g, w in zip(run("neuron"), run("cpu")):
        assert g.device.type == "neuron"
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


def test_scaled_dot_product_attention_with_mask_matches_cpu():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 8, 4) for _ in range(3))
    mask = torch.randn(8, 8) > 0
    mask[:, 0] = True  # no fully masked row

    def run(device):
        qkv = [t.to(device).requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*qkv, attn_mask=mask.to(device))
        out.sum().backward()
        return [out.detach()] + [t.grad for t in qkv]

    for g, w in zip(run("neuron"), run("cpu")):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


# The simulated clock ---------------------------------------------------------------------------


@pytest.mark.parametrize("op", [
    lambda x: x + 1,
    lambda x: torch.relu(x),
    lambda x: x.sum(dim=0),
    lambda x: torch.mm(x, x),
    lambda x: x.sort(dim=1),
    lambda x: torch.softmax(x, dim=-1),
], ids=["add", "relu", "sum", "mm", "sort", "softmax"])
def test_device_ops_advance_the_clock(op):
    x = torch.randn(64, 64, device="neuron")
    assert simulated_elapsed_ns(lambda: op(x)) > 0


def test_fp32_matmul_is_slower_than_bf16():
    # TensorE runs fp32 at a quarter of the bf16 rate. Only simulated time is read, so the
    # matmuls are not computed (a 2048^3 bf16 matmul takes a minute on a host without AVX-512).
    with torch_neuron.predict_only():
        a = torch.empty(2048, 2048, device="neuron")
        b = a.bfloat16()
        fp32 = simulated_elapsed_ns(lambda: torch.mm(a, a))
        bf16 = simulated_elapsed_ns(lambda: torch.mm(b, b))
    assert bf16 > 0
    assert fp32 > 2 * bf16


def test_bigger_ops_take_longer():
    small = torch.randn(64, 64, device="neuron")
    big = torch.randn(1024, 1024, device="neuron")
    elapsed = simulated_elapsed_ns
    assert elapsed(lambda: big + 1) > elapsed(lambda: small + 1)
    assert elapsed(lambda: torch.mm(big, big)) > elapsed(lambda: torch.mm(small, small))


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.float32])
@pytest.mark.parametrize("shape, expanded, dim", [
    ((7, 1), (7, 5), 1), ((1, 9), (4, 9), 0), ((3, 1, 4), (3, 5, 4), 1), ((1,), (6,), 0)])
def test_median_along_an_expanded_dimension(op, dtype, shape, expanded, dim):
    # The CPU kernel misreads a zero stride along the reduced dimension (PyTorch's CPU median
    # returns garbage there); neuron reads it densely, as CUDA's kernel does, so the reference
    # is the CPU on a contiguous copy.
    x = torch.randint(0, 200, shape, generator=torch.Generator().manual_seed(0)).to(dtype)
    x = x.expand(*expanded)
    want = getattr(x.contiguous(), op)(dim=dim)
    got = getattr(x.to("neuron"), op)(dim=dim)
    assert torch.equal(got.values.cpu(), want.values)
    assert torch.equal(got.indices.cpu(), want.indices)


def test_conj_physical_in_place_runs_on_neuron():
    # Its only kernel was a composite calling a CPU-only stub (found by the fuzzer).
    z = torch.tensor([1 + 2j, -3 - 0.5j])
    n = z.to("neuron")
    assert n.conj_physical_() is n
    assert torch.equal(n.cpu(), z.conj_physical())


def test_mish_backward_in_float16_matches_the_cpu_kernel():
    # PyTorch's CompositeImplicitAutograd decomposition rounds differently in float16.
    x = torch.randn(64, generator=torch.Generator().manual_seed(0)).half().requires_grad_()
    n = x.detach().to("neuron").requires_grad_()
    torch.nn.functional.mish(x).sum().backward()
    torch.nn.functional.mish(n).sum().backward()
    assert torch.equal(n.grad.cpu(), x.grad)
