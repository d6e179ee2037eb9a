"""DDP's timing stats and a bf16 gradient-compression comm hook, run with `--device neuron`
(backend "neuron") and `--device cpu` (backend "gloo"); every rank saves what it saw.

  timing  small buckets; DDP samples every iteration
          (_set_ddp_runtime_logging_sample_rate(1)); around each step the worker records
          its own timing events on the current stream (neuron events,
          or host-clock readings on the CPU) before the forward (e0), after it (e1) and after
          the backward (e2), and saves DDP's per-iteration stats next to them. DDP computes
          iteration i's stats at the start of iteration i + 1's forward, so the stats read
          after step i + 1's forward are step i's.
  bf16    default_hooks.bf16_compress_hook registered as it is on neuron (no wrapper):
          losses and final parameters. Stock PyTorch refuses that hook by name unless CUDA
          with NCCL or XPU with XCCL is available, on the CPU too, so the CPU reference run
          registers the same function under another name.
"""

import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import _training_common as common

args = common.parse_args()
rank, world, device = common.setup(args.device)

STEPS, GLOBAL_BATCH, IN, HIDDEN, OUT = 6, 16, 16, 64, 4
LOCAL = GLOBAL_BATCH // world
STATS = ("forward_compute_time", "backward_compute_time", "backward_comm_time",
         "backward_compute_comm_overlap_time")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def new_model():
    torch.manual_seed(0)
    return Net().to(device)


gen = torch.Generator().manual_seed(1)
X = torch.randn(STEPS, GLOBAL_BATCH, IN, generator=gen)
Y = torch.randn(STEPS, GLOBAL_BATCH, OUT, generator=gen)
rows = slice(rank * LOCAL, (rank + 1) * LOCAL)


def batch(step):
    return X[step, rows].to(device), Y[step, rows].to(device)


class Clock:
    """Timestamps of the device's current stream: neuron events (simulated time) on neuron,
    the host clock on the CPU. elapsed_ns(a, b) is the time from mark a to mark b."""

    def mark(self):
        if device.type == "neuron":
            event = torch.neuron.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter_ns()

    @staticmethod
    def elapsed_ns(a, b):
        if device.type == "neuron":
            return a.elapsed_time(b) * 1e6
        return float(b - a)


def timing():
    # Buckets of about 1 KB: three all-reduces per backward, the first launched while the
    # backward still computes the earlier layers' gradients (compute and comm overlap).
    ddp = DDP(new_model(), bucket_cap_mb=0.001)
    ddp._set_ddp_runtime_logging_sample_rate(1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    clock = Clock()
    steps, stats = [], []
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        e0 = clock.mark()
        out = ddp(x)
        e1 = clock.mark()
        # The forward just computed the stats of the previous step.
        data = ddp._get_ddp_logging_data()
        stats.append({k: data.get(k, 0) for k in STATS + tuple("avg_" + s for s in STATS)})
        F.mse_loss(out, y).backward()
        e2 = clock.mark()
        opt.step()
        steps.append({"forward": clock.elapsed_ns(e0, e1), "backward": clock.elapsed_ns(e1, e2)})
    data = ddp._get_ddp_logging_data()
    bucket_bytes = sum(p.numel() * p.element_size() for p in ddp.parameters())
    return {"steps": steps, "stats": stats,
            "final": {k: data.get(k, 0) for k in ("avg_" + s for s in STATS)},
            "bucket_bytes": bucket_bytes,
            "buckets": data.get("rebuilt_bucket_sizes", data.get("bucket_sizes", ""))}


def bf16():
    common.clear_fallbacks(args.device)
    ddp = DDP(new_model())
    hook = default_hooks.bf16_compress_hook
    if device.type == "cpu":

        def bf16_reference(state, bucket):
            return default_hooks.bf16_compress_hook(state, bucket)

        hook = bf16_reference
    ddp.register_comm_hook(None, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(ddp(x), y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return {"losses": losses, "params": dict(ddp.module.named_parameters()),
            "grad_devices": sorted({str(p.grad.device) for p in ddp.parameters()}),
            "fallbacks": common.fallbacks(args.device)}


results = {"timing": timing(), "bf16": bf16()}
if args.device == "neuron":
    import torch_neuron

    cost = torch_neuron.distributed.collective_cost("all_reduce", results["timing"]["bucket_bytes"])
    results["timing"]["all_reduce_ns"] = cost["duration_ns"]
common.finish(args.out, args.device, rank, results, "ddp timing")
