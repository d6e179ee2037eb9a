"""The simulator's own speed measures (issue 27, item 6): one BLAS thread while a kernel runs
(torch_neuron/nki/blas.py), restored after."""

import numpy as np
import pytest

import torch_neuron.nki as nki
import torch_neuron.nki.isa as nisa
import torch_neuron.nki.language as nl
from torch_neuron.nki import blas


def test_blas_runs_one_thread_inside_a_kernel_and_is_restored_after():
    if blas._openblas() is None:
        pytest.skip("NumPy's BLAS is not an OpenBLAS this process can find")
    get, set_ = blas._openblas()
    original = get()
    set_(2)
    seen = []

    @nki.jit
    def kernel(x):
        seen.append(get())
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(256, dtype=np.float32).reshape(128, 2)
    try:
        np.testing.assert_array_equal(kernel(x), x)
        assert seen == [1] and get() == 2
    finally:
        set_(original)
