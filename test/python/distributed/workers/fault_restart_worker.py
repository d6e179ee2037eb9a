"""FSDP2 training that survives a simulated hardware fault by restarting under torchrun.

    torchrun --nproc-per-node 2 --max-restarts 1 fault_restart_worker.py --out DIR [--fault]

Each step ends with a torch.distributed.checkpoint of the model and optimizer; a (re)started
job resumes after the newest complete checkpoint. With --fault, rank 1's NeuronCore reports an
uncorrectable HBM error in the middle of step FAULT_STEP of the first attempt
(torch_neuron.inject_fault): that rank raises, torchrun stops the job and starts it again, and
the second attempt finishes from the checkpoint. Rank 0 writes the final loss and parameters
to DIR/result.pt, and every attempt appends a line to DIR/attempts.txt.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.fsdp import fully_shard

import torch_neuron
from _tiny_transformer import SEQ, VOCAB, TinyTransformer

STEPS, FAULT_STEP = 6, 3

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--fault", action="store_true")
args = parser.parse_args()

dist.init_process_group("neuron")
rank, attempt = dist.get_rank(), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
device = torch.device("neuron", int(os.environ["LOCAL_RANK"]))
torch.manual_seed(0)
model = TinyTransformer().to(device)
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)


def checkpoint_dir(step):
    return os.path.join(args.out, f"step{step}")


# Resume after the newest complete checkpoint (DCP writes .metadata last).
done = [s for s in range(STEPS) if os.path.exists(os.path.join(checkpoint_dir(s), ".metadata"))]
start = max(done) + 1 if done else 0
if done:
    model_sd, optim_sd = get_state_dict(model, opt)
    state = {"model": model_sd, "optim": optim_sd}
    dcp.load(state, checkpoint_id=checkpoint_dir(max(done)))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
if rank == 0:
    with open(os.path.join(args.out, "attempts.txt"), "a") as f:
        f.write(f"attempt {attempt} starts at step {start}\n")

loss = None
for step in range(start, STEPS):
    if args.fault and attempt == 0 and rank == 1 and step == FAULT_STEP:
        torch_neuron.inject_fault("hbm_ue", after_launches=20)  # mid-forward of this step
    g = torch.Generator().manual_seed(step)  # the same data whatever attempt runs the step
    ids = torch.randint(0, VOCAB, (4, SEQ + 1), generator=g)[rank::2].to(device)
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    model_sd, optim_sd = get_state_dict(model, opt)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=checkpoint_dir(step))

losses = torch.stack([loss.detach()]).to(device)
dist.all_reduce(losses)  # the mean over ranks is the loss of the whole batch
params = {name: p.full_tensor().cpu() for name, p in model.named_parameters()}
if rank == 0:
    torch.save({"loss": (losses / 2).item(), "params": params}, os.path.join(args.out, "result.pt"))
dist.destroy_process_group()
