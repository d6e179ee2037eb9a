"""FSDP2 (fully_shard), unchanged, on one device type: run it with `--device neuron` (backend
"neuron") and with `--device cpu` (backend "gloo") on 4 ranks and compare what they save.

A tiny transformer (2 blocks), fully_shard per block then on the root, AdamW, and
clip_grad_norm_ on the DTensor parameters every step. Recipes, each from the same seed:
  bf16            MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32),
                  reshard_after_forward=True
  bf16_no_reshard the same with reshard_after_forward=False
  fp32            no mixed precision
  dcp             the bf16 recipe interrupted after STEPS // 2 steps: model and optimizer
                  state dicts saved with torch.distributed.checkpoint, a new model and
                  optimizer loaded from it, training continued
Rank 0 also trains the model without FSDP in float32 on the full batch ("single").
Each rank saves per recipe: its losses, the gradient norms clip_grad_norm_ returned, the full
parameters at the end, where its shards live, and the ops that fell back to the CPU.
"""

import os

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

import _tiny_transformer as tt
import _training_common as common

args = common.parse_args()
rank, world, device = common.setup(args.device)

STEPS, GLOBAL_BATCH, LR, MAX_NORM = 4, 8, 1e-2, 1.0
LOCAL = GLOBAL_BATCH // world
# fully_shard's default mesh is on the accelerator (neuron whenever torch_neuron is loaded):
# name the device type so that the CPU run shards on the CPU.
MESH = init_device_mesh(device.type, (world,))
DATA = tt.token_batches(STEPS, GLOBAL_BATCH)


def batch(step, whole=False):
    rows = DATA[step] if whole else DATA[step, rank * LOCAL:(rank + 1) * LOCAL]
    rows = rows.to(device)
    return rows[:, :-1], rows[:, 1:]


def sharded_model(recipe):
    model = tt.new_model(device)
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if recipe != "fp32" else MixedPrecisionPolicy())
    reshard = recipe != "bf16_no_reshard"
    for block in model.blocks:
        fully_shard(block, mesh=MESH, mp_policy=mp, reshard_after_forward=reshard)
    fully_shard(model, mesh=MESH, mp_policy=mp, reshard_after_forward=reshard)
    return model


def new_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)


def train_steps(model, opt, steps, record, whole=False):
    for step in steps:
        opt.zero_grad()
        inputs, targets = batch(step, whole)
        loss = tt.lm_loss(model(inputs), targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_NORM)
        opt.step()
        record["losses"].append(loss.item())
        record["grad_norms"].append(
            (norm.full_tensor() if isinstance(norm, DTensor) else norm).item())


def full_params(model):
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach()
            for n, p in model.named_parameters()}


def describe_shards(model):
    """Where the shards are: the device of each local tensor, the placements, the mesh."""
    local_devices, placements, mesh_types = set(), set(), set()
    for p in model.parameters():
        assert isinstance(p, DTensor), type(p)
        local_devices.add(str(p.to_local().device))
        placements.add(p.placements == (Shard(0),))
        mesh_types.add(p.device_mesh.device_type)
    return {"local_devices": sorted(local_devices), "all_shard0": placements == {True},
            "mesh_types": sorted(mesh_types)}


results = {"world": world, "recipes": {}, "single": {}}
# Without a mesh, fully_shard shards over the accelerator: neuron when torch_neuron is loaded,
# the CPU in the stock-PyTorch reference run.
probe = torch.nn.Linear(4, 4).to(device)
fully_shard(probe)
results["default_mesh"] = (probe.weight.device_mesh.device_type,
                           str(probe.weight.to_local().device))
del probe
for recipe in ("bf16", "bf16_no_reshard", "fp32", "dcp"):
    common.clear_fallbacks(args.device)
    record = {"losses": [], "grad_norms": []}
    model = sharded_model(recipe)
    opt = new_optimizer(model)
    if recipe == "dcp":
        half = STEPS // 2
        train_steps(model, opt, range(half), record)
        checkpoint = os.path.join(args.out, f"checkpoint_{args.device}")
        model_sd, optim_sd = get_state_dict(model, opt)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=checkpoint)
        del model, opt, model_sd, optim_sd
        # A new model (other weights, so the load has to do the work) and a new optimizer
        # whose state the load fills in. Not torch.nn.init.normal_: random ops on neuron
        # DTensors fail for now (DTensor's RNG tracker reads the device generator's state as
        # Philox seed and offset, 16 bytes; the neuron generator's is MT19937's 5056 bytes).
        model = sharded_model(recipe)
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(0.5)
        opt = new_optimizer(model)
        model_sd, optim_sd = get_state_dict(model, opt)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=checkpoint)
        set_state_dict(model, opt, model_state_dict=state["model"],
                       optim_state_dict=state["optim"])
        train_steps(model, opt, range(half, STEPS), record)
    else:
        train_steps(model, opt, range(STEPS), record)
    record["fallbacks"] = common.fallbacks(args.device)
    record["shards"] = describe_shards(model)
    record["params"] = full_params(model)
    results["recipes"][recipe] = record

if rank == 0:
    model = tt.new_model(device)
    record = {"losses": [], "grad_norms": []}
    train_steps(model, new_optimizer(model), range(STEPS), record, whole=True)
    record["params"] = full_params(model)
    results["single"] = record

common.finish(args.out, args.device, rank, results, "fsdp")
