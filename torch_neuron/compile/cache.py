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

from torch_neuron._C import _setting


@functools.cache
def build_tag() -> str:
    """A hash of torch_neuron's compiled library and of this package's code."""
    digest = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(__file__))  # the torch_neuron package
    files = [os.path.join(root, "lib", "libtorch_neuron.so")]
    here = os.path.dirname(__file__)
    files += sorted(os.path.join(here, f) for f in os.listdir(here) if f.endswith(".py"))
    for path in files:
        if os.path.exists(path):
            with open(path, "rb") as f:
                digest.update(f.read())
    return f"torch_neuron-{digest.hexdigest()[:16]}"


def configure() -> None:
    """At import, before anything compiles: Inductor settles its cache folder at its first use,
    and a program compiled with the default backend may find its graph in the cache before
    Inductor ever asks torch.neuron for its code generators (torch_neuron.compile.register)."""
    _apply_neff_cache_variables()
    _tag_cache_key()


def _apply_neff_cache_variables() -> None:
    """Sets Inductor's own variables from TorchNeuron's."""
    folder = _setting("TORCH_NEURONX_NEFF_CACHE_DIR")
    if folder and not _setting("TORCHINDUCTOR_CACHE_DIR"):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder  # Inductor reads it from there
    for name in ("TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_DISABLE_NEFF_CACHE"):
        if _setting(name):
            import torch.compiler.config

            torch.compiler.config.force_disable_caches = True


def _tag_cache_key() -> None:
    import torch

    tag = build_tag()
    current = torch.compiler.config.cache_key_tag
    if tag not in current:
        torch.compiler.config.cache_key_tag = f"{current}+{tag}" if current else tag
