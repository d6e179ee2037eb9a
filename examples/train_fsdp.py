"""Train a small transformer language model with FSDP2 on neuron: each rank keeps a shard of the
weights, gathers a block's parameters when it runs it and reduce-scatters the gradients.

    python -m torch_neuron run --nproc-per-node 4 examples/train_fsdp.py --trace trace.json
    torchrun --nproc-per-node 4 examples/train_fsdp.py
    python examples/train_fsdp.py                  # one rank

Each rank runs on NeuronCore neuron:LOCAL_RANK with the c10d backend "neuron". `fully_shard`
wraps each block, then the root; parameters are gathered in bfloat16 for compute and gradients
reduced in float32 (MixedPrecisionPolicy). Random tokens from a seeded generator stand in for
a dataset (nothing is downloaded); every rank trains on its own slice of the global batch.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

import torch_neuron  # noqa: F401  (registers the "neuron" device and backend)


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=64, heads=4, layers=2, context=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(context, dim))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True,
                                       norm_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        """Logits of every position, (batch x positions, vocab)."""
        n = tokens.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tokens.device).triu(1)
        x = self.embed(tokens) + self.position[:n]
        for block in self.blocks:
            x = block(x, src_mask=causal, is_causal=True)
        # Flattened before the head, whose output is then no view: FSDP2 warns about a root
        # module that returns a view.
        return self.head(self.norm(x).flatten(0, 1))


def init_distributed() -> None:
    """torchrun's environment, or a group of one when the script runs on its own."""
    torch.neuron.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "RANK" in os.environ:
        dist.init_process_group(backend="neuron")
    else:
        dist.init_process_group(backend="neuron", store=dist.HashStore(), rank=0, world_size=1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4, help="sequences per rank")
    parser.add_argument("--context", type=int, default=32)
    args = parser.parse_args()

    init_distributed()
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("neuron", torch.neuron.current_device())
    mesh = init_device_mesh("neuron", (world,))

    torch.manual_seed(0)  # the same initial weights on every rank, before sharding
    model = TinyLM(context=args.context).to(device)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    # The global batch from one seeded generator; this rank's slice of it.
    tokens = torch.randint(0, 64, (world * args.batch, args.context + 1),
                           generator=torch.Generator().manual_seed(1))  # a skewed vocabulary
    data = tokens[rank * args.batch:(rank + 1) * args.batch].to(device)
    for step in range(args.steps):
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.float(), data[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss)  # the global batch's loss (SUM: every backend has it)
        if rank == 0:
            print(f"step {step:3d}  loss {mean_loss.item() / world:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
