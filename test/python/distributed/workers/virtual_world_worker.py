"""One running rank of a large virtual world (test_virtual_world.py): what torch.distributed
shows it, object and CPU collectives by the SPMD rule, a 2-D mesh, two DDP steps. Prints one
line `WORLD {json}`."""

import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh

import torch_neuron  # noqa: F401

torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()

objects = [None] * world
dist.all_gather_object(objects, {"from": rank})
cpu_sum = torch.tensor([1.0, 2.0])
dist.all_reduce(cpu_sum)
cpu_max = torch.tensor([1.0, 2.0])
dist.all_reduce(cpu_max, op=dist.ReduceOp.MAX)
cpu_premul = torch.tensor([1.0, 2.0])
dist.all_reduce(cpu_premul, op=dist.ReduceOp.PREMUL_SUM(0.5))
mesh = init_device_mesh("neuron", (2, world // 2), mesh_dim_names=("dp", "tp"))

model = nn.parallel.DistributedDataParallel(
    nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 64)).to("neuron"))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(8, 64, device="neuron")).square().mean().backward()
    optimizer.step()
    optimizer.zero_grad()

print("WORLD " + json.dumps({
    "world": world, "rank": rank, "device": f"neuron:{torch.neuron.current_device()}",
    "objects": objects, "cpu_sum": cpu_sum.tolist(), "cpu_max": cpu_max.tolist(),
    "cpu_premul": cpu_premul.tolist(),
    "mesh_groups": {name: mesh[name].size() for name in ("dp", "tp")}}), flush=True)
dist.destroy_process_group()
