"""Each hardware rule violated once: the error names the rule, the values and the kernel line."""

import os
import sys

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

HERE = os.path.basename(__file__)


def load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def raises(error, kernel, *args, match, target="trn2", **options):
    with pytest.raises(error, match=match) as info:
        nki.jit(kernel, platform_target=target, **options)(*args)
    assert HERE in info.value.source, info.value.source
    return info.value


def test_error_names_the_kernel_source_line():
    def kernel():
        line[0] = sys._getframe().f_lineno + 1
        nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)

    line = [0]
    err = raises(nki.PartitionLimitError, kernel, match="partition dimension")
    assert err.source.endswith(f"{HERE}:{line[0]}")
    assert str(err).startswith(err.source)
    assert "256" in str(err) and "128" in str(err)


def test_matmul_stationary_at_most_128x128():
    def kernel(a, b):
        acc = nl.ndarray((256, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b))

    raises(nki.PartitionLimitError, kernel, np.ones((128, 256), np.float32),
           np.ones((128, 64), np.float32), match="256 partitions|partition dimension")

    def kernel2(a, b):
        acc = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a)[:, 0:128].reshape((128, 128)),
                       moving=load(b))
        wide = nl.ndarray((128, 200), nl.float32)
        nisa.memset(dst=wide, value=0)
        nisa.nc_matmul(dst=acc, stationary=wide, moving=load(b))

    raises(nki.TileSizeError, kernel2, np.ones((128, 128), np.float32),
           np.ones((128, 64), np.float32), match="stationary free size 200 exceeds 128")


def test_matmul_moving_at_most_128x512():
    def kernel(a, b):
        acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b))

    raises(nki.TileSizeError, kernel, np.ones((128, 128), np.float32),
           np.ones((128, 1024), np.float32), match="moving free size 1024 exceeds 512")


def test_matmul_output_stays_in_one_psum_bank():
    def kernel(a, b):
        acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)  # two 2 KiB banks
        nisa.nc_matmul(dst=acc[:, 256:768], stationary=load(a), moving=load(b))

    err = raises(nki.PsumBankError, kernel, np.ones((128, 128), np.float32),
                 np.ones((128, 512), np.float32), match="crossing a 2048-byte bank boundary")
    assert "[1024, 3072)" in str(err)


def test_psum_capacity_is_eight_2kib_banks_per_partition():
    def kernel():
        tiles = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(8)]
        nl.ndarray((128, 1), nl.float32, buffer=nl.psum)
        return tiles

    raises(nki.CapacityError, kernel, match="PSUM has 0 of 16384 bytes per partition free")


def test_psum_tiles_freed_when_out_of_scope_are_reused():
    def kernel():
        for _ in range(40):
            t = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
            nisa.memset(dst=t, value=0)
        return None

    nki.jit(kernel)()
    addresses = {r.writes[0].address for r in kernel_records(kernel)}
    # 40 tiles in 8 banks: freed banks are reused, in turn (the RING allocation mode rotates
    # through the 8 banks, nki.compiler.AllocationMode)
    assert addresses == {(b * 2048, (b + 1) * 2048) for b in range(8)}


def kernel_records(fn):
    return nki.run(fn).records


@pytest.mark.parametrize("target,per_partition", [("trn1", 192 * 1024), ("trn2", 224 * 1024),
                                                  ("trn3", 256 * 1024)])
def test_sbuf_capacity_per_partition_per_neuroncore_version(target, per_partition):
    def fits():
        nl.ndarray((128, per_partition // 4), nl.float32)

    def too_big():
        nl.ndarray((128, per_partition // 4 + 1), nl.float32)

    nki.jit(fits, platform_target=target)()
    err = raises(nki.CapacityError, too_big, target=target, match="SBUF has")
    assert f"of {per_partition} bytes per partition" in str(err)


def test_matmul_dtype_rules():
    a, b = np.ones((128, 64), np.float32), np.ones((128, 64), np.float32)

    def fp32_with_bf16(a, b):
        acc = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b, nl.bfloat16))

    raises(nki.DtypeError, fp32_with_bf16, a, b, match="the other must be too")

    def int_inputs(a, b):
        acc = nl.ndarray((64, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a, nl.int32), moving=load(b, nl.int32))

    raises(nki.DtypeError, int_inputs, a, b, match="stationary is int32")

    def bf16_psum(a, b):
        acc = nl.ndarray((64, 64), nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b))

    raises(nki.DtypeError, bf16_psum, a, b, match="must be float32 on NeuronCore-v3")
    nki.jit(bf16_psum, platform_target="trn3")(a, b)  # NeuronCore-v4 accepts a bf16 PSUM


def test_instruction_dtype_rules():
    x = np.ones((16, 8), np.float32)

    def transpose_changes_dtype(a):
        out = nl.ndarray((8, 16), nl.bfloat16, buffer=nl.psum)
        nisa.nc_transpose(dst=out, data=load(a))

    raises(nki.DtypeError, transpose_changes_dtype, x, match="keeps the dtype")

    def bitvec_on_floats(a):
        out = nl.ndarray((16, 8), nl.float32)
        nisa.tensor_tensor(dst=out, data1=load(a), data2=load(a), op=nl.bitwise_and)

    raises(nki.DtypeError, bitvec_on_floats, x, match="needs integer tiles")

    def scale_not_fp32(a):
        out = nl.ndarray((16, 8), nl.float32)
        nisa.activation(dst=out, op=nl.exp, data=load(a), scale=load(a[:, 0:1], nl.bfloat16))

    raises(nki.DtypeError, scale_not_fp32, x, match="scale .* must be float32")

    def fp8_double_row_on_trn1(a):
        acc = nl.ndarray((4, 4), nl.float32, buffer=nl.psum)
        st = load(a.reshape((16, 2, 4)), nl.float8_e4m3)
        nisa.nc_matmul(dst=acc, stationary=st, moving=st,
                       perf_mode=nisa.matmul_perf_mode.double_row)

    raises(nki.UnsupportedError, fp8_double_row_on_trn1, x, target="trn1",
           match="needs NeuronCore-v3")


def test_memory_space_rules():
    x = np.ones((16, 8), np.float32)

    def compute_on_hbm(a):
        out = nl.ndarray((16, 8), nl.float32)
        nisa.tensor_copy(dst=out, src=a)

    raises(nki.MemorySpaceError, compute_on_hbm, x, match="is in HBM")

    def matmul_from_psum(a):
        p = nl.ndarray((16, 8), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=load(a))
        acc = nl.ndarray((8, 8), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=p, moving=load(a))

    raises(nki.MemorySpaceError, matmul_from_psum, x, match="needs it in sbuf")

    def dma_from_psum(a):
        p = nl.ndarray((16, 8), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=load(a))
        out = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=p)

    raises(nki.MemorySpaceError, dma_from_psum, x, match="src .* is in psum")

    def gpsimd_reads_psum(a):
        p = nl.ndarray((16, 8), nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=load(a))
        out = nl.ndarray((16, 8), nl.float32)
        nisa.tensor_copy(dst=out, src=p, engine=nisa.engine.gpsimd)

    raises(nki.MemorySpaceError, gpsimd_reads_psum, x, match="GpSimd Engine cannot access")

    # A kernel's outputs are HBM tensors (NKI known issues: "Top-level tensors must be on
    # HBM"), in predict-only mode too.
    def returns_a_tile(a):
        return load(a)

    raises(nki.MemorySpaceError, returns_a_tile, x, match="outputs must be in HBM")
    import torch
    import torch_neuron

    with torch_neuron.predict_only():
        raises(nki.MemorySpaceError, returns_a_tile, torch.ones(16, 8, device="neuron"),
               match="tile in SBUF")


def test_out_of_bounds_access():
    x = np.ones((128, 64), np.float32)

    def slice_past_end(a):
        load(a)[:, 32:96]

    err = raises(nki.OutOfBoundsError, slice_past_end, x, match="outside")
    assert "[32, 96)" in str(err) and "size 64" in str(err)

    def ds_past_end(a):
        t = nl.ndarray((8, 64), nl.float32)
        nisa.dma_copy(dst=t, src=a[nl.ds(124, 8), :])

    raises(nki.OutOfBoundsError, ds_past_end, x, match=r"nl.ds\(124, 8\)")


def test_reading_memory_never_written():
    x = np.ones((16, 8), np.float32)

    def half_written(a):
        t = nl.ndarray((16, 8), nl.float32)
        nisa.dma_copy(dst=t[:, 0:4], src=a[:, 0:4])
        out = nl.ndarray((16, 8), nl.float32)
        nisa.tensor_copy(dst=out, src=t)
        res = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=res, src=out)
        return res

    raises(nki.UninitializedReadError, half_written, x, match="64 of 128 elements")
    # uninitialized="nan": reads give NaN, as in AWS's simulator
    got = nki.jit(half_written, uninitialized="nan")(x)
    np.testing.assert_array_equal(got[:, :4], 1)
    assert np.isnan(got[:, 4:]).all()

    def partial_output(a):
        res = nl.ndarray((16, 8), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=res[0:8], src=load(a)[0:8])
        return res

    with pytest.raises(nki.UninitializedReadError, match="returned .* 64 of 128 elements"):
        nki.simulate(partial_output)(x)


def test_results_of_unwritten_memory_stay_unwritten_until_something_uses_them():
    # Note [Results of unwritten memory]: as nki-library's find_nonzero_indices does, write one
    # column in 16 of a tile, transpose it through a matmul with the identity, and keep only
    # the transposed rows that were written. The rest is computed from NaN and never used.
    x = np.random.default_rng(3).uniform(-1, 1, size=(128, 8)).astype(np.float32)

    def kernel(a, use_garbage):
        cols = nl.ndarray((128, 128), nl.float32)
        for c in range(8):
            nisa.dma_copy(dst=cols[:, 16 * c:16 * c + 1], src=a[:, c:c + 1])
        identity = nl.shared_identity_matrix(128, dtype=nl.float32)
        flipped = nl.ndarray((128, 128), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=flipped, stationary=cols, moving=identity)   # = cols.T
        kept = nl.ndarray((8, 128), nl.float32)
        for c in range(8):
            nisa.tensor_copy(dst=kept[c:c + 1], src=flipped[16 * c:16 * c + 1])
        out = nl.ndarray((8, 128), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=kept)
        if use_garbage:   # a row computed from unwritten columns, into a reduction
            total = nl.ndarray((1, 1), nl.float32)
            nisa.tensor_reduce(dst=total, op=nl.add, data=flipped[1:2], axis=1)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(x, False), x.T)
    raises(nki.UninitializedReadError, kernel, x, True, match="computed from memory never")
    # shared_constant: an HBM constant loaded with the program, no instruction.
    run = nki.run(lambda: nl.shared_constant(np.arange(6, dtype=np.int32).reshape(2, 3)))
    np.testing.assert_array_equal(run.result, np.arange(6).reshape(2, 3))
    assert run.records == []


def test_an_in_place_instruction_keeps_its_unwritten_elements_unwritten():
    x = np.ones((128, 64), np.float32)

    def kernel(a, rows):
        t = nl.ndarray((128, 64), nl.float32)
        nisa.dma_copy(dst=t[0:96, :], src=a[0:96, :])                      # rows 96.. never
        nisa.tensor_scalar(dst=t, data=t, op0=nl.minimum, operand0=7.0)    # in place
        out = nl.ndarray((rows, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[0:rows, :])
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(x, 96), x[:96])
    raises(nki.UninitializedReadError, kernel, x, 128, match="never written")


def test_a_jit_kernel_called_inside_a_kernel_runs_in_the_callers_program():
    # AWS's nki-library test wrappers call @nki.jit kernels from a kernel: one program, inlined.
    @nki.jit
    def inner(t):
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[nl.program_id() * 64:(nl.program_id() + 1) * 64],
                      src=t[nl.program_id() * 64:(nl.program_id() + 1) * 64])
        return out, nl.num_programs()

    def outer(a):
        out, programs = inner(a)
        assert programs == 2
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    run = nki.jit(outer, platform_target="trn2")[2].run(x)
    np.testing.assert_array_equal(run.result, x)
    assert sorted(r.core for r in run.records) == [0, 1]


def test_lnc_degree_per_neuroncore_version():
    def kernel(a):
        out = nl.ndarray((2, 4), nl.float32, buffer=nl.shared_hbm)
        i = nl.program_id()
        t = nl.ndarray((1, 4), nl.float32)
        nisa.dma_copy(dst=t, src=a[i:i + 1])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=float(nl.num_programs()))
        nisa.dma_copy(dst=out[i:i + 1], src=t)
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(nki.NkiValidationError, match="supports LNC degrees 1..1"):
        nki.jit(kernel, platform_target="trn1")[2](x)
    run = nki.jit(kernel, platform_target="trn2")[2].run(x)
    np.testing.assert_array_equal(run.result, 2 * x)
    assert {r.core for r in run.records} == {0, 1}


def test_matmul_cannot_accumulate_onto_psum_zeroed_by_memset_before_neuroncore_v4():
    # Explicit accumulation onto a memset is undefined on v2/v3; with accumulate=None the first
    # matmul overwrites, as AWS's kernels that zero PSUM first rely on (accumulation.py).
    a, b = np.ones((128, 64), np.float32), np.ones((128, 64), np.float32)

    def kernel(a, b, accumulate):
        acc = nl.zeros((64, 64), nl.float32, buffer=nl.psum)   # memset, then a matmul
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b), accumulate=accumulate)
        nisa.nc_matmul(dst=acc, stationary=load(a), moving=load(b))    # accumulates
        out = nl.ndarray((64, 64), nl.float32)
        nisa.tensor_copy(dst=out, src=acc)
        res = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=res, src=out)
        return res

    raises(nki.NkiValidationError, kernel, a, b, True, match="last written by a non-matmul")
    np.testing.assert_array_equal(nki.jit(kernel, platform_target="trn2")(a, b, None), 256)
    np.testing.assert_array_equal(nki.jit(kernel, platform_target="trn3")(a, b, True), 256)


def test_depends_on_orders_independent_instructions():
    # NkiInstruction.depends_on (the release's stub): "this instruction runs after every listed
    # producer completes". Two independent loads run side by side on their DMA queues; with the
    # dependency the second starts when the first ends.
    x = np.ones((128, 512), np.float32)

    def kernel(a, b, wait):
        t = nl.ndarray((128, 512), nl.float32)
        u = nl.ndarray((128, 512), nl.float32)
        first = nisa.dma_copy(dst=t, src=a)
        second = nisa.dma_copy(dst=u, src=b)
        if wait:
            assert second.depends_on(first) is second
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
        nisa.dma_copy(dst=out, src=t)
        return out

    apart = nki.profile(nki.jit(kernel, platform_target="trn2"), x, x, False)
    assert apart.instruction(1).start_us == 0
    ordered = nki.profile(nki.jit(kernel, platform_target="trn2"), x, x, True)
    np.testing.assert_array_equal(ordered.run.result, 2 * x)
    assert ordered.instruction(1).start_us >= ordered.instruction(0).end_us

    def backwards(a):
        t = nl.ndarray((128, 512), nl.float32)
        first = nisa.dma_copy(dst=t, src=a)
        later = nisa.dma_copy(dst=t, src=a)
        first.depends_on(later)

    raises(nki.NkiValidationError, backwards, x, match="issued after its consumer")


def test_hardware_dge_rules_and_errors_are_assertions():
    # nki-dge.rst: hwdge from NeuronCore-v3, triggered by the Scalar or Sync Engine, never
    # indirect. Rule errors are also AssertionErrors, as AWS's simulator reports them.
    x = np.ones((8, 16), np.float32)

    def copy(a, eng, indirect):
        t = nl.ndarray((8, 16), nl.float32)
        src = a
        if indirect:
            idx = nl.ndarray((8, 1), nl.int32)
            nisa.iota(idx, [[0, 1]], 0, 1)
            src = a.ap([[16, 8], [1, 16]], vector_offset=idx)
        nisa.dma_copy(dst=t, src=src, dge_mode=nisa.dge_mode.hwdge, engine=eng)
        return store(t)

    k = nki.jit(copy, platform_target="trn2")
    np.testing.assert_array_equal(k(x, nisa.engine.sync, False), x)
    with pytest.raises(nki.NkiValidationError, match="scalar and nisa.engine.sync"):
        k(x, nisa.engine.gpsimd, False)
    with pytest.raises(nki.NkiValidationError, match="does not serve an indirect"):
        k(x, nisa.engine.scalar, True)
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v3"):
        nki.jit(copy, platform_target="trn1")(x, nisa.engine.sync, False)
    with pytest.raises(AssertionError, match="partition dimension"):
        nki.simulate(lambda: nl.ndarray((256, 4), nl.float32))()


def test_ml_dtypes_arrays_are_taken_as_their_nki_dtype():
    # AWS's simulator takes low-precision NumPy inputs as ml_dtypes arrays
    # (nki/guides/nki_simulator.rst). ml_dtypes is optional here.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8).astype(ml_dtypes.bfloat16)

    def kernel(a):
        assert a.dtype == "bfloat16"
        t = nl.ndarray(a.shape, nl.float32)
        nisa.dma_copy(dst=t, src=a)
        return store(t)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x.astype(np.float32))


def test_with_schedule_orders_named_instructions():
    # nki/guides/how-to-scheduling-apis.rst: kernel.with_schedule([(dependent, prerequisite)])
    # makes the first named instruction wait for the second. Two independent instructions on
    # different engines run side by side without it.
    x = np.ones((128, 512), np.float32)

    @nki.jit(platform_target="trn2")
    def kernel(a):
        t = load(a)
        e = nl.ndarray(t.shape, nl.float32)
        nisa.activation(dst=e, op=nl.exp, data=t, name="exp")
        g = nl.ndarray(t.shape, nl.float32)
        nisa.memset(dst=g, value=2.0, engine=nisa.engine.gpsimd, name="fill")
        nisa.tensor_tensor(dst=e, data1=e, data2=g, op=nl.add)
        return store(e)

    def times(k):
        p = nki.profile(k, x)
        (a,), (f,) = ([p.instruction(i) for i, r in enumerate(p.records) if r.name == n]
                      for n in ("activation", "memset"))
        return p, a, f

    _, act, fill = times(kernel)
    assert fill.start_us < act.end_us                       # side by side
    p, act, fill = times(kernel.with_schedule([("fill", ["exp"])]))
    assert fill.start_us >= act.end_us
    np.testing.assert_allclose(p.run.result, np.exp(x) + 2, rtol=1e-6)
    with pytest.raises(nki.NkiValidationError, match="no instruction is named 'nope'"):
        kernel.with_schedule([("fill", "nope")])(x)
