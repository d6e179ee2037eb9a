"""The simulated clock under the neuron process group (clocks agree across ranks, a late rank
delays everyone, async collectives overlap compute but take their DMA share from HBM-bound
compute) and init_process_group's forms."""

import pytest

from conftest import assert_ok, run_torchrun


@pytest.mark.parametrize("ranks", [2, 3])
def test_clocks_agree_across_ranks(ranks):
    result = assert_ok(run_torchrun("clock_worker.py", ranks))
    assert result.stdout.count("clock ok") == ranks
    # Two ranks also check that an all-reduce slows HBM-bound compute by its DMA share.
    assert result.stdout.count("dma share ok") == (2 if ranks == 2 else 0)


@pytest.mark.parametrize("form", ["device_id", "per_device"])
def test_init_process_group_forms(form):
    result = assert_ok(run_torchrun("init_forms_worker.py", 2, [form]))
    assert result.stdout.count(f"init ok ({form})") == 2


def test_default_backend_patch_still_matches_pytorch():
    """The no-backend default (torch_neuron.distributed._default_to_neuron) wraps PyTorch's
    _new_process_group_helper by position: fail loudly if PyTorch changes its signature."""
    import inspect

    import torch.distributed.distributed_c10d as c10d

    import torch_neuron  # noqa: F401

    assert getattr(c10d._new_process_group_helper, "_torch_neuron_default_backend", False)
    params = list(inspect.signature(c10d._new_process_group_helper.__wrapped__).parameters)
    assert params[:4] == ["group_size", "group_rank", "global_ranks_in_group", "backend"]
