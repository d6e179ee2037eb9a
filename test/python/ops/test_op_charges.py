"""Ops whose work is not one pass over their largest tensor are charged for the work they do
(csrc/aten/OpWork.cpp). Predict-only mode charges as an executed run does and needs no values,
so the shapes can be large."""
import pytest
import torch

import torch_neuron


def simulated_us(call):
    call()
    torch.neuron.synchronize()
    start = torch.neuron.simulated_time_ns()
    call()
    torch.neuron.synchronize()
    return (torch.neuron.simulated_time_ns() - start) / 1e3


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
