"""The matrix-multiplication optimization sequence of AWS's NKI tutorial, written from its
description (aws-neuron-sdk nki/guides/tutorials/kernel-optimization.rst and
matrix_multiplication.rst), and profiled on the simulated NeuronCore.

Every kernel computes result[M, N] = lhsT[K, M].T @ rhs[K, N] (the stationary operand given
transposed, K on the partitions), accumulating in fp32; the result is stored as
`result_dtype` (fp32 by default; the tutorial stores it in the inputs' dtype, which the DMA
converts to, as the fidelity anchors do):

1. `tiled`: for each 128 x 512 output tile, load one 128 x 128 lhsT tile and one 128 x 512 rhs
   tile per 128-row step of K, multiply into PSUM, copy the tile to SBUF and store it.
2. `hoisted`: the lhsT tiles of a row of output tiles are loaded once, outside the N loop.
3. `blocked_free`: blocks of TILES_M x TILES_N output tiles; each block loads its lhsT and rhs
   tiles once, still one DMA per tile, and computes all its tiles.
4. `blocked`: blocked in K too, accumulating the partial results in SBUF, which frees enough
   SBUF for larger M and N blocks, so each operand is loaded fewer times, in DMAs of a whole
   block's 128-row step of K: 2-4 KiB a partition instead of a tile's 256 B-1 KiB, which the
   DMA engines move at several times the rate (the tutorial's "DMA efficiency" step).

Run it: python examples/nki/matmul_sequence.py (prints each kernel's predicted time and the
busiest engine; checks each against torch on the CPU).
"""

import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

TILE_K, TILE_M, TILE_N = 128, 128, 512  # partitions, stationary free size, moving free size


@nki.jit
def tiled(lhsT, rhs, result_dtype=nl.float32):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = nl.ndarray((M, N), dtype=result_dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                a = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k * TILE_K:(k + 1) * TILE_K,
                                              m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=b, src=rhs[k * TILE_K:(k + 1) * TILE_K,
                                             n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            out = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                          src=out)
    return result


@nki.jit
def hoisted(lhsT, rhs, result_dtype=nl.float32):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    result = nl.ndarray((M, N), dtype=result_dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        a = nl.ndarray((TILE_K, KT, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(KT):
            nisa.dma_copy(dst=a[:, k, :], src=lhsT[k * TILE_K:(k + 1) * TILE_K,
                                                   m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            b = nl.ndarray((TILE_K, KT, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
            for k in nl.affine_range(KT):
                nisa.dma_copy(dst=b[:, k, :], src=rhs[k * TILE_K:(k + 1) * TILE_K,
                                                      n * TILE_N:(n + 1) * TILE_N])
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                nisa.nc_matmul(dst=acc, stationary=a[:, k, :], moving=b[:, k, :])
            out = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                          src=out)
    return result


def _block_tiles(a, b, result, m0, n0, tiles_m, tiles_n, k_tiles):
    """The output tiles of one block, each accumulated over k_tiles in PSUM, copied to SBUF and
    stored."""
    for mt in nl.affine_range(tiles_m):
        for nt in nl.affine_range(tiles_n):
            acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_tiles):
                nisa.nc_matmul(dst=acc, stationary=a[:, k, mt * TILE_M:(mt + 1) * TILE_M],
                               moving=b[:, k, nt * TILE_N:(nt + 1) * TILE_N])
            out = nl.ndarray((TILE_M, TILE_N), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m0 + mt * TILE_M:m0 + (mt + 1) * TILE_M,
                                     n0 + nt * TILE_N:n0 + (nt + 1) * TILE_N], src=out)


@nki.jit
def blocked_free(lhsT, rhs, tiles_m=2, tiles_n=2, result_dtype=nl.float32):
    K, M = lhsT.shape
    _, N = rhs.shape
    KT = K // TILE_K
    BM, BN = tiles_m * TILE_M, tiles_n * TILE_N
    result = nl.ndarray((M, N), dtype=result_dtype, buffer=nl.shared_hbm)
    for mb in nl.affine_range(M // BM):
        a = nl.ndarray((TILE_K, KT, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for mt in nl.affine_range(tiles_m):
            cols = slice(mt * TILE_M, (mt + 1) * TILE_M)
            for k in nl.affine_range(KT):
                nisa.dma_copy(dst=a[:, k, cols], src=lhsT[k * TILE_K:(k + 1) * TILE_K,
                                                          mb * BM + cols.start:mb * BM + cols.stop])
        for nb in nl.affine_range(N // BN):
            b = nl.ndarray((TILE_K, KT, BN), dtype=rhs.dtype, buffer=nl.sbuf)
            for nt in nl.affine_range(tiles_n):
                cols = slice(nt * TILE_N, (nt + 1) * TILE_N)
                for k in nl.affine_range(KT):
                    nisa.dma_copy(dst=b[:, k, cols],
                                  src=rhs[k * TILE_K:(k + 1) * TILE_K,
                                          nb * BN + cols.start:nb * BN + cols.stop])
            _block_tiles(a, b, result, mb * BM, nb * BN, tiles_m, tiles_n, KT)
    return result


@nki.jit
def blocked(lhsT, rhs, tiles_m=8, tiles_n=4, tiles_k=8, result_dtype=nl.float32):
    K, M = lhsT.shape
    _, N = rhs.shape
    BM, BN, BK = tiles_m * TILE_M, tiles_n * TILE_N, tiles_k * TILE_K
    KB = K // BK
    result = nl.ndarray((M, N), dtype=result_dtype, buffer=nl.shared_hbm)
    # One SBUF buffer of block results, reused by every block (two do not fit in fp32 at the
    # tutorial's block sizes): a block's first copies wait for the last block's stores.
    res = nl.ndarray((TILE_M, tiles_m, BN), dtype=nl.float32, buffer=nl.sbuf)
    for nb in nl.affine_range(N // BN):
        for mb in nl.affine_range(M // BM):
            for kb in nl.sequential_range(KB):
                # One DMA per operand and 128-row step of K: [128, BM] and [128, BN] at a time.
                a = nl.ndarray((TILE_K, tiles_k, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((TILE_K, tiles_k, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                for k in nl.affine_range(tiles_k):
                    row = kb * BK + k * TILE_K
                    nisa.dma_copy(dst=a[:, k, :], src=lhsT[row:row + TILE_K,
                                                           mb * BM:(mb + 1) * BM])
                    nisa.dma_copy(dst=b[:, k, :], src=rhs[row:row + TILE_K,
                                                          nb * BN:(nb + 1) * BN])
                for mt in nl.affine_range(tiles_m):
                    for nt in nl.affine_range(tiles_n):
                        acc = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(tiles_k):
                            nisa.nc_matmul(dst=acc,
                                           stationary=a[:, k, mt * TILE_M:(mt + 1) * TILE_M],
                                           moving=b[:, k, nt * TILE_N:(nt + 1) * TILE_N])
                        # The K blocks' partial results accumulate in SBUF (the first copies).
                        part = res[:, mt, nt * TILE_N:(nt + 1) * TILE_N]
                        if kb == 0:
                            nisa.tensor_copy(dst=part, src=acc)
                        else:
                            nisa.tensor_tensor(dst=part, data1=part, data2=acc, op=nl.add)
                    if kb == KB - 1:  # a row of finished tiles leaves while the next computes
                        nisa.dma_copy(dst=result[mb * BM + mt * TILE_M:mb * BM + (mt + 1) * TILE_M,
                                                 nb * BN:(nb + 1) * BN], src=res[:, mt, :])
    return result


KERNELS = [("tiled", tiled), ("hoisted", hoisted), ("blocked_free", blocked_free),
           ("blocked", blocked)]


def main(K=2048, M=1024, N=2048):
    torch.manual_seed(0)
    lhsT = torch.randn(K, M, dtype=torch.bfloat16)
    rhs = torch.randn(K, N, dtype=torch.bfloat16)
    expected = lhsT.float().T @ rhs.float()
    for name, kernel in KERNELS:
        p = nki.profile(kernel, lhsT, rhs)
        torch.testing.assert_close(p.run.result, expected, rtol=1e-4, atol=1e-2)
        busy = ", ".join(f"{e} {v * 100:.0f}%" for e, v in p.busy.items())
        print(f"{name:13s} {p.time_us:9.1f} us  bound by {p.bound:7s} ({busy}); "
              f"{len(p.records)} instructions")


if __name__ == "__main__":
    main()
