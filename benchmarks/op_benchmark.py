"""Host wall time of neuron ops next to the same ops on the CPU, in one process.

Neuron ops compute with ATen's CPU kernels on device memory, so the ratio neuron/CPU measures
what the backend adds: dispatch, host views, the cost model and trace bookkeeping. Targets:
large ops <= 1.05, 1-element ops <= 1.3, host<->device copies >= 0.8 of memcpy, and the
simulator's own work per op (cost model + trace record) <= 1 us.

    python benchmarks/op_benchmark.py            # full sizes
    python benchmarks/op_benchmark.py --quick    # small sizes, for CI smoke runs
"""

import argparse
import time

import torch
import torch.nn.functional as F
import torch_neuron  # noqa: F401


def best_time(fn, repeat, warmup=2):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)  # the least disturbed run: this machine has other work going on


def compare(name, make_inputs, op, repeat, loops=1):
    cpu_args = make_inputs()
    neuron_args = [a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args]

    def run(args):
        for _ in range(loops):
            op(*args)

    # Alternate the two devices, so that a slow spell of this shared machine hits both alike.
    cpu, neuron = float("inf"), float("inf")
    for _ in range(repeat):
        cpu = min(cpu, best_time(lambda: run(cpu_args), 1, warmup=1))
        neuron = min(neuron, best_time(lambda: run(neuron_args), 1, warmup=1))
    print(f"{name:<44} cpu {cpu / loops * 1e6:10.1f} us   neuron {neuron / loops * 1e6:10.1f} us"
          f"   ratio {neuron / cpu:5.2f}")
    return neuron / cpu


def copy_bandwidth(nbytes, repeat):
    src = torch.empty(nbytes, dtype=torch.uint8).fill_(1)
    host_dst = torch.empty_like(src)
    dev_dst = torch.empty(nbytes, dtype=torch.uint8, device="neuron")
    memcpy = best_time(lambda: host_dst.copy_(src), repeat)
    upload = best_time(lambda: dev_dst.copy_(src), repeat)
    download = best_time(lambda: host_dst.copy_(dev_dst), repeat)
    gb = nbytes / 1e9
    print(f"{'copy ' + str(nbytes >> 20) + ' MiB':<44} memcpy {gb / memcpy:6.1f} GB/s   "
          f"host->neuron {gb / upload:6.1f} GB/s ({memcpy / upload:4.2f} of memcpy)   "
          f"neuron->host {gb / download:6.1f} GB/s ({memcpy / download:4.2f} of memcpy)")
    return min(memcpy / upload, memcpy / download)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (CI smoke run)")
    args = parser.parse_args()
    torch.manual_seed(0)
    q = args.quick
    repeat = 3 if q else 7
    n = 256 if q else 2048
    big = (1 << 18) if q else (1 << 24)  # float32 elements: 1 MiB / 64 MiB

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"simulated {torch.neuron.get_device_name()}")
    compare(f"matmul {n}x{n} float32", lambda: [torch.randn(n, n), torch.randn(n, n)],
            torch.mm, repeat)
    batch = 2 if q else 8
    compare(f"conv2d {batch}x64x56x56, 64x64x3x3",
            lambda: [torch.randn(batch, 64, 56, 56), torch.randn(64, 64, 3, 3)],
            lambda x, w: F.conv2d(x, w, padding=1), repeat)
    compare(f"softmax {big * 4 >> 20} MiB", lambda: [torch.randn(big // 1024, 1024)],
            lambda x: torch.softmax(x, -1), repeat)
    compare(f"layer_norm {big * 4 >> 20} MiB", lambda: [torch.randn(big // 1024, 1024)],
            lambda x: F.layer_norm(x, (1024,)), repeat)
    compare("add, 1 element (per-op overhead)", lambda: [torch.randn(1), torch.randn(1)],
            torch.add, 5 * repeat, loops=2000)
    compare("relu, 1 element (per-op overhead)", lambda: [torch.randn(1)], torch.relu,
            5 * repeat, loops=2000)
    copy_bandwidth(big * 4, repeat)
    n = 20000 if q else 200000
    off = min(torch_neuron._C._simulation_overhead_ns(n, False) for _ in range(repeat))
    on = min(torch_neuron._C._simulation_overhead_ns(n, True) for _ in range(repeat))
    print(f"{'simulation per op (cost model + launch)':<44} {off * 1e-3:6.2f} us   "
          f"with trace recording {on * 1e-3:6.2f} us   (target <= 1 us)")


if __name__ == "__main__":
    main()
