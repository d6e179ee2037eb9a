"""torch.distributed.pipelining on neuron ranks (test_distributed_pipelining.py launches it with
torchrun and reads what every rank saves).

    torchrun --nproc-per-node 2 pipelining_worker.py --what values --out DIR
    torchrun --nproc-per-node 4 pipelining_worker.py --what fsdp --out DIR
    TORCH_NEURON_EXECUTE=0 torchrun --nproc-per-node 4 pipelining_worker.py --what timing --out DIR

values: a tiny transformer (_tiny_transformer.py, 2 blocks per rank, weights made on the CPU)
  split into stages by the `pipeline()` tracer (split_spec) and by hand (`PipelineStage` on a
  copy of the model with the other stages' parts removed), trained STEPS steps with SGD under
  ScheduleGPipe, Schedule1F1B (one stage per rank) and ScheduleInterleaved1F1B (two stages per
  rank). Each run starts from a fresh copy of the same CPU state dict. Rank 0 also trains the
  whole model on its NeuronCore, microbatch by microbatch, as the reference.
fsdp: the same model on a ("pp", "dp") 2x2 mesh: one stage per pp rank, fully_shard over dp,
  each dp rank fed its half of the batch; rank 0 also runs the one-process reference on the
  two halves.
timing: GPipe over one identical transformer block per rank, profiled with
  torch_neuron.profiler; each rank saves its simulated records.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

sys.path.insert(0, os.path.dirname(__file__))
from _tiny_transformer import DIM, SEQ, Block, TinyTransformer, lm_loss, token_batches  # noqa: E402
from _training_common import finish, setup, to_cpu  # noqa: E402

from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe,  # noqa: E402
                                          ScheduleInterleaved1F1B, SplitPoint, pipeline)

STEPS = 2
BATCH = 8
MICROBATCHES = 4
LR = 0.1
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved": ScheduleInterleaved1F1B}


class PartialTransformer(TinyTransformer):
    """TinyTransformer whose missing parts (None) are skipped: a manual pipeline stage keeps the
    full model's parameter names."""

    def forward(self, x):
        if self.tok is not None:
            x = self.tok(x) + self.pos(torch.arange(x.shape[1], device=x.device))
        for block in self.blocks:
            x = block(x)
        if self.out is not None:
            x = self.out(self.norm(x))
        return x


def initial_state(world):
    """The one CPU-initialised state dict every run copies: 2 blocks per rank, so that the
    interleaved schedule has one block per stage."""
    torch.manual_seed(0)
    return TinyTransformer(2 * world).state_dict()


def n_blocks(state):
    return 1 + max(int(k.split(".")[1]) for k in state if k.startswith("blocks."))


def manual_stage_module(state, stage, n_stages, device):
    """A copy of the whole model without the other stages' parts (the blocks they run become
    Identity, so the names stay the whole model's)."""
    blocks = n_blocks(state)
    model = PartialTransformer(blocks)
    model.load_state_dict(state)
    per = blocks // n_stages
    for i in range(blocks):
        if not stage * per <= i < (stage + 1) * per:
            model.blocks[i] = nn.Identity()
    if stage != 0:
        model.tok = model.pos = None
    if stage != n_stages - 1:
        model.norm = model.out = None
    return model.to(device)


# The pipes traced so far, by number of stages: tracing (torch.export) takes seconds, so each
# rank traces a split once and every run reloads the initial weights into its stage modules.
_pipes = {}


def traced_pipe(state, n_stages, example):
    if n_stages not in _pipes:
        blocks = n_blocks(state)
        model = TinyTransformer(blocks)
        model.load_state_dict(state)
        per = blocks // n_stages
        split_spec = {f"blocks.{s * per}": SplitPoint.BEGINNING for s in range(1, n_stages)}
        _pipes[n_stages] = pipeline(model, mb_args=(example,), split_spec=split_spec)
        assert _pipes[n_stages].num_stages == n_stages, _pipes[n_stages].num_stages
    return _pipes[n_stages]


def traced_stage_module(state, stage, n_stages, device, example):
    """The tracer's stage module (its parameter names are the whole model's), fresh weights."""
    pipe = traced_pipe(state, n_stages, example)
    mod = pipe.get_stage_module(stage)
    own = mod.state_dict()
    assert own.keys() <= state.keys(), sorted(own.keys() - state.keys())
    mod.load_state_dict({k: state[k] for k in own})
    return pipe, mod.to(device)


def grads_of(modules):
    return {name: p.grad for m in modules for name, p in m.named_parameters()
            if p.grad is not None}


def params_of(modules):
    return {name: p for m in modules for name, p in m.named_parameters()}


def train_pipeline(split, schedule_name, state, data, rank, world, device):
    """Returns {"losses": [[per microbatch] per step] on the last stage, "grads": [{name: grad}
    per step] of this rank's stages}."""
    n_stages = world * (2 if schedule_name == "interleaved" else 1)
    my_stages = [rank, rank + world] if schedule_name == "interleaved" else [rank]
    example = data[0, :BATCH // MICROBATCHES, :-1]
    stages, modules = [], []
    for s in my_stages:
        if split == "tracer":
            pipe, mod = traced_stage_module(state, s, n_stages, device, example)
            stages.append(pipe.build_stage(s, device))
        else:
            mod = manual_stage_module(state, s, n_stages, device)
            stages.append(PipelineStage(mod, s, n_stages, device))
        modules.append(mod)
    schedule_cls = SCHEDULES[schedule_name]
    schedule = schedule_cls(stages if schedule_name == "interleaved" else stages[0],
                            n_microbatches=MICROBATCHES, loss_fn=lm_loss)
    opt = torch.optim.SGD([p for m in modules for p in m.parameters()], lr=LR)
    is_first = 0 in my_stages
    is_last = n_stages - 1 in my_stages
    out = {"losses": [], "grads": [], "stages": my_stages}
    for step in range(STEPS):
        tokens = data[step].to(device)
        opt.zero_grad()
        losses = []
        args = (tokens[:, :-1],) if is_first else ()
        kwargs = {"target": tokens[:, 1:], "losses": losses} if is_last else {}
        schedule.step(*args, **kwargs)
        out["losses"].append([loss.item() for loss in losses])
        out["grads"].append(to_cpu(grads_of(modules)))
        opt.step()
    return out


def reference_model(state, device):
    """The whole model on one NeuronCore, with its SGD optimizer."""
    model = TinyTransformer(n_blocks(state))
    model.load_state_dict(state)
    model.to(device)
    return model, torch.optim.SGD(model.parameters(), lr=LR)


def backward_microbatches(model, tokens, microbatches):
    """Backward of each microbatch's loss in turn, gradients accumulating; their losses."""
    losses = []
    for mb in tokens.chunk(microbatches):
        loss = lm_loss(model(mb[:, :-1]), mb[:, 1:])
        loss.backward()
        losses.append(loss.item())
    return losses


def finish_step(model, opt, out, losses, divisor):
    """Gradients divided by `divisor` (the schedules' scale_grads), recorded, then SGD."""
    for p in model.parameters():
        p.grad.div_(divisor)
    out["losses"].append(losses)
    out["grads"].append(to_cpu(grads_of([model])))
    opt.step()


def train_reference(state, data, device):
    """The whole model on one NeuronCore, microbatch by microbatch as the schedules feed it:
    per-microbatch losses, gradients summed over microbatches and divided by their count (the
    schedules' scale_grads), SGD."""
    model, opt = reference_model(state, device)
    out = {"losses": [], "grads": []}
    for step in range(STEPS):
        opt.zero_grad()
        losses = backward_microbatches(model, data[step].to(device), MICROBATCHES)
        finish_step(model, opt, out, losses, MICROBATCHES)
    return out


def run_values(rank, world, device):
    state = initial_state(world)
    data = token_batches(STEPS, BATCH)
    results = {"world": world}
    for split in ("tracer", "manual"):
        for name in SCHEDULES:
            results[(split, name)] = train_pipeline(split, name, state, data, rank, world, device)
            dist.barrier()
    if rank == 0:
        results["reference"] = train_reference(state, data, device)
    return results


FSDP_SCHEDULES = ("gpipe", "1f1b")
FSDP_MICROBATCHES = 2


def run_fsdp(rank, world, device):
    """Pipeline over "pp" x FSDP over "dp" on a 2x2 mesh: stage pp holds half the blocks (made
    by hand), fully_shard per block and on the stage over the dp sub-mesh; dp rank d trains on
    its half of each batch (feed())."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    assert world == 4, world
    mesh = init_device_mesh("neuron", (2, 2), mesh_dim_names=("pp", "dp"))
    pp, dp = mesh["pp"].get_local_rank(), mesh["dp"].get_local_rank()
    state = initial_state(2)
    data = token_batches(STEPS, BATCH)
    results = {"pp": pp, "dp": dp}
    for name in FSDP_SCHEDULES:
        mod = manual_stage_module(state, pp, 2, device)
        for block in mod.blocks:
            if isinstance(block, Block):
                fully_shard(block, mesh=mesh["dp"])
        fully_shard(mod, mesh=mesh["dp"])
        stage = PipelineStage(mod, pp, 2, device, group=mesh["pp"].get_group())
        schedule = SCHEDULES[name](stage, n_microbatches=FSDP_MICROBATCHES, loss_fn=lm_loss)
        opt = torch.optim.SGD(mod.parameters(), lr=LR)
        out = {"losses": [], "grads": []}
        for step in range(STEPS):
            tokens = feed(data[step], dp).to(device)
            opt.zero_grad()
            losses = []
            args = (tokens[:, :-1],) if pp == 0 else ()
            kwargs = {"target": tokens[:, 1:], "losses": losses} if pp == 1 else {}
            schedule.step(*args, **kwargs)
            out["losses"].append([loss.item() for loss in losses])
            out["grads"].append(to_cpu({n: p.grad.full_tensor()
                                        for n, p in mod.named_parameters()}))
            opt.step()
        results[name] = out
        dist.barrier()
    if rank == 0:
        results["reference"] = train_reference_dp(state, data, device)
    return results


def feed(batch, dp):
    """What dp rank `dp` trains on: its contiguous half of the batch."""
    return batch.chunk(2)[dp]


def train_reference_dp(state, data, device):
    """One process on one NeuronCore: each dp rank's half in turn, microbatch by microbatch;
    the gradient is the mean over the halves of each half's microbatch mean (what the dp
    reduce-scatter averages), then SGD."""
    model, opt = reference_model(state, device)
    out = {"losses": [], "grads": []}
    for step in range(STEPS):
        opt.zero_grad()
        losses = [backward_microbatches(model, feed(data[step], dp).to(device), FSDP_MICROBATCHES)
                  for dp in range(2)]
        finish_step(model, opt, out, losses, 2 * FSDP_MICROBATCHES)
    return out


TIMING_MICROBATCHES = 8
TIMING_MB_SIZE = 2


def run_timing(rank, world, device):
    """GPipe over `world` stages of one identical Block each (float activations in and out, an
    MSE loss on the last stage), TIMING_MICROBATCHES microbatches: one warm-up step, then one
    profiled step. Saves this rank's simulated records."""
    import torch.nn.functional as F

    import torch_neuron.profiler

    torch.manual_seed(0)
    blocks = [Block() for _ in range(world)]  # on the CPU: the same weights on every rank
    mod = blocks[rank].to(device)
    stage = PipelineStage(mod, rank, world, device)
    schedule = ScheduleGPipe(stage, n_microbatches=TIMING_MICROBATCHES,
                             loss_fn=lambda out, target: F.mse_loss(out, target))
    batch = TIMING_MICROBATCHES * TIMING_MB_SIZE
    x = torch.randn(batch, SEQ, DIM).to(device)
    target = torch.randn(batch, SEQ, DIM).to(device)

    def step():
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=target)
        else:
            schedule.step()

    # The first step runs with execution on: the schedule's first step agrees on the stages'
    # shapes by reading tensors the stages send each other (`.item()`), which predict-only
    # mode does not compute. The profiled step is predicted only (its values are not read).
    torch_neuron.set_execute(True)
    step()
    torch.neuron.synchronize()
    torch_neuron.set_execute(False)
    dist.barrier()
    with torch_neuron.profiler.profile() as prof:
        step()
        torch.neuron.synchronize()
    activation_bytes = TIMING_MB_SIZE * SEQ * DIM * 4
    # What the simulator charges for one activation between this rank and its next (the
    # last rank: its previous), on the link between their NeuronCores.
    from torch_neuron import _C

    places = dist.group.WORLD._get_backend(device).places
    peer = rank + 1 if rank + 1 < world else rank - 1
    pair_cost = _C._collective_cost("send_recv", activation_bytes, [places[rank], places[peer]],
                                    _C._instance_info()["name"])
    return {"records": prof.records, "collective_stream": _first_collective_stream(),
            "activation_bytes": activation_bytes, "pair_cost": pair_cost}


def _first_collective_stream():
    from torch_neuron.profiler.collectives import first_collective_stream

    return first_collective_stream()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--what", choices=("values", "fsdp", "timing"), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    rank, world, device = setup("neuron")
    run = {"values": run_values, "fsdp": run_fsdp, "timing": run_timing}[args.what]
    results = run(rank, world, device)
    finish(args.out, args.what, rank, results, f"pipelining {args.what}")


if __name__ == "__main__":
    main()
