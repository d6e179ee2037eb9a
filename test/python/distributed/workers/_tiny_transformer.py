"""A tiny decoder-only transformer for the FSDP2 and tensor-parallel workers: embeddings, two
pre-norm blocks (causal attention through scaled_dot_product_attention, a GELU MLP), a final
LayerNorm and a vocabulary projection. Attention infers its head count from the width of its
projections (view(..., -1, head_dim)), so it also runs with column-sharded q/k/v under TP."""

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB, DIM, HEADS, HIDDEN, SEQ, BLOCKS = 64, 32, 4, 64, 16, 2


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = DIM // HEADS
        self.wq = nn.Linear(DIM, DIM, bias=False)
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        self.wo = nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2)
                   for w in (self.wq, self.wk, self.wv))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, HIDDEN)
        self.w2 = nn.Linear(HIDDEN, DIM)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1 = nn.LayerNorm(DIM)
        self.attn = Attention()
        self.ln2 = nn.LayerNorm(DIM)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, blocks=BLOCKS):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(blocks))
        self.norm = nn.LayerNorm(DIM)
        self.out = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.out(self.norm(x))


def new_model(device):
    """The same initial weights on every rank, device and recipe: made on the CPU from seed 0."""
    torch.manual_seed(0)
    return TinyTransformer().to(device)


def token_batches(steps, batch):
    """Next-token data: (steps, batch, SEQ + 1) token ids from one CPU generator."""
    gen = torch.Generator().manual_seed(1)
    return torch.randint(0, VOCAB, (steps, batch, SEQ + 1), generator=gen)


def lm_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
