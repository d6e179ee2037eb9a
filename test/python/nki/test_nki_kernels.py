"""Whole kernels written from AWS's tutorials' descriptions (our own code) against torch on the
CPU, called with NumPy arrays and with neuron tensors; the instruction records of a small
kernel; and the `import nki` alias running a kernel in AWS's documented style unchanged."""

import os
import sys

import numpy as np
import pytest
import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@nki.jit
def tiled_matmul(lhsT, rhs):
    """result = lhsT.T @ rhs, tiled as in the matmul tutorial: loads of both operands hoisted
    out of the contraction loop, fp32 accumulation in PSUM, one PSUM bank per output tile."""
    K, M = lhsT.shape
    _, N = rhs.shape
    TK, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, \
        nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        lhs_tiles = nl.ndarray((TK, K // TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(K // TK):
            nisa.dma_copy(dst=lhs_tiles[:, k, :],
                          src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                rhs_tile = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=lhs_tiles[:, k, :], moving=rhs_tile)
            out = nl.ndarray((TM, TN), dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=out, src=acc)
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=out)
    return result


@nki.jit
def rmsnorm(a, gamma, eps=1e-6):
    """out[i] = a[i] / sqrt(mean(a[i]^2) + eps) * gamma, 128 rows at a time (the RMSNorm
    tutorial): sum of squares on ScalarE with its reduce registers, the reciprocal RMS per
    partition, then a per-partition scale and an element-wise gamma product."""
    N, D = a.shape
    out = nl.ndarray((N, D), dtype=a.dtype, buffer=nl.shared_hbm)
    P = nl.tile_size.pmax
    g = nl.ndarray((P, D), dtype=gamma.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, D)).broadcast(0, P))
    for i in nl.affine_range((N + P - 1) // P):
        rows = min(P, N - i * P)
        x = nl.ndarray((P, D), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x[0:rows], src=a[i * P:i * P + rows])
        sq = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        ssum = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=sq[0:rows], op=nl.square, data=x[0:rows],
                               reduce_op=nl.add, reduce_res=ssum[0:rows])
        rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=rstd[0:rows], data=ssum[0:rows], op0=nl.multiply,
                           operand0=1.0 / D, op1=nl.add, operand1=eps)
        nisa.activation(dst=rstd[0:rows], op=nl.rsqrt, data=rstd[0:rows])
        y = nl.ndarray((P, D), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=y[0:rows], data=x[0:rows], op0=nl.multiply,
                           operand0=rstd[0:rows])
        res = nl.ndarray((P, D), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=res[0:rows], data1=y[0:rows], data2=g[0:rows], op=nl.multiply)
        nisa.dma_copy(dst=out[i * P:i * P + rows], src=res[0:rows])
    return out


def torch_rmsnorm(a, gamma, eps=1e-6):
    a32 = a.float()
    return a32 * torch.rsqrt(a32.pow(2).mean(-1, keepdim=True) + eps) * gamma.float()


def test_tiled_matmul_numpy_matches_torch():
    g = torch.Generator().manual_seed(0)
    lhsT, rhs = torch.randn(256, 256, generator=g), torch.randn(256, 1024, generator=g)
    got = tiled_matmul(lhsT.numpy(), rhs.numpy())
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    np.testing.assert_allclose(got, (lhsT.T @ rhs).numpy(), rtol=1e-4, atol=1e-4)
    engines = [r.engine for r in tiled_matmul.last_run.records]
    assert engines.count("TensorE") == 2 * 2 * 2 and engines.count("VectorE") == 4


def test_tiled_matmul_neuron_bf16_matches_torch():
    g = torch.Generator().manual_seed(1)
    lhsT = torch.randn(256, 128, generator=g).bfloat16()
    rhs = torch.randn(256, 512, generator=g).bfloat16()
    got = nki.simulate(tiled_matmul)(lhsT.to("neuron"), rhs.to("neuron"))
    assert got.device.type == "neuron" and got.dtype == torch.bfloat16
    # fp32 accumulation of bf16 products, one bf16 rounding at the end
    want = (lhsT.float().T @ rhs.float()).bfloat16()
    np.testing.assert_allclose(got.cpu().float().numpy(), want.float().numpy(), rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("n,d", [(256, 384), (200, 96)])
def test_rmsnorm_numpy_matches_torch(n, d):
    g = torch.Generator().manual_seed(2)
    a, gamma = torch.randn(n, d, generator=g), torch.rand(d, generator=g) + 0.5
    got = rmsnorm(a.numpy(), gamma.numpy())
    np.testing.assert_allclose(got, torch_rmsnorm(a, gamma).numpy(), rtol=1e-5, atol=1e-5)


def test_rmsnorm_neuron_tensors_match_torch():
    g = torch.Generator().manual_seed(3)
    a, gamma = torch.randn(130, 64, generator=g), torch.rand(64, generator=g) + 0.5
    got = rmsnorm(a.to("neuron"), gamma.to("neuron"))
    assert got.device.type == "neuron" and got.dtype == torch.float32
    np.testing.assert_allclose(got.cpu().numpy(), torch_rmsnorm(a, gamma).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_kernel_writing_an_input_updates_it_in_place():
    @nki.jit
    def scale_in_place(x):
        t = nl.load(x)
        nl.store(x, nl.multiply(t, 2.0))

    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    scale_in_place(arr)
    np.testing.assert_array_equal(arr, 2 * np.arange(12).reshape(3, 4))
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("neuron")
    scale_in_place(t)
    assert torch.equal(t.cpu(), 2 * torch.arange(12, dtype=torch.float32).reshape(3, 4))


def test_records_name_engines_operands_regions_and_source_lines():
    @nki.jit
    def kernel(a, b):
        x = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a[64:128, :])                          # line +3
        w = nl.ndarray((64, 16), nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=w, src=b)
        xb = nl.ndarray((64, 32), nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=xb, op=nl.exp, data=x)
        acc = nl.ndarray((16, 32), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=w, moving=xb)
        res = nl.ndarray((16, 32), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((16, 32), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    a = np.random.default_rng(0).standard_normal((128, 32)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((64, 16)).astype(np.float32)
    run = nki.run(kernel, a, b)
    np.testing.assert_allclose(
        run.result, torch.from_numpy(b).bfloat16().float().numpy().T
        @ torch.from_numpy(np.exp(a[64:])).bfloat16().float().numpy(), rtol=1e-4, atol=1e-4)
    recs = run.records
    assert [(r.engine, r.name) for r in recs] == [
        ("DMA", "dma_copy"), ("DMA", "dma_copy"), ("ScalarE", "activation"),
        ("TensorE", "nc_matmul"), ("VectorE", "tensor_copy"), ("DMA", "dma_copy")]
    assert [r.index for r in recs] == list(range(6))
    # the first DMA reads bytes [64*32*4, 128*32*4) of input a and writes 64 partitions of x
    load_a, load_b, act, mm, copy, store = recs
    assert load_a.reads[0].space == "hbm" and load_a.reads[0].address == (8192, 16384)
    assert load_a.writes[0].space == "sbuf" and load_a.writes[0].partitions == (0, 64)
    assert load_a.writes[0].address[1] - load_a.writes[0].address[0] == 32 * 4
    assert load_a.dma_queue != load_b.dma_queue
    # 64 rows of 128 contiguous bytes each: one descriptor per partition
    assert (dict(load_a.attrs)["bytes"], dict(load_a.attrs)["descriptor_bytes"],
            dict(load_a.attrs)["descriptors"]) == (8192, 128, 64)
    # dependencies follow from regions: activation reads what the DMA wrote, the matmul reads
    # both SBUF tiles and writes PSUM, the copy reads that PSUM region
    assert act.reads[0] == load_a.writes[0]
    assert set(mm.reads) == {load_b.writes[0], act.writes[0]}
    assert mm.writes[0].space == "psum" and mm.writes[0].partitions == (0, 16)
    assert copy.reads[0] == mm.writes[0] and store.reads[0] == copy.writes[0]
    assert not load_a.writes[0].overlaps(load_b.writes[0])
    # (trnsim lays these out as its scheduler's 1-D regions: Note [Kernel schedule];
    # test_nki_timing.py checks the dependencies they give)
    # what the cost formulas need: partitions, free sizes, dtypes
    st, mv = mm.operand("stationary"), mm.operand("moving")
    assert (st.partitions, st.elements_per_partition, st.dtype) == (64, 16, "bfloat16")
    assert (mv.partitions, mv.elements_per_partition) == (64, 32)
    assert dict(mm.attrs)["perf_mode"] == "none" and dict(act.attrs)["op"] == "exp"
    first_line = kernel.fn.__code__.co_firstlineno  # the @nki.jit line
    assert load_a.source == f"{__file__}:{first_line + 3}"
    assert store.source == f"{__file__}:{first_line + 13}"


AWS_STYLE_KERNEL = '''
import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def matrix_multiply_kernel(lhsT, rhs):
    K, M = lhsT.shape
    K_, N = rhs.shape
    assert K == K_, "lhsT and rhs must have the same contraction dimension"
    TILE_M = nl.tile_size.gemm_stationary_fmax
    TILE_K = nl.tile_size.pmax
    TILE_N = nl.tile_size.gemm_moving_fmax

    result = nl.ndarray(shape=(M, N), dtype=lhsT.dtype, buffer=nl.hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            result_tile = nl.ndarray(shape=(TILE_M, TILE_N), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray(shape=(TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray(shape=(TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile,
                              src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile,
                              src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=result_tile, stationary=lhsT_tile, moving=rhs_tile)
            result_tmp = nl.ndarray(shape=result_tile.shape, dtype=result.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result_tmp, src=result_tile)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                          src=result_tmp)
    return result


lhsT = np.random.rand(256, 128).astype(np.float32)
rhs = np.random.rand(256, 1024).astype(np.float32)
out = nki.simulate(matrix_multiply_kernel)(lhsT, rhs)
np.testing.assert_allclose(out, lhsT.T @ rhs, rtol=1e-5)
import torch_neuron.nki
assert nl is torch_neuron.nki.language and nisa is torch_neuron.nki.isa
from nki.isa.constants import dge_mode, oob_mode  # as aws-neuron/nki-library imports them
assert oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode
'''


def test_import_nki_alias_runs_an_aws_style_kernel_unchanged(monkeypatch):
    # compat/nki on the path, as `pip install -e compat/nki` (scripts/install.sh) puts it; the
    # alias modules are dropped afterwards so that no other test sees an `nki` module
    monkeypatch.syspath_prepend(os.path.join(ROOT, "compat", "nki"))
    names = ("nki", "nki.language", "nki.isa", "nki.isa.constants", "nki.typing")
    saved = {name: sys.modules.pop(name) for name in names if name in sys.modules}
    try:
        exec(compile(AWS_STYLE_KERNEL, "aws_style_kernel.py", "exec"), {"__name__": "aws"})
        assert sys.modules["nki"].__file__.startswith(os.path.join(ROOT, "compat", "nki"))
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)


def test_the_nki_library_check_names_a_missing_checkout(tmp_path):
    # scripts/check_nki_library.py runs AWS's library kernels given a checkout (docs/nki.md);
    # without one it says what to pass instead of failing every check.
    import subprocess

    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "check_nki_library.py"),
                          str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "not a checkout of aws-neuron/nki-library" in out.stdout
