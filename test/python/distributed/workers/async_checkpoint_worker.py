"""torch.distributed.checkpoint.async_save of an FSDP2 model and its AdamW state on neuron, with
training going on while the checkpoint is written, and the load on another number of ranks.

    torchrun --nproc-per-node 4 async_checkpoint_worker.py save --out DIR
    torchrun --nproc-per-node 2 async_checkpoint_worker.py resume --out DIR
    torchrun --nproc-per-node 2 async_checkpoint_worker.py roundtrip --out DIR

The tiny transformer in float32, fully_shard per block and on the root, global batch 8 split
over the ranks, backend "neuron" as init_process_group gets it by default.
  save       trains steps 0 and 1, async_save's the model and optimizer state dicts, trains
             steps 2 and 3 while the save runs in DCP's background thread, then waits on the
             future; records the losses, the full parameters at the checkpoint, and (rank 0,
             not in roundtrip) the losses of the same training on one NeuronCore without FSDP
             or checkpoints.
  resume     a new model (every parameter 0.5) and optimizer, loaded from the checkpoint
             (resharded to this number of ranks), trains steps 2 and 3.
  roundtrip  save, then in the same processes resume from what it saved.
Each rank writes what it recorded to DIR/<phase>_rank<r>.pt.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

import torch_neuron  # noqa: F401

import _tiny_transformer as tt

parser = argparse.ArgumentParser()
parser.add_argument("phase", choices=["save", "resume", "roundtrip"])
parser.add_argument("--out", required=True)
args = parser.parse_args()

local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)
device = torch.device("neuron", local_rank)
dist.init_process_group()  # "neuron": CPU tensors go to a Gloo group of their own
rank, world = dist.get_rank(), dist.get_world_size()

STEPS, SAVED_AFTER, GLOBAL_BATCH, LR = 4, 2, 8, 1e-2
DATA = tt.token_batches(STEPS, GLOBAL_BATCH)
CHECKPOINT = os.path.join(args.out, "checkpoint")


def batch(step, whole=False):
    local = GLOBAL_BATCH // world
    rows = DATA[step] if whole else DATA[step, rank * local:(rank + 1) * local]
    rows = rows.to(device)
    return rows[:, :-1], rows[:, 1:]


def sharded_model():
    model = tt.new_model(device)
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    return model


def new_optimizer(model):
    return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)


def train(model, opt, steps, whole=False):
    losses = []
    for step in steps:
        opt.zero_grad()
        inputs, targets = batch(step, whole)
        loss = tt.lm_loss(model(inputs), targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def full_params(model):
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu()
            for n, p in model.named_parameters()}


def save():
    model = sharded_model()
    opt = new_optimizer(model)
    losses = train(model, opt, range(SAVED_AFTER))
    model_sd, optim_sd = get_state_dict(model, opt)
    future = dcp.async_save({"model": model_sd, "optim": optim_sd}, checkpoint_id=CHECKPOINT)
    saved = full_params(model)  # neuron all-gathers while the save's CPU exchanges run
    losses += train(model, opt, range(SAVED_AFTER, STEPS))
    future.result()
    record = {"losses": losses, "saved_params": saved}
    if rank == 0 and args.phase == "save":  # the reference: no FSDP, no checkpoint, the whole batch on one NeuronCore
        single = tt.new_model(device)
        record["single_losses"] = train(single, new_optimizer(single), range(STEPS), whole=True)
    return record


def resume():
    model = sharded_model()
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(0.5)  # other weights, so that the load has to do the work
    opt = new_optimizer(model)
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=CHECKPOINT)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    loaded = full_params(model)
    return {"loaded_params": loaded, "losses": train(model, opt, range(SAVED_AFTER, STEPS))}


if args.phase == "save":
    record = save()
elif args.phase == "resume":
    record = resume()
else:
    record = {"save": save(), "resume": resume()}
torch.save(record, os.path.join(args.out, f"{args.phase}_rank{rank}.pt"))
dist.barrier()
dist.destroy_process_group()
print(f"{args.phase} ok on rank {rank}", flush=True)
