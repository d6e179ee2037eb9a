"""Inductor's caches key on torch_neuron's build: a changed backend (its code generator, its
charge lines, its kernels) never reuses code compiled by another build. The key holds no
simulated times, so the instance (TORCH_NEURON_INSTANCE) can change without a recompile."""

import functools
import hashlib
import os


@functools.cache
def build_tag() -> str:
    """torch_neuron's version and a hash of its compiled library and this package's code."""
    import torch_neuron

    digest = hashlib.sha256()
    root = os.path.dirname(torch_neuron.__file__)
    files = [os.path.join(root, "lib", "libtorch_neuron.so")]
    here = os.path.dirname(__file__)
    files += sorted(os.path.join(here, f) for f in os.listdir(here) if f.endswith(".py"))
    for path in files:
        if os.path.exists(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    return f"torch_neuron-{getattr(torch_neuron, '__version__', '0')}-{digest.hexdigest()[:16]}"


def tag_cache_key() -> None:
    import torch

    tag = build_tag()
    current = torch.compiler.config.cache_key_tag
    if tag not in current:
        torch.compiler.config.cache_key_tag = f"{current}+{tag}" if current else tag
