"""Host wall time of the NKI simulator (issue 27, item 6).

Targets, on 2 cores without AVX-512:
- `predict`: the fully blocked fp32 matmul kernel of AWS's optimization tutorial (our
  `examples/nki/matmul_sequence.py::blocked`) at [4096, 8192] @ [8192, 8192], timed in
  predict-only mode (neuron tensors, `torch_neuron.set_execute(False)`), with the
  tutorial's final block sizes (16 x 2 x 8 tiles): <= 30 s. In fp32 they need 160 KiB of SBUF
  per partition, which fits because a loop iteration's tiles are released when it ends (Note
  [Tile lifetimes] in torch_neuron/nki/scopes.py).
- `functional`: the same kernel at [1024, 2048] @ [2048, 2048] computed with NumPy and
  timed: <= 30 s (8 x 2 x 8 tiles: M = 1024 is 8 tiles).
- `tiled-predict` (reported, no target): the naive tiled kernel of the same tutorial at the
  large size, about 100,000 instructions.

    python benchmarks/nki_benchmark.py            # all cases
    python benchmarks/nki_benchmark.py --quick    # small sizes (a smoke run)
    python benchmarks/nki_benchmark.py --case predict
"""

import argparse
import os
import sys
import time

import numpy as np
import torch

import torch_neuron
import torch_neuron.nki as nki

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "nki"))
import matmul_sequence  # noqa: E402

TUTORIAL_BLOCKS = dict(tiles_m=16, tiles_n=2, tiles_k=8)  # the tutorial's final blocking
SMALL_BLOCKS = dict(tiles_m=8, tiles_n=2, tiles_k=8)      # M = 1024 holds 8 tiles


def predict_case(kernel, m, k, n, **options):
    lhsT = torch.empty(k, m, dtype=torch.float32, device="neuron")
    rhs = torch.empty(k, n, dtype=torch.float32, device="neuron")
    torch_neuron.set_execute(False)
    try:
        start = time.perf_counter()
        p = nki.profile(kernel, lhsT, rhs, **options)
        return time.perf_counter() - start, p
    finally:
        torch_neuron.set_execute(True)


def functional_case(kernel, m, k, n, **options):
    rng = np.random.default_rng(0)
    lhsT = rng.standard_normal((k, m), dtype=np.float32)
    rhs = rng.standard_normal((k, n), dtype=np.float32)
    start = time.perf_counter()
    p = nki.profile(kernel, lhsT, rhs, **options)
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(p.run.result, lhsT.T @ rhs, rtol=1e-3, atol=1e-2)
    return elapsed, p


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--case", choices=("predict", "functional", "tiled-predict"),
                        action="append", help="run only these cases")
    args = parser.parse_args()
    big = (1024, 2048, 2048) if args.quick else (4096, 8192, 8192)
    small = (512, 1024, 1024) if args.quick else (1024, 2048, 2048)
    quick_blocks = dict(tiles_m=4, tiles_n=2, tiles_k=8)
    cases = {
        "predict": (predict_case, matmul_sequence.blocked, big,
                    quick_blocks if args.quick else TUTORIAL_BLOCKS, 30.0),
        "functional": (functional_case, matmul_sequence.blocked, small,
                       quick_blocks if args.quick else SMALL_BLOCKS, 30.0),
        "tiled-predict": (predict_case, matmul_sequence.tiled, big, {}, None),
    }
    failed = False
    for name in args.case or cases:
        run, kernel, (m, k, n), options, target = cases[name]
        elapsed, p = run(kernel, m, k, n, **options)
        count = len(p.records)
        verdict = ""
        if target is not None and not args.quick:
            ok = elapsed <= target
            failed |= not ok
            verdict = f"  target <= {target:.0f} s: {'met' if ok else 'MISSED'}"
        print(f"{name:14s} {kernel.__name__:8s} fp32 [{m},{k}]@[{k},{n}]: {elapsed:6.1f} s, "
              f"{count} instructions, {count / elapsed:6.0f} instructions/s; predicted "
              f"{p.time_us:.1f} us, bound by {p.bound}{verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
