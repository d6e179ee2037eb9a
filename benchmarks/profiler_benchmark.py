"""torch.profiler's cost on neuron next to its cost on the CPU, in one process: the wall time of
profiling 20 forwards of a small MLP (and reading key_averages()) with the CPU profiler on a
CPU model and with the CPU and PrivateUse1 activities on a neuron model. Target: neuron within
2x of the CPU.

    python benchmarks/profiler_benchmark.py
"""

import argparse
import time

import torch
import torch.profiler as tp
import torch_neuron  # noqa: F401


def profiled_forwards_s(device, activities, rounds):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 10)).to(device)
    x = torch.randn(32, 64, device=device)
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        with tp.profile(activities=activities) as prof:
            for _ in range(20):
                model(x)
        prof.key_averages()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    cpu_acts = [tp.ProfilerActivity.CPU]
    profiled_forwards_s("cpu", cpu_acts, 1)  # the profiler's one-time setup
    cpu = profiled_forwards_s("cpu", cpu_acts, args.rounds)
    neuron = profiled_forwards_s("neuron", cpu_acts + [tp.ProfilerActivity.PrivateUse1],
                                 args.rounds)
    print(f"20 profiled MLP forwards: cpu {cpu * 1e3:.1f} ms   neuron {neuron * 1e3:.1f} ms   "
          f"ratio {neuron / cpu:.2f} (target <= 2)")


if __name__ == "__main__":
    main()
