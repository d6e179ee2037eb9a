"""Inductor's caches, which play the part of TorchNeuron's NEFF cache.

They key on torch_neuron's build: a changed backend (its code generator, its charge lines, its
kernels) never reuses code compiled by another build. The key holds no simulated times, so the
instance (TORCH_NEURON_INSTANCE) can change without a recompile. TorchNeuron's NEFF-cache
variables map onto them: TORCH_NEURONX_NEFF_CACHE_DIR is where they live (unless
TORCHINDUCTOR_CACHE_DIR says otherwise), TORCH_NEURONX_NEFF_DISABLE_CACHE=1 (or
TORCH_NEURONX_DISABLE_NEFF_CACHE=1) turns them off."""

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


def apply_neff_cache_variables() -> None:
    """Sets Inductor's own variables from TorchNeuron's, at import (before anything compiles:
    Inductor settles its cache folder at its first use)."""
    folder = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if folder and "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    for name in ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE"):
        if os.environ.get(name, "").strip().lower() in ("1", "true", "yes"):
            import torch.compiler.config

            torch.compiler.config.force_disable_caches = True


def tag_cache_key() -> None:
    import torch

    tag = build_tag()
    current = torch.compiler.config.cache_key_tag
    if tag not in current:
        torch.compiler.config.cache_key_tag = f"{current}+{tag}" if current else tag
