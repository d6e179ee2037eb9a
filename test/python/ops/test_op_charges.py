"""Ops whose work is not one pass over their largest tensor are charged for the work they do
(csrc/aten/OpWork.cpp). Predict-only mode charges as an executed run does and needs no values,
so the shapes can be large."""
import pytest
import torch

import torch_neuron
from torch_neuron import profiler
from conftest import simulated_elapsed_ns


def simulated_us(call):
    return simulated_elapsed_ns(call, warmup=True) / 1e3


@pytest.mark.parametrize("op", ["cdist", "pdist"])
def test_pairwise_distances_cost_grows_with_the_features(op):
    # Each distance combines two rows of D features: D element operations per output. Before,
    # the op was one pass over its output, the same time whatever D.
    def time_for(features):
        x = torch.empty(1024, features, device="neuron")
        y = torch.empty(1024, features, device="neuron")
        if op == "cdist":
            return simulated_us(lambda: torch.cdist(x, y, p=1))
        return simulated_us(lambda: torch.pdist(x))

    with torch_neuron.predict_only():
        ratio = time_for(512) / time_for(64)
    assert 4 < ratio <= 8.5, ratio


def test_cdist_backward_cost_grows_with_the_features_not_the_points():
    def backward_us(points, features):
        x = torch.randn(points, features, device="neuron", requires_grad=True)
        y = torch.randn(points, features, device="neuron")
        grad = torch.ones(points, points, device="neuron")
        return simulated_us(lambda: torch.cdist(x, y, p=1).backward(grad))

    # Its work is pairs x features: four times the features, about four times the time; the
    # number of points (the incoming gradient's last dimension) is not a feature count.
    assert 2.5 < backward_us(256, 256) / backward_us(256, 64) <= 4.5


def test_in_place_and_summed_matmuls_cost_their_flops():
    # addmm_, baddbmm_ and addmv_ were charged as one VectorE pass (their names did not match
    # the matmul family), addbmm for one matrix of its batch.
    with torch_neuron.predict_only():
        a, b, c = (torch.empty(1024, 1024, device="neuron") for _ in range(3))
        b1, b2 = (torch.empty(16, 256, 256, device="neuron") for _ in range(2))
        m, v = torch.empty(256, 256, device="neuron"), torch.empty(1024, device="neuron")
        assert simulated_us(lambda: c.addmm_(a, b)) == pytest.approx(
            simulated_us(lambda: torch.addmm(c, a, b)), rel=1e-6)
        assert simulated_us(lambda: b1.baddbmm_(b1, b2)) == pytest.approx(
            simulated_us(lambda: torch.baddbmm(b1, b1, b2)), rel=1e-6)
        assert simulated_us(lambda: v.addmv_(a, v)) == pytest.approx(
            simulated_us(lambda: torch.addmv(v, a, v)), rel=1e-6)
        # addbmm multiplies the whole batch (then sums it): at least the batched product's
        # TensorE time, which bmm's charge (batch of 16) is dominated by.
        assert simulated_us(lambda: torch.addbmm(m, b1, b2)) > 0.5 * simulated_us(
            lambda: torch.bmm(b1, b2))


def pool_us(op, window, backward=False):
    # A stride-1 pool keeps the input's size: its engine reads window elements per output.
    x = torch.empty(8, 64, 128, 128, device="neuron", requires_grad=backward)
    pool = getattr(torch.nn.functional, op)
    if not backward:
        return simulated_us(lambda: pool(x, window, stride=1, padding=window // 2))
    y = pool(x, window, stride=1, padding=window // 2)
    grad = torch.empty_like(y)
    return simulated_us(lambda: torch.autograd.grad(y, x, grad, retain_graph=True))


@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_pooling_costs_its_window(op):
    # Note [Pooling windows]: a 9x9 window reads 9 times a 3x3's elements per output (both are
    # engine-bound at this size). Before, both cost one pass over the tensor.
    with torch_neuron.predict_only():
        assert 6 < pool_us(op, 9) / pool_us(op, 3) <= 9.2


def test_pooling_backward_costs_what_it_reads():
    with torch_neuron.predict_only():
        # avg pooling spreads each gradient over its window; max pooling sends it to the one
        # input its index names, whatever the window.
        assert 6 < pool_us("avg_pool2d", 9, True) / pool_us("avg_pool2d", 3, True) <= 9.2
        assert pool_us("max_pool2d", 9, True) == pytest.approx(pool_us("max_pool2d", 3, True),
                                                               rel=1e-6)


def test_pooling_charges_the_same_executed_and_predicted():
    def charge():
        x = torch.zeros(2, 4, 32, 32, device="neuron")
        return simulated_us(lambda: torch.nn.functional.max_pool2d(x, 7, stride=1, padding=3))

    with torch_neuron.predict_only():
        predicted = charge()
    assert charge() == pytest.approx(predicted, rel=1e-9)


def charged_bytes(op):
    """The HBM bytes the profiler records for `op`'s one device op (after a warm-up call)."""
    op()
    with profiler.profile() as prof:
        op()
    (record,) = prof.records
    return record["name"], record["bytes"]


def test_an_in_place_indexed_write_moves_the_entries_it_writes_not_the_buffer():
    # Note [Indexed writes]: a decode step's KV-cache update writes one position of a
    # [batch, heads, positions, dim] cache. Before, it was charged two passes over the whole
    # 640 MiB cache (read and written), 39% of a Llama-2-13b decode layer's predicted time.
    cache = torch.empty(8, 40, 8192, 128, dtype=torch.bfloat16, device="neuron")
    new = torch.empty(8, 40, 1, 128, dtype=torch.bfloat16, device="neuron")
    position = torch.tensor([8000], device="neuron")
    spread = position.view(1, 1, 1, 1).expand(8, 40, 1, 128).contiguous()
    written, index = new.nbytes, position.nbytes
    with torch_neuron.predict_only():
        assert charged_bytes(lambda: cache.index_copy_(2, position, new)) == (
            "aten::index_copy_", index + 2 * written)  # read the source, write the entries
        assert charged_bytes(lambda: cache.__setitem__((slice(None), slice(None), position),
                                                       new)) == (
            "aten::_index_put_impl_", index + 2 * written)
        # Accumulating writes read the entries they add to as well.
        assert charged_bytes(lambda: cache.index_add_(2, position, new)) == (
            "aten::index_add_", index + 3 * written)
        assert charged_bytes(lambda: cache.scatter_add_(2, spread, new)) == (
            "aten::scatter_add_", spread.nbytes + 3 * written)
        assert charged_bytes(lambda: cache.scatter_(2, spread, new, reduce="add")) == (
            "aten::scatter_.reduce", spread.nbytes + 3 * written)
        # The out-of-place form writes a whole new cache: its traffic is every operand's.
        name, moved = charged_bytes(lambda: torch.index_copy(cache, 2, position, new))
        assert moved >= 2 * cache.nbytes, (name, moved)


def test_indexed_writes_charge_the_same_executed_and_predicted_and_match_the_cpu():
    cpu_cache, cpu_new = torch.randn(2, 3, 16, 4), torch.randn(2, 3, 2, 4)
    cpu_position = torch.tensor([3, 9])

    def charge():
        cache, new = cpu_cache.to("neuron"), cpu_new.to("neuron")
        position = cpu_position.to("neuron")
        us = simulated_us(lambda: cache.index_copy_(2, position, new))
        return us, cache

    with torch_neuron.predict_only():
        predicted, _ = charge()
    executed, cache = charge()
    assert executed == pytest.approx(predicted, rel=1e-9)
    expected = cpu_cache.clone().index_copy_(2, cpu_position, cpu_new)
    torch.testing.assert_close(cache.cpu(), expected)
