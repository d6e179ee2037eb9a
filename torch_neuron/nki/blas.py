"""One BLAS thread while a kernel runs.

The simulator's matrix products are tiles (at most 128 x 128 by 128 x 512): far too small for
the BLAS's threads to pay off, and on a shared machine NumPy's OpenBLAS threads spin-wait for
a busy core, which made a functional kernel run 10-15x slower under load (issue 27, item 6:
0.9 s single-threaded, 12.9 s with two threads at load 7). Around a kernel run, NumPy's
OpenBLAS is set to one thread and restored after. The library is found among the process's
mapped files (as threadpoolctl does) under the names NumPy's wheels export; anything else
(another BLAS, another OS) leaves the threads as they are.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools

_NAMES = ("scipy_openblas_{}_num_threads64_", "scipy_openblas_{}_num_threads",
          "openblas_{}_num_threads64_", "openblas_{}_num_threads")


@functools.lru_cache(maxsize=None)
def _openblas():
    """(get, set) of the OpenBLAS NumPy loaded, or None."""
    import numpy  # noqa: F401  (loads its BLAS)

    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f
                            if "openblas" in line.lower() and ".so" in line.split()[-1]})
    except OSError:
        return None
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in _NAMES:
            get, set_ = (getattr(lib, name.format(verb), None) for verb in ("get", "set"))
            if get is not None and set_ is not None:
                get.restype = ctypes.c_int
                set_.argtypes = [ctypes.c_int]
                return get, set_
    return None


@contextlib.contextmanager
def single_threaded():
    blas = _openblas()
    if blas is None:
        yield
        return
    get, set_ = blas
    before = get()
    if before == 1:
        yield
        return
    set_(1)
    try:
        yield
    finally:
        set_(before)
