"""Float64 on neuron is computed in float32, as on Trainium (TorchNeuron does the same). The
policy applies to what an op writes and nothing else: elements an in-place op does not write
keep every bit of their float64 value, including values float32 cannot hold and other dtypes'
bits seen through a float64 view, and a value float32 holds exactly is written bit for bit,
even over an element that float32 cannot tell from it (Note [Float64 write-back])."""

import pytest
import torch

pytestmark = pytest.mark.filterwarnings("ignore:neuron computes float64")

# Values float32 rounds (0.1, 1/3), flushes (1e-300) or overflows (1e300), and a NaN payload.
VALUES = torch.tensor([0.1, 1e-300, 1e300, 1 / 3, -2.5, 7.0, float("nan"), 1e-40],
                      dtype=torch.float64)


def bits(t):
    return t.cpu().contiguous().view(torch.int64)


IN_PLACE = {
    "index_fill_": lambda t: t.index_fill_(0, torch.tensor([4], device=t.device), 3.0),
    "mask_assign": lambda t: t.__setitem__(t == 7.0, -1.0),
    "index_put_": lambda t: t.index_put_((torch.tensor([0], device=t.device),),
                                         torch.tensor(9.0, dtype=t.dtype, device=t.device)),
    "slice_mul_": lambda t: t[4:6].mul_(2),
    "masked_fill_": lambda t: t.masked_fill_(t < 0, 0.0),
    "scatter_": lambda t: t.scatter_(0, torch.tensor([5], device=t.device), 1.5),
    "slice_copy_": lambda t: t[5:6].copy_(torch.tensor([4.0], dtype=t.dtype, device=t.device)),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_ops_keep_the_elements_they_do_not_write(name):
    cpu, neuron = VALUES.clone(), VALUES.to("neuron")
    IN_PLACE[name](cpu)
    IN_PLACE[name](neuron)
    written = bits(cpu) != bits(VALUES)
    # Untouched elements: the same bits as before. Written ones: the CPU's value in float32.
    assert torch.equal(bits(neuron)[~written], bits(VALUES)[~written])
    assert torch.equal(neuron.cpu()[written].float(), cpu[written].float())


def test_int64_seen_through_a_float64_view_survives_an_in_place_op():
    ints = torch.tensor([1, 2, 3, -4, 1 << 60], dtype=torch.int64)
    neuron = ints.to("neuron")
    neuron.view(torch.float64).index_fill_(0, torch.tensor([0], device="neuron"), 0.5)
    cpu = ints.clone()
    cpu.view(torch.float64).index_fill_(0, torch.tensor([0]), 0.5)
    assert neuron.cpu().tolist() == cpu.tolist()


def index_put(t, i, v):
    t[torch.tensor(i, device=t.device)] = v


EXACT_WRITES = {
    "index_put": lambda t: index_put(t, [0], 0.0),
    "index_put_values": lambda t: index_put(
        t, [0, 1], torch.tensor([0.0, -0.0], dtype=t.dtype, device=t.device)),
    "masked_fill_": lambda t: t.masked_fill_(torch.arange(3, device=t.device) != 1, 0.0),
    "index_fill_": lambda t: t.index_fill_(0, torch.tensor([2], device=t.device), 0.0),
    "scatter_": lambda t: t.scatter_(0, torch.tensor([1], device=t.device), 0.0),
    "index_copy_": lambda t: t.index_copy_(
        0, torch.tensor([0], device=t.device), torch.zeros(1, dtype=t.dtype, device=t.device)),
}


@pytest.mark.parametrize("name", sorted(EXACT_WRITES))
def test_writes_float32_holds_exactly_land_bit_for_bit(name):
    # int64 bits seen as float64 are denormals, and 1e-300 too: float32 flushes them to 0.0,
    # so writing 0.0 over them leaves the float32 copy unchanged, yet it is a write.
    for start in (torch.tensor([3, 5, 7]).view(torch.float64),
                  torch.tensor([1e-300, -1e-310, 2.5], dtype=torch.float64)):
        cpu, neuron = start.clone(), start.to("neuron")
        EXACT_WRITES[name](cpu)
        EXACT_WRITES[name](neuron)
        assert bits(neuron).tolist() == bits(cpu).tolist(), (name, start)


def test_accumulating_nothing_keeps_the_float64_bits():
    # accumulate=True reads what it overwrites: adding 0.0 leaves each value as it was.
    for start in (torch.tensor([3, 5, 7]).view(torch.float64),
                  torch.tensor([1e-300, 0.1, 2.5], dtype=torch.float64)):
        cpu, neuron = start.clone(), start.to("neuron")
        for t in (cpu, neuron):
            t.index_put_((torch.tensor([0, 2], device=t.device),),
                         torch.tensor(0.0, dtype=t.dtype, device=t.device), accumulate=True)
        assert bits(neuron).tolist() == bits(cpu).tolist()


def test_results_are_still_float32_arithmetic():
    # The policy itself: what an op computes comes from float32 (documented in the README).
    x = torch.tensor([1 / 3], dtype=torch.float64)
    got = (x.to("neuron") * 3).cpu()
    assert got.dtype == torch.float64
    assert got.item() == (x.float() * 3).double().item()


# Narrowed ops keep PyTorch's dtype rules (Note [Float64 narrowing checks]): result dtypes,
# errors and overlap checks are those of the same op in float64 on the CPU.
def f64(*values, device):
    return torch.tensor(values, dtype=torch.float64, device=device)


RESULT_DTYPES = {
    # a 0-dim float64 tensor does not promote a float32 tensor
    "float32 + 0-dim float64": lambda d: torch.ones(2, device=d) + f64(2.5, device=d)[0],
    "complex(float64, float64)": lambda d: torch.complex(f64(1.5, 2, device=d), f64(3, 4, device=d)),
    "float16 * float64": lambda d: torch.full((2,), 1.5, dtype=torch.float16, device=d) * f64(0.1, 3, device=d),
    "int64 / float64": lambda d: torch.arange(1, 3, device=d) / f64(3, 7, device=d),
    "nansum(float64, dtype=float32)": lambda d: torch.nansum(f64(0.1, 0.2, device=d), dtype=torch.float32),
    "angle(float64 * 1j)": lambda d: (f64(0.5, -2, device=d) * 1j).angle(),
    "polar(float64, float64)": lambda d: torch.polar(f64(1, 2, device=d), f64(0.3, 0.4, device=d)),
}


@pytest.mark.parametrize("name", sorted(RESULT_DTYPES))
def test_narrowed_results_have_the_cpu_dtype(name):
    cpu, neuron = RESULT_DTYPES[name]("cpu"), RESULT_DTYPES[name]("neuron")
    assert neuron.dtype == cpu.dtype
    assert neuron.device.type == "neuron"
    torch.testing.assert_close(neuron.cpu(), cpu, rtol=1.3e-6, atol=1e-6)


ERRORS = {
    "mm(float64, float32)": lambda d: torch.mm(f64(1, 2, device=d).view(2, 1), torch.ones(1, 2, device=d)),
    "complex(float64, float32)": lambda d: torch.complex(f64(1, 2, device=d), torch.ones(2, device=d)),
    "lerp(float64, float32)": lambda d: torch.lerp(f64(1, 2, device=d), torch.ones(2, device=d), 0.5),
    "add_ partly overlapping itself": lambda d: (lambda x: x[1:].add_(x[:-1]))(f64(1, 2, 3, device=d)),
    "cat(out=an input)": lambda d: (lambda x: torch.cat([x, x], out=x))(f64(1, 2, device=d)),
    "in-place on an expanded tensor": lambda d: f64(1, device=d).expand(3).mul_(f64(1, 2, 3, device=d)),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_narrowed_ops_raise_where_the_cpu_raises(name):
    with pytest.raises(RuntimeError) as cpu_error:
        ERRORS[name]("cpu")
    with pytest.raises(RuntimeError) as neuron_error:
        ERRORS[name]("neuron")
    assert str(neuron_error.value).split("\n")[0] == str(cpu_error.value).split("\n")[0]


def test_mixed_float32_and_float64_that_pytorch_accepts_give_the_cpu_result():
    a, b = torch.rand(4, dtype=torch.float64), torch.rand(4)
    got = torch.add(a.to("neuron"), b.to("neuron"))
    assert got.dtype == torch.float64
    torch.testing.assert_close(got.cpu(), a + b)


def test_float64_batch_norm_updates_its_running_statistics():
    torch.manual_seed(0)
    x = torch.randn(8, 3, dtype=torch.float64)
    cpu = torch.nn.BatchNorm1d(3).double()
    neuron = torch.nn.BatchNorm1d(3).double().to("neuron")
    cpu(x)
    neuron(x.to("neuron"))
    torch.testing.assert_close(neuron.running_mean.cpu(), cpu.running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(neuron.running_var.cpu(), cpu.running_var, rtol=1e-5, atol=1e-6)
    # Evaluation reads the statistics and leaves every bit of them alone.
    before = neuron.running_mean.clone()
    neuron.eval()(x.to("neuron"))
    assert torch.equal(bits(neuron.running_mean), bits(before))


def test_narrowed_results_of_strided_views_have_the_cpu_strides():
    x = torch.rand(3, 2, dtype=torch.float64)
    cpu = torch.relu(x.unfold(0, 1, 2))
    neuron = torch.relu(x.to("neuron").unfold(0, 1, 2))
    assert neuron.stride() == cpu.stride()
    torch.testing.assert_close(neuron.cpu(), cpu, rtol=1.3e-6, atol=1e-7)
