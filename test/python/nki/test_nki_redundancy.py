"""The compiler's dropping of repeated instructions (Note [Redundant instructions] in
torch_neuron/nki/redundancy.py): a repeat of an earlier instruction on the same values is not
scheduled, its readers wait for the earlier one, and anything that changes the values (or an
instruction whose record does not say everything it computes) keeps it. Values stay exact."""

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl

VECTOR_GHZ = 0.96  # Trainium2 (test_nki_timing.py's hand-computation facts)


def _load(src, n=512):
    t = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=src)
    return t


def _store(t):
    out = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _tensor_tensor(data1, data2, op):
    """data1 op data2 into a new SBUF tile."""
    dst = nl.ndarray(data1.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=dst, data1=data1, data2=data2, op=op)
    return dst


def _sum_of_two_products(x, y, reload_between):
    # Each instruction on a line of its own: the profile's by_line() tells them apart.
    a, b = _load(x), _load(y)
    first = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=first, data1=a, data2=b, op=nl.multiply)     # 2
    if reload_between:
        nisa.dma_copy(dst=a, src=y)                                     # a's value changes
    again = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=again, data1=a, data2=b, op=nl.multiply)     # 3: a repeat, unless
    total = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)    # a was reloaded
    nisa.tensor_tensor(dst=total, data1=first, data2=again, op=nl.add)  # 4
    return _store(total)


@nki.jit(platform_target="trn2")
def product_twice(x, y):
    return _sum_of_two_products(x, y, reload_between=False)


@nki.jit(platform_target="trn2")
def product_after_reload(x, y):
    return _sum_of_two_products(x, y, reload_between=True)


@nki.jit(platform_target="trn2")
def accumulate_twice(x, y):
    acc, b = _load(x), _load(y)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=b, op=nl.add)
    nisa.tensor_tensor(dst=acc, data1=acc, data2=b, op=nl.add)          # acc changed: kept
    return _store(acc)


@nki.jit(platform_target="trn2")
def scaled_twice(x, y):
    a = _load(x)
    first = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=first, data=a, op0=nl.multiply, operand0=2.0)
    again = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=again, data=a, op0=nl.multiply, operand0=3.0)  # not a repeat
    return _store(_tensor_tensor(first, again, nl.add))


@nki.jit(platform_target="trn2")
def products_of_halves(x, y):
    a, b = _load(x), _load(y)
    left = _tensor_tensor(a[:, 0:256], b[:, 0:256], nl.multiply)
    right = _tensor_tensor(a[:, 256:512], b[:, 256:512], nl.multiply)
    return _store(_tensor_tensor(left, right, nl.add))


def _inputs():
    g = np.random.default_rng(0)
    return (g.standard_normal((128, 512), dtype=np.float32),
            g.standard_normal((128, 512), dtype=np.float32))


def test_a_repeat_is_not_scheduled_and_its_reader_waits_for_the_first():
    x, y = _inputs()
    p = nki.profile(product_twice, x, y)
    np.testing.assert_allclose(p.run.result, 2 * x * y, rtol=1e-6)
    first, again, total = (p.instruction(i) for i in (2, 3, 4))
    assert again.end_us == again.start_us == first.end_us
    assert p.instructions["VectorE"] == 2  # the first product and the sum
    assert p.dropped == 1 and "(1 repeated instruction dropped)" in p.summary()
    assert total.start_us == pytest.approx(first.end_us)
    # The repeat's line costs nothing in the line-by-line profile.
    assert p.by_line()[(p.records[3].source, "VectorE")] == 0


@pytest.mark.parametrize("kernel", [product_after_reload, accumulate_twice, scaled_twice,
                                    products_of_halves])
def test_instructions_on_other_values_are_all_scheduled(kernel):
    x, y = _inputs()
    p = nki.profile(kernel, x, y)
    vector = sum(r.engine == "VectorE" for r in p.records)
    assert p.instructions["VectorE"] == vector and p.dropped == 0
    assert all(p.instruction(i).end_us > p.instruction(i).start_us
               for i in range(len(p.records)))


def test_values_are_exact_whatever_is_dropped():
    x, y = _inputs()
    expected = {product_after_reload: x * y + y * y, accumulate_twice: x + 2 * y,
                scaled_twice: 5 * x, products_of_halves: x[:, :256] * y[:, :256]
                + x[:, 256:] * y[:, 256:]}
    for kernel, want in expected.items():
        np.testing.assert_allclose(kernel(x, y), want, rtol=1e-5, atol=1e-6)
