"""init_process_group's forms on neuron: backend "neuron" with device_id, and the per-device
form "cpu:gloo,neuron:neuron". Run under torchrun with the form as argument; prints
"init ok"."""

import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_neuron  # noqa: F401

form = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local_rank = int(os.environ["LOCAL_RANK"])
device = torch.device("neuron", local_rank)

if form == "device_id":
    torch.neuron.set_device(local_rank)
    dist.init_process_group(backend="neuron", device_id=device, timeout=timedelta(seconds=60))
    assert dist.get_backend() == "neuron"
elif form == "per_device":
    torch.neuron.set_device(local_rank)
    dist.init_process_group(backend="cpu:gloo,neuron:neuron", timeout=timedelta(seconds=60))
    pg = dist.group.WORLD
    assert pg._get_backend(torch.device("cpu")).name() == "gloo"
    assert type(pg._get_backend(device)).__name__ == "_ProcessGroupNeuron"
else:
    raise SystemExit(f"unknown form {form}")

t = torch.full((4,), float(rank + 1), device=device)
dist.all_reduce(t)
assert t.device == device and t.cpu().tolist() == [world * (world + 1) / 2] * 4
c = torch.full((2,), float(rank))
dist.all_reduce(c)
assert c.tolist() == [float(sum(range(world)))] * 2
if form == "device_id":
    # A group bound to a device can be split: the neuron backend splits itself.
    halves = dist.split_group(split_ranks=[[r] for r in range(world)])
    assert type(halves._get_backend(device)).__name__ == "_ProcessGroupNeuron"
    t = torch.full((2,), float(rank), device=device)
    dist.all_reduce(t, group=halves)
    assert t.cpu().tolist() == [float(rank)] * 2
# A subgroup of the bound group (DeviceMesh splits it when a device is bound).
mesh = torch.distributed.device_mesh.init_device_mesh("neuron", (world,))
t = torch.ones(3, device=device)
dist.all_reduce(t, group=mesh.get_group())
assert t.cpu().tolist() == [float(world)] * 3
dist.barrier()
dist.destroy_process_group()
print(f"init ok ({form}) on rank {rank}", flush=True)
