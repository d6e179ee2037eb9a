"""The random-number instructions of `nki.isa`: `rng`, `set_rng_seed`, `rand_set_state`,
`rand_get_state` and `rand2` (signatures and rules from the release's stub).

Note [Engine random number generators]
Each engine keeps PRNG state "cached inside the engine as a persistent state during the rest
of NEFF execution" (set_rng_seed docstring): here, per program (each core's engines) of the
kernel run. The generator is XORWOW, which rand2's docstring names ("Uses XORWOW PRNG
algorithm") and whose state is six 32-bit words a lane, as rand_set_state says of GpSimd ("6
elements"): Marsaglia's xorshift of five words plus an additive Weyl counter (G. Marsaglia,
"Xorshift RNGs", Journal of Statistical Software 8(14), 2003, section 3.1: xorwow; the
counter's step 362437). Each partition is a lane. The Vector Engine's 24 state words a lane
are taken as four such generators, drawn in turn along the lane's elements (an assumption: no
page says how the words are used). set_rng_seed's one 32-bit seed fills every lane's state
through SplitMix64 (G. Steele, D. Lea, C. Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014) of the seed and the lane, and a state no call seeded starts from
torch's default generator, as nisa.dropout does, so torch.manual_seed makes a kernel
reproducible (both assumptions: the hardware's seeding is not documented, so the simulator's
numbers are not the hardware's, only their distribution and reproducibility are). A 32-bit
draw becomes a float in [0, 1) as draw / 2^32.
"""

from __future__ import annotations

import numpy as np

from torch_neuron.nki.errors import DtypeError, NkiValidationError, ShapeError
from torch_neuron.nki.instruction import _Instruction
from torch_neuron.nki.instruction import engine as _engine

_WORDS = 6                              # XORWOW: x, y, z, w, v and the counter d
_VECTOR_GENERATORS = 4                  # 24 words a Vector Engine lane
_WEYL = 362437                          # Marsaglia 2003, xorwow
_MASK = 0xFFFFFFFF
_RNG_DTYPES = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
_RAND2_DTYPES = ("float8_e4m3", "float8_e5m2", "float16", "bfloat16", "float32", "tfloat32",
                 "int8", "int16", "int32", "uint8", "uint16", "uint32")
_LANES = 128


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """One SplitMix64 output per uint64 input (Steele et al. 2014)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def seeded_states(seed: int, generators: int) -> np.ndarray:
    """[128 lanes, generators * 6] uint32 XORWOW states from one seed (Note [Engine random
    number generators]); the xorshift words are never all zero."""
    lanes = np.arange(_LANES * generators * _WORDS, dtype=np.uint64)
    words = _splitmix64(np.uint64(seed & _MASK) * np.uint64(1 << 32) + lanes)
    states = (words & np.uint64(_MASK)).astype(np.uint32).reshape(_LANES, generators, _WORDS)
    states[:, :, 0] |= (states[:, :, :5] == 0).all(axis=2).astype(np.uint32)
    return states.reshape(_LANES, generators * _WORDS)


def draw(states: np.ndarray, lanes: int, count: int, generators: int) -> np.ndarray:
    """[lanes, count] uint32 draws, advancing the first `lanes` lanes' states in place."""
    s = states[:lanes].reshape(lanes, generators, _WORDS).astype(np.uint64)
    out = np.empty((lanes, count), dtype=np.uint32)
    for i in range(count):
        g = i % generators
        x, d = s[:, g, 0], s[:, g, 5]
        t = x ^ (x >> np.uint64(2))
        s[:, g, 0:4] = s[:, g, 1:5]
        v = s[:, g, 4]
        v = (v ^ ((v << np.uint64(4)) & np.uint64(_MASK))) ^ (t ^ ((t << np.uint64(1)) &
                                                                  np.uint64(_MASK)))
        s[:, g, 4] = v & np.uint64(_MASK)
        s[:, g, 5] = (d + np.uint64(_WEYL)) & np.uint64(_MASK)
        out[:, i] = ((s[:, g, 4] + s[:, g, 5]) & np.uint64(_MASK)).astype(np.uint32)
    states[:lanes] = s.astype(np.uint32).reshape(lanes, generators * _WORDS)
    return out


def _engine_states(ins: _Instruction, eng: str) -> np.ndarray:
    """The running program's state of `eng`'s generator (Note [Engine random number
    generators])."""
    table = ins.run.__dict__.setdefault("_prng", {})
    key = (ins.run.program_id, eng)
    if key not in table:
        import torch

        seed = int(torch.randint(0, 2**31, (1,)).item())
        table[key] = seeded_states(seed, _generators(eng))
    return table[key]


def _generators(eng: str) -> int:
    return _VECTOR_GENERATORS if eng == "VectorE" else 1


def _random_engine(ins: _Instruction, engine, version_for_gpsimd: int, default="VectorE"):
    eng = ins.engine(engine, ("VectorE", "GpSimdE"), default)
    if eng == "GpSimdE" and ins.target.nc_version < version_for_gpsimd:
        raise ins.error(NkiValidationError, f"nisa.{ins.name} runs on the GpSimd Engine from "
                                            f"NeuronCore-v{version_for_gpsimd}; the target is "
                                            f"{ins.target.core}")
    if eng == "VectorE" and default == "GpSimdE" and ins.target.nc_version < 4:
        raise ins.error(NkiValidationError, f"nisa.{ins.name} runs on the Vector Engine from "
                                            f"NeuronCore-v4; the target is {ins.target.core}")
    ins.no_psum_on_gpsimd(eng)
    return eng


def rng(dst, engine=_engine.vector, name=None):
    """32 random bits per element of dst, truncated to its dtype's least significant bits."""
    ins = _Instruction("rng")
    ins.tile(dst, "dst", read=False)
    eng = _random_engine(ins, engine, 3)
    if dst.dtype not in _RNG_DTYPES:
        raise ins.error(DtypeError, f"dst is {dst.dtype}; rng writes {', '.join(_RNG_DTYPES)}")
    P, F = ins.pf(dst)
    states = _engine_states(ins, eng)
    bits = draw(states, P, F, _generators(eng)) if ins.compute else None
    width = dst.dt.itemsize * 8
    ins.write(dst, lambda: (bits & np.uint32((1 << width) - 1 if width < 32 else _MASK))
              .astype(f"uint{width}").view(dst.dt.storage).reshape(dst.shape))
    ins.record(eng)


def rand2(dst, min, max, name=None):   # noqa: A002 (the stub's parameter names)
    """Uniform FP32 values in [min, max] from the Vector Engine's XORWOW, cast to dst."""
    ins = _Instruction("rand2")
    ins.needs_core(4)
    ins.tile(dst, "dst", read=False)
    if dst.dtype not in _RAND2_DTYPES:
        raise ins.error(DtypeError, f"dst is {dst.dtype}; rand2 writes "
                                    f"{', '.join(_RAND2_DTYPES)}")
    P, F = ins.pf(dst)
    lo = ins.scalar_or_vector(min, "min", P, float32=True)
    hi = ins.scalar_or_vector(max, "max", P, float32=True)
    if ins.compute and np.any(np.broadcast_to(lo, (P, 1)) >= np.broadcast_to(hi, (P, 1))):
        raise ins.error(NkiValidationError, "rand2 needs min < max")
    states = _engine_states(ins, "VectorE")
    bits = draw(states, P, F, _VECTOR_GENERATORS) if ins.compute else None
    ins.write(dst, lambda: (lo + (bits.astype(np.float64) / 2.0**32) * (hi - lo))
              .astype(np.float32))
    ins.record("VectorE")


def set_rng_seed(src_seeds, name=None):
    """Seeds the Vector Engine's generator of every lane from one 32-bit value."""
    ins = _Instruction("set_rng_seed")
    ins.tile(src_seeds, "src_seeds", spaces=("sbuf", "psum"))
    if src_seeds.size != 1 or src_seeds.dt.itemsize != 4:
        raise ins.error(ShapeError, f"src_seeds {src_seeds.shape} {src_seeds.dtype} must be a "
                                    f"[1, 1] tensor of a 32-bit value")
    value = ins.values(src_seeds, "src_seeds")
    _seed(ins, "VectorE", lambda: int(np.asarray(value).reshape(-1)[0]))
    ins.record("VectorE")


def _seed(ins: _Instruction, eng: str, seed) -> None:
    table = ins.run.__dict__.setdefault("_prng", {})
    table[(ins.run.program_id, eng)] = seeded_states(seed() if ins.compute else 0,
                                                     _generators(eng))


def rand_set_state(src_seeds, engine=_engine.gpsimd, name=None):
    """Each partition of src_seeds is its lane's XORWOW state."""
    ins = _Instruction("rand_set_state")
    ins.needs_core(3)
    ins.tile(src_seeds, "src_seeds", spaces=("sbuf",))
    eng = _random_engine(ins, engine, 3, default="GpSimdE")
    P, F = _check_state(ins, src_seeds, "src_seeds", eng)
    value = ins.values(src_seeds, "src_seeds")
    states = _engine_states(ins, eng)
    if ins.compute:
        states[:P] = np.asarray(value).reshape(P, F).astype(np.uint32)
    ins.record(eng)


def rand_get_state(dst, engine=_engine.gpsimd, name=None):
    """Writes each lane's XORWOW state into its partition of dst."""
    ins = _Instruction("rand_get_state")
    ins.needs_core(3)
    ins.tile(dst, "dst", read=False)
    eng = _random_engine(ins, engine, 3, default="GpSimdE")
    P, F = _check_state(ins, dst, "dst", eng)
    states = _engine_states(ins, eng)
    ins.write(dst, lambda: states[:P].copy().reshape(dst.shape))
    ins.record(eng)


def _check_state(ins: _Instruction, t, role: str, eng: str) -> tuple[int, int]:
    words = _WORDS * _generators(eng)
    if t.dtype != "uint32" or t.free_size != words:
        raise ins.error(ShapeError, f"{role} {t.shape} {t.dtype}: an XORWOW state on "
                                    f"{'the Vector' if eng == 'VectorE' else 'GpSimd'} Engine is "
                                    f"{words} uint32 elements per partition")
    return t.shape[0], words
