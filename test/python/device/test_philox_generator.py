"""The neuron generator is a (seed, offset) Philox4x32-10 generator, as CUDA's is (Note [Philox
generator] in csrc/runtime/Generator.h): its state is 16 bytes, element i of a draw at offset o
comes from counter o + i, and an op advances the offset by its element count rounded up to 4.
That is what DTensor's OffsetBasedRNGTracker relies on (a shard drawn at o + k * m equals rows
of the whole tensor drawn at o), checked here directly through set_rng_state."""

import math
import struct

import pytest
import torch

import torch_neuron
from conftest import run_python_json, simulated_elapsed_ns

MASK32 = 0xFFFFFFFF


def philox(counter, key):
    """Reference Philox4x32-10 (Salmon et al., SC'11) in Python, for a few elements."""
    x = [counter & MASK32, counter >> 32, 0, 0]
    k0, k1 = key & MASK32, key >> 32
    for _ in range(10):
        p0, p1 = 0xD2511F53 * x[0], 0xCD9E8D57 * x[2]
        x = [(p1 >> 32) ^ x[1] ^ k0, p1 & MASK32, (p0 >> 32) ^ x[3] ^ k1, p0 & MASK32]
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return x


def unit53(lo, hi):
    return ((hi << 32 | lo) >> 11) * 2.0 ** -53


def state(seed, offset):
    return torch.tensor(list(struct.pack("<Qq", seed, offset)), dtype=torch.uint8)


def seed_offset(s):
    return struct.unpack("<Qq", bytes(s.tolist()))


def set_state(seed, offset):
    torch.neuron.set_rng_state(state(seed, offset))


@pytest.fixture(autouse=True)
def restore_rng():
    states = torch.neuron.get_rng_state_all()
    yield
    torch.neuron.set_rng_state_all(states)


def test_philox_known_answer():
    # Random123's known-answer test: counter 0, key 0.
    assert philox(0, 0) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    seed, offset = 2**40 + 17, 1236
    set_state(seed, offset)
    u = torch.rand(6, dtype=torch.float64, device="neuron").cpu().tolist()
    set_state(seed, offset)
    n = torch.randn(6, dtype=torch.float64, device="neuron").cpu().tolist()
    for i in range(6):
        w = philox(offset + i, seed)
        assert u[i] == unit53(w[0], w[1])
        expected = math.sqrt(-2 * math.log(1 - unit53(w[0], w[1]))) * math.cos(
            2 * math.pi * unit53(w[2], w[3]))
        assert n[i] == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_state_is_seed_and_offset():
    torch.neuron.manual_seed(1234)
    s = torch.neuron.get_rng_state()
    assert s.dtype == torch.uint8 and s.shape == (16,) and s.device.type == "cpu"
    assert seed_offset(s) == (1234, 0)
    torch.randn(5, device="neuron")
    assert seed_offset(torch.neuron.get_rng_state()) == (1234, 8)
    set_state(99, 40)
    assert torch.neuron.initial_seed() == 99
    assert seed_offset(torch.neuron.get_rng_state()) == (99, 40)


def test_set_state_of_another_size_is_refused():
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.neuron.set_rng_state(torch.get_rng_state())  # a CPU generator's 5056 bytes
    with pytest.raises(RuntimeError, match="16 bytes"):
        torch.Generator(device="neuron").set_state(torch.zeros(8, dtype=torch.uint8))
    torch.randn(3, device="neuron")  # the generator still works


def test_offset_arithmetic():
    g = torch.Generator(device="neuron").manual_seed(3)
    assert g.get_offset() == 0
    for numel, expected in [(1, 4), (4, 8), (5, 16), (0, 16), (12, 28)]:
        torch.empty(numel, device="neuron").uniform_(generator=g)
        assert g.get_offset() == expected
    torch.empty(3, 2, dtype=torch.complex64, device="neuron").normal_(generator=g)
    assert g.get_offset() == 40  # 12 real numbers
    g.set_offset(100)
    assert g.get_offset() == 100
    g.manual_seed(4)
    assert g.get_offset() == 0 and g.initial_seed() == 4


def test_clone_and_state_round_trip():
    g = torch.Generator(device="neuron").manual_seed(77)
    torch.rand(10, device="neuron", generator=g)
    clone = g.clone_state()
    assert clone.get_offset() == g.get_offset() == 12 and clone.initial_seed() == 77
    a = torch.randn(20, device="neuron", generator=g).cpu()
    assert torch.equal(torch.randn(20, device="neuron", generator=clone).cpu(), a)
    h = torch.Generator(device="neuron")
    h.set_state(clone.get_state())
    assert torch.equal(h.get_state(), clone.get_state())


def test_reproducible_run_to_run_and_not_the_cpu_stream():
    code = """
        import json, torch, torch_neuron
        torch.manual_seed(2024)
        x = torch.randn(8, device="neuron")
        y = torch.nn.functional.dropout(torch.ones(8, device="neuron"), 0.5)
        z = torch.randperm(8, device="neuron")
        print(json.dumps([x.cpu().tolist(), y.cpu().tolist(), z.cpu().tolist()]))
    """
    first, second = run_python_json(code), run_python_json(code)
    assert first == second
    torch.manual_seed(2024)
    assert first[0] != torch.randn(8).tolist()


# Each draws a fresh neuron tensor of `shape` from the default generator.
KERNELS = {
    "normal_": lambda shape: torch.empty(shape, device="neuron").normal_(1.0, 2.0),
    "uniform_": lambda shape: torch.empty(shape, device="neuron").uniform_(-1, 3),
    "bernoulli_p": lambda shape: torch.empty(shape, device="neuron").bernoulli_(0.4),
    "bernoulli_tensor": lambda shape: torch.bernoulli(torch.full(shape, 0.3, device="neuron")),
    "exponential_": lambda shape: torch.empty(shape, device="neuron").exponential_(2.0),
    "random_": lambda shape: torch.empty(shape, dtype=torch.int64, device="neuron").random_(),
    "random_to": lambda shape: torch.empty(shape, dtype=torch.int32, device="neuron").random_(77),
    "random_from": lambda shape: torch.empty(shape, device="neuron").random_(-5, 9),
    "dropout_mask": lambda shape: torch.ops.aten.native_dropout(
        torch.ones(shape, device="neuron"), 0.3, True)[1],
}


@pytest.mark.parametrize("name", list(KERNELS))
def test_shard_drawn_at_shifted_offset_equals_rows_of_the_whole(name):
    # DTensor's Shard(0) recipe: shard k of m elements is drawn at offset o + k * m, then the
    # offset becomes o + numel (rounded up to 4) on every rank.
    seed, offset, rows, cols, shards = 7, 48, 8, 6, 4
    set_state(seed, offset)
    whole = KERNELS[name]((rows, cols)).cpu()
    assert seed_offset(torch.neuron.get_rng_state()) == (seed, offset + rows * cols)
    local = rows // shards
    for k in range(shards):
        set_state(seed, offset + k * local * cols)
        shard = KERNELS[name]((local, cols)).cpu()
        assert torch.equal(shard, whole[k * local:(k + 1) * local]), k


def test_strided_tensor_is_filled_in_logical_order():
    set_state(5, 0)
    contiguous = torch.empty(8, 6, device="neuron").normal_().cpu()
    set_state(5, 0)
    transposed = torch.empty(6, 8, device="neuron").t().normal_()
    assert not transposed.is_contiguous()
    assert torch.equal(transposed.cpu(), contiguous)
    set_state(5, 0)
    column = torch.zeros(8, 12, device="neuron")[:, ::2].normal_()
    assert torch.equal(column.cpu(), contiguous)


def test_statistics():
    torch.neuron.manual_seed(0)
    n = 100_000
    x = torch.empty(n, device="neuron").normal_(3.0, 2.0).cpu()
    assert abs(x.mean().item() - 3) < 0.03 and abs(x.std().item() - 2) < 0.03
    u = torch.rand(n, device="neuron").cpu()
    assert u.min().item() >= 0 and u.max().item() < 1 and abs(u.mean().item() - 0.5) < 0.01
    assert abs(u.std().item() - (1 / 12) ** 0.5) < 0.01
    b = torch.empty(n, device="neuron").bernoulli_(0.3).cpu()
    assert abs(b.mean().item() - 0.3) < 0.01
    e = torch.empty(n, device="neuron").exponential_(4.0).cpu()
    assert e.min().item() >= 0 and abs(e.mean().item() - 0.25) < 0.01
    _, mask = torch.ops.aten.native_dropout(torch.ones(n, device="neuron"), 0.2, True)
    assert abs(mask.cpu().float().mean().item() - 0.8) < 0.01
    r = torch.randint(0, 10, (n,), device="neuron").cpu()
    counts = torch.bincount(r, minlength=10).float() / n
    assert (counts - 0.1).abs().max().item() < 0.01


FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_kernels_dtypes(dtype):
    n = 4096
    make = lambda: torch.empty(n, dtype=dtype, device="neuron")
    # normal_ is computed in double and rounded once: the float64 draw, cast.
    set_state(1, 0)
    reference = torch.empty(n, dtype=torch.float64, device="neuron").normal_().cpu()
    set_state(1, 0)
    x = make().normal_()
    assert x.dtype == dtype and torch.equal(x.cpu(), reference.to(dtype))
    u = make().uniform_(0, 1).cpu()
    assert u.min() >= 0 and u.max() < 1 and u.unique().numel() > 100
    e = make().exponential_().cpu()
    assert e.min() >= 0 and torch.isfinite(e).all()
    b = make().bernoulli_(0.5).cpu()
    assert set(b.unique().tolist()) == {0.0, 1.0}
    bt = torch.bernoulli(torch.full((n,), 0.5, dtype=dtype, device="neuron")).cpu()
    assert bt.dtype == dtype and set(bt.unique().tolist()) == {0.0, 1.0}
    r = make().random_().cpu().double()
    digits = {torch.float32: 24, torch.float64: 53, torch.float16: 11, torch.bfloat16: 8}[dtype]
    assert r.min() >= 0 and r.max() <= 2 ** digits and r.unique().numel() > 100
    r = make().random_(-3, 4).cpu()
    assert set(r.unique().tolist()) == set(range(-3, 4))
    c = torch.empty(n, dtype=torch.complex64, device="neuron").normal_().cpu()
    assert abs(c.real.std().item() - 0.5 ** 0.5) < 0.05


@pytest.mark.parametrize("dtype", INTS + [torch.bool])
def test_integer_kernels_dtypes(dtype):
    n = 4096
    make = lambda: torch.empty(n, dtype=dtype, device="neuron")
    r = make().random_().cpu()
    assert r.dtype == dtype
    if dtype == torch.bool:
        assert set(r.unique().tolist()) == {False, True}
    else:
        info = torch.iinfo(dtype)
        assert r.min().item() >= 0 and r.max().item() <= info.max
        assert r.unique().numel() > (2 if dtype == torch.uint8 else 100)
        # The top of the range is reached for narrow types (PyTorch's range: [0, max]).
        if dtype in (torch.uint8, torch.int8):
            assert r.max().item() > info.max * 0.9
    top = 2 if dtype == torch.bool else 5
    r = make().random_(0, top).cpu()
    assert set(r.long().unique().tolist()) == set(range(top))
    b = make().bernoulli_(0.5).cpu()
    assert set(b.long().unique().tolist()) == {0, 1}
    with pytest.raises(RuntimeError):
        make().normal_()


def test_random_argument_checks_are_the_cpus():
    for op in [lambda t: t.normal_(0, -1), lambda t: t.uniform_(2, 1),
               lambda t: t.bernoulli_(1.5), lambda t: t.exponential_(-1),
               lambda t: t.random_(5, 2)]:
        with pytest.raises(RuntimeError) as cpu:
            op(torch.empty(3))
        with pytest.raises(RuntimeError) as neuron:
            op(torch.empty(3, device="neuron"))
        assert str(cpu.value).splitlines()[0] == str(neuron.value).splitlines()[0]


def test_int64_full_range():
    set_state(3, 0)
    r = torch.empty(4096, dtype=torch.int64, device="neuron").random_(
        -2 ** 63, None).cpu()
    assert r.min().item() < -2 ** 62 and r.max().item() > 2 ** 62


def test_predict_only_charges_without_drawing():
    torch.neuron.manual_seed(0)
    x = torch.zeros(1 << 16, device="neuron")
    ones = torch.ones(1 << 16, device="neuron")
    before = seed_offset(torch.neuron.get_rng_state())[1]
    with torch_neuron.predict_only():
        elapsed = simulated_elapsed_ns(lambda: x.normal_())
        x.uniform_()
        x.bernoulli_(0.5)
        x.exponential_()
        torch.nn.functional.dropout(ones, 0.5)
    assert elapsed > 0
    assert torch.equal(x.cpu(), torch.zeros(1 << 16))
    # The offsets advance as in a run that computes, so later draws are the same.
    assert seed_offset(torch.neuron.get_rng_state())[1] == before + 5 * (1 << 16)


def test_host_executed_random_ops_follow_seed_and_offset():
    def draw():
        return [torch.randperm(20, device="neuron").cpu(),
                torch.multinomial(torch.ones(10, device="neuron"), 5).cpu(),
                torch.poisson(torch.full((10,), 3.0, device="neuron")).cpu(),
                torch.empty(10, device="neuron").log_normal_().cpu(),
                torch.empty(10, device="neuron").cauchy_().cpu(),
                torch.empty(10, device="neuron").geometric_(0.3).cpu()]

    set_state(11, 64)
    first = draw()
    _, offset = seed_offset(torch.neuron.get_rng_state())
    assert offset > 64
    set_state(11, 64)
    assert all(torch.equal(a, b) for a, b in zip(first, draw()))
    set_state(11, 68)
    assert not torch.equal(draw()[0], first[0])
    set_state(12, 64)
    assert not torch.equal(draw()[0], first[0])
