"""Fused self-attention as an NKI kernel: out = softmax(Q K^T / sqrt(d)) V for one head,
written from the description in AWS's fused self-attention tutorial (aws-neuron-sdk
nki/guides/tutorials/fused-self-attn.rst): the scores never leave the chip.

Q and K come transposed, [d, seq] with the head dim d <= 128 on the partitions (the contraction
dim of Q K^T); V is [seq, d]. For each tile of 128 queries:

1. TensorE computes the tile's scores against all keys, 512 keys per matmul (one PSUM bank);
   the Scalar Engine copies them to SBUF, scaled by 1/sqrt(d).
2. The Vector Engine takes each row's maximum (negated); the Scalar Engine computes
   exp(score - max) and the row sums in one pass.
3. The unnormalized probabilities are transposed on TensorE 128 keys at a time (keys onto the
   partitions) and multiplied with the matching 128 rows of V, accumulating in PSUM.
4. The rows are divided by their sums at the end (one multiply on d columns instead of seq).

Run it: python examples/nki/attention.py (checks against torch on the CPU and prints the
kernel's per-engine profile).
"""

import math

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl


@nki.jit
def attention(q_t, k_t, v):
    d, seq = q_t.shape
    P = nl.tile_size.pmax
    chunk = nl.tile_size.psum_bank_fmax  # keys per score matmul: one PSUM bank of fp32
    assert d <= P and seq % P == 0, "head dim <= 128, sequence a multiple of 128"
    out = nl.ndarray((seq, d), dtype=v.dtype, buffer=nl.shared_hbm)
    # K and V stay in SBUF for all query tiles.
    keys = nl.ndarray((d, seq), dtype=k_t.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=keys, src=k_t)
    values = nl.ndarray((P, seq // P, d), dtype=v.dtype, buffer=nl.sbuf)
    for j in nl.affine_range(seq // P):
        nisa.dma_copy(dst=values[:, j, :], src=v[j * P:(j + 1) * P, :])
    for i in nl.affine_range(seq // P):
        q = nl.ndarray((d, P), dtype=q_t.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=q, src=q_t[:, i * P:(i + 1) * P])
        scores = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range((seq + chunk - 1) // chunk):
            n = min(chunk, seq - c * chunk)
            s = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=s, stationary=q, moving=keys[:, c * chunk:c * chunk + n])
            nisa.activation(dst=scores[:, c * chunk:c * chunk + n], op=nl.copy, data=s,
                            scale=1.0 / math.sqrt(d))
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.max, data=scores, axis=1, negate=True)
        probs = nl.ndarray((P, seq), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=probs, op=nl.exp, data=scores, bias=neg_max,
                               reduce_op=nl.add, reduce_res=total)
        acc = nl.ndarray((P, d), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(seq // P):
            staged = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_transpose(dst=staged, data=probs[:, j * P:(j + 1) * P])
            probs_t = nl.ndarray((P, P), dtype=v.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=probs_t, src=staged)
            nisa.nc_matmul(dst=acc, stationary=probs_t, moving=values[:, j, :])
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        o = nl.ndarray((P, d), dtype=v.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=o, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[i * P:(i + 1) * P, :], src=o)
    return out


def reference(q, k, v):
    """q, k, v: [seq, d]."""
    scores = (q.float() @ k.float().T) / math.sqrt(q.shape[1])
    return torch.softmax(scores, dim=-1) @ v.float()


def main(seq=2048, d=128, dtype=torch.bfloat16):
    torch.manual_seed(0)
    q, k, v = (torch.randn(seq, d, dtype=dtype) for _ in range(3))
    p = nki.profile(attention, q.T.contiguous(), k.T.contiguous(), v)
    torch.testing.assert_close(p.run.result.float(), reference(q, k, v), rtol=2e-2,
                               atol=2e-2)
    print(f"attention seq={seq}, d={d}, {str(dtype)[6:]}: {p.summary()}")


if __name__ == "__main__":
    main()
