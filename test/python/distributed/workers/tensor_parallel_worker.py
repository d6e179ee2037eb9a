"""DTensor and tensor parallelism, unchanged, on one device type: run it on 4 ranks with
`--device neuron` (backend "neuron") and with `--device cpu` (backend "gloo") and compare what
the ranks save.

  dtensor  on init_device_mesh(device, (4,)): distribute_tensor with Shard(0), Shard(1) (also
           uneven) and Replicate, redistribute between them and from Partial, full_tensor
           round trips, a DTensor matmul; where the local shards live
  mlp      parallelize_module(ColwiseParallel w1, RowwiseParallel w2) on an MLP fed a
           replicated input: output and weight gradients next to the unsharded module's
  sp_loss  SequenceParallel LayerNorm -> Colwise/Rowwise MLP -> vocabulary-sharded output
           projection (ColwiseParallel, Shard(-1)) with loss_parallel cross entropy: loss,
           logits and gradients next to the unsharded module's
  fsdp_tp  2-D: init_device_mesh(device, (2, 2), mesh_dim_names=("dp", "tp")), tensor
           parallel attention and MLP on "tp", fully_shard per block and root on "dp", AdamW
           for a few steps: losses and full parameters (rank 0 also trains unsharded on the
           full batch)
"""

import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                               SequenceParallel, loss_parallel,
                                               parallelize_module)

import _tiny_transformer as tt
import _training_common as common

args = common.parse_args()
rank, world, device = common.setup(args.device)
assert world == 4, "the worker is written for 4 ranks (a (4,) and a (2, 2) mesh)"
results = {"world": world}


def cpu_randn(*shape, seed):
    """The same values on every rank and in both runs."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def full(t):
    return t.full_tensor() if isinstance(t, DTensor) else t


def grads(module):
    return {n: full(p.grad) for n, p in module.named_parameters()}


# ---- dtensor: placements, redistribute, full_tensor round trips ------------------------------
mesh = init_device_mesh(device.type, (world,))
x = cpu_randn(8, 12, seed=10).to(device)
uneven = cpu_randn(10, 3, seed=11).to(device)  # 10 rows over 4 ranks: 3, 3, 3, 1
checks = {"mesh_device_type": mesh.device_type, "round_trips": {}, "local_devices": set()}
for name, t, placements in (("shard0", x, [Shard(0)]), ("shard1", x, [Shard(1)]),
                            ("replicate", x, [Replicate()]),
                            ("uneven_shard0", uneven, [Shard(0)])):
    d = distribute_tensor(t, mesh, placements)
    checks["local_devices"].add(str(d.to_local().device))
    checks["round_trips"][name] = torch.equal(d.full_tensor(), t)
    checks[f"local_shape_{name}"] = tuple(d.to_local().shape)
d = distribute_tensor(x, mesh, [Shard(0)])
for name, target in (("shard0_to_shard1", [Shard(1)]), ("shard1_to_replicate", [Replicate()]),
                     ("replicate_to_shard0", [Shard(0)])):
    d = d.redistribute(mesh, target)
    checks["local_devices"].add(str(d.to_local().device))
    checks["round_trips"][name] = (torch.equal(d.full_tensor(), x)
                                   and d.placements == tuple(target))
# Partial -> Replicate is an all-reduce: integer-valued floats so the sum is exact.
partial_local = torch.arange(12.0, device=device).reshape(3, 4) * (rank + 1)
d = DTensor.from_local(partial_local, mesh, [Partial()])
checks["round_trips"]["partial_to_replicate"] = torch.equal(
    d.redistribute(mesh, [Replicate()]).to_local().cpu(),
    torch.arange(12.0).reshape(3, 4) * sum(range(1, world + 1)))
# Partial -> Shard(0) is a reduce-scatter.
checks["round_trips"]["partial_to_shard0"] = torch.equal(
    d.redistribute(mesh, [Shard(0)]).full_tensor().cpu(),
    torch.arange(12.0).reshape(3, 4) * sum(range(1, world + 1)))
# A DTensor op: row-sharded x times a replicated matrix stays row-sharded.
w = cpu_randn(12, 5, seed=12).to(device)
product = distribute_tensor(x, mesh, [Shard(0)]) @ distribute_tensor(w, mesh, [Replicate()])
checks["matmul_placements"] = str(product.placements)
checks["matmul"] = product.full_tensor()
checks["matmul_reference"] = x @ w
checks["local_devices"] = sorted(checks["local_devices"])
results["dtensor"] = checks


# ---- mlp: ColwiseParallel / RowwiseParallel ---------------------------------------------------
class MLP(nn.Module):
    def __init__(self, dim=16, hidden=64):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.relu(self.w1(x)))


torch.manual_seed(0)
reference = MLP().to(device)
tp_mlp = parallelize_module(copy.deepcopy(reference), mesh,
                            {"w1": ColwiseParallel(), "w2": RowwiseParallel()})
inp = cpu_randn(4, 16, seed=13).to(device)
common.clear_fallbacks(args.device)
out = tp_mlp(inp)
out.sum().backward()
mlp_fallbacks = common.fallbacks(args.device)
ref_out = reference(inp)
ref_out.sum().backward()
results["mlp"] = {
    "out": out, "ref_out": ref_out, "grads": grads(tp_mlp), "ref_grads": grads(reference),
    "out_is_plain_tensor": not isinstance(out, DTensor),
    "weight_placements": {n: str(p.placements) for n, p in tp_mlp.named_parameters()},
    "local_devices": sorted({str(p.to_local().device) for p in tp_mlp.parameters()}),
    "fallbacks": mlp_fallbacks,
}


# ---- sp_loss: SequenceParallel LayerNorm, TP MLP, vocabulary-sharded loss_parallel -----------
class SeqModel(nn.Module):
    def __init__(self, dim=16, vocab=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = MLP(dim)
        self.out = nn.Linear(dim, vocab, bias=False)

    def forward(self, x):
        return self.out(self.mlp(self.norm(x)))


BATCH, SEQ, VOCAB = 2, 8, 32
torch.manual_seed(1)
reference = SeqModel(vocab=VOCAB).to(device)
sp_model = parallelize_module(copy.deepcopy(reference), mesh, {
    "norm": SequenceParallel(),  # input and output sharded on the sequence dimension
    "mlp.w1": ColwiseParallel(input_layouts=Shard(1)),  # all-gathers the sequence
    "mlp.w2": RowwiseParallel(output_layouts=Shard(1)),  # reduce-scatters it back
    "out": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                           use_local_output=False),  # logits stay sharded over the vocabulary
})
seq_x = cpu_randn(BATCH, SEQ, 16, seed=14).to(device)
targets = torch.randint(0, VOCAB, (BATCH, SEQ),
                        generator=torch.Generator().manual_seed(15)).to(device)
chunk = SEQ // world
common.clear_fallbacks(args.device)
logits = sp_model(seq_x[:, rank * chunk:(rank + 1) * chunk])  # this rank's part of the sequence
with loss_parallel():
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    loss.backward()
sp_fallbacks = common.fallbacks(args.device)
ref_logits = reference(seq_x)
ref_loss = F.cross_entropy(ref_logits.flatten(0, 1), targets.flatten())
ref_loss.backward()
results["sp_loss"] = {
    "loss": full(loss), "ref_loss": ref_loss, "logits": logits.full_tensor(),
    "ref_logits": ref_logits, "logits_placements": str(logits.placements),
    "grads": grads(sp_model), "ref_grads": grads(reference),
    "local_devices": sorted({str(p.to_local().device) for p in sp_model.parameters()}),
    "fallbacks": sp_fallbacks,
}


# ---- fsdp_tp: 2-D, tensor parallel inside each block on "tp", FSDP2 on "dp" ------------------
STEPS, GLOBAL_BATCH, LR = 3, 4, 1e-2
mesh2d = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))
dp_rank, dp_size = mesh2d["dp"].get_local_rank(), mesh2d["dp"].size()
LOCAL = GLOBAL_BATCH // dp_size
DATA = tt.token_batches(STEPS, GLOBAL_BATCH)
BLOCK_PLAN = {"attn.wq": ColwiseParallel(), "attn.wk": ColwiseParallel(),
              "attn.wv": ColwiseParallel(), "attn.wo": RowwiseParallel(),
              "mlp.w1": ColwiseParallel(), "mlp.w2": RowwiseParallel()}


def train(model, whole):
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.1)
    losses = []
    for step in range(STEPS):
        rows = DATA[step] if whole else DATA[step, dp_rank * LOCAL:(dp_rank + 1) * LOCAL]
        rows = rows.to(device)
        opt.zero_grad()
        loss = tt.lm_loss(model(rows[:, :-1]), rows[:, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


model = tt.new_model(device)
for block in model.blocks:
    parallelize_module(block, mesh2d["tp"], BLOCK_PLAN)
    fully_shard(block, mesh=mesh2d["dp"])
fully_shard(model, mesh=mesh2d["dp"])
common.clear_fallbacks(args.device)
losses = train(model, whole=False)
record = {
    "losses": losses,
    "params": {n: p.full_tensor().detach() for n, p in model.named_parameters()},
    "placements": {n: str(p.placements) for n, p in model.named_parameters()},
    "local_devices": sorted({str(p.to_local().device) for p in model.parameters()}),
    "mesh": (mesh2d.device_type, mesh2d.mesh_dim_names, mesh2d.mesh.tolist()),
    "fallbacks": common.fallbacks(args.device),
}
if rank == 0:
    single = tt.new_model(device)
    record["single_losses"] = train(single, whole=True)
    record["single_params"] = {n: p.detach() for n, p in single.named_parameters()}
results["fsdp_tp"] = record

common.finish(args.out, args.device, rank, results, "tensor parallel")
