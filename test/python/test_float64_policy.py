"""Float64 on neuron is computed in float32, as on Trainium (TorchNeuron does the same). The
policy applies to what an op writes and nothing else: elements an in-place op does not write
keep every bit of their float64 value, including values float32 cannot hold and other dtypes'
bits seen through a float64 view. (Which elements an op wrote is told from the float32 copy it
wrote into: an element written with the value it already had in float32 keeps its float64
bits too; that value is the same in float32, the precision the policy promises.)"""

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


def test_results_are_still_float32_arithmetic():
    # The policy itself: what an op computes comes from float32 (documented in the README).
    x = torch.tensor([1 / 3], dtype=torch.float64)
    got = (x.to("neuron") * 3).cpu()
    assert got.dtype == torch.float64
    assert got.item() == (x.float() * 3).double().item()
