"""The Vector Engine instructions of torch_neuron/nki/isa_vector.py and the composite
nki.language functions (softmax, rms_norm, where) against NumPy references, and their
durations against the formulas they are costed with (timing.py's _COST_AS).

Hand-computation facts: Trainium2's VectorE clock is 0.96 GHz (trnsim instance.cpp, from the
Trn2 architecture page); MIN_II = 64 cycles; tensor_tensor on two fp32 SBUF inputs takes 2N
cycles, tensor_scalar max(MIN_II, N) (the ISA stub's cost notes, aws-neuron-sdk 1db4d74e)."""

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

RNG = np.random.default_rng(1)
VECTOR_GHZ, GPSIMD_GHZ, MIN_II = 0.96, 1.2, 64


def rand(*shape):
    return RNG.uniform(-2.0, 2.0, size=shape).astype(np.float32)


def load(x, dtype=None):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def duration_ns(p, name):
    (i,) = [i for i, r in enumerate(p.records) if r.name == name]
    t = p.instruction(i)
    return (t.end_us - t.start_us) * 1e3


def test_scalar_tensor_tensor_and_its_tensor_tensor_cost():
    x, y, v = rand(128, 300), rand(128, 300), rand(128, 1)

    @nki.jit(platform_target="trn2")
    def kernel(a, b, c):
        out1 = nl.ndarray(a.shape, nl.float32)
        nisa.scalar_tensor_tensor(dst=out1, data=load(a), op0=nl.multiply, operand0=load(c),
                                  op1=nl.add, operand1=load(b))
        out2 = nl.ndarray(a.shape, nl.float32)
        nisa.scalar_tensor_tensor(dst=out2, data=load(a), op0=nl.subtract, operand0=1.5,
                                  op1=nl.subtract, operand1=load(b), reverse0=True,
                                  reverse1=True)
        return store(out1), store(out2)

    p = nki.profile(kernel, x, y, v)
    out1, out2 = p.run.result
    np.testing.assert_allclose(out1, x * v + y, rtol=1e-6)
    np.testing.assert_allclose(out2, y - (1.5 - x), rtol=1e-6)
    first = p.instruction([i for i, r in enumerate(p.records)
                           if r.name == "scalar_tensor_tensor"][0])
    assert (first.end_us - first.start_us) * 1e3 == pytest.approx(2 * 300 / VECTOR_GHZ)


def test_tensor_scalar_reduce_accumulates_across_calls():
    x, y = rand(128, 100), rand(128, 100)

    @nki.jit(platform_target="trn2")
    def kernel(a, b):
        d1, d2 = nl.ndarray(a.shape, nl.float32), nl.ndarray(a.shape, nl.float32)
        res, best = nl.ndarray((128, 1), nl.float32), nl.ndarray((128, 1), nl.float32)
        nisa.tensor_scalar_reduce(dst=d1, data=load(a), op0=nl.multiply, operand0=2.0,
                                  reduce_op=nl.add)
        nisa.tensor_scalar_reduce(dst=d2, data=load(b), op0=nl.add, operand0=1.0,
                                  reduce_op=nl.add, reduce_res=res,
                                  reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.tensor_scalar_reduce(dst=d2, data=load(b), op0=nl.add, operand0=1.0,
                                  reduce_op=nl.max, reduce_res=best, reduce_res_negate=True)
        return store(d1), store(res), store(best)

    p = nki.profile(kernel, x, y)
    d1, res, best = p.run.result
    np.testing.assert_allclose(d1, 2 * x, rtol=1e-6)
    np.testing.assert_allclose(res[:, 0], (2 * x).sum(1) + (y + 1).sum(1), rtol=1e-5)
    np.testing.assert_allclose(best[:, 0], -(y + 1).max(1), rtol=1e-6)
    i = [i for i, r in enumerate(p.records) if r.name == "tensor_scalar_reduce"][0]
    t = p.instruction(i)
    assert (t.end_us - t.start_us) * 1e3 == pytest.approx(max(MIN_II, 100) / VECTOR_GHZ)


def test_tensor_scalar_reduce_with_a_unary_op0_ignores_operand0():
    # AWS's rmsnorm_quant: |x| and its row maximum in one instruction (op0=nl.abs, operand0=0).
    x = rand(64, 48)

    def kernel(a):
        d, m = nl.ndarray(a.shape, nl.float32), nl.ndarray((64, 1), nl.float32)
        nisa.tensor_scalar_reduce(dst=d, data=load(a), op0=nl.abs, operand0=0.0,
                                  reduce_op=nl.maximum, reduce_res=m)
        return store(d), store(m)

    d, m = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(d, np.abs(x))
    np.testing.assert_array_equal(m[:, 0], np.abs(x).max(1))
    with pytest.raises(nki.NkiValidationError, match="None or 0"):
        nki.simulate(lambda a: nisa.tensor_scalar_reduce(
            dst=nl.ndarray(a.shape, nl.float32), data=load(a), op0=nl.abs, operand0=2.0,
            reduce_op=nl.add))(x)


def test_tensor_copy_predicated_copies_where_the_predicate_holds():
    x, y = rand(64, 40), rand(64, 40)
    mask = (RNG.uniform(size=(64, 40)) > 0.5).astype(np.uint8)

    def kernel(a, b, m):
        out, out2 = load(b), load(b)
        nisa.tensor_copy_predicated(dst=out, src=load(a), predicate=load(m))
        nisa.tensor_copy_predicated(dst=out2, src=7.0, predicate=load(m), reverse_pred=True)
        return store(out), store(out2)

    out, out2 = nki.simulate(kernel)(x, y, mask)
    np.testing.assert_array_equal(out, np.where(mask != 0, x, y))
    np.testing.assert_array_equal(out2, np.where(mask == 0, np.float32(7.0), y))

    def bad(a, m):
        out = load(a)
        nisa.tensor_copy_predicated(dst=out, src=load(a), predicate=load(m, nl.float32))

    with pytest.raises(nki.DtypeError, match="uint8, uint16 or uint32"):
        nki.simulate(bad)(x, mask)


def test_max8_gives_the_eight_largest_in_descending_order():
    x = rand(32, 2, 50)

    def kernel(a):
        out = nl.ndarray((32, 8), nl.float32)
        nisa.max8(dst=out, src=load(a))
        return store(out)

    expected = -np.sort(-x.reshape(32, 100), axis=1)[:, :8]
    np.testing.assert_array_equal(nki.simulate(kernel)(x), expected)


def test_find_index8_and_match_replace8_pair_duplicates_as_documented():
    # The example of nc_match_replace8's docstring (aws-neuron-sdk nki/api/nki/isa): duplicate
    # vals take successive matches, from the highest slot down; nc_find_index8 pairs them
    # the other way, in ascending order; a value absent from the data gets all ones.
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], np.float32)
    absent = np.array([[3, 5, 8, 8, 8, 8, 8, 8]], np.float32)

    @nki.jit(platform_target="trn2")
    def kernel(d, v, w):
        a = load(d)
        replaced = nl.ndarray(a.shape, nl.float32)
        matched = nl.ndarray((1, 8), nl.uint32)
        nisa.nc_match_replace8(dst=replaced, data=a, vals=load(v), imm=-1.0, dst_idx=matched)
        found = nl.ndarray((1, 8), nl.uint32)
        nisa.nc_find_index8(dst=found, data=a, vals=load(v))
        missing = nl.ndarray((1, 8), nl.uint16)
        nisa.nc_find_index8(dst=missing, data=a, vals=load(w))
        return store(replaced), store(matched), store(found), store(missing)

    replaced, matched, found, missing = kernel(data, vals, absent)
    np.testing.assert_array_equal(matched, [[2, 10, 9, 8, 7, 6, 5, 4]])
    np.testing.assert_array_equal(found, [[2, 4, 5, 6, 7, 8, 9, 10]])
    np.testing.assert_array_equal(replaced, [[1, 2, -1, 4] + [-1] * 7])
    np.testing.assert_array_equal(missing, [[2, 0xFFFF, 4, 5, 6, 7, 8, 9]])


def test_find_index8_gives_the_argsort_of_max8():
    x = rand(64, 300)

    @nki.jit(platform_target="trn2")
    def kernel(a):
        t = load(a)
        top = nl.ndarray((64, 8), nl.float32)
        nisa.max8(dst=top, src=t)
        where = nl.ndarray((64, 8), nl.uint32)
        nisa.nc_find_index8(dst=where, data=t, vals=top)
        return store(where)

    np.testing.assert_array_equal(kernel(x), np.argsort(-x, axis=1)[:, :8])


def test_stream_shuffle_permutes_within_each_quadrant_and_255_keeps():
    x, keep = rand(128, 20), rand(128, 20)
    mask = [31 - i for i in range(32)]
    mask[5] = 255

    @nki.jit(platform_target="trn2")
    def kernel(a, b):
        out = load(b)
        nisa.nc_stream_shuffle(dst=out, src=load(a), shuffle_mask=mask)
        return store(out)

    want = keep.copy()
    for p in range(128):
        if mask[p % 32] != 255:
            want[p] = x[p - p % 32 + mask[p % 32]]
    np.testing.assert_array_equal(kernel(x, keep), want)
    with pytest.raises(nki.NkiValidationError, match="start at 0"):
        nki.simulate(lambda a: nisa.nc_stream_shuffle(dst=load(a)[32:96], src=load(a)[0:64],
                                                      shuffle_mask=mask))(x)

    # In place (dst is src), as nki-library's find_nonzero_indices shuffles: every partition
    # reads the source as it was before the instruction.
    @nki.jit(platform_target="trn2")
    def in_place(a):
        t = load(a)
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=[31 - i for i in range(32)])
        return store(t)

    np.testing.assert_array_equal(in_place(x), np.concatenate(
        [x[32 * q:32 * (q + 1)][::-1] for q in range(4)]))


def test_dma_transpose_permutes_as_documented_and_is_timed_as_its_copy():
    x2 = rand(512, 128).astype(np.float16)
    x4 = rand(2, 3, 4, 64).astype(np.float16)

    @nki.jit(platform_target="trn2")
    def transposes(a, b):
        t = nl.ndarray((128, 512), nl.float16)
        nisa.dma_transpose(dst=t, src=a)
        u = nl.ndarray((64, 3, 4, 2), nl.float16)
        nisa.dma_transpose(dst=u, src=b, axes=(3, 1, 2, 0))
        return store(t), store(u)

    t, u = transposes(x2, x4)
    np.testing.assert_array_equal(t, x2.T)
    np.testing.assert_array_equal(u, np.transpose(x4, (3, 1, 2, 0)))

    def one_load(instruction):
        @nki.jit(platform_target="trn2")
        def kernel(a):
            t = nl.ndarray((128, 512), nl.float16)
            if instruction == "transpose":
                nisa.dma_transpose(dst=t, src=a)
            else:
                nisa.dma_copy(dst=t, src=a.reshape((128, 512)))
            return store(t)
        return nki.profile(kernel, x2).time_us

    # The same bytes in rows of the same length: the model gives the transpose its copy's time
    # (isa.dma_transpose: the guide's "up to 90%" of a copy's throughput is not modelled).
    assert one_load("transpose") == pytest.approx(one_load("copy"), rel=1e-9)
    with pytest.raises(nki.DtypeError, match="2-byte"):
        nki.simulate(lambda a: nisa.dma_transpose(
            dst=nl.ndarray((16, 16), nl.float32), src=a, dge_mode=nisa.dge_mode.hwdge))(
            rand(16, 16))
    with pytest.raises(nki.ShapeError, match="must be"):
        nki.simulate(lambda a: nisa.dma_transpose(dst=nl.ndarray((16, 16), nl.float16),
                                                  src=a))(x2[:32, :16])


def test_exponential_on_neuroncore_v4_and_its_absence_before():
    x, m = rand(16, 64), rand(16, 1)

    def kernel(a, b):
        out, total = nl.ndarray(a.shape, nl.float32), nl.ndarray((16, 1), nl.float32)
        nisa.exponential(dst=out, src=load(a), max_value=load(b), reduce_res=total,
                         reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return store(out), store(total)

    out, total = nki.jit(kernel, platform_target="trn3")(x, m)
    np.testing.assert_allclose(out, np.exp(x - m), rtol=1e-6)
    np.testing.assert_allclose(total[:, 0], np.exp(x - m).sum(1), rtol=1e-5)
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v4"):
        nki.jit(kernel, platform_target="trn2")(x, m)


def test_language_softmax_rms_norm_and_where():
    x, w, c = rand(128, 200), rand(128, 200), (RNG.uniform(size=(128, 200)) > 0.3)
    cond = c.astype(np.float32)

    def kernel(a, b, k):
        ta, tb = load(a), load(b)
        s = nl.softmax(ta, axis=1)
        r = nl.rms_norm(ta, tb, axis=1, n=200, epsilon=1e-5)
        chosen = nl.where(load(k), ta, tb)
        scalar = nl.where(load(k), ta, -1.0)
        return store(s), store(r), store(chosen), store(scalar)

    s, r, chosen, scalar = nki.simulate(kernel)(x, w, cond)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(s, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(r, x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-5) * w,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(chosen, np.where(c, x, w))
    np.testing.assert_array_equal(scalar, np.where(c, x, np.float32(-1.0)))


def test_tensor_scalar_cumulative_is_a_running_reduction():
    x = rand(32, 20)

    @nki.jit(platform_target="trn2")
    def kernel(a):
        s, m, cont = (nl.ndarray(a.shape, nl.float32) for _ in range(3))
        nisa.tensor_scalar_cumulative(dst=s, src=load(a), op0=nl.multiply, op1=nl.add,
                                      imm0=2.0)
        nisa.tensor_scalar_cumulative(dst=cont, src=load(a), op0=nl.add, op1=nl.add, imm0=0.0,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
        nisa.tensor_scalar_cumulative(dst=m, src=load(a), op0=nl.add, op1=nl.maximum,
                                      imm0=0.0, imm1=0.5,
                                      reduce_cmd=nisa.reduce_cmd.load_reduce)
        return store(s), store(cont), store(m)

    p = nki.profile(kernel, x)
    s, cont, m = p.run.result
    np.testing.assert_allclose(s, np.cumsum(2 * x, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cont, (2 * x).sum(1, keepdims=True) + np.cumsum(x, axis=1),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m, np.maximum.accumulate(np.maximum(x, 0.5), axis=1))
    i = [i for i, r in enumerate(p.records) if r.name == "tensor_scalar_cumulative"][0]
    t = p.instruction(i)
    assert (t.end_us - t.start_us) * 1e3 == pytest.approx(max(MIN_II, 20) / VECTOR_GHZ)


def test_activate2_on_neuroncore_v4():
    x, b = rand(16, 48), rand(16, 1)

    def kernel(a, bias):
        out, total = nl.ndarray(a.shape, nl.float32), nl.ndarray((16, 1), nl.float32)
        nisa.activate2(dst=out, op=nl.tanh, data=load(a), imm0=3.0, imm1=load(bias),
                       op0=nl.multiply, op1=nl.subtract, reduce_op=nl.add, reduce_res=total,
                       reduce_cmd=nisa.reduce_cmd.reset_reduce)
        return store(out), store(total)

    out, total = nki.jit(kernel, platform_target="trn3")(x, b)
    np.testing.assert_allclose(out, np.tanh(3 * x - b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(total[:, 0], np.tanh(3 * x - b).sum(1), rtol=1e-5, atol=1e-5)

    def bad(a, bias):
        out = nl.ndarray(a.shape, nl.float32)
        nisa.activate2(dst=out, op=nl.tanh, data=load(a), imm0=1.0, imm1=1.0, op0=nl.add,
                       op1=nl.multiply)

    with pytest.raises(nki.NkiValidationError, match="activate2 takes"):
        nki.jit(bad, platform_target="trn3")(x, b)


def test_activate2_prelu_takes_its_slope_from_relu_param():
    # "relu_param: scalar or vector parameter for parameterized activation functions (e.g.,
    # PReLU)"; the docstring's stage 2: dst = op(val, relu_param=relu_param).
    x, slope = rand(16, 48), np.linspace(0.0, 0.5, 16, dtype=np.float32).reshape(16, 1)

    def kernel(a, s, per_partition):
        out = nl.ndarray(a.shape, nl.float32)
        nisa.activate2(dst=out, op=nl.prelu, data=load(a), imm0=2.0, imm1=0.0,
                       op0=nl.multiply, op1=nl.bypass,
                       relu_param=load(s) if per_partition else 0.1)
        return store(out)

    k = nki.jit(kernel, platform_target="trn3")
    np.testing.assert_allclose(k(x, slope, True), np.where(x > 0, 2 * x, slope * 2 * x),
                               rtol=1e-6)
    np.testing.assert_allclose(k(x, slope, False), np.where(x > 0, 2 * x, 0.2 * x), rtol=1e-6)


def test_range_select_masks_by_free_index_and_takes_row_maxima():
    x = rand(8, 64)
    lo = np.arange(8, dtype=np.float32)[:, None] * 4      # a band per row
    hi = lo + 10

    @nki.jit(platform_target="trn2")
    def kernel(a, b0, b1):
        out, best = nl.ndarray(a.shape, nl.float32), nl.ndarray((8, 1), nl.float32)
        nisa.range_select(dst=out, on_true_tile=load(a), comp_op0=nl.greater_equal,
                          comp_op1=nl.less, bound0=load(b0), bound1=load(b1),
                          reduce_res=best, range_start=2)
        return store(out), store(best)

    p = nki.profile(kernel, x, lo, hi)
    out, best = p.run.result
    index = 2 + np.arange(64)[None, :]
    expected = np.where((index >= lo) & (index < hi), x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(best[:, 0], expected.max(1))
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v3"):
        nki.jit(kernel, platform_target="trn1")(x, lo, hi)


def test_language_var_all_dropout_expand_dims():
    x = rand(64, 3, 40)
    flags = (RNG.uniform(size=(64, 40)) > 0.02).astype(np.float32)

    def kernel(a, f):
        t = load(a)
        v = nl.var(t, axis=(1, 2))
        everywhere = nl.all(load(f), axis=1)
        kept = nl.dropout(t, 0.0)
        dropped = nl.dropout(t, 1.0)
        e = nl.expand_dims(load(f), 1)
        return store(v), store(everywhere), store(kept), store(dropped), store(e)

    v, everywhere, kept, dropped, e = nki.simulate(kernel)(x, flags)
    np.testing.assert_allclose(v.reshape(64), x.reshape(64, -1).var(1), rtol=1e-5)
    np.testing.assert_array_equal(everywhere.reshape(64), flags.all(1).astype(np.float32))
    np.testing.assert_array_equal(kept, x)
    np.testing.assert_array_equal(dropped, np.zeros_like(x))
    assert e.shape == (64, 1, 40)
    np.testing.assert_array_equal(e[:, 0], flags)


def test_gpsimd_gathers_and_nonzero_with_count():
    # local_gather: the release's example (aws-neuron-sdk nki/test/test_nki_isa_local_gather.py):
    # a (128, 512, 4) buffer, (16, 4) indices per GpSimd core replicated 8 times, 64 valid,
    # 4 elements at each index; its numpy reference is the expectation here.
    src = RNG.uniform(0, 100, size=(128, 512, 4)).astype(np.float32)
    per_core = RNG.integers(0, 512, size=(16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1))
    data, where = rand(32, 200), RNG.integers(0, 200, size=(32, 3, 5)).astype(np.uint32)
    flags = (rand(128, 40) > 1.0).astype(np.float32)

    @nki.jit(platform_target="trn2")
    def kernel(s, i, d, w, f):
        gathered = nl.ndarray((128, 4, 16, 4), nl.float32)
        nisa.local_gather(dst=gathered, src_buffer=load(s), index=load(i, nl.uint16),
                          num_elem_per_idx=4, num_valid_indices=64)
        picked = nl.ndarray((32, 3, 5), nl.float32)
        nisa.nc_n_gather(dst=picked, data=load(d), indices=load(w, nl.uint32))
        found = nl.ndarray((128, 41), nl.int32)
        nisa.memset(dst=found, value=7)
        nisa.nonzero_with_count(dst=found, src=load(f), index_offset=16, padding_val=-1)
        return store(gathered), store(picked), store(found)

    gathered, picked, found = kernel(src, index * 4, data, where, flags)
    want = np.empty((128, 64, 4), np.float32)
    for core in range(8):
        rows = slice(16 * core, 16 * (core + 1))
        indices_1d = index[rows].flatten(order="F")[:64]
        want[rows] = np.take(src[rows], indices_1d, axis=1)
    np.testing.assert_array_equal(gathered, want.reshape(128, 4, 16, 4))
    np.testing.assert_array_equal(picked, np.take_along_axis(
        data, where.reshape(32, -1).astype(np.int64), axis=1).reshape(32, 3, 5))
    for p in range(128):
        if p % 16:
            assert (found[p] == 7).all()   # only each GpSimd core's first partition
            continue
        hits = np.flatnonzero(flags[p])
        np.testing.assert_array_equal(found[p], np.concatenate(
            [hits + 16, np.full(40 - hits.size, -1), [hits.size]]))
    # The docstring's worked example, one partition.
    row = np.zeros((128, 8), np.float32)
    row[0] = [0, 1, 1, 0, 0, 1, 0, 0]

    @nki.jit(platform_target="trn2")
    def example(f):
        out = nl.ndarray((128, 9), nl.int32)
        nisa.memset(dst=out, value=0)
        nisa.nonzero_with_count(dst=out, src=load(f), index_offset=16, padding_val=-1)
        return store(out)

    np.testing.assert_array_equal(example(row)[0], [17, 18, 21, -1, -1, -1, -1, -1, 3])
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v3"):
        nki.jit(platform_target="trn1")(lambda f: nisa.nonzero_with_count(
            dst=nl.ndarray((128, 9), nl.int32), src=load(f)))(row)


def sequence_bounds_reference(sequence):
    """The NumPy reference of AWS's test of sequence_bounds (aws-neuron-sdk
    nki/test/test_nki_isa_sequence_bounds.py, compute_sequence_bounds), restated."""
    n = len(sequence)
    lo, hi = np.zeros(n), np.zeros(n)
    lo[0] = 0 if sequence[0] != 0 else n
    for i in range(1, n):
        lo[i] = n if sequence[i] == 0 else lo[i - 1] if sequence[i] == sequence[i - 1] else i
    hi[-1] = n if sequence[-1] != 0 else -1
    for i in range(n - 2, -1, -1):
        hi[i] = -1 if sequence[i] == 0 else hi[i + 1] if sequence[i] == sequence[i + 1] else i + 1
    return np.vstack((lo, hi))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_sequence_bounds_matches_the_releases_reference(dtype):
    example = np.array([[0, 1, 1, 2, 2, 2, 0, 3, 3]], dtype=dtype)   # the docstring's example
    rng = np.random.default_rng(0)
    packed = np.sort(rng.integers(0, 32, size=32)).reshape(1, 32).astype(dtype)

    def kernel(ids):
        out = nl.ndarray((1, 2, ids.shape[1]), ids.dtype)
        nisa.sequence_bounds(dst=out, segment_ids=load(ids))
        return store(out)

    got = nki.simulate(kernel)(example)
    np.testing.assert_array_equal(got[0], [[9, 1, 1, 3, 3, 3, 9, 7, 7],
                                           [-1, 3, 3, 6, 6, 6, -1, 9, 9]])
    np.testing.assert_array_equal(nki.simulate(kernel)(packed)[0],
                                  sequence_bounds_reference(packed[0]))


def test_local_gather_carries_unwritten_elements_as_unwritten():
    # AWS's moe_tkg gathers from a tile it wrote 2 partitions of and uses only those rows
    # (Note [Results of unwritten memory]).
    a = np.arange(8, dtype=np.float32).reshape(2, 4)

    def kernel(a, rows):
        src = nl.ndarray((16, 4), nl.float32)
        nisa.dma_copy(dst=src[0:2, :], src=a)
        idx = nl.ndarray((16, 1), nl.uint16)
        nisa.memset(dst=idx, value=0)
        dst = nl.ndarray((16, 16), nl.float32)
        nisa.local_gather(dst=dst, src_buffer=src, index=idx, num_valid_indices=16)
        out = nl.ndarray((rows, 16), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=dst[0:rows, :])
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(a, 2), np.repeat(a[:, :1], 16, axis=1))
    with pytest.raises(nki.UninitializedReadError):
        nki.simulate(kernel)(a, 3)


def test_topk_finds_each_snakes_largest_values_and_their_positions():
    # The docstring's example shape (n = 42 in 3 columns of a 16-partition snake), two
    # groups, K = 20: results as a snake over the group's partitions (AWS's gpsimd_topk
    # de-snakes position i from partition i % 16, column i // 16), positions >= K untouched.
    rng = np.random.default_rng(4)
    x = rng.permutation(32 * 3).reshape(32, 3).astype(np.float32) / 8   # distinct, exact in bf16

    @nki.jit(platform_target="trn2")
    def kernel(a):
        src = nl.ndarray((32, 3), nl.bfloat16)
        nisa.dma_copy(dst=src, src=a)
        val = nl.ndarray((32, 20), nl.bfloat16)
        idx = nl.ndarray((32, 20), nl.uint32)
        nisa.memset(dst=val, value=-1.0)
        nisa.memset(dst=idx, value=7)
        nisa.topk(val_dst=val, idx_dst=idx, src=src, n=42)
        outs = [nl.ndarray((32, 20), t.dtype, buffer=nl.shared_hbm) for t in (val, idx)]
        for o, t in zip(outs, (val, idx)):
            nisa.dma_copy(dst=o, src=t)
        return outs

    p = nki.profile(kernel, x)
    val, idx = p.run.result
    for g in range(2):
        snake = x[16 * g:16 * g + 16].T.reshape(-1)[:42]
        got_val = val[16 * g:16 * g + 16, :2].T.reshape(-1)
        got_idx = idx[16 * g:16 * g + 16, :2].T.reshape(-1)
        np.testing.assert_array_equal(got_val[:20], np.sort(snake)[-20:])
        np.testing.assert_array_equal(snake[got_idx[:20]], got_val[:20])
        assert (got_val[20:] == -1).all() and (got_idx[20:] == 7).all()    # untouched
    assert (val[:, 2:] == -1).all()
    i = [n for n, r in enumerate(p.records) if r.name == "topk"][0]
    t = p.instruction(i)
    assert (t.end_us - t.start_us) * 1e3 == pytest.approx((4 * 42 + 20) / GPSIMD_GHZ)


@pytest.mark.parametrize("name,ref", [("cos", np.cos), ("tan", np.tan), ("floor", np.floor),
                                      ("ceil", np.ceil), ("trunc", np.trunc)])
def test_nl_functions_built_from_other_instructions(name, ref):
    # The stub gives their NumPy meaning only; language.py builds them from sin, mod and fmod.
    x = np.random.default_rng(3).uniform(-6, 6, (16, 32)).astype(np.float32)
    x[0, :6] = [-2.0, 2.0, -0.5, 0.5, -1.5, 3.0]
    x = np.where(np.abs(np.cos(x)) < 0.1, 0.25, x).astype(np.float32)   # tan's poles

    def kernel(a):
        return store(getattr(nl, name)(load(a)))

    got = nki.simulate(kernel)(x)
    if name in ("floor", "ceil", "trunc"):
        np.testing.assert_array_equal(got, ref(x))
    else:
        np.testing.assert_allclose(got, ref(x), rtol=1e-5, atol=1e-6)
