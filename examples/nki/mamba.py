"""Mamba's selective scan as NKI kernels: the three versions of AWS's fused Mamba tutorial,
written from its description (aws-neuron-sdk nki/guides/tutorials/fused_mamba.rst, first
published in Neuron 2.20.0 as general/nki/tutorials/fused_mamba.rst at ce3668bf).

Inputs delta and u [batch, channels, seq], A [channels, state], B and C [batch, state, seq]:

    h[b, c, s, t] = exp(delta[b, c, t] A[c, s]) h[b, c, s, t-1]
                    + delta[b, c, t] B[b, s, t] u[b, c, t]
    out[b, c, t]  = sum over s of C[b, s, t] h[b, c, s, t]

Channels go on the partitions (tiles of 128), the sequence on the free axis. For one state and
one channel tile the tutorial's six steps are: ScalarE's activation computes exp(delta * A)
with A's column as the per-partition scale (steps 1 and 2); VectorE multiplies delta by u,
then by B's row broadcast across the partitions (3); tensor_tensor_scan runs the recurrence
along the sequence (4); VectorE multiplies by C's row broadcast (5) and adds the result into
the accumulator over states (6). Step 3's delta x u is the same for every state: written
once per state, as in the tutorial, it is scheduled once per channel tile in v2 and v3 (the
compiler drops repeated instructions, Note [Redundant instructions]). B's and C's rows are
broadcast with the tile method `broadcast_to`, as the tutorial's kernels of Neuron 2.20 (the
ones it timed) do: TensorE's ones-matmul into PSUM, read there by VectorE. The versions differ
in their loops:

- `mamba_v1`: states outside, channel tiles inside; delta and u are loaded at every step, and
  one accumulator holds every channel tile until the end.
- `mamba_v2`: channel tiles outside, states inside: delta and u are loaded once per channel
  tile, which has its own accumulator, stored after its states.
- `mamba_v3`: v2 with the sequence in chunks of 512 inside the state loop; each chunk's scan
  starts from the last column of the previous chunk's.

The tutorial measured them on a NeuronCore-v2 (the fidelity suite's op anchors, docs/
fidelity.md): v1 172.93 us at 256 channels, 2.34 ms at 4096; v2 1.61 ms at 4096; and v2 and v3
from 512 to 8192 positions (batch 1, 16 states).

Run it: python examples/nki/mamba.py (checks the three against PyTorch on the CPU and prints
their profiles at the tutorial's 4096-channel size).
"""

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

SEQ_CHUNK = 512  # v3's sequence tile, the tutorial's starting choice


def _step(delta_t, u_t, a_col, b_row, c_row, init, acc):
    """Steps 1-6 for one state over one [128, n] stretch; returns the scan's tile."""
    P, n = delta_t.shape
    decay = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=decay, op=nl.exp, data=delta_t, scale=a_col)
    delta_u = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=delta_u, data1=delta_t, data2=u_t, op=nl.multiply)
    drive = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=drive, data1=delta_u, data2=b_row.broadcast_to((P, n)),
                       op=nl.multiply)
    state = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor_scan(dst=state, data0=decay, data1=drive, initial=init,
                            op0=nl.multiply, op1=nl.add)
    out = nl.ndarray((P, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=out, data1=state, data2=c_row.broadcast_to((P, n)),
                       op=nl.multiply)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=out, op=nl.add)
    return state


def _shapes(delta, A):
    batch, channels, seq = delta.shape
    P = nl.tile_size.pmax
    if channels % P:
        raise ValueError(f"channels ({channels}) must be a multiple of {P}")
    return batch, channels // P, seq, A.shape[1], P


@nki.jit
def mamba_v1(delta, u, A, B, C):
    batch, tiles, seq, states, P = _shapes(delta, A)
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        acc = nl.zeros((P, tiles, seq), dtype=nl.float32, buffer=nl.sbuf)
        for s in nl.affine_range(states):
            for t in nl.affine_range(tiles):
                c0 = t * P
                _step(nl.load(delta[b, c0:c0 + P]), nl.load(u[b, c0:c0 + P]),
                      nl.load(A[c0:c0 + P, s:s + 1]), nl.load(B[b, s:s + 1]),
                      nl.load(C[b, s:s + 1]), 0.0, acc[:, t, :])
        for t in nl.affine_range(tiles):
            nl.store(out[b, t * P:(t + 1) * P], acc[:, t, :])
    return out


@nki.jit
def mamba_v2(delta, u, A, B, C):
    return _channel_tiles_outside(delta, u, A, B, C, chunk=None)


@nki.jit
def mamba_v3(delta, u, A, B, C):
    return _channel_tiles_outside(delta, u, A, B, C, chunk=SEQ_CHUNK)


def _channel_tiles_outside(delta, u, A, B, C, chunk):
    """v2 and v3: channel tiles outside, states inside, delta and u loaded once per channel
    tile; `chunk`: v3's sequence tile, each chunk's scan starting where the previous one ended
    (None: v2, the whole sequence in one scan)."""
    batch, tiles, seq, states, P = _shapes(delta, A)
    if chunk is not None and seq % chunk:
        raise ValueError(f"seq ({seq}) must be a multiple of {chunk}")
    out = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        for t in nl.affine_range(tiles):
            c0 = t * P
            delta_t, u_t = nl.load(delta[b, c0:c0 + P]), nl.load(u[b, c0:c0 + P])
            acc = nl.zeros((P, seq), dtype=nl.float32, buffer=nl.sbuf)
            for s in nl.affine_range(states):
                a_col = nl.load(A[c0:c0 + P, s:s + 1])
                if chunk is None:
                    _step(delta_t, u_t, a_col, nl.load(B[b, s:s + 1]), nl.load(C[b, s:s + 1]),
                          0.0, acc)
                    continue
                carry = nl.zeros((P, 1), dtype=nl.float32, buffer=nl.sbuf)
                for k in nl.sequential_range(seq // chunk):  # in order: the scan carries
                    t0, t1 = k * chunk, (k + 1) * chunk
                    state = _step(delta_t[:, t0:t1], u_t[:, t0:t1], a_col,
                                  nl.load(B[b, s:s + 1, t0:t1]), nl.load(C[b, s:s + 1, t0:t1]),
                                  carry, acc[:, t0:t1])
                    nisa.tensor_copy(dst=carry, src=state[:, chunk - 1:chunk])
            nl.store(out[b, c0:c0 + P], acc)
    return out


def reference(delta, u, A, B, C):
    """The scan in PyTorch, float32, one position at a time."""
    decay = torch.exp(delta[:, :, None, :] * A[None, :, :, None])   # [b, c, s, t]
    drive = delta[:, :, None, :] * B[:, None, :, :] * u[:, :, None, :]
    h = torch.zeros(decay.shape[:3])
    states = []
    for i in range(delta.shape[-1]):
        h = decay[..., i] * h + drive[..., i]
        states.append(h)
    return (torch.stack(states, dim=-1) * C[:, None, :, :]).sum(dim=2)


def inputs(batch, channels, seq, states, generator=None):
    """Random inputs in the ranges a Mamba layer sees (delta positive, A negative)."""
    g = generator or torch.Generator().manual_seed(0)
    delta = torch.rand(batch, channels, seq, generator=g) * 0.1
    u = torch.randn(batch, channels, seq, generator=g)
    A = -torch.rand(channels, states, generator=g)
    B = torch.randn(batch, states, seq, generator=g)
    C = torch.randn(batch, states, seq, generator=g)
    return delta, u, A, B, C


def main():
    small = inputs(1, 256, 1024, 4)
    expected = reference(*small)
    for kernel in (mamba_v1, mamba_v2, mamba_v3):
        torch.testing.assert_close(kernel(*small), expected, rtol=1e-4, atol=1e-4)
    print("mamba_v1, v2, v3 match PyTorch at [1, 256, 1024], 4 states")
    import torch_neuron

    torch_neuron.set_execute(False)  # the tutorial's size on neuron tensors: timed, not computed
    size = [torch.empty(s, device="neuron") for s in ((1, 4096, 512), (1, 4096, 512), (4096, 16),
                                                      (1, 16, 512), (1, 16, 512))]
    for kernel in (mamba_v1, mamba_v2, mamba_v3):
        p = nki.profile(nki.jit(kernel, platform_target="trn1"), *size)
        print(f"{kernel.__name__} [1, 4096, 512], 16 states, trn1: {p.summary()}")


if __name__ == "__main__":
    main()
