"""LayerNorm as NKI kernels, the two versions of AWS's LayerNorm tutorial written from its
description (aws-neuron-sdk general/nki/tutorials/layernorm.rst at 49ee15c5):
y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dim of [rows, hidden].

Both process 128 rows at a time (the last tile partial), with gamma and beta loaded once and
broadcast across the partitions:

- `layernorm_v1` uses nki.language functions only: nl.mean for the mean, the mean of the
  squares minus the squared mean for the variance (the tutorial's "trick"), nl.rsqrt(var +
  eps), then the shift, the scale and the affine transform, each a separate pass.
- `layernorm_v2` uses nki.isa: bn_stats over slices of at most 512 elements
  (nl.tile_size.bn_stats_fmax) and bn_aggr for mean and variance, and one tensor_scalar for
  (x - mean) * rstd.

The tutorial measured both on trn1 (NCLatency p50: v1 2311 us, v2 1969 us) with its script's
perf mode, whose default input is (4096, 8192) float32; its text says (300, 1000). The
fidelity suite's layernorm anchors time these kernels at (4096, 8192) and say why
(torch_neuron/fidelity/op_anchors.py).

Run it: python examples/nki/layernorm.py (checks against torch on the CPU and prints both
kernels' per-engine profiles).
"""

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl


def _broadcast_rows(vectors, P):
    """[hidden] HBM vectors loaded once and broadcast to P partitions (nl.broadcast_to); the
    rows are loaded first, so that once dropped they leave one hole, not one between the
    broadcasts."""
    rows = [nl.load(v.reshape((1, v.shape[0]))) for v in vectors]
    return [nl.broadcast_to(row, (P, row.shape[1])) for row in rows]


@nki.jit
def layernorm_v1(x, gamma, beta, eps=1e-5):
    rows, hidden = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, hidden), dtype=x.dtype, buffer=nl.shared_hbm)
    g, b = _broadcast_rows((gamma, beta), P)
    for i in nl.affine_range((rows + P - 1) // P):
        r0 = i * P
        n = min(P, rows - r0)
        xt = nl.load(x[r0:r0 + n])
        mean = nl.mean(xt, axis=1, keepdims=True)
        mean_sq = nl.mean(nl.square(xt), axis=1, keepdims=True)
        rstd = nl.rsqrt(nl.add(nl.subtract(mean_sq, nl.multiply(mean, mean)), eps))
        # The tutorial's passes, each a new tile; rebinding drops the one it read, so at most
        # two full-width tiles are live besides gamma and beta (a [128, 8192] float32 tile
        # takes a sixth of an SBUF partition).
        xt = nl.subtract(xt, mean)
        xt = nl.multiply(xt, rstd)
        xt = nl.multiply(xt, g[0:n])
        y = nl.add(xt, b[0:n])
        nl.store(out[r0:r0 + n], y)
    return out


@nki.jit
def layernorm_v2(x, gamma, beta, eps=1e-5):
    rows, hidden = x.shape
    P = nl.tile_size.pmax
    fmax = nl.tile_size.bn_stats_fmax
    chunks = (hidden + fmax - 1) // fmax
    out = nl.ndarray((rows, hidden), dtype=x.dtype, buffer=nl.shared_hbm)
    g, b = _broadcast_rows((gamma, beta), P)
    for i in nl.affine_range((rows + P - 1) // P):
        r0 = i * P
        n = min(P, rows - r0)
        xt = nl.ndarray((P, hidden), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:n], src=x[r0:r0 + n])
        stats = nl.ndarray((P, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            c0 = c * fmax
            nisa.bn_stats(dst=stats[0:n, 6 * c:6 * c + 6],
                          data=xt[0:n, c0:min(hidden, c0 + fmax)])
        mean_var = nl.ndarray((P, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var[0:n], data=stats[0:n])
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:n], data=mean_var[0:n, 1:2], op0=nl.add, operand0=eps,
                           op1=nl.rsqrt)
        y = nl.ndarray((P, hidden), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n], data=xt[0:n], op0=nl.subtract,
                           operand0=mean_var[0:n, 0:1], op1=nl.multiply, operand1=rstd[0:n])
        nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=g[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=b[0:n], op=nl.add)
        nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])
    return out


def main(rows=4096, hidden=8192):
    torch.manual_seed(0)
    x, gamma, beta = torch.randn(rows, hidden), torch.randn(hidden), torch.randn(hidden)
    expected = torch.nn.functional.layer_norm(x, (hidden,), gamma, beta, eps=1e-5)
    for kernel in (layernorm_v1, layernorm_v2):
        p = nki.profile(nki.jit(kernel, platform_target="trn1"), x, gamma, beta)
        torch.testing.assert_close(p.run.result, expected, rtol=1e-4, atol=1e-4)
        print(f"{kernel.__name__} [{rows}, {hidden}] fp32 on trn1: {p.summary()}")


if __name__ == "__main__":
    main()
