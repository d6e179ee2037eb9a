"""DTensor random ops on neuron (Note [Philox generator]): run on 2 ranks with torchrun,
`--out DIR`. Each rank saves, for every case, the full tensor the ranks drew together and the
same op drawn on this one device as a plain tensor from the same (seed, offset):

  fsdp_<init>      torch.nn.init.<init> (normal_, uniform_, trunc_normal_) on the weight of a
                   Linear after fully_shard (Shard(0) DTensor parameters). trunc_normal_
                   redraws out-of-range values in a loop whose exit test (`mask.any()`) each
                   rank evaluates on its own shard, so a rank may stop drawing earlier: same
                   values, but the ranks' final offsets may differ (as on CUDA), so every case
                   starts from a fresh seed
  colwise_<init>   the same on the weight of a ColwiseParallel Linear (Shard(0))
  dropout          F.dropout on a Shard(0) DTensor activation (the mask)
  meta recipe      build on meta, fully_shard, to_empty(device="neuron"), reset_parameters(),
                   then a few SGD steps on 2 ranks; rank 0 also runs the same recipe on one
                   device, without FSDP, on the full batch: initial parameters and losses
"""

import struct

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

import _training_common as common

args = common.parse_args()
rank, world, device = common.setup(args.device)
assert device.type == "neuron" and world == 2
mesh = init_device_mesh("neuron", (world,))
results = {}

INITS = {
    "normal_": lambda w: nn.init.normal_(w, 0.5, 2.0),
    "uniform_": lambda w: nn.init.uniform_(w, -1.0, 3.0),
    "trunc_normal_": lambda w: nn.init.trunc_normal_(w, 0.0, 1.0, -1.5, 1.5),
}


def offset():
    return struct.unpack("<Qq", bytes(torch.neuron.get_rng_state().tolist()))[1]


def on_one_device(state, shape, op):
    """`op` on a plain tensor drawn from `state`; returns (values, offset after)."""
    saved = torch.neuron.get_rng_state()
    torch.neuron.set_rng_state(state)
    with torch.no_grad():
        values = op(torch.empty(shape, device=device))
    after = offset()
    torch.neuron.set_rng_state(saved)
    return values, after


def start():
    """Every case starts from the same state on every rank, at a nonzero offset (4)."""
    torch.manual_seed(1234)
    torch.randn(3, device=device)


for kind in ("fsdp", "colwise"):
    for name, init in INITS.items():
        start()
        layer = nn.Linear(16, 8, device=device)
        if kind == "fsdp":
            fully_shard(layer, mesh=mesh)
        else:
            parallelize_module(layer, mesh, ColwiseParallel())
        assert layer.weight.placements == (Shard(0),), layer.weight.placements
        state = torch.neuron.get_rng_state()
        with torch.no_grad():
            init(layer.weight)
        expected, expected_offset = on_one_device(state, (8, 16), init)
        results[f"{kind}_{name}"] = {"full": layer.weight.full_tensor(), "expected": expected,
                                     "offset": offset(), "expected_offset": expected_offset}

start()
x = distribute_tensor(torch.ones(8, 16, device=device), mesh, [Shard(0)])
state = torch.neuron.get_rng_state()
dropped = F.dropout(x, 0.5)
expected, expected_offset = on_one_device(state, (8, 16),
                                          lambda t: F.dropout(t.fill_(1.0), 0.5))
results["dropout"] = {"full": dropped.full_tensor(), "expected": expected, "offset": offset(),
                      "expected_offset": expected_offset}

# ---- the meta-device init recipe -------------------------------------------------------------
STEPS, BATCH, LR = 4, 8, 0.1
data = torch.randn(STEPS, BATCH, 16, generator=torch.Generator().manual_seed(5))
target = torch.randn(STEPS, BATCH, 8, generator=torch.Generator().manual_seed(6))


def build():
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def reset(model):
    torch.manual_seed(0)
    for m in model.modules():
        if hasattr(m, "reset_parameters"):
            m.reset_parameters()


def train(model, rows):
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for step in range(STEPS):
        loss = F.mse_loss(model(data[step, rows].to(device)), target[step, rows].to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


model = build()
for layer in model:
    if isinstance(layer, nn.Linear):
        fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
model.to_empty(device=device)
reset(model)
local = BATCH // world
recipe = {"init": {n: p.full_tensor() for n, p in model.named_parameters()}}
losses = train(model, slice(rank * local, (rank + 1) * local))
mean_losses = torch.stack(losses)
dist.all_reduce(mean_losses)
recipe["losses"] = mean_losses / world
if rank == 0:
    single = build()
    single.to_empty(device=device)
    reset(single)
    recipe["single_init"] = {n: p.detach().clone() for n, p in single.named_parameters()}
    recipe["single_losses"] = torch.stack(train(single, slice(0, BATCH)))
results["meta_recipe"] = recipe

common.finish(args.out, args.device, rank, results, "dtensor rng")
