"""Known values in predict-only mode (Note [Known values in predict-only mode]): small data
uploaded from the CPU, filled, computed on and read back along an unbroken chain keeps its
values, as the CPU computes them; anything else still raises; the chain is charged as a
computing run charges it."""

import pytest
import torch

import torch_neuron

from conftest import simulated_elapsed_ns


def chain():
    votes = torch.tensor([1, 0, 1], dtype=torch.int32).to("neuron")
    acc = torch.zeros(3, dtype=torch.int32, device="neuron")
    acc += votes * 2
    return acc, acc.sum()


def test_a_chain_of_small_work_gives_the_cpus_values():
    with torch_neuron.predict_only():
        acc, total = chain()
        assert total.item() == 4
        assert acc.cpu().tolist() == [2, 0, 2]
    cpu_votes = torch.tensor([1, 0, 1], dtype=torch.int32)
    assert (cpu_votes * 2).sum().item() == 4


def test_a_chain_is_charged_as_when_computing():
    computed = simulated_elapsed_ns(chain)
    with torch_neuron.predict_only():
        predicted = simulated_elapsed_ns(chain)
    assert predicted == pytest.approx(computed, rel=1e-12)  # (clock sums round)


def test_other_work_ends_the_chain():
    with torch_neuron.predict_only():
        small = torch.tensor([7]).to("neuron")
        big = torch.empty(1024, 1024, device="neuron")
        big.add_(1)  # not small: predicted without values
        with pytest.raises(NotImplementedError, match="predict-only"):
            small.item()


def test_large_uploads_and_their_results_have_no_values():
    with torch_neuron.predict_only():
        large = torch.ones(512, 1024).to("neuron")  # 2 MiB
        with pytest.raises(NotImplementedError, match="predict-only"):
            large.cpu()
        fresh = torch.randint(0, 9, (4,), device="neuron")
        with pytest.raises(NotImplementedError, match="predict-only"):
            fresh.cpu()


def test_a_graph_compiled_while_predicting_folds_constants_with_their_values():
    """Inductor folds uniform constants by computing them on the device and reading them back
    (.item()): compiled while predicting, the graph must bake the real value, not NaN, since a
    later executed call reuses it."""
    def f(x):
        return x + torch.full((8,), 2.0, device=x.device) * 3.0

    compiled = torch.compile(f, backend="neuron")
    with torch_neuron.predict_only():
        compiled(torch.empty(8, device="neuron"))
    x = torch.arange(8.0)
    torch.testing.assert_close(compiled(x.to("neuron")).cpu(), f(x))
