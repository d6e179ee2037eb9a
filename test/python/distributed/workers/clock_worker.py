"""Simulated clocks under collectives (Note [Neuron process group]): every rank's collective
ends at the same simulated time, max(arrivals) + the cost model's duration (+ the event record
that marks the collective's Work complete, Note [Event records]); a late rank delays
everyone; an async collective overlaps compute. Run under torchrun; prints "clock ok"."""

import os

import torch
import torch.distributed as dist

import torch_neuron
from torch_neuron.distributed import collective_cost

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
# No backend and no device given: neuron is the accelerator, so "neuron" is the default, and
# the rank's device comes from LOCAL_RANK.
dist.init_process_group()
assert dist.get_backend() == "neuron", dist.get_backend()
torch.neuron.set_device(local_rank)
device = torch.device("neuron", local_rank)


def now():
    return torch.neuron.simulated_time_ns()


def gather(value):
    values = [None] * world
    dist.all_gather_object(values, value)
    return values


x = torch.randn(512, 512, device=device)
# 1. Rank r computes r + 1 matmuls, then all-reduces 1 MiB: all ranks end together, at the
#    slowest rank's arrival plus the modelled duration.
payload = torch.ones(256 * 1024, device=device)
dist.barrier()
for _ in range(3 * (rank + 1)):
    x = (x @ x).tanh()
arrival = now()
dist.all_reduce(payload)
end = now()
arrivals, ends = gather(arrival), gather(end)
# The collective, then the event its Work records on completion: 100 cycles at 1.4 GHz.
duration = collective_cost("all_reduce", payload.numel() * 4)["duration_ns"] + 100 / 1.4
assert len(set(ends)) == 1, f"ranks disagree on when the all-reduce ended: {ends}"
assert abs(ends[0] - (max(arrivals) + duration)) < 1e-3 * duration, (ends, arrivals, duration)
assert max(arrivals) > min(arrivals)  # the late rank really was late
assert torch.equal(payload.cpu(), torch.full((256 * 1024,), float(world)))

# 2. An async all-reduce overlaps compute issued before its wait; a blocking one does not.
big = torch.ones(4 * 1024 * 1024, device=device)  # 16 MiB
comm = collective_cost("all_reduce", big.numel() * 4)["duration_ns"]
dist.barrier()
start = now()
dist.all_reduce(big)
for _ in range(4):
    x = (x @ x).tanh()
sequential = now() - start
dist.barrier()
start = now()
work = dist.all_reduce(big, async_op=True)
for _ in range(4):
    x = (x @ x).tanh()
work.wait()
overlapped = now() - start
compute = sequential - comm
assert overlapped < sequential, (overlapped, sequential)
assert overlapped >= max(comm, compute) * 0.999, (overlapped, comm, compute)

# 3. The collective has a track of its own in the profiler, and the per-group collective
#    stream's record says what the model chose.
with torch_neuron.profiler.profile() as prof:
    dist.all_reduce(payload)
records = [r for r in prof.records if r["name"] == "c10d::all_reduce"]
assert len(records) == 1 and records[0]["queue"] >= torch_neuron._C._first_collective_stream()
assert '"algorithm"' in records[0]["detail"] and '"busbw_gbps"' in records[0]["detail"]

# 4. CPU tensors on the same process group go straight to Gloo and cost no device time.
before = now()
cpu = torch.full((8,), float(rank))
dist.all_reduce(cpu)
assert cpu.tolist() == [float(sum(range(world)))] * 8
assert now() == before

# 5. Note [Collective DMA share]: a collective moves its bytes on its core's DMA queues, so
#    HBM-bound compute on the current stream that runs while an all-reduce runs on the group's
#    stream finishes later by the collective's bytes over the core's DMA engines' rate. By hand,
#    for 2 ranks on the default trn2.3xlarge: each rank sends the whole buffer (half in the
#    reduce-scatter, half in the all-gather), and a logical core (LNC=2) has 2 x 16 DMA engines
#    at 23 B/ns (NKI DMA bandwidth guide): 736 GB/s.
if world == 2 and torch_neuron._C._instance_info()["name"] == "trn2.3xlarge":
    a = torch.ones(8 * 1024 * 1024, device=device)
    b = torch.ones(8 * 1024 * 1024, device=device)

    def add_time(collective=None):
        dist.barrier()
        start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        start.record()
        work = dist.all_reduce(collective, async_op=True) if collective is not None else None
        a.add_(b)  # 12 bytes of HBM traffic per element: bound by the DMA queues
        end.record()
        if work is not None:
            work.wait()
        return start.elapsed_time(end) * 1e6  # ns

    alone = add_time()
    shared = add_time(big)
    expected = big.numel() * 4 / (2 * 16 * 23.0)
    assert abs((shared - alone) - expected) <= 1e-6 * expected, (shared, alone, expected)
    model = collective_cost("all_reduce", big.numel() * 4)["dma_ns"]
    assert abs(model - expected) <= 1e-9 * expected, (model, expected)

    # A rank whose DMA queues are still busy with another stream's work arrives when they are
    # free; the ranks still agree on when the collective ends.
    side = torch.neuron.Stream()
    dist.barrier()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    if rank == 0:
        with torch.neuron.stream(side):
            for _ in range(4):
                a.add_(b)
    dist.all_reduce(payload)
    end.record()
    spans = gather(start.elapsed_time(end))
    assert len(set(spans)) == 1, f"ranks disagree on when the all-reduce ended: {spans}"
    assert spans[0] * 1e6 > 3 * alone, (spans, alone)  # rank 0's four adds went first
    print(f"dma share ok on rank {rank}", flush=True)

dist.destroy_process_group()
print(f"clock ok on rank {rank}", flush=True)
