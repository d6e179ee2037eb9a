"""Where ranks sit: prints one JSON line with this rank's device, every rank's (node, chip)
and the cost model's all-reduce link for the world group, after checking an all-reduce.
Makes no device choice of its own: the backend takes LOCAL_RANK."""

import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_neuron  # noqa: F401
from torch_neuron.distributed import collective_cost

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("neuron", timeout=timedelta(seconds=30))
backend = dist.group.WORLD._get_backend(torch.device("neuron"))
device = torch.device("neuron", backend.device)
t = torch.full((1024,), float(rank), device=device)
dist.all_reduce(t)
assert t.cpu().eq(sum(range(world))).all()
with torch_neuron.profiler.profile() as prof:
    dist.all_reduce(t)
(record,) = [r for r in prof.records if r["name"] == "c10d::all_reduce"]
report = json.dumps({"rank": rank, "device": backend.device, "places": backend.places,
                     "model": collective_cost("all_reduce", 4096),
                     "charged": json.loads(record["detail"])})
# One write of less than PIPE_BUF bytes: lines of ranks sharing the pipe do not interleave.
os.write(1, (report + "\n").encode())
dist.destroy_process_group()
