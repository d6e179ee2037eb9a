"""Training jobs run both for real (every rank a process) and as a virtual world (Note [Virtual
world]): `--job` picks the parallelism (a comma-separated list runs each in turn, in one
process group), the tiny transformer trains `--steps` steps and the last one is timed with
neuron events. Prints one line `JOB {json}` per job with the step's simulated time.

  ddp      DistributedDataParallel over the world
  zero1    DDP + ZeroRedundancyOptimizer (optimizer states sharded)
  fsdp     fully_shard per block and root, bf16 mixed precision, reshard_after_forward=False
           on the root
  tp       tensor parallel attention and MLP (parallelize_module) over the world
  fsdp_tp  a (dp, tp) mesh: TP within, FSDP2 across
  pipe     a (pp, dp) mesh: two pipeline stages (Schedule1F1B, 2 micro-batches), each stage
           data parallel with FSDP2
`--checkpoint` wraps every block in activation checkpointing; `--accumulate N` accumulates
gradients over N micro-batches (not with pipe); `--imbalance` makes rank 1 do extra work
before each step (the SPMD assumption's limit).
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               parallelize_module)
from torch.utils.checkpoint import checkpoint

import torch_neuron  # noqa: F401

import _tiny_transformer as tt

parser = argparse.ArgumentParser()
JOBS = ["ddp", "zero1", "fsdp", "tp", "fsdp_tp", "pipe"]
parser.add_argument("--job", required=True, help=", ".join(JOBS) + ", or several, comma-separated")
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--checkpoint", action="store_true")
parser.add_argument("--accumulate", type=int, default=1)
parser.add_argument("--imbalance", action="store_true")
args = parser.parse_args()
jobs = args.job.split(",")
if any(job not in JOBS for job in jobs):
    parser.error(f"--job: choose from {', '.join(JOBS)}")

local_rank = int(os.environ["LOCAL_RANK"])
torch.neuron.set_device(local_rank)
device = torch.device("neuron", local_rank)
dist.init_process_group("neuron")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
BATCH = 4


class Checkpointed(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


def model_on_device():
    model = tt.TinyTransformer()
    if args.checkpoint:
        model.blocks = nn.ModuleList(Checkpointed(b) for b in model.blocks)
    return model.to(device)


def blocks_of(model):
    return [b.block if args.checkpoint else b for b in model.blocks]


def tensor_parallel(model, mesh):
    for block in blocks_of(model):
        parallelize_module(block, mesh, {
            "attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
            "attn.wv": ColwiseParallel(), "attn.wo": RowwiseParallel(),
            "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel()})
    return model


def batch():
    tokens = torch.randint(0, tt.VOCAB, (BATCH, tt.SEQ), device=device)
    return tokens, torch.roll(tokens, -1, dims=1)


def loss_of(model, tokens, targets):
    return F.cross_entropy(model(tokens).flatten(0, 1), targets.flatten())


def train_step(model, optimizer):
    if args.imbalance and rank == 1:  # extra work on one rank only
        a = torch.randn(2048, 2048, device=device)
        for _ in range(20):
            a = a @ a
    for _ in range(args.accumulate):
        loss_of(model, *batch()).backward()
    optimizer.step()
    optimizer.zero_grad()


def pipeline_job(job):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    mesh = init_device_mesh("neuron", (2, world // 2), mesh_dim_names=("pp", "dp"))
    stage_index = mesh.get_local_rank("pp")
    model = model_on_device()
    # Stage 0: embeddings and the first block; stage 1: the second block and the head.
    if stage_index == 0:
        class Stage(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok, self.pos, self.block = model.tok, model.pos, model.blocks[0]

            def forward(self, tokens):
                positions = torch.arange(tokens.shape[1], device=tokens.device)
                return self.block(self.tok(tokens) + self.pos(positions))
    else:
        class Stage(nn.Module):
            def __init__(self):
                super().__init__()
                self.block, self.norm, self.out = model.blocks[1], model.norm, model.out

            def forward(self, x):
                return self.out(self.norm(self.block(x)))
    stage_module = Stage()
    fully_shard(stage_module, mesh=mesh["dp"])
    stage = PipelineStage(stage_module, stage_index, 2, device, group=mesh["pp"].get_group())

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    schedule = Schedule1F1B(stage, n_microbatches=2, loss_fn=loss_fn)
    optimizer = torch.optim.AdamW(stage_module.parameters())

    def step():
        tokens, targets = batch()
        if stage_index == 0:
            schedule.step(tokens)
        else:
            schedule.step(target=targets)
        optimizer.step()
        optimizer.zero_grad()

    return step


def build_step(job):
    if job == "pipe":
        return pipeline_job(job)
    model = model_on_device()
    if job == "ddp":
        model = nn.parallel.DistributedDataParallel(model)
        optimizer = torch.optim.AdamW(model.parameters())
    elif job == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        model = nn.parallel.DistributedDataParallel(model)
        optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)
    elif job == "fsdp":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.blocks:
            fully_shard(block, mp_policy=policy)
        fully_shard(model, mp_policy=policy, reshard_after_forward=False)
        optimizer = torch.optim.AdamW(model.parameters())
    elif job == "tp":
        mesh = init_device_mesh("neuron", (world,))
        tensor_parallel(model, mesh)
        # Plain tensors (embeddings, norms) beside DTensors: foreach kernels refuse the mix.
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    else:  # fsdp_tp
        mesh = init_device_mesh("neuron", (world // 2, 2), mesh_dim_names=("dp", "tp"))
        tensor_parallel(model, mesh["tp"])
        for block in model.blocks:
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
        optimizer = torch.optim.AdamW(model.parameters())
    return lambda: train_step(model, optimizer)


for job in jobs:
    step = build_step(job)
    for _ in range(args.steps - 1):
        step()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    step()
    end.record()
    end.synchronize()
    print("JOB " + json.dumps({"job": job, "rank": rank, "world": world,
                               "step_us": start.elapsed_time(end) * 1e3}), flush=True)
    dist.barrier()
dist.destroy_process_group()
