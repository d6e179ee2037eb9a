"""The example kernels of examples/nki/ (RMSNorm, softmax, fused attention, the LayerNorm
tutorial's two versions, the fused Mamba tutorial's three) against PyTorch on the CPU, at small
sizes with partial row tiles, and their profiles' shape (which engines they use)."""

import math
import sys
from pathlib import Path

import pytest
import torch

import torch_neuron
import torch_neuron.nki as nki

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples" / "nki"))
import attention  # noqa: E402
import layernorm  # noqa: E402
import mamba  # noqa: E402
import rmsnorm  # noqa: E402
import softmax  # noqa: E402


def test_rmsnorm_matches_torch():
    torch.manual_seed(0)
    x, gamma = torch.randn(200, 96), torch.randn(96)
    p = nki.profile(rmsnorm.rmsnorm, x, gamma)
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gamma
    torch.testing.assert_close(p.run.result, expected, rtol=1e-5, atol=1e-5)
    assert p.instructions["ScalarE"] == 4 and p.instructions["TensorE"] == 0


def test_softmax_matches_torch():
    torch.manual_seed(0)
    x = torch.randn(130, 300) * 8
    out = softmax.softmax(x)
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_attention_matches_torch(dtype, tol):
    torch.manual_seed(0)
    seq, d = 640, 64   # two 512-key chunks, the second partial
    q, k, v = (torch.randn(seq, d, dtype=dtype) for _ in range(3))
    p = nki.profile(attention.attention, q.T.contiguous(), k.T.contiguous(), v)
    scores = (q.float() @ k.float().T) / math.sqrt(d)
    expected = torch.softmax(scores, dim=-1) @ v.float()
    assert p.run.result.dtype == dtype
    torch.testing.assert_close(p.run.result.float(), expected, rtol=tol, atol=tol)
    # per query tile: 2 score matmuls, and per key tile a transpose and a matmul
    assert p.instructions["TensorE"] == (seq // 128) * (2 + 2 * seq // 128)


@pytest.mark.parametrize("kernel", [layernorm.layernorm_v1, layernorm.layernorm_v2])
def test_layernorm_tutorial_versions_match_torch(kernel):
    torch.manual_seed(0)
    x, gamma, beta = torch.randn(150, 700), torch.randn(700), torch.randn(700)
    out = kernel(x, gamma, beta)
    expected = torch.nn.functional.layer_norm(x, (700,), gamma, beta, eps=1e-5)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)


def test_layernorm_v2_is_faster_than_v1_at_the_tutorials_size():
    # The size the tutorial's perf mode measured (examples/nki/layernorm.py's docstring). Its
    # cost analysis: v2 replaces v1's separate mean, variance, shift and scale passes with
    # bn_stats/bn_aggr and one tensor_scalar, so VectorE spends less time per row, though
    # bn_stats issues one instruction per 512 elements.
    x, gamma, beta = torch.randn(4096, 8192), torch.randn(8192), torch.randn(8192)
    v1 = nki.profile(nki.jit(layernorm.layernorm_v1, platform_target="trn1"), x, gamma, beta)
    v2 = nki.profile(nki.jit(layernorm.layernorm_v2, platform_target="trn1"), x, gamma, beta)
    assert v2.time_us < v1.time_us
    assert v2.busy["VectorE"] * v2.time_us < v1.busy["VectorE"] * v1.time_us


@pytest.mark.parametrize("kernel", [mamba.mamba_v1, mamba.mamba_v2, mamba.mamba_v3])
def test_mamba_tutorial_versions_match_torch(kernel):
    # Two batches and two channel tiles; v3's sequence in two chunks, the second starting from
    # the first one's last state.
    args = mamba.inputs(2, 256, 1024, 3)
    expected = mamba.reference(*args)
    torch.testing.assert_close(kernel(*args), expected, rtol=1e-4, atol=1e-4)


def test_mamba_v2_loads_delta_and_u_once_per_channel_tile_where_v1_reloads_them():
    # The tutorial's loop reordering: v1 loads delta and u for every (state, channel tile), v2
    # once per channel tile, so v2 moves fewer DMA bytes for the same VectorE work.
    args = [torch.empty(s, device="neuron") for s in
            ((1, 512, 512), (1, 512, 512), (512, 8), (1, 8, 512), (1, 8, 512))]
    with torch_neuron.predict_only():
        v1 = nki.profile(nki.jit(mamba.mamba_v1, platform_target="trn1"), *args)
        v2 = nki.profile(nki.jit(mamba.mamba_v2, platform_target="trn1"), *args)
    names = [[r.name for r in p.run.records] for p in (v1, v2)]
    assert names[0].count("tensor_tensor") == names[1].count("tensor_tensor") == 4 * 4 * 8
    assert names[1].count("dma_copy") < names[0].count("dma_copy")
