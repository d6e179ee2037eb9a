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


CHECKS = [(check_cumsum, (1, 2)), (check_cascaded_max, (1,)), (check_rope, (1, 2)),
          (check_conv1d, (1,)), (check_qkv, (1,)),
          (check_qkv_token_generation, (1,)),
          (check_output_projection, (1,)), (check_cross_entropy, (1, 2)),
          (check_attention_cte, (1, 2)), (check_find_nonzero, (1, 2))]


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
