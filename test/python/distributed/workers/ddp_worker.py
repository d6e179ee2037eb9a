"""DistributedDataParallel, unchanged, on one device type: run it with `--device neuron`
(backend "neuron") and with `--device cpu` (backend "gloo") and compare what the ranks save.

Several independent trainings in one launch, each from the same seed:
  buckets  a tiny bucket_cap_mb, so that the gradients travel in several buckets (several
           all-reduces per backward, launched as the buckets become ready)
  no_sync  gradient accumulation: the first of two micro-batches under ddp.no_sync()
  unused   find_unused_parameters=True with a branch the forward skips on odd steps
  allreduce_hook / bf16_hook
           DDP comm hooks (default_hooks.allreduce_hook, bf16_compress_hook), wrapped to
           record on which device the bucket and the values of DDP's futures live
Rank 0 also trains the same model in this process, without DDP, on the full batch ("single"),
on the same device, for each recipe. On neuron, a model with nn.SyncBatchNorm trains under
DDP too ("sync_bn"), against plain BatchNorm on the full batch on the CPU ("sync_bn_single").
Every rank saves its losses, its final parameters, the devices its hooks saw, the bucket sizes
DDP reports and the ops that fell back to the CPU.
"""

import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import _training_common as common

args = common.parse_args()
rank, world, device = common.setup(args.device)

STEPS, GLOBAL_BATCH, IN, HIDDEN, OUT = 4, 16, 16, 32, 4
assert GLOBAL_BATCH % world == 0
LOCAL = GLOBAL_BATCH // world
LR = 0.05


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(IN, HIDDEN)
        self.fc2 = nn.Linear(HIDDEN, HIDDEN)
        self.branch = nn.Linear(HIDDEN, HIDDEN)  # only used when use_branch
        self.fc3 = nn.Linear(HIDDEN, OUT)

    def forward(self, x, use_branch=True):
        h = F.relu(self.fc1(x))
        h = F.relu(self.fc2(h))
        if use_branch:
            h = h + torch.tanh(self.branch(h))
        return self.fc3(h)


def new_model():
    torch.manual_seed(0)  # the same initial weights in every recipe, rank and device
    return Net().to(device)


# The global data set, made on the CPU from one seed: every rank and both runs see the same.
gen = torch.Generator().manual_seed(1)
X = torch.randn(STEPS, 2, GLOBAL_BATCH, IN, generator=gen)  # 2 micro-batches per step
Y = torch.randn(STEPS, 2, GLOBAL_BATCH, OUT, generator=gen)


def batch(step, micro, whole=False):
    rows = slice(None) if whole else slice(rank * LOCAL, (rank + 1) * LOCAL)
    return X[step, micro, rows].to(device), Y[step, micro, rows].to(device)


grad_snapshots = []


def train(model, recipe, whole=False):
    """The training loop of one recipe, for a DDP model (whole=False, this rank's rows) or a
    plain one (whole=True, every row): returns the loss of each step."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        use_branch = recipe != "unused" or step % 2 == 0
        if recipe == "no_sync":
            step_loss = 0.0
            for micro in range(2):
                x, y = batch(step, micro, whole)
                # Accumulate locally on the first micro-batch, all-reduce on the last one.
                ctx = model.no_sync() if (micro == 0 and not whole) else contextlib.nullcontext()
                with ctx:
                    loss = F.mse_loss(model(x, use_branch), y)
                    loss.backward()
                step_loss += loss.item()
                if step == 0 and not whole:
                    # Under no_sync the gradient stays this rank's own; after the last
                    # micro-batch it is the all-reduced one, the same on every rank.
                    grad_snapshots.append(model.module.fc3.weight.grad.clone())
            losses.append(step_loss)
        else:
            x, y = batch(step, 0, whole)
            loss = F.mse_loss(model(x, use_branch), y)
            loss.backward()
            losses.append(loss.item())
        opt.step()
    return losses


def recording(hook, seen):
    """Wraps a DDP comm hook: notes the device of each bucket and of the value of the future
    the hook returns (DDP's futures must carry device tensors, not CPU copies)."""

    def wrapped(state, bucket):
        seen.append(("bucket", str(bucket.buffer().device)))
        fut = hook(state, bucket)

        def check(f):
            value = f.value()
            tensor = value[0] if isinstance(value, list) else value
            seen.append(("future", str(tensor.device)))
            return tensor

        return fut.then(check)

    return wrapped


def ddp_for(recipe, model, seen):
    if recipe == "buckets":
        # 0.001 MB = 1048 bytes, smaller than most weights: DDP's rebuilt buckets (from the
        # second step on) are several instead of one.
        return DDP(model, bucket_cap_mb=0.001)
    if recipe == "unused":
        return DDP(model, find_unused_parameters=True)
    ddp = DDP(model)
    if recipe == "allreduce_hook":
        ddp.register_comm_hook(None, recording(default_hooks.allreduce_hook, seen))
    elif recipe == "bf16_hook":
        ddp.register_comm_hook(None, recording(default_hooks.bf16_compress_hook, seen))
    return ddp


results = {"world": world, "recipes": {}, "single": {}}
for recipe in ("buckets", "no_sync", "unused", "allreduce_hook", "bf16_hook"):
    seen = []
    grad_snapshots.clear()
    common.clear_fallbacks(args.device)
    ddp = ddp_for(recipe, new_model(), seen)
    losses = train(ddp, recipe)
    logging = ddp._get_ddp_logging_data()
    results["recipes"][recipe] = {
        "losses": losses,
        "params": {n: p for n, p in ddp.module.named_parameters()},
        "grad_devices": sorted({str(p.grad.device) for p in ddp.module.parameters()
                                if p.grad is not None}),
        "param_devices": sorted({str(p.device) for p in ddp.module.parameters()}),
        "seen": sorted(set(seen)),
        # DDP rebuilds its buckets after the first step, in the order gradients became ready.
        "buckets": logging.get("rebuilt_bucket_sizes", logging.get("bucket_sizes", "")),
        "buckets_reduced": logging.get("num_buckets_reduced", 0),
        "fallbacks": common.fallbacks(args.device),
        "grad_snapshots": list(grad_snapshots),
    }
    if rank == 0:
        model = new_model()
        results["single"][recipe] = {"losses": train(model, recipe, whole=True),
                                     "params": dict(model.named_parameters())}


# SyncBatchNorm (neuron only: PyTorch refuses it on the CPU): a convolution, batch norm over the
# whole global batch, a head; DDP on this rank's rows against plain BatchNorm on every row in
# one process (on the CPU, rank 0), whose batch statistics are the same.
XC = torch.randn(STEPS, GLOBAL_BATCH, 3, 6, 6, generator=gen)
YC = torch.randn(STEPS, GLOBAL_BATCH, OUT, generator=gen)


def batch_norm_net(sync, on):
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Flatten(), nn.Linear(8 * 6 * 6, OUT))
    return (nn.SyncBatchNorm.convert_sync_batchnorm(net) if sync else net).to(on)


def train_batch_norm(model, rows, on):
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(XC[step, rows].to(on)), YC[step, rows].to(on))
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


if args.device == "neuron":
    common.clear_fallbacks(args.device)
    ddp = DDP(batch_norm_net(sync=True, on=device))
    rows = slice(rank * LOCAL, (rank + 1) * LOCAL)
    results["sync_bn"] = {"losses": train_batch_norm(ddp, rows, device),
                          "state": dict(ddp.module.state_dict()),
                          "fallbacks": common.fallbacks(args.device)}
    if rank == 0:
        model = batch_norm_net(sync=False, on="cpu")
        results["sync_bn_single"] = {"losses": train_batch_norm(model, slice(None), "cpu"),
                                     "state": dict(model.state_dict())}

common.finish(args.out, args.device, rank, results, "ddp")
