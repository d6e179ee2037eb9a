"""Row softmax as an NKI kernel: softmax over the last dim of a 2-D [rows, cols] tensor, the
numerically stable form (subtract the row maximum before exponentiating), in the style of AWS's
NKI tutorials (aws-neuron-sdk nki/guides/tutorials/, the fused attention tutorial's softmax
step; nki-samples' softmax).

Per 128-row tile: the Vector Engine finds each row's maximum, negated (tensor_reduce with
negate=True); the Scalar Engine computes exp(x - max) and the row sums in one pass
(activation_reduce with the negated maximum as its per-partition bias); the Vector Engine
takes the sums' reciprocals and scales the rows.

Run it: python examples/nki/softmax.py (checks against torch on the CPU and prints the
kernel's per-engine profile).
"""

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl


@nki.jit
def softmax(x):
    rows, cols = x.shape
    P = nl.tile_size.pmax
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((rows + P - 1) // P):
        r0 = i * P
        n = min(P, rows - r0)
        xt = nl.ndarray((P, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=xt[0:n], src=x[r0:r0 + n])
        neg_max = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max[0:n], op=nl.max, data=xt[0:n], axis=1, negate=True)
        e = nl.ndarray((P, cols), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=e[0:n], op=nl.exp, data=xt[0:n], bias=neg_max[0:n],
                               reduce_op=nl.add, reduce_res=total[0:n])
        inv = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv[0:n], data=total[0:n])
        y = nl.ndarray((P, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:n], data=e[0:n], op0=nl.multiply, operand0=inv[0:n])
        nisa.dma_copy(dst=out[r0:r0 + n], src=y[0:n])
    return out


def main(rows=4096, cols=2048):
    torch.manual_seed(0)
    x = torch.randn(rows, cols) * 4
    p = nki.profile(softmax, x)
    torch.testing.assert_close(p.run.result, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)
    print(f"softmax [{rows}, {cols}] fp32: {p.summary()}")


if __name__ == "__main__":
    main()
