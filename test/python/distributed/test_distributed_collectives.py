"""The c10d "neuron" backend moves the right bytes: every collective, reduction, dtype and
point-to-point op against the same op on CPU tensors through Gloo, under torchrun."""

import pytest

from conftest import assert_ok, run_torchrun


@pytest.mark.parametrize("ranks", [2, pytest.param(4, marks=pytest.mark.extended)])
def test_every_collective_matches_gloo_on_cpu(ranks):
    result = assert_ok(run_torchrun("collectives_worker.py", ranks))
    for rank in range(ranks):
        assert f"collectives ok:" in result.stdout and f"on rank {rank}" in result.stdout
