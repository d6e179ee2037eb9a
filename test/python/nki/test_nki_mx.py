"""NeuronCore-v4's MX instructions (nisa.quantize_mx, nisa.nc_matmul_mx; isa_mx.py) and dtype
views (Note [Dtype views]) against references computed here from the OCP MX v1.0 formats:
float8 codes decoded by torch's float8 dtypes, float4 E2M1 codes by the spec's value table,
scales 2^(bits - 127), the contraction over partitions and x4 lanes as AWS's tutorial states
it (aws-neuron-sdk nki/deep-dives/mxfp-matmul.rst)."""

import numpy as np
import pytest
import torch

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

RNG = np.random.default_rng(7)
# OCP MX v1.0, E2M1: magnitudes of codes 0..7; bit 3 is the sign.
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
TORCH_FP8 = {"float8_e5m2_x4": torch.float8_e5m2, "float8_e4m3fn_x4": torch.float8_e4m3fn}


def decode(codes: np.ndarray, dtype: str) -> np.ndarray:
    """Values of element codes (uint8 array, one code per element)."""
    if dtype == "float4_e2m1fn_x4":
        magnitude = E2M1[codes & 7]
        return np.where(codes & 8, -magnitude, magnitude)
    return torch.from_numpy(codes.astype(np.uint8)).view(TORCH_FP8[dtype]).double().numpy()


def random_codes(shape, dtype):
    """Finite element codes: float8 without the NaN/inf exponents, any float4."""
    if dtype == "float4_e2m1fn_x4":
        return RNG.integers(0, 16, size=shape).astype(np.uint8)
    top = {"float8_e5m2_x4": 0x7B, "float8_e4m3fn_x4": 0x7E}[dtype]
    codes = RNG.integers(0, top + 1, size=shape).astype(np.uint8)
    return codes | (RNG.integers(0, 2, size=shape).astype(np.uint8) << 7)


def host_words(codes: np.ndarray, dtype: str) -> np.ndarray:
    """[K, 4F] element codes as the host passes x4 data: uint32 words of 4 float8 codes, or
    uint8 bytes of 2 float4 codes (2 bytes per x4 element), element j in the low bits first."""
    K = codes.shape[0]
    if dtype == "float4_e2m1fn_x4":
        pairs = codes.reshape(K, -1, 2)
        return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    return np.ascontiguousarray(codes).view(np.uint32).reshape(K, -1)


def mx_product(st_codes, st_scale, mv_codes, mv_scale, st_dtype, mv_dtype):
    """sum over partitions k and lanes q of st[k, i, q] * mv[k, j, q], each value times the
    scale of its group of 8 partitions (dense scales: [K // 8, F])."""
    K = st_codes.shape[0]
    st = decode(st_codes, st_dtype).reshape(K, -1, 4)
    mv = decode(mv_codes, mv_dtype).reshape(K, -1, 4)
    st = st * np.repeat(2.0 ** (st_scale.astype(np.float64) - 127), 8, axis=0)[:, :, None]
    mv = mv * np.repeat(2.0 ** (mv_scale.astype(np.float64) - 127), 8, axis=0)[:, :, None]
    return np.einsum("kiq,kjq->ij", st, mv)


def load_scales(scale_hbm, K):
    """Dense [K // 8, F] scales into the SBUF layout of Note [MX layout]: the 4 rows of each
    32-partition quadrant at the start of the quadrant (unused partitions zeroed)."""
    F = scale_hbm.shape[1]
    sb = nl.ndarray((K, F), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=sb, value=0)
    for q in range(K // 32):
        nisa.dma_copy(dst=sb[32 * q:32 * q + 4, :], src=scale_hbm[4 * q:4 * q + 4, :])
    return sb


def mx_matmul_kernel(dtype, dst_dtype=nl.float32):
    @nki.jit(platform_target="trn3")
    def kernel(st_words, st_scale, mv_words, mv_scale):
        K = st_words.shape[0]
        M, N = st_scale.shape[1], mv_scale.shape[1]
        # The host's integers viewed as x4 data: in units of the new dtype, as the tutorial's
        # .ap(dtype=mx_dtype, pattern=...) does (x4 of 2 bytes over uint8: half the count).
        st_x4 = st_words.ap(pattern=[[M, K], [1, M]], offset=0, dtype=dtype)
        st = nl.ndarray((K, M), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=st_x4)
        mv_raw = nl.ndarray(mv_words.shape, dtype=mv_words.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv_raw, src=mv_words)
        mv = mv_raw.view(dtype)                     # the same bytes, read in SBUF
        acc = nl.ndarray((M, N), dtype=dst_dtype, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv,
                          stationary_scale=load_scales(st_scale, K),
                          moving_scale=load_scales(mv_scale, K))
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out
    return kernel


@pytest.mark.parametrize("dtype", ["float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4"])
def test_mx_matmul_of_host_quantized_tiles_equals_the_scaled_contraction(dtype):
    K, M, N = 64, 32, 48
    st_codes, mv_codes = random_codes((K, 4 * M), dtype), random_codes((K, 4 * N), dtype)
    st_scale = RNG.integers(120, 130, size=(K // 8, M)).astype(np.uint8)
    mv_scale = RNG.integers(120, 130, size=(K // 8, N)).astype(np.uint8)
    out = mx_matmul_kernel(dtype)(host_words(st_codes, dtype), st_scale,
                                  host_words(mv_codes, dtype), mv_scale)
    want = mx_product(st_codes, st_scale, mv_codes, mv_scale, dtype, dtype)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


def test_mx_matmul_bf16_result_and_accumulation():
    K, M, N, dtype = 32, 16, 64, "float8_e4m3fn_x4"
    a, b = random_codes((K, 4 * M), dtype), random_codes((K, 4 * N), dtype)
    sa = np.full((K // 8, M), 127, np.uint8)
    sb = RNG.integers(125, 129, size=(K // 8, N)).astype(np.uint8)

    @nki.jit(platform_target="trn3")
    def twice(a_words, a_scale, b_words, b_scale):
        st = nl.ndarray((K, M), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=st, src=a_words.view(dtype))
        mv = nl.ndarray((K, N), dtype=dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=b_words.view(dtype))
        scales = [nl.ndarray((K // 8, f), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
                  for f in (M, N)]
        nisa.dma_copy(dst=scales[0], src=a_scale.view(nl.float8_e8m0fnu))
        nisa.dma_copy(dst=scales[1], src=b_scale.view(nl.float8_e8m0fnu))
        acc = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.psum)
        for _ in range(2):   # the second accumulates (accumulate=None after a matmul)
            nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=scales[0],
                              moving_scale=scales[1])
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    out = twice(host_words(a, dtype), sa, host_words(b, dtype), sb)
    once = torch.from_numpy(mx_product(a, sa, b, sb, dtype, dtype)).float().bfloat16()
    want = (once.float() + once.float()).bfloat16().float().numpy()
    np.testing.assert_array_equal(out, want)


def quantize_reference(x: np.ndarray, dtype: str):
    """(element codes [P, F], dense scale bits [P // 8, F // 4]) per the quantize_mx docstring:
    X = 2^(floor(log2(amax)) - (E_max - 1)) per 8 x 4 group, the elements x / X rounded to the
    float8 type (torch's conversion)."""
    P, F = x.shape
    e_max = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15}[dtype]
    groups = np.abs(x.astype(np.float64)).reshape(P // 8, 8, F // 4, 4).max(axis=(1, 3))
    _, exponent = np.frexp(groups)            # amax = m * 2^e, m in [0.5, 1): floor(log2) = e-1
    bits = np.where(groups > 0, exponent - 1 - (e_max - 1) + 127, 0).astype(np.uint8)
    factor = np.repeat(np.repeat(2.0 ** (bits.astype(np.float64) - 127), 8, 0), 4, 1)
    q = torch.from_numpy(x.astype(np.float64) / factor).to(TORCH_FP8[dtype])
    return q.view(torch.uint8).numpy(), bits


@pytest.mark.parametrize("dtype", ["float8_e4m3fn_x4", "float8_e5m2_x4"])
def test_quantize_mx_writes_the_docstrings_scales_in_each_quadrant(dtype):
    P, F = 64, 32
    x = (RNG.standard_normal((P, F)) * np.exp(RNG.uniform(-3, 3, size=(P, 1)))).astype(np.float32)
    x[8:16, 4:8] = 0.0                                            # an all-zero group
    x_bf16 = torch.from_numpy(x).bfloat16()

    @nki.jit(platform_target="trn3")
    def quantize(src):
        s = nl.ndarray((P, F), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=src)
        data = nl.ndarray((P, F // 4), dtype=dtype, buffer=nl.sbuf)
        scale = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=scale, value=0xAB)                        # what stays unused
        nisa.quantize_mx(dst=data, src=s, dst_scale=scale)
        out = nl.ndarray((P, F // 4), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=data.view(nl.uint32))
        scale_out = nl.ndarray((P, F // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=scale_out, src=scale)
        return out, scale_out

    words, scale = (t.numpy() for t in quantize(x_bf16))
    codes, bits = quantize_reference(x_bf16.float().numpy(), dtype)
    np.testing.assert_array_equal(words, np.ascontiguousarray(codes).view(np.uint32))
    used = [0, 1, 2, 3, 32, 33, 34, 35]                 # groups 0-3 and 4-7 (Note [MX layout])
    np.testing.assert_array_equal(scale[used], bits)
    assert (np.delete(scale, used, axis=0) == 0xAB).all()
    assert bits[1, 1] == 0                               # the zero group: 2^-127


def test_quantized_tiles_multiply_close_to_the_unquantized_product():
    K, M, N, dtype = 128, 32, 64, "float8_e4m3fn_x4"
    a = RNG.standard_normal((K, 4 * M)).astype(np.float32)
    b = RNG.standard_normal((K, 4 * N)).astype(np.float32)

    @nki.jit(platform_target="trn3")
    def qmm(a_hbm, b_hbm):
        tiles = []
        for src, F in ((a_hbm, M), (b_hbm, N)):
            s = nl.ndarray((K, 4 * F), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=s, src=src)
            data = nl.ndarray((K, F), dtype=dtype, buffer=nl.sbuf)
            scale = nl.ndarray((K, F), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
            nisa.quantize_mx(dst=data, src=s, dst_scale=scale)
            tiles.append((data, scale))
        acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=tiles[0][0], moving=tiles[1][0],
                          stationary_scale=tiles[0][1], moving_scale=tiles[1][1])
        res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    a16, b16 = torch.from_numpy(a).bfloat16(), torch.from_numpy(b).bfloat16()
    out = qmm(a16, b16).double().numpy()
    af, bf = a16.double().numpy().reshape(K, M, 4), b16.double().numpy().reshape(K, N, 4)
    exact = np.einsum("kiq,kjq->ij", af, bf)
    # float8_e4m3fn keeps 3 mantissa bits: each product is within about 2 * 2^-4 of exact.
    bound = 0.15 * np.einsum("kiq,kjq->ij", np.abs(af), np.abs(bf))
    assert (np.abs(out - exact) <= bound).all()
    assert np.abs(out - exact).max() > 0                 # it did quantize


def test_mx_rules():
    x4 = "float8_e5m2_x4"

    def run(body, target="trn3"):
        return nki.simulate(nki.jit(body, platform_target=target))(np.zeros((4, 4), np.float32))

    def matmul_with(scale_partitions, target="trn3", K=64):
        def body(_):
            st = nl.ndarray((K, 8), dtype=x4, buffer=nl.sbuf)
            mv = nl.ndarray((K, 8), dtype=x4, buffer=nl.sbuf)
            nisa.memset(dst=st.view(nl.uint32), value=0)
            nisa.memset(dst=mv.view(nl.uint32), value=0)
            sc = nl.ndarray((scale_partitions, 8), dtype=nl.uint8, buffer=nl.sbuf)
            nisa.memset(dst=sc, value=127)
            acc = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=sc,
                              moving_scale=sc)
        return run(body, target)

    matmul_with(36)
    with pytest.raises(nki.ShapeError, match=r"partitions 0\.\.35"):
        matmul_with(8)                            # 64 data partitions span two quadrants
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v4"):
        matmul_with(36, target="trn2")
    with pytest.raises(nki.ShapeError, match="multiple of 32"):
        matmul_with(36, K=48)

    def quantize_to(dtype):
        def body(_):
            s = nl.ndarray((32, 16), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.memset(dst=s, value=1.0)
            nisa.quantize_mx(dst=nl.ndarray((32, 4), dtype=dtype, buffer=nl.sbuf), src=s,
                             dst_scale=nl.ndarray((4, 4), dtype=nl.uint8, buffer=nl.sbuf))
        return run(body)

    quantize_to("float8_e4m3fn_x4")
    with pytest.raises(nki.DtypeError, match="float4 is not supported"):
        quantize_to("float4_e2m1fn_x4")

    def arithmetic_on_x4(_):
        t = nl.ndarray((32, 4), dtype=x4, buffer=nl.sbuf)
        nisa.memset(dst=t.view(nl.uint32), value=0)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)

    with pytest.raises(nki.DtypeError, match="packed MX data"):
        run(arithmetic_on_x4)

    def cast_by_dma(_):
        t = nl.ndarray((32, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=0)
        nisa.dma_copy(dst=nl.ndarray((32, 4), dtype=x4, buffer=nl.sbuf), src=t)

    with pytest.raises(nki.DtypeError, match="not cast"):
        run(cast_by_dma)


def test_dtype_views_read_and_write_the_same_bytes():
    pairs = torch.randn(16, 64).bfloat16()
    host = pairs.view(torch.float32).numpy().copy()          # two bfloat16 per float32

    @nki.jit
    def views(a):
        t = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        as_bf16 = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=as_bf16, src=t.view(nl.bfloat16))
        nisa.memset(dst=t.view(nl.uint8)[:, 0:4], value=0)  # float 0 of each row: +0.0
        f8 = t.view(nl.float8_e4m3fn)                        # bytes as float8, and back
        nisa.tensor_copy(dst=f8[:, 4:8], src=f8[:, 8:12])    # float 1 := float 2
        out = [nl.ndarray(s.shape, dtype=nl.float32, buffer=nl.shared_hbm)
               for s in (as_bf16, t)]
        nisa.dma_copy(dst=out[0], src=as_bf16)
        nisa.dma_copy(dst=out[1], src=t)
        return out

    as_bf16, t = views(host)
    np.testing.assert_array_equal(as_bf16, pairs.float().numpy())
    want = host.copy()
    want[:, 0], want[:, 1] = 0.0, host[:, 2]
    np.testing.assert_array_equal(t.view(np.uint32), want.view(np.uint32))

    def strided_last(a):
        t = nl.ndarray((16, 32), dtype=nl.float32, buffer=nl.sbuf)
        return t[:, 0:32:2].view(nl.bfloat16)

    with pytest.raises(nki.ShapeError, match="contiguous"):
        nki.simulate(strided_last)(host)


def test_mx_instructions_are_timed_on_trainium3s_clocks():
    # An MX matmul takes a BF16 matmul's cycles over the same x4 tiles ("4x the throughput",
    # trainium3_arch.rst), max(min(64, M), N) at TensorE's 2.4 GHz; quantize_mx one x4 element
    # per cycle at VectorE's 1.2 GHz (same page), at least MIN_II = 64 cycles.
    x4 = "float8_e4m3fn_x4"

    @nki.jit(platform_target="trn3")
    def kernel(_):
        st = nl.ndarray((128, 128), dtype=x4, buffer=nl.sbuf)
        mv = nl.ndarray((128, 512), dtype=x4, buffer=nl.sbuf)
        scale = nl.ndarray((128, 512), dtype=nl.uint8, buffer=nl.sbuf)
        for t, v in ((st.view(nl.uint32), 0), (mv.view(nl.uint32), 0), (scale, 127)):
            nisa.memset(dst=t, value=v)
        acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=scale,
                          moving_scale=scale)                                   # 3
        src = nl.ndarray((128, 2048), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.memset(dst=src, value=1.0)                                         # 4
        nisa.quantize_mx(dst=nl.ndarray((128, 16), dtype=x4, buffer=nl.sbuf),
                         src=src[:, 0:64], dst_scale=scale[:, 0:16])          # 5: 16 < 64
        nisa.quantize_mx(dst=mv, src=src, dst_scale=scale)                      # 6
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        nisa.dma_copy(dst=out, src=res)
        return out

    p = nki.profile(kernel, np.zeros(4, np.float32))
    names = [r.name for r in p.records]
    assert names[3] == "nc_matmul_mx" and names[5] == names[6] == "quantize_mx"

    def ns(i):
        t = p.instruction(i)
        return (t.end_us - t.start_us) * 1e3

    assert ns(3) == pytest.approx(512 / 2.4, rel=1e-9)
    # 5 reads the output of 4, the VectorE instruction before it: + 100 cycles (Note
    # [Dependent instruction overhead]); 6 follows 5, whose output it does not read.
    assert ns(5) == pytest.approx((64 + 100) / 1.2, rel=1e-9)
    assert ns(6) == pytest.approx(512 / 1.2, rel=1e-9)
    assert p.flops == pytest.approx(2 * 128 * 4 * 128 * 512)


def test_memset_of_mx_data_and_scales_and_indirect_copies_of_mx_rows():
    # memset: "For x4 packed types ... only value=0 is supported"; an E8M0 scale is a power of
    # two. A gather of x4 rows moves their bits (an MoE kernel selecting experts' weights).
    x4 = "float8_e5m2_x4"
    words = RNG.integers(0, 2**32, size=(16, 8), dtype=np.uint32)
    rows = np.array([[3], [0], [15], [7]], dtype=np.int32)

    @nki.jit(platform_target="trn3")
    def kernel(w, idx):
        z = nl.ndarray((4, 8), dtype=x4, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0)
        scale = nl.ndarray((4, 8), dtype=nl.float8_e8m0fnu, buffer=nl.sbuf)
        nisa.memset(dst=scale, value=0.25)
        idx_sb = nl.ndarray((4, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=idx_sb, src=idx)
        picked = nl.ndarray((4, 8), dtype=x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=picked, src=w.view(x4).ap([[8, 4], [1, 8]], vector_offset=idx_sb))
        outs = [nl.ndarray((4, 8), dtype=d, buffer=nl.shared_hbm)
                for d in (nl.uint32, nl.uint8, nl.uint32)]
        nisa.dma_copy(dst=outs[0], src=z.view(nl.uint32))
        nisa.dma_copy(dst=outs[1], src=scale.view(nl.uint8))
        nisa.dma_copy(dst=outs[2], src=picked.view(nl.uint32))
        return outs

    zeros, scale, picked = kernel(words, rows)
    assert (zeros == 0).all() and (scale == 127 - 2).all()
    np.testing.assert_array_equal(picked, words[rows[:, 0]])

    def memset_x4(value):
        return nki.simulate(nki.jit(lambda: nisa.memset(
            dst=nl.ndarray((4, 8), dtype=x4, buffer=nl.sbuf), value=value),
            platform_target="trn3"))()

    with pytest.raises(nki.DtypeError, match="only value=0"):
        memset_x4(1.0)


def test_mx_matmul_results_from_unwritten_columns_stay_unwritten():
    # As nc_matmul (Note [Results of unwritten memory]): stationary columns never written give
    # result rows never written, an error only where they are used.
    x4 = "float8_e4m3fn_x4"
    codes = random_codes((32, 16), x4)

    def kernel(words, rows):
        st = nl.ndarray((32, 8), dtype=x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=st[:, 0:4], src=words.view(x4))            # columns 4..7 never
        mv = nl.ndarray((32, 4), dtype=x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=mv, src=words.view(x4))
        scale = nl.ndarray((4, 8), dtype=nl.uint8, buffer=nl.sbuf)
        nisa.memset(dst=scale, value=127)
        acc = nl.ndarray((8, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=st, moving=mv, stationary_scale=scale,
                          moving_scale=scale[:, 0:4])
        res = nl.ndarray((rows, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc[0:rows, :])
        out = nl.ndarray((rows, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        return out

    words = host_words(codes, x4)
    want = mx_product(codes, np.full((4, 4), 127, np.uint8), codes, np.full((4, 4), 127,
                                                                           np.uint8), x4, x4)
    got = nki.jit(kernel, platform_target="trn3")(words, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    with pytest.raises(nki.UninitializedReadError):
        nki.jit(kernel, platform_target="trn3")(words, 8)
