"""Smoke seeds that currently find a real difference (a bug, not an intended difference: those
are in explained.py), by the bug they show. These are the open items of issue 17 that the
fuzzer found; the smoke test requires exactly these seeds to mismatch, so fixing a bug makes it
fail until its seeds are removed here, and any new mismatch fails it at once.

N1  float64 narrowing: every float32 result of an op with a narrowed float64 input comes back
    as float64 (torch.ones(2) + float64 tensor gives float64; the CPU gives float32), and
    complex results of float64 inputs stay complex64.
N2  float64 narrowing hides or adds dtype errors (torch.complex(f64, f64) on neuron raises).
N3  float64 narrowing hides overlap errors (cat(out=self) with narrowed arguments).
N4  float64 narrowing: results are rebuilt contiguous instead of with the CPU's strides.
M3  the index pre-checks raise IndexError where the CPU raises RuntimeError or nothing
    (index_add_ with a source of the wrong rank, index_copy_ on a size-0 dimension).
"""

OPEN = {
    1000068: "N1 add: float32 result returned as float64",
    1000104: "N1 add: float32 result returned as float64",
    1000496: "N1 addcdiv: float32 result returned as float64",
    1000478: "N1 nextafter: float32 result returned as float64",
    1000031: "N2 complex: dtype error on neuron only",
    1000081: "N3 cat(out=self): overlap error lost",
    1000362: "N4 clamp: result strides",
    1000156: "N4 outer: result strides",
    1000451: "N4 unique: result strides",
    1000093: "N4 unique_consecutive: result strides",
    1000324: "M3 index_add_: IndexError where the CPU raises RuntimeError",
    1000483: "M3 index_copy_: IndexError where the CPU raises nothing",
}
