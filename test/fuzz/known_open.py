"""Smoke seeds that currently find a real difference (a bug, not an intended difference: those
are in explained.py), by the bug they show. These are the open items of issue 17 that the
fuzzer found; the smoke test requires exactly these seeds to mismatch, so fixing a bug makes it
fail until its seeds are removed here, and any new mismatch fails it at once.

N1  float64 narrowing: every float32 result of an op with a narrowed float64 input comes back
    as float64 (torch.ones(2) + float64 tensor gives float64; the CPU gives float32), and
    complex results of float64 inputs stay complex64.
N2  float64 narrowing hides or adds dtype errors (torch.complex(f64, f64) on neuron raises).
N3  float64 narrowing hides overlap errors (cat(out=self) with narrowed arguments).
(Fixed and removed: N4, float64 results rebuilt contiguous instead of with the CPU kernel's
strides; M3 on empty tensors, the index pre-check raised where the CPU copies nothing.)
"""

OPEN = {
    1000068: "N1 add: float32 result returned as float64",
    1000104: "N1 add: float32 result returned as float64",
    1000496: "N1 addcdiv: float32 result returned as float64",
    1000478: "N1 nextafter: float32 result returned as float64",
    1000031: "N2 complex: dtype error on neuron only",
    1000081: "N3 cat(out=self): overlap error lost",
}
