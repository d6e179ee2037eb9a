"""nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode take PyTorch's fused fast
path (one ATen op per block). On neuron it runs as its ATen decomposition (Note [Transformer
fast path on neuron]): the results are the CPU fast path's, and the block is charged as the
ops it is made of, as the same block run op by op is."""
import copy

import pytest
import torch
import torch.nn as nn

import torch_neuron
from conftest import simulated_elapsed_ns


@pytest.fixture
def fastpath():
    before = torch.backends.mha.get_fastpath_enabled()
    yield
    torch.backends.mha.set_fastpath_enabled(before)


def pair(module):
    """The module on the CPU and its own copy on neuron, both in eval mode."""
    cpu = module.eval()
    return cpu, copy.deepcopy(cpu).to("neuron")


def test_multihead_attention_fast_path_matches_cpu(fastpath):
    torch.manual_seed(0)
    cpu, neuron = pair(nn.MultiheadAttention(32, 4, batch_first=True))
    x = torch.randn(3, 7, 32)
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[1, 5:] = True
    with torch.no_grad():
        out, weights = cpu(x, x, x, key_padding_mask=padding)
        got, got_weights = neuron(*(x.to("neuron"),) * 3, key_padding_mask=padding.to("neuron"))
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got_weights.cpu(), weights, atol=1e-5, rtol=1e-5)


ENCODERS = {
    "layer": lambda: nn.TransformerEncoderLayer(32, 4, 64, batch_first=True),
    "layer, norm first": lambda: nn.TransformerEncoderLayer(32, 4, 64, batch_first=True,
                                                            norm_first=True),
    # Without nested tensors, the encoder's layers take the padding mask on neuron.
    "encoder without nested tensors": lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(32, 4, 64, batch_first=True), 2, enable_nested_tensor=False),
}


@pytest.mark.parametrize("build", ENCODERS.values(), ids=ENCODERS.keys())
def test_encoder_fast_path_with_a_padding_mask_matches_cpu(fastpath, build):
    torch.manual_seed(0)
    cpu, neuron = pair(build())
    x = torch.randn(2, 6, 32)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2])
    with torch.no_grad():
        expected = cpu(x, src_key_padding_mask=padding)
        got = neuron(x.to("neuron"), src_key_padding_mask=padding.to("neuron"))
    torch.testing.assert_close(got.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_nested_tensor_path_raises_a_clear_error(fastpath):
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2).eval().to("neuron")  # nested tensors enabled
    x = torch.randn(2, 5, 16, device="neuron")
    padding = torch.tensor([[False] * 5, [False] * 3 + [True] * 2], device="neuron")
    with torch.no_grad(), pytest.raises(NotImplementedError,
                                        match="enable_nested_tensor=False"):
        encoder(x, src_key_padding_mask=padding)
    assert torch.ones(3, device="neuron").sum().item() == 3  # the device stays usable


def simulated_us(call):
    """The simulated time of the second call, without autograd (the fast path's condition)."""
    with torch.no_grad():
        return simulated_elapsed_ns(call, warmup=True) / 1e3


def test_fast_path_is_charged_as_its_ops(fastpath):
    """The fused layer costs what its ops cost run one by one (before: one streaming pass,
    34x less for this layer)."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(256, 8, 1024, batch_first=True).eval().to("neuron")
    x = torch.randn(4, 128, 256, device="neuron")
    torch.backends.mha.set_fastpath_enabled(True)
    fused = simulated_us(lambda: layer(x))
    torch.backends.mha.set_fastpath_enabled(False)
    op_by_op = simulated_us(lambda: layer(x))
    assert 0.8 < fused / op_by_op < 1.25, (fused, op_by_op)


def test_fast_path_charges_the_same_in_predict_only_mode(fastpath):
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, 128, batch_first=True).eval().to("neuron")
    x = torch.randn(2, 16, 64, device="neuron")
    padding = torch.zeros(2, 16, dtype=torch.bool, device="neuron")
    padding[1, 12:] = True

    def run():
        return layer(x, src_key_padding_mask=padding)

    executed = simulated_us(run)
    with torch_neuron.predict_only():
        predicted = simulated_us(run)
    assert predicted == pytest.approx(executed, rel=1e-9)
