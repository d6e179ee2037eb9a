"""torch.compile on neuron next to torch.compile on the CPU, side by side in one process.

For each workload: host wall time of eager and compiled runs on the CPU and on neuron (same
threads, same inputs, compiled with Inductor on both: backend "inductor" on the CPU, "neuron"
on neuron), and the predicted Trainium time of the neuron runs, eager and compiled. Goals
(issue 13): neuron-compiled wall time <= 1.1x CPU-compiled, and neuron's compiled/eager speedup
at least CPU's minus 5%.

    python benchmarks/compile_benchmark.py [--quick] [--cpu-keeps-freed-memory]

Eager runs allocate a fresh result per op. neuron's caching allocator reuses freed blocks (as
CUDA's does); glibc returns large blocks to the OS and faults fresh pages in on every CPU op,
which makes CPU eager slower and its compiled/eager speedup larger for reasons that are not
compilation. --cpu-keeps-freed-memory reruns the benchmark with glibc told to keep freed memory
(MALLOC_MMAP_THRESHOLD_ at its 32 MiB maximum, MALLOC_TRIM_THRESHOLD_ large), so that both
devices allocate alike.
"""

import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

import torch_neuron  # noqa: F401  (registers the device)


class PointwiseBlock(nn.Module):
    """LayerNorm + GELU + residual: memory-bound elementwise work Inductor fuses."""

    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + nn.functional.gelu(self.norm(x)) * 0.5


class TransformerBlock(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


def workloads(quick: bool):
    """(name, model, input, training)."""
    s = 4 if quick else 1
    yield ("pointwise block (LayerNorm+GELU+residual) forward", PointwiseBlock(1024),
           torch.randn(4096 // s, 1024), False)
    yield ("MLP training step", nn.Sequential(nn.Linear(512, 1024), nn.GELU(),
                                              nn.Linear(1024, 512)),
           torch.randn(256 // s, 512), True)
    yield ("transformer block training step", TransformerBlock(256),
           torch.randn(8 // s, 128, 256), True)


def step(model, x, training):
    if training:
        model(x).square().mean().backward()
    else:
        with torch.no_grad():
            model(x)


def wall_ms(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def predicted_ms(fn):
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    parser.add_argument("--cpu-keeps-freed-memory", action="store_true",
                        help="glibc keeps freed memory, as neuron's caching allocator does")
    args = parser.parse_args()
    if args.cpu_keeps_freed_memory and "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        # glibc reads these at startup: run again with them set.
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_=str(32 << 20),
                   MALLOC_TRIM_THRESHOLD_=str(1 << 34))
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    repeats, rounds = (3, 1) if args.quick else (5, 3)
    torch.manual_seed(0)
    allocator = ("glibc keeps freed memory" if "MALLOC_TRIM_THRESHOLD_" in os.environ
                 else "default glibc allocator")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, simulated "
          f"{torch_neuron._C._instance_info()['name']}, CPU side: {allocator}; wall times are "
          "medians (ms)")
    header = (f"{'workload':<52}{'cpu eager':>10}{'cpu comp':>10}{'neu eager':>10}"
              f"{'neu comp':>10}{'neu/cpu comp':>13}{'speedup cpu':>12}{'speedup neu':>12}"
              f"{'Trainium eager->comp (us)':>28}")
    print(header)
    for name, model, x, training in workloads(args.quick):
        runs = {}
        for device in ("cpu", "neuron"):
            m, xi = copy.deepcopy(model).to(device), x.to(device)
            backend = "neuron" if device == "neuron" else "inductor"
            compiled = torch.compile(copy.deepcopy(m), backend=backend)
            runs[(device, "eager")] = lambda m=m, xi=xi: step(m, xi, training)
            runs[(device, "compiled")] = lambda c=compiled, xi=xi: step(c, xi, training)
            for fn in (runs[(device, "eager")], runs[(device, "compiled")]):
                fn()  # warm-up: compiles, fills caches
                fn()
        # Alternate the four configurations so that machine noise hits all alike.
        samples = {key: [] for key in runs}
        for _ in range(rounds):
            for key, fn in runs.items():
                samples[key].append(wall_ms(fn, repeats))
        t = {key: statistics.median(v) for key, v in samples.items()}
        predicted = (predicted_ms(runs[("neuron", "eager")]),
                     predicted_ms(runs[("neuron", "compiled")]))
        speedup_cpu = t[("cpu", "eager")] / t[("cpu", "compiled")]
        speedup_neuron = t[("neuron", "eager")] / t[("neuron", "compiled")]
        print(f"{name:<52}{t[('cpu', 'eager')]:>10.2f}{t[('cpu', 'compiled')]:>10.2f}"
              f"{t[('neuron', 'eager')]:>10.2f}{t[('neuron', 'compiled')]:>10.2f}"
              f"{t[('neuron', 'compiled')] / t[('cpu', 'compiled')]:>13.2f}"
              f"{speedup_cpu:>12.2f}{speedup_neuron:>12.2f}"
              f"{predicted[0] * 1e3:>15.1f} -> {predicted[1] * 1e3:.1f}")


if __name__ == "__main__":
    main()
