"""Smoke seeds that currently find a real difference (a bug, not an intended difference: those
are in explained.py), by the bug they show. These are the open items of issue 17 that the
fuzzer found; the smoke test requires exactly these seeds to mismatch, so fixing a bug makes it
fail until its seeds are removed here, and any new mismatch fails it at once.

None open: the smoke and the long runs (seeds 0-49999, 2026-12-05) have no unexplained
mismatch.
(Fixed and removed: N1-N3, float64 narrowing changed result dtypes and hid or
added errors (Note [Float64 narrowing checks]); N4, float64 results rebuilt contiguous instead of
with the CPU kernel's strides; M3 on empty tensors, the index pre-check raised where the CPU
copies nothing; seed 40184, a narrowed float64 result of a sparse view ordered its size-1
dimensions differently from the CPU.)
"""

OPEN = {}
