"""The random-number instructions (isa_random.py, Note [Engine random number generators]):
XORWOW against Marsaglia's published recurrence computed here with Python integers, state
set and read back, seeds that reproduce, and nl.rand's distribution."""

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl


def xorwow(state, count):
    """Marsaglia, "Xorshift RNGs" (2003), xorwow: five xorshift words and a Weyl counter."""
    x, y, z, w, v, d = (int(s) for s in state)
    out = []
    for _ in range(count):
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = (v ^ (v << 4) ^ t ^ (t << 1)) & 0xFFFFFFFF
        d = (d + 362437) & 0xFFFFFFFF
        out.append((v + d) & 0xFFFFFFFF)
    return out, [x, y, z, w, v, d]


def test_gpsimd_rng_is_xorwow_from_the_state_it_is_given():
    rng = np.random.default_rng(1)
    states = rng.integers(1, 2**32, size=(32, 6), dtype=np.uint32)

    @nki.jit(platform_target="trn2")
    def kernel(s):
        seeds = nl.ndarray((32, 6), nl.uint32)
        nisa.dma_copy(dst=seeds, src=s)
        nisa.rand_set_state(src_seeds=seeds)
        bits = nl.ndarray((32, 10), nl.uint32)
        nisa.rng(dst=bits, engine=nisa.engine.gpsimd)
        small = nl.ndarray((32, 3), nl.uint8)           # the next 3 draws, low 8 bits
        nisa.rng(dst=small, engine=nisa.engine.gpsimd)
        after = nl.ndarray((32, 6), nl.uint32)
        nisa.rand_get_state(dst=after)
        outs = []
        for t in (bits, small, after):
            o = nl.ndarray(t.shape, t.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=o, src=t)
            outs.append(o)
        return outs

    bits, small, after = kernel(states)
    for p in range(32):
        want, state = xorwow(states[p], 13)
        assert bits[p].tolist() == want[:10]
        assert small[p].tolist() == [w & 0xFF for w in want[10:]]
        assert after[p].tolist() == state


def seeded_draws(seed, target="trn2", rand_shape=(128, 64)):
    @nki.jit(platform_target=target)
    def kernel(s):
        seed_tile = nl.ndarray((1, 1), nl.int32)
        nisa.dma_copy(dst=seed_tile, src=s)
        nl.random_seed(seed_tile)
        u = nl.rand(rand_shape, nl.float32)
        out = nl.ndarray(rand_shape, nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out
    return kernel(np.array([[seed]], np.int32))


def test_a_seed_reproduces_nl_rand_and_its_values_are_uniform_in_0_1():
    a, b, c = seeded_draws(42), seeded_draws(42), seeded_draws(43)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 0.0 and a.max() < 1.0
    # 8,192 draws: the mean of U(0, 1) within 5 standard errors (sd 1/sqrt(12)), and every
    # tenth of the range holds its share within 5 binomial standard deviations.
    n = a.size
    assert abs(a.mean() - 0.5) < 5 / np.sqrt(12 * n)
    counts = np.histogram(a, bins=10, range=(0, 1))[0]
    assert (np.abs(counts - n / 10) < 5 * np.sqrt(n * 0.1 * 0.9)).all()


def test_rand2_draws_within_each_partitions_range_on_neuroncore_v4():
    lo = np.linspace(-5, 5, 64, dtype=np.float32).reshape(64, 1)

    @nki.jit(platform_target="trn3")
    def kernel(lo_hbm):
        lo_t = nl.ndarray((64, 1), nl.float32)
        nisa.dma_copy(dst=lo_t, src=lo_hbm)
        hi_t = nl.ndarray((64, 1), nl.float32)
        nisa.tensor_scalar(dst=hi_t, data=lo_t, op0=nl.add, operand0=0.5)
        u = nl.ndarray((64, 256), nl.float32)
        nisa.rand2(dst=u, min=lo_t, max=hi_t)
        out = nl.ndarray((64, 256), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    u = kernel(lo)
    assert ((u >= lo) & (u <= lo + 0.5)).all()
    assert np.abs((u - lo).mean() - 0.25) < 0.01


def test_random_instruction_rules():
    def run(body, target="trn2"):
        return nki.simulate(nki.jit(body, platform_target=target))()

    with pytest.raises(nki.DtypeError, match="rng writes"):
        run(lambda: nisa.rng(dst=nl.ndarray((4, 4), nl.float32)))
    with pytest.raises(nki.ShapeError, match="6 uint32"):
        run(lambda: nisa.rand_get_state(dst=nl.ndarray((4, 5), nl.uint32)))
    with pytest.raises(nki.UnsupportedError, match="NeuronCore-v4"):
        run(lambda: nisa.rand2(dst=nl.ndarray((4, 4), nl.float32), min=0.0, max=1.0))
    with pytest.raises(nki.NkiValidationError, match="GpSimd Engine from NeuronCore-v3"):
        run(lambda: nisa.rng(dst=nl.ndarray((4, 4), nl.uint32), engine=nisa.engine.gpsimd),
            target="trn1")
    # The Vector Engine's state is 24 words a lane on NeuronCore-v4.
    run(lambda: nisa.rand_get_state(dst=nl.ndarray((4, 24), nl.uint32),
                                    engine=nisa.engine.vector), target="trn3")
