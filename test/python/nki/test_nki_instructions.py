"""Each nki.isa instruction and nki.language function against a NumPy/PyTorch CPU reference."""

import contextlib

import numpy as np
import pytest
import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

RNG = np.random.default_rng(0)


def rand(*shape, low=-2.0, high=2.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def load(x, dtype=None, buffer=nl.sbuf):
    t = nl.ndarray(x.shape, dtype or x.dtype, buffer=buffer)
    nisa.dma_copy(dst=t, src=x)
    return t


def store(t):
    if t.buffer is nl.psum:
        staged = nl.ndarray(t.shape, t.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=staged, src=t)
        t = staged
    out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dma_copy_and_tensor_copy_round_trip_and_cast():
    x = rand(64, 96)

    def kernel(a):
        t = load(a)
        c = nl.ndarray((64, 96), nl.bfloat16)
        nisa.tensor_copy(dst=c, src=t)                 # float32 -> bfloat16 on VectorE
        back = nl.ndarray((64, 96), nl.float32)
        nisa.tensor_copy(dst=back, src=c, engine=nisa.engine.scalar)
        return store(t), store(back)

    same, cast = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(cast, torch.from_numpy(x).bfloat16().float().numpy())


def test_dma_copy_reshapes_between_equal_sizes_and_slices_hbm():
    x = rand(4, 32, 16)

    def kernel(a):
        t = nl.ndarray((32, 16), nl.float32)
        nisa.dma_copy(dst=t, src=a[2])                 # int index drops an HBM dim
        flat = nl.ndarray((32, 16), nl.float32)
        nisa.dma_copy(dst=flat, src=a[1:2, :, :])      # (1, 32, 16) -> (32, 16)
        part = nl.ndarray((8, 16), nl.float32)
        nisa.dma_copy(dst=part, src=a[3, nl.ds(4, 8), :])
        return store(t), store(flat), store(part)

    t, flat, part = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(t, x[2])
    np.testing.assert_array_equal(flat, x[1])
    np.testing.assert_array_equal(part, x[3, 4:12])


@pytest.mark.parametrize("dtype", [nl.float32, nl.bfloat16, nl.float8_e4m3])
def test_nc_matmul_is_stationary_transposed_times_moving(dtype):
    k, m, n = 128, 96, 320
    a, b = rand(k, m), rand(k, n)

    def kernel(st, mv):
        acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(st, dtype), moving=load(mv, dtype))
        return store(acc)

    got = nki.simulate(kernel)(a, b)
    round_to = {nl.float32: torch.float32, nl.bfloat16: torch.bfloat16}.get(dtype)
    if round_to is None:  # IEEE-like float8_e4m3 (max 240), checked against our own rounding
        from torch_neuron.nki import dtypes
        ra, rb = (dtypes.round_to(v, dtypes.BY_NAME[dtype]) for v in (a, b))
    else:
        ra, rb = (torch.from_numpy(v).to(round_to).float().numpy() for v in (a, b))
    want = ra.astype(np.float64).T @ rb.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_nc_matmul_accumulates_in_psum_and_accumulate_false_overwrites():
    a, b = rand(256, 64), rand(256, 128)

    def kernel(st, mv):
        acc = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        for k in nl.affine_range(2):
            nisa.nc_matmul(dst=acc, stationary=load(st[k * 128:(k + 1) * 128]),
                           moving=load(mv[k * 128:(k + 1) * 128]))
        over = nl.ndarray((64, 128), nl.float32, buffer=nl.psum)
        for k in nl.static_range(2):
            nisa.nc_matmul(dst=over, stationary=load(st[k * 128:(k + 1) * 128]),
                           moving=load(mv[k * 128:(k + 1) * 128]), accumulate=(k > 0))
        nisa.nc_matmul(dst=over, stationary=load(st[:128]), moving=load(mv[:128]),
                       accumulate=False)
        return store(acc), store(over)

    acc, over = nki.simulate(kernel)(a, b)
    np.testing.assert_allclose(acc, a.T @ b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(over, a[:128].T @ b[:128], rtol=1e-5, atol=1e-4)


def test_nc_matmul_double_row_fp8_contracts_over_partitions_and_pairs():
    a, b = rand(128, 2, 16), rand(128, 2, 64)

    def kernel(st, mv):
        acc = nl.ndarray((16, 64), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=load(st, nl.float8_e4m3),
                       moving=load(mv, nl.float8_e4m3),
                       perf_mode=nisa.matmul_perf_mode.double_row)
        return store(acc)

    got = nki.jit(kernel, platform_target="trn2")(a, b)
    from torch_neuron.nki import dtypes
    ra, rb = (dtypes.round_to(v, dtypes.BY_NAME["float8_e4m3"]).astype(np.float64)
              for v in (a, b))
    np.testing.assert_allclose(got, np.einsum("kjm,kjn->mn", ra, rb), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("engine", [nisa.engine.tensor, nisa.engine.vector])
def test_nc_transpose(engine):
    x = rand(32, 24)

    def kernel(a):
        out = nl.ndarray((24, 32), nl.float32,
                         buffer=nl.psum if engine is nisa.engine.tensor else nl.sbuf)
        nisa.nc_transpose(dst=out, data=load(a), engine=engine)
        return store(out)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x.T)


def test_view_patterns_and_dynamic_selects_as_the_stub_describes_them():
    # strides / offset / get_pattern, vector_select and a dynamic select (the stub's
    # NkiTensor docstrings); an access pattern stepping over partitions is illegal
    # (nki-aps.rst: "reads every other partition").
    rows = np.arange(128 * 512, dtype=np.float32).reshape(128, 512)
    cube = np.arange(4 * 128 * 8, dtype=np.float32).reshape(4, 128, 8)

    def kernel(a, c):
        t = nl.ndarray((128, 64), nl.float32)
        view = t.slice(1, 8, 24)
        assert view.get_pattern() == [[64, 128], [1, 16]] and view.offset == 8
        assert t.strides == (64, 1)
        offsets = nl.ndarray((64, 1), nl.int32)
        nisa.iota(offsets, [[1, 1]], 0, 2)                       # rows 0, 2, 4, ...
        every_other = nl.ndarray((64, 512), nl.float32)
        nisa.dma_copy(dst=every_other, src=a.vector_select(0, offsets))
        index = nl.ndarray((1, 1), nl.int32)
        nisa.memset(dst=index, value=2)
        plane = nl.ndarray((128, 8), nl.float32)
        nisa.dma_copy(dst=plane, src=c.select(0, index))
        return store(every_other), store(plane)

    every_other, plane = nki.simulate(kernel)(rows, cube)
    np.testing.assert_array_equal(every_other, rows[0::2])
    np.testing.assert_array_equal(plane, cube[2])
    with pytest.raises(nki.ShapeError, match="step one partition"):
        nki.simulate(lambda: nl.ndarray((16, 32), nl.float32).ap([[64, 8], [1, 32]]))()


def test_rearrange_splits_reorders_and_merges_as_a_view():
    # The stub's example: (128, 24) -> ('b', ('h', 'w')) -> ('b', 'w', 'h') with h = 4; and an
    # HBM tensor's two dims merged after a reorder that keeps them adjacent.
    x = np.arange(128 * 24, dtype=np.float32).reshape(128, 24)
    y = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)

    def kernel(a, b):
        t = load(a)
        r = t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4})
        assert r.shape == (128, 6, 4)
        out = nl.ndarray(r.shape, nl.float32)
        nisa.tensor_copy(dst=out, src=r)
        merged = b.rearrange(("x", "y", "z"), (("x", "y"), "z"))
        return store(out), store(load(merged))

    out, merged = nki.simulate(kernel)(x, y)
    np.testing.assert_array_equal(out, x.reshape(128, 4, 6).transpose(0, 2, 1))
    np.testing.assert_array_equal(merged, y.reshape(6, 4))
    with pytest.raises(nki.ShapeError, match="partition dim"):
        nki.simulate(lambda a: load(a).rearrange(("b", "c"), ("c", "b")))(x)


def test_base_tensor_is_the_whole_tensor_a_view_belongs_to():
    # Not in the stub; AWS's MX kernels read .base_tensor on views and whole tensors.
    x = rand(8, 16)

    def kernel(a):
        t = load(a)
        view = t[2:4, 3:9].view(nl.int32)
        assert view.base_tensor.shape == (8, 16) and view.base_tensor.dtype == "float32"
        assert a.base_tensor.buffer == a.buffer
        return store(view.base_tensor)

    np.testing.assert_array_equal(nki.simulate(kernel)(x), x)


def test_tensor_copy_takes_the_samples_leftover_dtype_argument():
    # AWS's samples still pass tensor_copy(..., dtype=): the copy writes dst's dtype; a
    # different dtype= only warns.
    x = rand(8, 16)

    def kernel(a, dtype):
        out = nl.ndarray((8, 16), nl.float32)
        nisa.tensor_copy(dst=out, src=load(a), dtype=dtype)
        return store(out)

    np.testing.assert_array_equal(nki.simulate(kernel)(x, nl.float32), x)
    with pytest.warns(UserWarning, match="writes float32"):
        np.testing.assert_array_equal(nki.simulate(kernel)(x, nl.bfloat16), x)


def test_matmul_transpose_mode_is_bit_accurate_into_bf16_psum_from_neuroncore_v3():
    # Trainium2 guide, "Built-in Transpose Support": transpose mode transposes NaN/Inf
    # properly and gives "FP16/BF16 PSUM output for FP16/BF16 transpose".
    x = torch.randn(64, 32).bfloat16()
    x[3, 5], x[10, 0] = float("nan"), float("inf")

    def kernel(a, target_dst):
        t = nl.ndarray((64, 32), nl.bfloat16)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray((32, 64), target_dst, buffer=nl.psum)
        nisa.nc_matmul(dst=out, stationary=t, moving=nl.shared_identity_matrix(64, nl.bfloat16),
                       is_transpose=True)
        return store(out)

    got = nki.jit(kernel, platform_target="trn2")(x, nl.bfloat16)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, x.T, rtol=0, atol=0, equal_nan=True)
    with pytest.raises(nki.DtypeError, match="must be float32"):
        nki.jit(kernel, platform_target="trn1")(x, nl.bfloat16)


@pytest.mark.parametrize("op,ref", [(nl.add, np.add), (nl.subtract, np.subtract),
                                    (nl.multiply, np.multiply), (nl.divide, np.divide),
                                    (nl.maximum, np.maximum), (nl.minimum, np.minimum),
                                    (nl.power, None)])
def test_tensor_tensor(op, ref):
    x, y = rand(16, 40, low=0.5), rand(16, 40, low=0.5)

    def kernel(a, b):
        out = nl.ndarray((16, 40), nl.float32)
        nisa.tensor_tensor(dst=out, data1=load(a), data2=load(b), op=op)
        return store(out)

    np.testing.assert_allclose(nki.simulate(kernel)(x, y), (ref or np.power)(x, y), rtol=1e-6)


def test_tensor_tensor_bitvec_on_integers():
    x = RNG.integers(0, 1000, (8, 16)).astype(np.int32)
    y = RNG.integers(0, 1000, (8, 16)).astype(np.int32)

    def kernel(a, b):
        out = nl.ndarray((8, 16), nl.int32)
        nisa.tensor_tensor(dst=out, data1=load(a), data2=load(b), op=nl.bitwise_xor)
        return store(out)

    np.testing.assert_array_equal(nki.simulate(kernel)(x, y), x ^ y)


def test_tensor_scalar_two_ops_reverse_and_vector_operand():
    x, col = rand(32, 50), rand(32, 1, low=0.5)

    def kernel(a, c):
        out1 = nl.ndarray((32, 50), nl.float32)
        nisa.tensor_scalar(dst=out1, data=load(a), op0=nl.multiply, operand0=3.0,
                           op1=nl.subtract, operand1=1.0, reverse1=True)
        out2 = nl.ndarray((32, 50), nl.float32)
        nisa.tensor_scalar(dst=out2, data=load(a), op0=nl.divide, operand0=load(c))
        out3 = nl.ndarray((32, 50), nl.float32)
        nisa.tensor_scalar(dst=out3, data=load(a), op0=nl.abs, operand0=None)
        return store(out1), store(out2), store(out3)

    o1, o2, o3 = nki.simulate(kernel)(x, col)
    np.testing.assert_allclose(o1, 1.0 - x * 3.0, rtol=1e-6)
    np.testing.assert_allclose(o2, x / col, rtol=1e-6)
    np.testing.assert_array_equal(o3, np.abs(x))


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.maximum, np.max),
                                    (nl.minimum, np.min), (nl.multiply, np.prod)])
def test_tensor_reduce_over_last_free_axes(op, ref):
    x = rand(16, 4, 8, low=0.5, high=1.5)

    def kernel(a):
        inner = nl.ndarray((16, 4), nl.float32)
        nisa.tensor_reduce(dst=inner, op=op, data=load(a), axis=2)
        both = nl.ndarray((16, 1), nl.float32)
        nisa.tensor_reduce(dst=both, op=op, data=load(a), axis=(1, 2), negate=True)
        return store(inner), store(both)

    inner, both = nki.simulate(kernel)(x)
    np.testing.assert_allclose(inner, ref(x, axis=2), rtol=1e-5)
    np.testing.assert_allclose(both[:, 0], -ref(x, axis=(1, 2)), rtol=1e-5)


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.maximum, np.max),
                                    (nl.average, np.mean)])
def test_tensor_partition_reduce(op, ref):
    x = rand(64, 12)

    def kernel(a):
        out = nl.ndarray((1, 12), nl.float32)
        nisa.tensor_partition_reduce(dst=out, op=op, data=load(a))
        return store(out)

    np.testing.assert_allclose(nki.simulate(kernel)(x)[0], ref(x, axis=0), rtol=1e-5,
                               atol=1e-6)


ACTIVATIONS = [(nl.exp, torch.exp), (nl.log, torch.log), (nl.tanh, torch.tanh),
               (nl.sigmoid, torch.sigmoid), (nl.relu, torch.relu),
               (nl.gelu, torch.nn.functional.gelu), (nl.sqrt, torch.sqrt),
               (nl.rsqrt, torch.rsqrt), (nl.square, torch.square), (nl.abs, torch.abs),
               (nl.reciprocal, torch.reciprocal), (nl.silu, torch.nn.functional.silu),
               (nl.copy, lambda v: v)]


def derivative(fn):
    """The elementwise derivative of fn, by torch autograd."""
    def d(v):
        v = v.clone().requires_grad_()
        fn(v).sum().backward()
        return v.grad.detach()
    return d


def gelu_sigmoid(v):  # Hendrycks and Gimpel's x * sigmoid(1.702 x)
    return v * torch.sigmoid(1.702 * v)


ACTIVATIONS += [(nl.gelu_dx, derivative(torch.nn.functional.gelu)),
                (nl.silu_dx, derivative(torch.nn.functional.silu)),
                (nl.erf_dx, derivative(torch.erf)),
                (nl.gelu_apprx_sigmoid, gelu_sigmoid),
                (nl.gelu_apprx_sigmoid_dx, derivative(gelu_sigmoid))]


@pytest.mark.parametrize("op,ref", ACTIVATIONS, ids=[op.name for op, _ in ACTIVATIONS])
def test_activation_with_scale_and_bias(op, ref):
    x, bias = rand(32, 64, low=0.1, high=2.0), rand(32, 1, low=0.1, high=0.5)

    def kernel(a, b):
        out = nl.ndarray((32, 64), nl.float32)
        nisa.activation(dst=out, op=op, data=load(a), bias=load(b), scale=0.5)
        return store(out)

    want = ref(torch.from_numpy(x) * 0.5 + torch.from_numpy(bias)).numpy()
    np.testing.assert_allclose(nki.simulate(kernel)(x, bias), want, rtol=1e-5, atol=1e-6)


def test_activation_reduce_and_reduce_registers():
    x = rand(16, 30)

    def kernel(a):
        t = load(a)
        out = nl.ndarray((16, 30), nl.float32)
        sums = nl.ndarray((16, 1), nl.float32)
        nisa.activation_reduce(dst=out, op=nl.square, data=t, reduce_op=nl.add,
                               reduce_res=sums)
        # two activations accumulating in the registers, read out by the second
        total = nl.ndarray((16, 1), nl.float32)
        nisa.activation(dst=out, op=nl.copy, data=t, reduce_op=nl.add,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=out, op=nl.copy, data=t, reduce_op=nl.add,
                        reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=total)
        return store(sums), store(total)

    sums, total = nki.simulate(kernel)(x)
    np.testing.assert_allclose(sums[:, 0], (x ** 2).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(total[:, 0], 2 * x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_memset_and_nl_creation():
    def kernel():
        t = nl.ndarray((8, 5), nl.int32)
        nisa.memset(dst=t, value=7)
        return store(t), store(nl.zeros((4, 3), nl.float32)), store(nl.ones((4, 3), nl.bfloat16)), \
            store(nl.full((4, 3), 2.5, nl.float32))

    t, z, o, f = nki.simulate(kernel)()
    np.testing.assert_array_equal(t, np.full((8, 5), 7))
    np.testing.assert_array_equal(z, 0)
    np.testing.assert_array_equal(o, 1)
    np.testing.assert_array_equal(f, 2.5)


def test_iota_and_affine_select_causal_mask():
    x = rand(8, 8)

    def kernel(a):
        idx = nl.ndarray((8, 2, 3), nl.int32)
        nisa.iota(dst=idx, pattern=[[10, 2], [1, 3]], offset=5, channel_multiplier=100)
        masked = nl.ndarray((8, 8), nl.float32)
        # keep column j <= row i: i - j >= 0
        nisa.affine_select(dst=masked, pattern=[[-1, 8]], channel_multiplier=1,
                           on_true_tile=load(a), on_false_value=-1e9,
                           cmp_op=nl.greater_equal)
        return store(idx), store(masked)

    idx, masked = nki.simulate(kernel)(x)
    p, w, xx = np.meshgrid(np.arange(8), np.arange(2), np.arange(3), indexing="ij")
    np.testing.assert_array_equal(idx, 5 + 100 * p + 10 * w + xx)
    np.testing.assert_array_equal(masked, np.where(np.tril(np.ones((8, 8))) > 0, x, -1e9))


def test_bn_stats_and_bn_aggr_give_mean_and_variance():
    x = rand(32, 1024)

    def kernel(a):
        t = load(a)
        stats = nl.ndarray((32, 12), nl.float32)
        for i in nl.affine_range(2):
            nisa.bn_stats(dst=stats[:, i * 6:(i + 1) * 6], data=t[:, i * 512:(i + 1) * 512])
        mv = nl.ndarray((32, 2), nl.float32)
        nisa.bn_aggr(dst=mv, data=stats)
        return store(mv)

    mv = nki.simulate(kernel)(x)
    np.testing.assert_allclose(mv[:, 0], x.mean(axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(mv[:, 1], x.var(axis=1), rtol=1e-4)


def test_select_reduce_selects_and_takes_the_row_max():
    x = rand(16, 20)
    pred = (RNG.random((16, 20)) > 0.5).astype(np.uint8)

    def kernel(a, p):
        out = nl.ndarray((16, 20), nl.float32)
        mx = nl.ndarray((16, 1), nl.float32)
        nisa.select_reduce(dst=out, predicate=load(p), on_true=load(a), on_false=-5.0,
                           reduce_res=mx, reduce_cmd=nisa.reduce_cmd.reset_reduce,
                           reduce_op=nl.maximum)
        return store(out), store(mx)

    out, mx = nki.simulate(kernel)(x, pred)
    want = np.where(pred != 0, x, -5.0)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(mx[:, 0], want.max(axis=1))


def test_tensor_tensor_scan_is_a_linear_recurrence():
    decay, inputs = rand(8, 25, low=0.5, high=1.0), rand(8, 25)

    def kernel(d, u):
        out = nl.ndarray((8, 25), nl.float32)
        # h_t = d_t * h_{t-1} + u_t
        nisa.tensor_tensor_scan(dst=out, data0=load(d), data1=load(u), initial=0.0,
                                op0=nl.multiply, op1=nl.add)
        return store(out)

    h, want = np.zeros(8, np.float64), []
    for t in range(25):
        h = decay[:, t] * h + inputs[:, t]
        want.append(h)
    np.testing.assert_allclose(nki.simulate(kernel)(decay, inputs), np.stack(want, axis=1),
                               rtol=1e-5, atol=1e-5)


def test_dropout_zeroes_about_prob_and_keeps_values():
    x = rand(128, 256, low=1.0, high=2.0)

    def kernel(a, prob):
        out = nl.ndarray((128, 256), nl.float32)
        nisa.dropout(dst=out, data=load(a), prob=prob)
        return store(out)

    torch.manual_seed(0)
    got = nki.simulate(kernel)(x, 0.3)
    dropped = got == 0
    assert abs(dropped.mean() - 0.3) < 0.01
    np.testing.assert_array_equal(got[~dropped], x[~dropped])
    np.testing.assert_array_equal(nki.simulate(kernel)(x, 0.0), x)
    assert not nki.simulate(kernel)(x, 1.0).any()
    torch.manual_seed(0)
    np.testing.assert_array_equal(nki.simulate(kernel)(x, 0.3), got)


BINARY = [(nl.add, np.add), (nl.subtract, np.subtract), (nl.multiply, np.multiply),
          (nl.divide, np.divide), (nl.maximum, np.maximum), (nl.minimum, np.minimum)]
UNARY = [(nl.exp, np.exp), (nl.log, np.log), (nl.tanh, np.tanh),
         (nl.sigmoid, lambda v: 1 / (1 + np.exp(-v))), (nl.relu, lambda v: np.maximum(v, 0)),
         (nl.gelu, lambda v: torch.nn.functional.gelu(torch.from_numpy(v)).numpy()),
         (nl.sqrt, np.sqrt), (nl.rsqrt, lambda v: 1 / np.sqrt(v)), (nl.square, np.square),
         (nl.abs, np.abs), (nl.negative, np.negative), (nl.reciprocal, np.reciprocal)]


def test_nl_functions_issue_instructions_and_match_numpy():
    x, y, col = rand(16, 24, low=0.5), rand(16, 24, low=0.5), rand(16, 1, low=0.5)

    def kernel(a, b, c):
        ta, tb, tc = nl.load(a), nl.load(b), nl.load(c)
        outs = [f(ta, tb) for f, _ in BINARY] + [f(ta, 2.0) for f, _ in BINARY]
        outs += [f(ta, tc) for f, _ in BINARY] + [f(ta) for f, _ in UNARY]
        outs += [nl.sum(ta, axis=1), nl.max(ta, axis=1), nl.min(ta, axis=1),
                 nl.mean(ta, axis=1), nl.matmul(ta, tb, transpose_x=True),
                 nl.transpose(ta), nl.copy(ta, dtype=nl.bfloat16)]
        res = []
        for o in outs:
            out = nl.ndarray(o.shape, o.dtype, buffer=nl.shared_hbm)
            nl.store(out, o)
            res.append(out)
        return res

    got = nki.simulate(kernel)(x, y, col)
    want = [r(x, y) for _, r in BINARY] + [r(x, np.float32(2)) for _, r in BINARY]
    want += [r(x, col) for _, r in BINARY] + [r(x) for _, r in UNARY]
    want += [x.sum(1), x.max(1), x.min(1), x.mean(1), x.T @ y, x.T,
             torch.from_numpy(x).bfloat16().float().numpy()]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.reshape(w.shape), w, rtol=2e-5, atol=1e-5)


def test_views_permute_reshape_broadcast_share_storage():
    x = rand(8, 6)

    def kernel(a):
        t = load(a)
        r = nl.ndarray((8, 2, 3), nl.float32)
        nisa.tensor_copy(dst=r, src=t.reshape((8, 2, 3)))
        swapped = nl.ndarray((8, 3, 2), nl.float32)
        nisa.tensor_copy(dst=swapped, src=r.permute((0, 2, 1)))
        col = nl.ndarray((8, 1), nl.float32)
        assert t[..., 5].shape == (8, 1) and t[3].shape == (1, 6) and a[3, 2].shape == (1,)
        nisa.tensor_copy(dst=col, src=t[..., 5])
        wide = nl.ndarray((8, 6), nl.float32)
        nisa.tensor_copy(dst=wide, src=col.broadcast(1, 6))
        hb = nl.ndarray((8, 6), nl.float32)
        nisa.dma_copy(dst=hb, src=a[0:1, :].broadcast(0, 8))
        return store(r), store(swapped), store(wide), store(hb)

    r, swapped, wide, hb = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(swapped, x.reshape(8, 2, 3).transpose(0, 2, 1))
    np.testing.assert_array_equal(r.reshape(8, 6), x)
    np.testing.assert_array_equal(wide, np.repeat(x[:, 5:6], 6, axis=1))
    np.testing.assert_array_equal(hb, np.repeat(x[0:1], 8, axis=0))


@pytest.mark.parametrize("dtype,torch_dtype", [(nl.bfloat16, torch.bfloat16),
                                               (nl.float16, torch.float16),
                                               (nl.float8_e4m3fn, torch.float8_e4m3fn),
                                               (nl.float8_e5m2, torch.float8_e5m2)])
def test_writes_round_to_nearest_even_like_torch(dtype, torch_dtype):
    # magnitudes across the normal and subnormal ranges of each format, and exact ties
    mags = np.logspace(-9, 2.5, 128 * 64).astype(np.float32).reshape(128, 64)
    x = mags * np.where(RNG.random((128, 64)) > 0.5, 1, -1).astype(np.float32)
    x[0, :4] = [1.00390625, 1.01171875, 2.5, 3.5]  # ties for bf16 (8 and 24 * 2^-11) and fp8

    def kernel(a):
        t = nl.ndarray((128, 64), dtype)
        nisa.tensor_copy(dst=t, src=load(a))
        back = nl.ndarray((128, 64), nl.float32)
        nisa.tensor_copy(dst=back, src=t)
        return store(back), store(t)

    via_fp32, narrow = nki.simulate(kernel)(torch.from_numpy(x))  # CPU torch in, CPU torch out
    want = torch.from_numpy(x).to(torch_dtype)
    assert narrow.dtype == torch_dtype and narrow.device.type == "cpu"
    assert torch.equal(via_fp32, want.float())
    assert torch.equal(narrow.float(), want.float())


@pytest.mark.parametrize("target,sbuf_kib", [("trn1", 192), ("trn2", 224), ("trn3", 256)])
def test_tile_size_constants_follow_the_target(target, sbuf_kib):
    def kernel():
        ts = nl.tile_size
        return (ts.pmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax, ts.psum_bank_fmax,
                ts.psum_num_banks, ts.bn_stats_fmax, ts.sbuf_fmax_bytes,
                nisa.get_nc_version().value)

    got = nki.jit(kernel, platform_target=target)()
    version = {"trn1": 2, "trn2": 3, "trn3": 4}[target]
    assert got == (128, 128, 512, 512, 8, 512, sbuf_kib * 1024, version)


def test_neuron_platform_target_override_selects_the_default_target(monkeypatch):
    def kernel():
        return nisa.get_nc_version().value, nl.tile_size.sbuf_fmax_bytes

    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1")  # as AWS's examples do
    assert nki.simulate(kernel)() == (2, 192 * 1024)
    assert nki.jit(kernel, platform_target="trn3")() == (4, 256 * 1024)  # the argument wins
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9")
    with pytest.raises(ValueError, match="NEURON_PLATFORM_TARGET_OVERRIDE='trn9'"):
        nki.simulate(kernel)()
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE")
    import torch_neuron
    core = torch_neuron._C._instance_info()["core_version"]  # NeuronCore-v3 on trn2.3xlarge
    assert nki.simulate(kernel)()[0] == int(core[-1])


def test_access_pattern_view_pools_windows():
    x = rand(4, 8, 8)

    def kernel(a):
        t = load(a)
        # [partition, out row, out col, window row, window col] over a [4, 8, 8] tile
        windows = t.ap([[64, 4], [16, 4], [2, 4], [8, 2], [1, 2]])
        return store(nl.sum(windows, axis=[3, 4]))

    want = x.reshape(4, 4, 2, 4, 2).sum(axis=(2, 4))
    np.testing.assert_allclose(nki.simulate(kernel)(x), want, rtol=1e-5)

    def past_the_end(a, use):
        view = load(a).ap([[64, 4], [1, 65]])   # built: no error until an instruction uses it
        if use:
            store(view)

    # .ap on a column slice of a tile steps partitions by the slice's own width (nki-aps.rst:
    # "the number of elements in the free dimension of the tensor"), as AWS's TensorView does.
    def column_slice(a):
        t = load(a)
        right = t.ap([[16, 4], [1, 8]], offset=8)          # columns 8..15 of a [4, 16] tile
        return store(right.ap([[8, 4], [1, 8]], offset=0))

    y = rand(4, 16)
    np.testing.assert_array_equal(nki.simulate(column_slice)(y), y[:, 8:])
    nki.simulate(past_the_end)(x, False)
    with pytest.raises(nki.OutOfBoundsError, match="src: .* addresses elements"):
        nki.simulate(past_the_end)(x, True)


def test_broadcast_to_free_and_partition_dims():
    row, col = rand(1, 600), rand(16, 1)

    def kernel(r, c):
        wide = nl.broadcast_to(load(r), (96, 600))    # across partitions: TensorE, 2 banks
        tall = nl.broadcast_to(load(c), (16, 5))      # along the free dim: VectorE copy
        return store(wide), store(tall)

    run = nki.run(kernel, row, col)
    wide, tall = run.result
    np.testing.assert_array_equal(wide, np.repeat(row, 96, axis=0))
    np.testing.assert_array_equal(tall, np.repeat(col, 5, axis=1))
    assert [r.name for r in run.records].count("nc_matmul") == 2


def test_tile_broadcast_to_is_one_matmul_read_in_place_from_psum():
    # The tile method of the Neuron 2.20-era API ("a new view, no copy"): the architecture
    # guide's partition broadcast, one nc_matmul of a ones constant by the row, its PSUM result
    # used where it is; the ones are set once per kernel, not per call.
    rows, x = rand(4, 512), rand(128, 512)

    def kernel(r, a):
        xt = load(a)
        outs = []
        for i in nl.affine_range(4):
            wide = load(r[i:i + 1]).broadcast_to((128, 512))
            assert wide.buffer is nl.psum and wide.dtype == nl.float32
            y = nl.ndarray((128, 512), nl.float32)
            nisa.tensor_tensor(dst=y, data1=xt, data2=wide, op=nl.multiply)
            outs.append(store(y))
        return tuple(outs)

    run = nki.run(kernel, rows, x)
    for i, out in enumerate(run.result):
        np.testing.assert_array_equal(out, x * rows[i])
    names = [r.name for r in run.records]
    assert names.count("nc_matmul") == 4 and names.count("memset") == 1
    assert names.count("tensor_copy") == 0  # no copy of the row, none out of PSUM


def test_nl_broadcast_to_gives_an_sbuf_tile_that_can_be_stored():
    # AWS's example of nl.broadcast_to stores its result straight to HBM.
    row = rand(1, 64)

    def kernel(r):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        wide = nl.broadcast_to(load(r), (128, 64))
        assert wide.buffer is nl.sbuf
        nl.store(out, wide)
        return out

    np.testing.assert_array_equal(nki.simulate(kernel)(row), np.repeat(row, 128, axis=0))


def test_nki_typing_annotations_check_shapes():
    import torch_neuron.nki.typing as nt

    @nki.jit
    def kernel(a: nt.tensor[4, 8]):
        return store(load(a))

    np.testing.assert_array_equal(kernel(np.ones((4, 8), np.float32)), 1)
    with pytest.raises(nki.ShapeError, match=r"declares nt.tensor\[4, 8\]"):
        kernel(np.ones((4, 9), np.float32))


def test_logical_not_and_the_names_aws_kernels_import():
    # nl.logical_not is "XOR with 1" for 0/1 tiles (the release's stub). The other names are
    # what aws-neuron/nki-library's kernels import or annotate with: `nki.isa.constants`,
    # `nki.isa.dma_engine`, `nki.dtype`, `nl.NKIObject`, and `.ap(dtype=...)` of a view's own
    # dtype.
    import importlib

    x = (rand(8, 16) > 0).astype(np.float32)

    def kernel(a):
        t = nl.load(a)
        out = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.logical_not(t))
        same = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=same, src=a.ap(pattern=[[16, 8], [1, 16]], dtype=nl.float32))
        return out, same

    out, same = nki.simulate(kernel)(x)
    np.testing.assert_array_equal(out, 1.0 - x)
    np.testing.assert_array_equal(same, x)
    # Another dtype of the same size reads the same bytes (Note [Dtype views]).
    bits = nki.simulate(lambda a: store(load(a.ap(pattern=[[16, 8], [1, 16]], dtype=nl.int32))))(x)
    np.testing.assert_array_equal(bits, x.view(np.int32))
    constants = importlib.import_module("torch_neuron.nki.isa").constants
    assert constants.oob_mode is nisa.oob_mode and constants.dma_engine is nisa.dma_engine
    assert nki.dtype is str and nl.DType is str
    assert nisa.nc_version.gen3 >= nisa.nc_version.gen2  # kernels branch on the generation
    assert nl.NKIObject(a=1, b="x").b == "x"


def test_indirect_dma_gathers_and_scatters_rows_by_runtime_offsets():
    # dma_copy's docstring: vector_offset gives each partition its own row; scalar_offset one
    # offset for all (Note [Indirect DMA] in torch_neuron/nki/tensor.py).
    data, upd = rand(64, 32), rand(16, 32)
    rows = RNG.permutation(64)[:16].reshape(16, 1).astype(np.uint32)
    col = np.array([[5]], np.int32)

    def kernel(d, idx, u, c, oob):
        P, F = u.shape
        i = load(idx)
        gathered = nl.ndarray((P, F), nl.float32)
        nisa.dma_copy(dst=gathered, src=d.ap(pattern=[[F, P], [1, F]], vector_offset=i,
                                             indirect_dim=0), oob_mode=oob)
        one = nl.ndarray((1, 1), nl.float32)  # d[3, c]: row 3 statically, column c at run time
        nisa.dma_copy(dst=one, src=d.ap(pattern=[[F, 1], [1, 1]], offset=3 * F,
                                        scalar_offset=load(c), indirect_dim=1))
        out = nl.ndarray(d.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=load(d))
        nisa.dma_copy(dst=out.ap(pattern=[[F, P], [1, F]], vector_offset=i, indirect_dim=0),
                      src=load(u), oob_mode=oob)
        return store(gathered), store(one), out

    gathered, one, scattered = nki.simulate(kernel)(data, rows, upd, col, nisa.oob_mode.error)
    np.testing.assert_array_equal(gathered, data[rows[:, 0]])
    np.testing.assert_array_equal(one, data[3:4, 5:6])
    want = data.copy()
    want[rows[:, 0]] = upd
    np.testing.assert_array_equal(scattered, want)

    # A row past the tensor: an error by default, skipped with oob_mode.skip.
    rows[2] = 1000
    with pytest.raises(nki.OutOfBoundsError, match="oob_mode.skip"):
        nki.simulate(kernel)(data, rows, upd, col, nisa.oob_mode.error)
    _, _, skipped = nki.simulate(kernel)(data, rows, upd, col, nisa.oob_mode.skip)
    want = data.copy()
    keep = np.arange(16) != 2
    want[rows[keep, 0]] = upd[keep]
    np.testing.assert_array_equal(skipped, want)
    # Only DMA takes an indirect view.
    with pytest.raises(nki.UnsupportedError, match="only dma_copy, dma_compute and dma_transpose"):
        nki.simulate(lambda d, idx: nisa.tensor_copy(
            dst=nl.ndarray((16, 32), nl.float32),
            src=d.ap(pattern=[[32, 16], [1, 32]], vector_offset=load(idx), indirect_dim=0)))(
            data, rows)


def test_manual_placement_and_nkiobject_keywords():
    # nl.ndarray(address=(partition_offset, free_offset)): tiles at the kernel's own addresses;
    # two placed at the same bytes are ordered by the schedule (a write after a read waits).
    x = rand(32, 64)
    from dataclasses import dataclass

    @dataclass
    class Params(nl.NKIObject):
        cols: int
        unused: int   # left out by the call below: None (as AWS's mlp_tkg constants)
        rows = None   # not annotated, so not a dataclass field: still a keyword argument

    def kernel(a):
        p = Params(64, rows=32)
        assert p.cols == 64 and p.unused is None
        first = nl.ndarray((p.rows, 64), nl.float32, address=(32, 1024))
        nisa.dma_copy(dst=first, src=a)
        doubled = nl.ndarray((p.rows, 64), nl.float32, address=(32, 4096))
        nisa.tensor_scalar(dst=doubled, data=first, op0=nl.multiply, operand0=2.0)
        again = nl.ndarray((p.rows, 64), nl.float32, address=(32, 1024))  # first's bytes
        nisa.dma_copy(dst=again, src=a)
        return store(doubled), store(again)

    run = nki.run(kernel, x)
    doubled, again = run.result
    np.testing.assert_allclose(doubled, 2 * x, rtol=1e-6)
    np.testing.assert_array_equal(again, x)
    load, double, reload = run.records[:3]
    assert load.writes[0].partitions == (32, 64) and load.writes[0].address == (1024, 1280)
    assert reload.writes[0].address == (1024, 1280)
    # The reload shares no value with the multiply, only bytes: its transfer waits for the
    # multiply to have read them (a write after a read), so it ends after the multiply; at
    # bytes of its own it would run beside the first load and end before.
    t = nki.profile(kernel, x)
    assert t.instruction(2).end_us > t.instruction(1).end_us
    with pytest.raises(nki.PartitionLimitError):
        nki.simulate(lambda: nl.ndarray((64, 8), nl.float32, address=(96, 0)))()
    with pytest.raises(nki.CapacityError):
        nki.simulate(lambda: nl.ndarray((8, 8), nl.float32, address=(0, 1 << 30)))()
    with pytest.raises(TypeError, match="unexpected keyword"):
        Params(columns=3)


def test_dma_compute_adds_sources_and_reads_modifies_writes_indexed_rows():
    # dma_compute's docstring: dst = srcs[0] + srcs[1] + ... in float32; with a vector_offset,
    # scatter dst(HBM)[idx] += src(SBUF) or gather dst(SBUF) += src(HBM)[idx].
    a, b, c = rand(32, 64), rand(32, 64), rand(32, 64)
    table, upd = rand(64, 16), rand(8, 16)
    rows = RNG.permutation(64)[:8].reshape(8, 1).astype(np.uint32)

    def kernel(x, y, z, t, u, idx):
        total = nl.ndarray((32, 64), nl.bfloat16)
        nisa.dma_compute(dst=total, srcs=[x, y, z], reduce_op=nl.add, scales=(1.0, 1.0, 1.0))
        out = nl.ndarray(t.shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        i = load(idx)
        view = out.ap(pattern=[[16, 8], [1, 16]], vector_offset=i, indirect_dim=0)
        nisa.dma_compute(dst=view, srcs=[view, load(u)], reduce_op=nl.add)
        acc = load(u)
        nisa.dma_compute(dst=acc, srcs=[t.ap(pattern=[[16, 8], [1, 16]], vector_offset=i,
                                             indirect_dim=0), acc], reduce_op=nl.add)
        return store(total), out, store(acc)

    total, scattered, gathered = nki.simulate(kernel)(a, b, c, table, upd, rows)
    want = torch.from_numpy(a + b + c).bfloat16().float().numpy()
    np.testing.assert_array_equal(total, want)
    want = table.copy()
    want[rows[:, 0]] += upd
    np.testing.assert_allclose(scattered, want, rtol=1e-6)
    np.testing.assert_allclose(gathered, upd + table[rows[:, 0]], rtol=1e-6)
    with pytest.raises(nki.NkiValidationError, match="nl.add only"):
        nki.simulate(lambda x: nisa.dma_compute(dst=nl.ndarray((32, 64), nl.float32),
                                                srcs=[x, x], reduce_op=nl.multiply))(a)


@pytest.mark.parametrize("columns", [1, 2])
def test_indirect_dma_transpose_gathers_rows_then_transposes(columns):
    # The docstring's "DMA Indirect Transpose" examples: flat = indices.T.flatten(), dst =
    # src[flat].T; 2-d indices [128, N] in column-major order.
    src = torch.randn(300, 128).bfloat16()
    idx = RNG.integers(0, 300, size=(128, columns)).astype(np.uint32)

    @nki.jit(platform_target="trn2")
    def gather_transpose(src_hbm, idx_hbm):
        P, F = 128, 128 * idx_hbm.shape[1]
        idx_sb = nl.ndarray(idx_hbm.shape, nl.uint32)
        nisa.dma_copy(dst=idx_sb, src=idx_hbm)
        dst = nl.ndarray((P, F), dtype=src_hbm.dtype)
        nisa.memset(dst=dst, value=0)
        view = src_hbm.ap(pattern=[[P, F], [1, P]], vector_offset=idx_sb, indirect_dim=0)
        nisa.dma_transpose(dst=dst, src=view, axes=(1, 0), dge_mode=1)   # swdge, as an int
        return store(dst)

    out = gather_transpose(src, idx)
    want = src[torch.from_numpy(idx.T.flatten().astype(np.int64))].T
    assert torch.equal(out, want)

    @nki.jit(platform_target="trn2")
    def four_d(src_hbm, idx_hbm):
        T, d1, d2, d3 = src_hbm.shape
        F = 128 * idx_hbm.shape[1]
        idx_sb = nl.ndarray(idx_hbm.shape, nl.uint32)
        nisa.dma_copy(dst=idx_sb, src=idx_hbm)
        dst = nl.ndarray((d3, d1, d2, F), dtype=src_hbm.dtype)
        view = src_hbm.ap(pattern=[[d1 * d2 * d3, F], [d2 * d3, d1], [d3, d2], [1, d3]],
                          vector_offset=idx_sb, indirect_dim=0)
        nisa.dma_transpose(dst=dst, src=view, axes=(3, 1, 2, 0))
        return store(dst)

    src4 = torch.randn(200, 1, 4, 64).bfloat16()
    idx4 = RNG.integers(0, 200, size=(128, columns)).astype(np.uint32)
    gathered = src4[torch.from_numpy(idx4.T.flatten().astype(np.int64))]
    assert torch.equal(four_d(src4, idx4), gathered.permute(3, 1, 2, 0))


def test_load_transpose2d_gather_flattened_and_no_reorder():
    x = rand(64, 128).astype(np.float16)
    data = rand(16, 40)
    where = RNG.integers(0, 40, size=(16, 7)).astype(np.uint32)

    def kernel(a, d, w, ordered):
        t = nl.load_transpose2d(a, dtype=nl.float32)       # (128, 64) in SBUF
        picked = nl.gather_flattened(load(d), load(w))
        with nl.no_reorder() if ordered else contextlib.nullcontext():
            u = nl.ndarray((16, 40), nl.float32)
            nisa.dma_copy(dst=u, src=d)      # independent of the next load...
            v = nl.ndarray((16, 40), nl.float32)
            nisa.dma_copy(dst=v, src=d)      # ...unless the block keeps program order
        return store(t), store(picked), store(u), store(v)

    run = nki.run(kernel, x, data, where, False)
    t, picked, _, _ = run.result
    np.testing.assert_array_equal(t, x.T.astype(np.float32))
    np.testing.assert_array_equal(picked, np.take_along_axis(data, where.astype(np.int64), 1))
    assert [r.name for r in run.records[:2]] == ["dma_transpose", "tensor_copy"]

    def load_starts(ordered):
        p = nki.profile(kernel, x, data, where, ordered)
        u, v = [i for i, r in enumerate(p.records) if r.name == "dma_copy"
                and r.reads and r.reads[0].space == "hbm"][-2:]
        return p.instruction(u), p.instruction(v)

    u, v = load_starts(False)
    assert v.start_us < u.end_us        # side by side on two DMA queues
    u, v = load_starts(True)
    assert v.start_us >= u.end_us       # in program order
