"""Tile lifetimes (Note [Tile lifetimes] in torch_neuron/nki/scopes.py): an on-chip tile
allocated in a loop iteration is released when the iteration ends, unless something outliving
the iteration holds it; using a released tile is an error naming the kernel line."""

import os
import sys

import numpy as np
import pytest
import torch

import torch_neuron
import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

HERE = os.path.basename(__file__)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "nki"))
import matmul_sequence  # noqa: E402

KIB = 1024
# 120 KiB of fp32 per partition: one fits in a NeuronCore-v3 SBUF partition (28 MiB = 128 x
# 224 KiB, aws-neuron-sdk nki/guides/architecture/trainium2_arch.rst), two do not.
BIG = 120 * KIB // 4


def sbuf_peak(kernel) -> int:
    return kernel.last_run.allocators["sbuf"].peak


def test_a_loop_reuses_its_iterations_tiles():
    """Each iteration's 120 KiB tile is released before the next one is allocated (before,
    the next iteration's tile was allocated while the last one was still bound: 240 KiB)."""
    @nki.jit(platform_target="trn2")
    def kernel(x):
        out = nl.ndarray((128, BIG), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            t = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.activation(dst=t, op=nl.copy, data=t, scale=float(i + 1))
            nisa.dma_copy(dst=out, src=t)
        return out

    x = np.random.default_rng(0).standard_normal((128, BIG), dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), 3 * x)
    assert sbuf_peak(kernel) == BIG * 4


def test_too_much_sbuf_within_one_iteration_is_still_a_capacity_error():
    @nki.jit(platform_target="trn2")
    def kernel():
        for _ in nl.affine_range(2):
            a = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            line[0] = sys._getframe().f_lineno + 1
            b = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            return a, b

    line = [0]
    with pytest.raises(nki.CapacityError, match="122880 bytes per partition") as info:
        kernel()
    assert info.value.source.endswith(f"{HERE}:{line[0]}")


def test_tutorial_blocking_fits_in_fp32():
    """AWS's final matmul blocking (16 x 2 x 8 tiles, kernel-optimization.rst) in fp32, on one
    M x N block with two K blocks: per partition lhsT 8 x 2048 fp32 (64 KiB), rhs 8 x 1024
    (32 KiB) and the block's results 16 x 1024 (64 KiB): 160 KiB alive at once, and the next K
    block's tiles reuse the last one's."""
    m, k, n = 2048, 2048, 1024
    lhsT = torch.empty(k, m, dtype=torch.float32, device="neuron")
    rhs = torch.empty(k, n, dtype=torch.float32, device="neuron")
    torch_neuron.set_execute(False)
    try:
        kernel = matmul_sequence.blocked._with(platform_target="trn2")
        kernel(lhsT, rhs, tiles_m=16, tiles_n=2, tiles_k=8)
    finally:
        torch_neuron.set_execute(True)
    assert sbuf_peak(kernel) == (64 + 32 + 64) * KIB


@pytest.mark.extended
def test_tutorial_blocking_fits_at_the_tutorials_size():
    """The whole fp32 [4096, 8192] @ [8192, 8192] kernel with 16 x 2 x 8 blocks (predict-only,
    10-30 s on 2 cores, by load)."""
    lhsT = torch.empty(8192, 4096, dtype=torch.float32, device="neuron")
    rhs = torch.empty(8192, 8192, dtype=torch.float32, device="neuron")
    torch_neuron.set_execute(False)
    try:
        kernel = matmul_sequence.blocked._with(platform_target="trn2")
        kernel(lhsT, rhs, tiles_m=16, tiles_n=2, tiles_k=8)
    finally:
        torch_neuron.set_execute(True)
    assert sbuf_peak(kernel) == 160 * KIB
    assert len(kernel.last_run.records) > 30000


def test_a_tile_used_after_its_iteration_is_an_error_naming_the_line():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            if i == 1:
                line[0] = sys._getframe().f_lineno + 1
                nisa.tensor_tensor(dst=t, data1=t, data2=last, op=nl.add)
            last = t  # first bound in the body: local to it, so its tile dies with it
        return out

    line = [0]
    with pytest.raises(nki.ReleasedTileError, match="allocated inside an iteration of the loop "
                                                     f"at .*{HERE}") as info:
        kernel(np.ones((128, 64), np.float32))
    assert info.value.source.endswith(f"{HERE}:{line[0]}")
    assert "data2" in str(info.value)


def test_the_last_iterations_tile_is_usable_after_the_loop_until_its_bytes_are_taken():
    """No next iteration reuses the last one's tiles: Python keeps them bound after the loop,
    and they hold its values (AWS's rotational_topk returns them). A tile allocated since at
    the same bytes makes the use an error (Note [Tile lifetimes])."""
    def kernel(x, overwrite):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            t = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address=(0, 0))
            nisa.dma_copy(dst=t, src=x[i])
        if overwrite:
            other = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf, address=(0, 0))
            nisa.memset(dst=other, value=0.0)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.random.default_rng(2).standard_normal((2, 128, 64), dtype=np.float32)
    np.testing.assert_array_equal(nki.jit(kernel)(x, False), x[1])
    with pytest.raises(nki.ReleasedTileError, match="last iteration"):
        nki.jit(kernel)(x, True)


def test_a_variable_bound_before_the_loop_carries_its_tile_out():
    """`acc = nl.add(acc, x)`: each new tile is held by a variable that outlives the
    iteration, so it lives on (and the last one is returned after the loop)."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, 64), nl.float32)
        for i in nl.affine_range(4):
            t = nl.load(x[i])
            acc = nl.add(acc, t)
        nisa.dma_copy(dst=out, src=acc)
        return out

    x = np.random.default_rng(1).standard_normal((4, 128, 64), dtype=np.float32)
    np.testing.assert_allclose(kernel(x), x.sum(axis=0), rtol=1e-6, atol=1e-6)


def test_tiles_kept_in_an_outer_list_outlive_the_loop():
    """The migration guide's list of tiles (nki/migration/index.rst): appended in one loop,
    all alive, read in the next."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((4, 128, 64), nl.float32, buffer=nl.shared_hbm)
        tiles = []
        for i in nl.affine_range(4):
            tiles.append(nl.load(x[i]))
        for i in nl.affine_range(4):
            nl.store(out[i], nl.multiply(tiles[i], 2.0))
        return out

    x = np.random.default_rng(2).standard_normal((4, 128, 64), dtype=np.float32)
    np.testing.assert_array_equal(kernel(x), 2 * x)
    assert sbuf_peak(kernel) == 5 * 64 * 4   # the 4 listed tiles and one product at a time


def test_a_tile_allocated_outside_and_written_inside_lives_outside():
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 4 * 64), nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((128, 4, 64), nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(4):
            buf[:, i, :] = nl.multiply(nl.load(x[i]), float(i))   # a write, not an allocation
        nisa.dma_copy(dst=out, src=buf.reshape((128, 4 * 64)))
        return out

    x = np.ones((4, 128, 64), np.float32)
    expected = np.concatenate([np.full((128, 64), i, np.float32) for i in range(4)], axis=1)
    np.testing.assert_array_equal(kernel(x), expected)


def test_a_body_variable_stays_local_to_its_loop_in_later_runs():
    """`t` is first bound in the inner loop; in the second outer iteration a sibling loop
    starts while `t` still names the released tile of the first: it stays the inner loop's
    (two 120 KiB tiles would not fit)."""
    @nki.jit(platform_target="trn2")
    def kernel(x):
        out = nl.ndarray((128, BIG), nl.float32, buffer=nl.shared_hbm)
        for _ in nl.affine_range(2):
            for _ in nl.affine_range(2):
                pass
            for _ in nl.affine_range(2):
                t = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x)
                nisa.dma_copy(dst=out, src=t)
        return out

    x = np.ones((128, BIG), np.float32)
    np.testing.assert_array_equal(kernel(x), x)
    assert sbuf_peak(kernel) == BIG * 4


def test_a_name_rebound_before_a_loop_carries_its_new_tile():
    """`acc` was first bound in an earlier loop (its tile released there), then rebound to a
    live tile before the next loop: in that loop it is an outer variable."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            acc = nl.load(x[i])
        acc = nl.zeros((128, 64), nl.float32)
        for i in nl.affine_range(4):
            acc = nl.add(acc, nl.load(x[i]))
        nisa.dma_copy(dst=out, src=acc)
        return out

    x = np.random.default_rng(3).standard_normal((4, 128, 64), dtype=np.float32)
    np.testing.assert_allclose(kernel(x), x.sum(axis=0), rtol=1e-6, atol=1e-6)


def test_break_ends_the_iteration_scope():
    @nki.jit(platform_target="trn2")
    def kernel(x):
        out = nl.ndarray((128, BIG), nl.float32, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            t = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            if i == 1:
                break
        u = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)   # fits: t was released
        nisa.dma_copy(dst=u, src=x)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.ones((128, BIG), np.float32)
    np.testing.assert_array_equal(kernel(x), x)
    assert sbuf_peak(kernel) == BIG * 4


def test_a_tile_the_kernel_drops_after_a_loop_is_freed_at_once():
    """Looking at the kernel's variables at the loop's end must not keep them alive: the first
    120 KiB tile, dropped, leaves room for the second."""
    @nki.jit(platform_target="trn2")
    def kernel(x):
        out = nl.ndarray((128, BIG), nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
        for _ in nl.affine_range(2):
            pass
        a = None
        a = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.dma_copy(dst=out, src=a)
        return out

    x = np.ones((128, BIG), np.float32)
    np.testing.assert_array_equal(kernel(x), x)


def test_plain_range_loops_of_the_kernel_are_scopes_too():
    """The current stub prefers `range` to nl.affine_range; the kernel's own `range` loops are
    scopes (recompiled from its source, torch_neuron/nki/range_loops.py), closures and line
    numbers kept."""
    scale = 2.0

    @nki.jit(platform_target="trn2")
    def kernel(x, carry):
        out = nl.ndarray((128, BIG), nl.float32, buffer=nl.shared_hbm)
        for i in range(3):
            t = nl.ndarray((128, BIG), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.activation(dst=t, op=nl.copy, data=t, scale=scale)
            if carry and i == 2:
                line[0] = sys._getframe().f_lineno + 1
                nisa.dma_copy(dst=out, src=last)
            nisa.dma_copy(dst=out, src=t)
            last = t
        return out

    line = [0]
    x = np.ones((128, BIG), np.float32)
    np.testing.assert_array_equal(kernel(x, False), 2 * x)
    assert sbuf_peak(kernel) == BIG * 4
    with pytest.raises(nki.ReleasedTileError, match="the loop at") as info:
        kernel(x, True)
    assert info.value.source.endswith(f"{HERE}:{line[0]}")


def test_tiles_past_their_last_use_are_freed_when_memory_runs_out():
    # Note [Tiles freed at their last use]: p0 is still bound when the 8 full PSUM banks are
    # allocated, but nothing reads it any more, so the compiler would reuse its bank (AWS's
    # bwmm_shard_on_block). Tiles still in use when memory runs out remain an error.
    x = np.eye(128, dtype=np.float32)

    def kernel(a, reuse_p0):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        a_sb = nl.ndarray((128, 128), dtype=nl.float32)
        nisa.dma_copy(dst=a_sb, src=a)
        s = nl.ndarray((128, 128), dtype=nl.float32)
        for _ in range(2):
            p0 = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p0, stationary=a_sb, moving=a_sb)
            t = nl.ndarray((128, 128), dtype=nl.float32)
            nisa.tensor_copy(dst=t, src=p0)                            # p0's last use
            banks = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                     for _ in range(8)]
            for b in banks:
                nisa.nc_matmul(dst=b[:, 0:128], stationary=t, moving=a_sb)
            nisa.tensor_copy(dst=s, src=(p0 if reuse_p0 else banks[7][:, 0:128]))
        nisa.dma_copy(dst=out, src=s)
        return out

    k = nki.jit(kernel, platform_target="trn2")
    np.testing.assert_array_equal(k(x, False), x)
    assert k.last_run.dies is not None          # the kernel ran with tiles freed at last use
    with pytest.raises(nki.CapacityError, match="PSUM"):
        k(x, True)
