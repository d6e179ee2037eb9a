"""An op that resizes its out= argument and then raises leaves the argument resized, as on the
CPU (the differential fuzzer found neuron keeping the old shape). The added elements are
uninitialized on both devices; the ones the argument had are kept."""

import pytest
import torch

# cat resizes a non-empty out= (deprecated, warned on both devices): that resize is the subject.
pytestmark = [pytest.mark.filterwarnings("ignore:An output with one or more elements was resized"),
              pytest.mark.filterwarnings("ignore:neuron computes float64")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cat_into_one_of_its_inputs_keeps_the_resize_after_the_error(dtype):
    cpu = torch.tensor([[1.5, 2.5]], dtype=dtype)
    neuron = cpu.to("neuron")
    for x in (cpu, neuron):
        with pytest.raises(RuntimeError, match="single memory location"):
            torch.cat([x, x], 0, out=x)
    assert neuron.shape == cpu.shape == (2, 2)
    assert torch.equal(neuron.cpu()[0], cpu[0])
    # The device is still usable.
    assert (neuron[:1] * 2).cpu().tolist() == [[3.0, 5.0]]
