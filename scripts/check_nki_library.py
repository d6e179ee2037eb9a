"""Runs kernels of AWS's NKI library (github.com/aws-neuron/nki-library) on the simulated
NeuronCore and compares them with NumPy/torch references: the check behind docs/nki.md's list.

    python scripts/check_nki_library.py PATH/TO/nki-library [--target trn2]

PATH is a local checkout (nothing is downloaded); its `src/` holds the `nkilib_src` package.
`import nki` must be this project's alias (`pip install -e compat/nki`). Prints one line per
kernel and exits 1 if any fails. Not part of the test suite: the library is not vendored.
"""

import argparse
import os
import sys
import traceback

import numpy as np
import torch

RNG = np.random.default_rng(0)


def _fn(kernel):
    return getattr(kernel, "fn", kernel)


def sdpa_causal(q, k_t, v):
    q, k, v = (torch.from_numpy(a).float() for a in (q, k_t.transpose(0, 2, 1), v))
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                            scale=1.0).numpy()


def check_cumsum(nki, lnc):
    from nkilib_src.nkilib.core.cumsum import cumsum
    x = RNG.standard_normal((256, 2048)).astype(np.float32)
    out = nki.jit(_fn(cumsum))[lnc](x)
    return np.abs(out - np.cumsum(x, -1)).max() < 2e-3


def check_cascaded_max(nki, lnc):
    from nkilib_src.nkilib.core.max.cascaded_max import cascaded_max
    x = RNG.standard_normal((1, 4096)).astype(np.float32)
    value, index = nki.jit(_fn(cascaded_max))[lnc](x)
    return value.ravel()[0] == x.max() and int(index.ravel()[0]) == x.argmax()


def check_rope(nki, lnc):
    from nkilib_src.nkilib.core.embeddings.rope import RoPE
    d, b, h, s = 128, 1, 2, 256
    x = RNG.standard_normal((d, b, h, s)).astype(np.float32)
    angle = RNG.standard_normal((d // 2, b, s)).astype(np.float32)
    out = nki.jit(_fn(RoPE))[lnc](x, np.cos(angle), np.sin(angle), lnc_shard=lnc > 1)
    c, sn = np.cos(angle)[:, :, None], np.sin(angle)[:, :, None]
    want = np.concatenate([x[:d // 2] * c - x[d // 2:] * sn, x[d // 2:] * c + x[:d // 2] * sn])
    return np.abs(out - want).max() < 1e-5


def check_conv1d(nki, lnc):
    from nkilib_src.nkilib.experimental.conv.conv1d import conv1d
    x = RNG.standard_normal((1, 128, 256)).astype(np.float16)
    w = (RNG.standard_normal((3, 128, 128)) * 0.1).astype(np.float16)
    bias = RNG.standard_normal((128,)).astype(np.float16)
    out = nki.jit(_fn(conv1d))[lnc](x, w, bias, padding=(1, 1)).astype(np.float32)
    want = torch.nn.functional.conv1d(torch.from_numpy(x).float(),
                                      torch.from_numpy(w).float().permute(2, 1, 0),
                                      torch.from_numpy(bias).float(), padding=1).numpy()
    return np.abs(out - want).max() < 1e-2


def check_qkv(nki, lnc, seq=512):
    from nkilib_src.nkilib.core.qkv.qkv import qkv
    from nkilib_src.nkilib.core.utils.common_types import NormType
    h, i = 1024, 3 * 128
    x, mlp, attn = (RNG.standard_normal((1, seq, h)).astype(np.float16) * 0.5 for _ in range(3))
    gamma = (1 + 0.1 * RNG.standard_normal((1, h))).astype(np.float16)
    w = (RNG.standard_normal((h, i)) * 0.05).astype(np.float16)
    out = nki.jit(_fn(qkv))[lnc](x, w, fused_residual_add=True, mlp_prev=mlp,
                                  attention_prev=attn, fused_norm_type=NormType.RMS_NORM,
                                  gamma_norm_weights=gamma)
    out = out[0] if isinstance(out, (list, tuple)) else out   # token generation: (out, ...)
    hidden = x.astype(np.float32) + mlp.astype(np.float32) + attn.astype(np.float32)
    hidden = hidden / np.sqrt((hidden ** 2).mean(-1, keepdims=True) + 1e-6) * gamma
    want = hidden @ w.astype(np.float32)
    return np.abs(np.asarray(out).astype(np.float32).reshape(want.shape) - want).max() < 2e-2


def check_qkv_token_generation(nki, lnc):
    return check_qkv(nki, lnc, seq=1)


def check_output_projection(nki, lnc):
    from nkilib_src.nkilib.core.output_projection.output_projection_cte.output_projection_cte \
        import output_projection_cte
    a = (RNG.standard_normal((1, 2, 128, 512)) * 0.5).astype(np.float16)
    w = (RNG.standard_normal((256, 512)) * 0.05).astype(np.float16)
    out = nki.jit(_fn(output_projection_cte))[lnc](a, w).astype(np.float32)
    want = np.einsum("bnds,nde->bse", a.astype(np.float32), w.astype(np.float32).reshape(2, 128,
                                                                                         512))
    return np.abs(out - want).max() < 1e-2


def check_cross_entropy(nki, lnc):
    from nkilib_src.nkilib.experimental.loss.cross_entropy import (cross_entropy_backward,
                                                                    cross_entropy_forward)
    logits = RNG.standard_normal((64, 1024)).astype(np.float32)
    targets = RNG.integers(0, 1024, (64,)).astype(np.int32)
    reference = torch.from_numpy(logits.copy()).requires_grad_()
    loss = torch.nn.functional.cross_entropy(reference, torch.from_numpy(targets).long(),
                                             reduction="none")
    loss.mean().backward()
    got, lse = nki.jit(_fn(cross_entropy_forward))[lnc](logits, targets, chunk_size=1024,
                                                         dtype="float32")
    ok = np.abs(got.ravel() - loss.detach().numpy()).max() < 1e-5
    if lnc == 1:   # in place: the logits become their gradient
        nki.jit(_fn(cross_entropy_backward))(logits, targets, lse, chunk_size=1024,
                                              dtype="float32")
        ok = ok and np.abs(logits - reference.grad.numpy()).max() < 1e-6
    return ok


def check_attention_cte(nki, lnc):
    from nkilib_src.nkilib.core.attention.attention_cte import attention_cte
    q = (RNG.standard_normal((2, 512, 128)) * 0.3).astype(np.float16)
    k = (RNG.standard_normal((2, 128, 512)) * 0.3).astype(np.float16)
    v = RNG.standard_normal((2, 512, 128)).astype(np.float16)
    out = nki.jit(_fn(attention_cte))[lnc](q, k, v, scale=1.0, causal_mask=True)
    return np.abs(out.astype(np.float32) - sdpa_causal(q, k, v)).max() < 2e-2


def check_find_nonzero(nki, lnc):
    from nkilib_src.nkilib.core.subkernels.find_nonzero_indices import find_nonzero_indices
    x = (RNG.random((512, 16)) > 0.7).astype(np.float32)
    index, count = nki.jit(_fn(find_nonzero_indices))[lnc](x)
    return all(count[c] == np.flatnonzero(x[:, c]).size
               and (index[c][:count[c]] == np.flatnonzero(x[:, c])).all() for c in range(16))


def _close(got, want, atol, rtol=0.0):
    """nki-library's tolerance ('max' mode): |got - want| <= atol + rtol * max|want|."""
    got, want = (np.asarray(a.float() if isinstance(a, torch.Tensor) else a, np.float32)
                 for a in (got, want))
    return got.shape == want.shape and bool(
        (np.abs(got - want) <= atol + rtol * np.abs(want).max()).all())


def _shim_neuronxcc_typing():
    # router_topk.py imports neuronxcc.nki.typing (the old compiler package) only for its
    # nt.mutable_tensor annotation; neuronxcc is not installed with this project's nki alias.
    import importlib
    import types
    try:
        importlib.import_module("neuronxcc.nki.typing")
    except ImportError:
        names = ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.typing")
        mods = {name: types.ModuleType(name) for name in names}
        mods["neuronxcc"].nki = mods["neuronxcc.nki"]
        mods["neuronxcc.nki"].typing = mods["neuronxcc.nki.typing"]
        mods["neuronxcc.nki.typing"].mutable_tensor = object
        sys.modules.update(mods)


def check_rmsnorm_tkg(nki, lnc):
    from nkilib_src.nkilib.core.subkernels.rmsnorm_tkg import rmsnorm_tkg
    from nkilib_src.nkilib.core.subkernels.rmsnorm_torch import (rmsnorm_tkg_torch_ref,
                                                                  rmsnorm_tkg_torch_ref_lnc1)
    b, s, h, actual = (1, 4, 2048, 1920) if lnc == 1 else (4, 1, 2048, None)
    x = RNG.standard_normal((b, s, h)).astype(np.float16)
    gamma = RNG.standard_normal((1, h)).astype(np.float16)
    out = np.zeros((128, b * s, h // 128), np.float16)   # written in place and returned
    got = nki.jit(_fn(rmsnorm_tkg))[lnc](x, gamma, out, hidden_actual=actual)
    ref = rmsnorm_tkg_torch_ref if lnc == 2 else rmsnorm_tkg_torch_ref_lnc1
    want = ref(torch.from_numpy(x), torch.from_numpy(gamma), None, hidden_actual=actual)["out"]
    return _close(got, want, 1e-5, 2e-2) and _close(out, want, 1e-5, 2e-2)


def check_layernorm_tkg(nki, lnc):
    from nkilib_src.nkilib.core.subkernels.layernorm_tkg import layernorm_tkg
    from nkilib_src.nkilib.core.subkernels.layernorm_torch import (layernorm_tkg_torch_ref,
                                                                    layernorm_tkg_torch_ref_lnc1)
    b, h = 4, 1024
    x, gamma, beta = (RNG.standard_normal(shape).astype(np.float16)
                      for shape in ((b, 1, h), (1, h), (1, h)))
    out = np.zeros((128, b, h // 128), np.float16)
    nki.jit(_fn(layernorm_tkg))[lnc](x, gamma, out, beta=beta)
    ref = layernorm_tkg_torch_ref if lnc == 2 else layernorm_tkg_torch_ref_lnc1
    want = ref(torch.from_numpy(x), torch.from_numpy(gamma), None,
               beta=torch.from_numpy(beta))["out"]
    return _close(out, want, 1e-5, 2e-2)


def check_rope_hf(nki, lnc):
    from nkilib_src.nkilib.core.embeddings.rope_hf import rope_hf
    b, qh, kh, s, d = 1, 4, 2, 256, 128
    q = RNG.standard_normal((b, qh, s, d)).astype(np.float32)
    k = RNG.standard_normal((b, kh, s, d)).astype(np.float32)
    q_out, k_out = np.zeros_like(q), np.zeros_like(k)
    angle = RNG.standard_normal((b, s, d // 2)).astype(np.float32)
    angle = np.concatenate([angle, angle], -1)   # HF layout: the half-dims share an angle
    cos, sin = np.cos(angle), np.sin(angle)
    if lnc == 1:
        nki.jit(_fn(rope_hf))(q, k, q_out, k_out, cos=cos, sin=sin)
    else:   # the packed [S, 2D] cos|sin cache
        cache = np.concatenate([cos[0], sin[0]], -1)
        nki.jit(_fn(rope_hf))[lnc](q, k, q_out, k_out, rope_cache=cache)

    def rope(x):
        rotated = np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1)
        return x * cos[:, None] + rotated * sin[:, None]
    return _close(q_out, rope(q), 1e-5) and _close(k_out, rope(k), 1e-5)


def check_output_projection_tkg(nki, lnc):
    from nkilib_src.nkilib.core.output_projection.output_projection_tkg import \
        output_projection_tkg
    from nkilib_src.nkilib.core.utils.common_types import QuantizationType
    b, n, s, d, h = 4, 8, 4, 64, 1024
    attn = torch.from_numpy(RNG.standard_normal((d, b, n, s)).astype(np.float32)).bfloat16()
    w = torch.from_numpy(RNG.standard_normal((n * d, h)).astype(np.float32) * 0.1).bfloat16()
    bias = torch.from_numpy(RNG.standard_normal((1, h)).astype(np.float32)).bfloat16()
    out = nki.jit(_fn(output_projection_tkg))[lnc](attn, w, bias, QuantizationType.NONE)
    want = torch.einsum("dbns,nde->bse", attn.float(), w.float().reshape(n, d, h)) + bias.float()
    return _close(out, want.reshape(b * s, h), 1e-5, 2e-2)


def check_attention_bwd(nki, lnc):
    from nkilib_src.nkilib.core.attention.attention_bwd import attention_bwd
    from nkilib_src.nkilib.core.attention.attention_bwd_torch import compute_o_lse
    b, h, s, d = 1, lnc, 512, 128   # LNC=2 shards on batch x kv heads
    q, k, v, dy = (torch.from_numpy(RNG.standard_normal((b, h, d, s)).astype(np.float32))
                   for _ in range(4))
    o, lse, _ = compute_o_lse(q, k, v, True, True)   # the forward pass's saved outputs
    got = nki.jit(_fn(attention_bwd))[lnc](q.numpy(), k.numpy(), v.numpy(),
                                           o.float().numpy(), dy.numpy(), lse.float().numpy(),
                                           use_causal_mask=True, mixed_precision=True)
    leaves = [t.transpose(2, 3).clone().requires_grad_() for t in (q, k, v)]   # [b, h, s, d]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True)
    out.backward(dy.transpose(2, 3))
    return all(_close(g, t.grad.transpose(2, 3), 1e-5, 2e-2) for g, t in zip(got, leaves))


def check_dynamic_elementwise_add(nki, lnc):
    from nkilib_src.nkilib.experimental.dynamic_shapes.dynamic_elementwise_add import \
        dynamic_elementwise_add
    a, b = (torch.from_numpy(RNG.standard_normal((384, 1024)).astype(np.float32)).bfloat16()
            for _ in range(2))
    # Only the first num_m_tiles * 128 rows are computed; the rest of the output is left
    # unwritten (documented), so unwritten memory reads as NaN instead of raising.
    out = nki.jit(_fn(dynamic_elementwise_add), uninitialized="nan")[lnc](
        a, b, np.array([[2]], np.int32))
    return bool((out[:256] == (a[:256].float() + b[:256].float()).bfloat16()).all()
                and out[256:].float().isnan().all())


def check_indexed_flatten(nki, lnc):
    from nkilib_src.nkilib.core.subkernels.indexed_flatten import indexed_flatten
    experts, tokens, f_len = 3, 4096, 128
    x = np.arange(experts * tokens, dtype=np.int32).reshape(experts, tokens)
    offsets = np.array([40, -100, 5], np.int32)   # overlapping, negative (dropped), unsorted
    output_len = (experts * tokens + 1024 + 127) // 128 * 128
    got = nki.jit(_fn(indexed_flatten))[lnc](x, f_len, output_len, offsets, None, -1)
    want = np.full(output_len, -1, np.int32)
    for row in range(experts):   # later rows win where blocks overlap
        for block in range(tokens // f_len):
            at = (offsets[row] + block) * f_len
            if 0 <= at < output_len:
                want[at:at + f_len] = x[row, block * f_len:(block + 1) * f_len]
    return np.array_equal(np.asarray(got).reshape(-1), want)


def check_router_topk(nki, lnc):
    _shim_neuronxcc_typing()
    import nki.language as nl
    from nkilib_src.nkilib.core.router_topk.router_topk import router_topk
    from nkilib_src.nkilib.core.utils.common_types import RouterActFnType
    t, h, e, top = 8, 512, 128, 4
    x, w, bias = (torch.empty(shape).uniform_(-0.1, 0.1).bfloat16()
                  for shape in ((h, t), (h, e), (1, e)))

    def kernel(x, w, bias):
        logits = nl.ndarray((t, e), nl.bfloat16, buffer=nl.shared_hbm)
        affinities = nl.ndarray((t, e), nl.bfloat16, buffer=nl.shared_hbm)
        index = nl.ndarray((t, top), nl.uint32, buffer=nl.shared_hbm)
        router_topk(x=x, w=w, w_bias=bias, router_logits=logits, expert_affinities=affinities,
                    expert_index=index, act_fn=RouterActFnType.SOFTMAX, k=top, x_hbm_layout=0,
                    x_sb_layout=0, router_pre_norm=True, norm_topk_prob=True,
                    use_indirect_dma_scatter=True)
        return logits, affinities, index

    logits, affinities, index = nki.jit(kernel)[lnc](x, w, bias)
    want_logits = x.float().T @ w.float() + bias.float()
    probs = torch.softmax(want_logits, -1)
    top_p, top_i = probs.topk(top, -1)
    want = torch.zeros_like(probs).scatter(-1, top_i, top_p / top_p.sum(-1, keepdim=True))
    return (_close(logits, want_logits, 2e-3) and _close(affinities, want, 2e-3)
            and torch.equal(index.long().sort(-1).values, top_i.sort(-1).values))


def check_topk_reduce(nki, lnc):
    from nkilib_src.nkilib.experimental.collectives.topk_reduce import topk_reduce
    ranks, t, top, h = 8, 4, 4, 256
    # all_to_all_v output: T*K rows [values | token id as int32 bits] scattered among R*T
    # rows; the other rows are padding (-1).
    rows = torch.full((ranks * t, h + 2), -1.0, dtype=torch.bfloat16)
    values = torch.from_numpy(RNG.standard_normal((t * top, h)).astype(np.float32)).bfloat16()
    ids = torch.arange(t, dtype=torch.int32).repeat_interleave(top)[:, None].view(torch.bfloat16)
    rows[torch.from_numpy(RNG.permutation(ranks * t)[:t * top])] = torch.cat([values, ids], 1)
    got = nki.jit(_fn(topk_reduce))[lnc](rows, t, top)
    want = values.float().reshape(t, top, h).sum(1)
    return _close(got, want, 0, 2e-2)


def check_depthwise_conv1d(nki, lnc):
    from nkilib_src.nkilib.experimental.conv.depthwise_conv1d import \
        depthwise_conv1d_implicit_gemm
    n, c, width, taps = 1, 16, 512, 7
    x = torch.from_numpy(RNG.standard_normal((n, c, 1, width)).astype(np.float32)).bfloat16()
    w = torch.from_numpy(RNG.standard_normal((c, 1, 1, taps)).astype(np.float32)).bfloat16()
    out = nki.jit(_fn(depthwise_conv1d_implicit_gemm))[lnc](
        x, w, padding=((0, 0), (3, 3)), stride=(1, 2), feature_group_count=c)
    want = torch.nn.functional.conv2d(x.float(), w.float(), stride=(1, 2), padding=(0, 3),
                                      groups=c)
    return _close(out, want, 0, 1e-2)


def check_rotational_topk(nki, lnc):
    import nki.language as nl
    from nkilib_src.nkilib.core.topk.rotational_topk import (cleanup_rotational_constants,
                                                             create_rotational_topk_config,
                                                             create_topk_config,
                                                             prepare_rotational_constants,
                                                             rotational_topk)
    batch, vocab, k = 3, 3168, 64
    x = RNG.standard_normal((batch, vocab)).astype(np.float32)
    config = create_topk_config(inp_shape=(batch, 1, vocab), inp_dtype=nl.float32, k=k,
                                sorted=True, num_programs=lnc)
    config = prepare_rotational_constants(create_rotational_topk_config(
        inp_shape=(config.BxS, config.vocab_size), topk_config=config))
    try:
        values, index = nki.jit(_fn(rotational_topk))[lnc](x, config)
    finally:
        cleanup_rotational_constants()
    want = -np.sort(-x, -1)[:, :k]
    index = np.asarray(index).astype(np.int64).reshape(batch, k)
    return (np.array_equal(np.asarray(values).reshape(batch, k), want)
            and np.array_equal(np.take_along_axis(x, index, -1), want))


def check_rmsnorm_quant(nki, lnc):
    import nki.isa as nisa
    import nki.language as nl
    from nkilib_src.nkilib.core.rmsnorm.rmsnorm_quant import (RmsNormQuantKernelArgs,
                                                              rmsnorm_quant_kernel)
    from nkilib_src.nkilib.core.utils.common_types import NormType, QuantizationType
    b, s, h = 1, 16, 1024
    x = RNG.standard_normal((b, s, h)).astype(np.float16)
    gamma = RNG.standard_normal((1, h)).astype(np.float16)
    args = RmsNormQuantKernelArgs(quantization_type=QuantizationType.ROW, lower_bound=0.0,
                                  norm_type=NormType.RMS_NORM, eps=1e-6)

    def kernel(x, gamma):
        out = _fn(rmsnorm_quant_kernel)(x, gamma, args)   # [B, S, H + 4] float8_e4m3
        # Each row's last 4 fp8 "elements" are the bytes of its fp32 dequantization scale.
        scale = nl.ndarray((b, s, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=scale, src=out[:, :, h:].view(nl.float32))
        return out, scale

    out, scale = nki.jit(kernel)[lnc](x, gamma)
    x32 = x.astype(np.float32)
    normed = x32 / np.sqrt((x32 ** 2).mean(-1, keepdims=True)) * gamma.astype(np.float32)
    want_scale = np.abs(normed).max(-1, keepdims=True) / 240.0   # float8_e4m3's largest value
    want = normed / want_scale
    # the kernel rounds to float8_e4m3 (3 mantissa bits): allow one step of it
    step = np.maximum(2.0 ** (np.floor(np.log2(np.abs(want) + 1e-30)) - 3), 2.0 ** -9)
    quantized = np.asarray(out, np.float32)[..., :h]
    return bool((np.abs(quantized - want) <= step * 1.01).all()) and _close(scale, want_scale,
                                                                            0, 1e-2)


def _mlp_kernel():
    """nki-library's mlp(). Its module has a duplicated docstring tail after the docstring's
    closing quotes (an IndentationError at import, upstream as of 2026-04); if it still does,
    load it with the duplicate dropped."""
    import importlib
    import types
    try:
        return importlib.import_module("nkilib_src.nkilib.core.mlp.mlp").mlp
    except IndentationError as error:
        path = error.filename
    lines = open(path).read().split("\n")
    closes = [i for i, line in enumerate(lines) if line.strip() == '"""']
    first, second = closes[1], closes[2]   # the docstring's close, and its duplicate's
    source = "\n".join(lines[:first + 1] + [""] * (second - first) + lines[second + 1:])
    module = types.ModuleType("nkilib_src.nkilib.core.mlp.mlp")
    module.__file__, module.__package__ = path, "nkilib_src.nkilib.core.mlp"
    sys.modules[module.__name__] = module
    exec(compile(source, path, "exec"), module.__dict__)
    return module.mlp


def check_mlp(nki, lnc, seq=256, hidden=1024, inter=448):
    import nki.language as nl
    from nkilib_src.nkilib.core.utils.common_types import ActFnType, NormType
    mlp = _mlp_kernel()

    def bf16(*shape, scale=1.0):
        return torch.from_numpy(RNG.standard_normal(shape).astype(np.float32) * scale).bfloat16()
    x, residual = bf16(2, seq, hidden), bf16(2, seq, hidden)
    gamma = (1 + 0.1 * bf16(1, hidden).float()).bfloat16()
    gate_w, up_w = bf16(hidden, inter, scale=hidden ** -0.5), bf16(hidden, inter,
                                                                   scale=hidden ** -0.5)
    down_w = bf16(inter, hidden, scale=inter ** -0.5)
    out = nki.jit(_fn(mlp))[lnc](x, gate_w, up_w, down_w, normalization_weights_tensor=gamma,
                                 fused_add_tensor=residual, activation_fn=ActFnType.SiLU,
                                 normalization_type=NormType.RMS_NORM, output_dtype=nl.bfloat16)
    out = out[0] if isinstance(out, (list, tuple)) else out
    hid = x.float() + residual.float()
    hid = hid / torch.sqrt((hid * hid).mean(-1, keepdim=True) + 1e-6) * gamma.float()
    want = (torch.nn.functional.silu(hid @ gate_w.float()) * (hid @ up_w.float())) @ down_w.float()
    return _close(out.float().reshape(want.shape), want, 1e-5, 2e-2)


def check_mlp_token_generation(nki, lnc):
    return check_mlp(nki, lnc, seq=1, hidden=2048, inter=512)


CHECKS = [(check_cumsum, (1, 2)), (check_cascaded_max, (1,)), (check_rope, (1, 2)),
          (check_conv1d, (1,)), (check_qkv, (1,)),
          (check_qkv_token_generation, (1,)),
          (check_output_projection, (1,)), (check_cross_entropy, (1, 2)),
          (check_attention_cte, (1, 2)), (check_find_nonzero, (1, 2)),
          (check_rmsnorm_tkg, (1, 2)), (check_layernorm_tkg, (1, 2)), (check_rope_hf, (1, 2)),
          (check_output_projection_tkg, (1, 2)), (check_attention_bwd, (1, 2)),
          (check_dynamic_elementwise_add, (1,)), (check_indexed_flatten, (2,)),
          (check_router_topk, (1, 2)), (check_topk_reduce, (1, 2)),
          (check_depthwise_conv1d, (1, 2)), (check_rotational_topk, (1, 2)),
          (check_rmsnorm_quant, (1, 2)), (check_mlp, (1, 2)),
          (check_mlp_token_generation, (1, 2))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", help="a local checkout of aws-neuron/nki-library")
    parser.add_argument("--target", default="trn2", help="NEURON_PLATFORM_TARGET_OVERRIDE")
    args = parser.parse_args()
    if not os.path.isdir(os.path.join(args.library, "src", "nkilib_src")):
        print(f"{args.library} is not a checkout of aws-neuron/nki-library (no src/nkilib_src); "
              f"git clone https://github.com/aws-neuron/nki-library and pass its path")
        return 2
    sys.path.insert(0, os.path.join(args.library, "src"))
    os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = args.target
    import nki
    import torch_neuron.nki

    if nki.language is not torch_neuron.nki.language:
        print(f"`import nki` is {nki.__file__}, not torch_neuron's alias: "
              f"pip install --no-build-isolation -e compat/nki")
        return 1
    failed = 0
    for check, degrees in CHECKS:
        for lnc in degrees:
            label = f"{check.__name__.removeprefix('check_')} (LNC={lnc})"
            try:
                ok = bool(check(nki, lnc))
                print(f"{'ok  ' if ok else 'FAIL'} {label}")
            except Exception:   # noqa: BLE001 (reported, then counted)
                ok = False
                print(f"FAIL {label}: {traceback.format_exc(limit=2).splitlines()[-1]}")
            failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
