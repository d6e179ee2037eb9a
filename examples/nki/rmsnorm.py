"""RMSNorm as an NKI kernel, written from the description in AWS's RMSNorm tutorial
(aws-neuron-sdk nki/guides/tutorials/rmsnorm.rst): y = x / sqrt(mean(x^2) + eps) * gamma over
the last dim of a 2-D [rows, hidden] tensor.

Following the tutorial's plan: gamma is loaded once and broadcast across the 128 partitions;
the rows are processed 128 at a time (the last tile partial when rows % 128 != 0); for each
tile the Scalar Engine squares the row and sums it in the same pass (activation_reduce), the
mean plus eps goes through rsqrt, and the Vector Engine scales each row by its factor and
multiplies by gamma.

Run it: python examples/nki/rmsnorm.py (checks against torch on the CPU and prints the
kernel's per-engine profile).
"""

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl


@nki.jit
def rmsnorm(x, gamma, eps=1e-6):
    rows, hidden = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, hidden), dtype=x.dtype, buffer=nl.shared_hbm)
    # gamma once, on every partition: the DMA reads the same row 128 times (stride 0).
    g = nl.ndarray((P, hidden), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, hidden)).broadcast(0, P))
    for i in nl.affine_range((rows + P - 1) // P):
        r0 = i * P
        n = min(P, rows - r0)
        xt = nl.ndarray((P, hidden), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:n], src=x[r0:r0 + n])
        squares = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=squares[0:n], op=nl.square, data=xt[0:n],
                               reduce_op=nl.add, reduce_res=total[0:n])
        # mean + eps, then 1/sqrt on the Scalar Engine
        nisa.tensor_scalar(dst=total[0:n], data=total[0:n], op0=nl.multiply,
                           operand0=1.0 / hidden, op1=nl.add, operand1=eps)
        factor = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=factor[0:n], op=nl.rsqrt, data=total[0:n])
        y = nl.ndarray((P, hidden), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n], data=xt[0:n], op0=nl.multiply, operand0=factor[0:n])
        nisa.tensor_tensor(dst=y[0:n], data1=y[0:n], data2=g[0:n], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])
    return out


def reference(x, gamma, eps=1e-6):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()


def main(rows=4096, hidden=512):
    torch.manual_seed(0)
    x, gamma = torch.randn(rows, hidden), torch.randn(hidden)
    p = nki.profile(rmsnorm, x, gamma)
    torch.testing.assert_close(p.run.result, reference(x, gamma), rtol=1e-5, atol=1e-5)
    print(f"rmsnorm [{rows}, {hidden}] fp32: {p.summary()}")


if __name__ == "__main__":
    main()
