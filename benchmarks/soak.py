"""Soak: a long training run whose device and host memory must stay flat.

    python benchmarks/soak.py                 # 10,000 steps (about 10 minutes here)
    python benchmarks/soak.py --steps 300     # the smoke CI runs (test_soak_smoke.py)

Trains a tiny transformer LM (dropout on, AdamW) on neuron and samples, every --every steps at
the same point of the step, the live HBM (torch.neuron.memory_allocated), the HBM the allocator
reserves, and the process's resident host memory. Live HBM must be exactly the same number at
every sample after warm-up (each step allocates and frees the same tensors); reserved HBM must
not grow; resident host memory may not grow by more than --rss-slack-mib after warm-up (Python
and the allocator of the host round pages, so a few MiB of drift are not a leak). Exits 1 and
says which figure grew otherwise.
"""

import argparse
import resource
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron  # noqa: F401

VOCAB, SEQ, BATCH = 64, 16, 8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, VOCAB)

    def forward(self, tokens):
        causal = nn.Transformer.generate_square_subsequent_mask(SEQ, device=tokens.device)
        return self.head(self.encoder(self.embed(tokens), mask=causal, is_causal=True))


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--rss-slack-mib", type=float, default=16.0)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyLM().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = torch.randint(0, VOCAB, (BATCH, SEQ + 1), device="neuron")
    samples = []
    for step in range(args.steps):
        logits = model(data[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), data[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step >= args.warmup and step % args.every == 0:
            samples.append((step, torch.neuron.memory_allocated(), torch.neuron.memory_reserved(),
                            rss_mib(), loss.item()))
    first, last = samples[0], samples[-1]
    print(f"{args.steps} steps; samples every {args.every} after step {args.warmup}")
    print(f"live HBM     {first[1]} -> {last[1]} bytes")
    print(f"reserved HBM {first[2]} -> {last[2]} bytes")
    print(f"host RSS     {first[3]:.1f} -> {last[3]:.1f} MiB")
    print(f"loss         {first[4]:.4f} -> {last[4]:.4f}")
    problems = []
    if len({s[1] for s in samples}) != 1:
        problems.append("live HBM changed between samples: " + str(sorted({s[1] for s in samples})))
    if max(s[2] for s in samples) > first[2]:
        problems.append("reserved HBM grew")
    if max(s[3] for s in samples) - first[3] > args.rss_slack_mib:
        problems.append(f"host RSS grew by more than {args.rss_slack_mib} MiB")
    for p in problems:
        print("LEAK:", p)
    print("memory flat" if not problems else "memory NOT flat")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
