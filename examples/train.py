"""Train a small transformer language model on neuron: the README's demo.

    python examples/train.py                       # trains, prints the loss
    python -m torch_neuron run examples/train.py --instance trn2.3xlarge --trace trace.json

Random tokens stand in for a dataset (nothing is downloaded); the loss falls because the model
learns the token statistics of the batch it sees.
"""

import argparse

import torch
import torch.nn as nn
import torch_neuron  # noqa: F401  (registers the "neuron" device)


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=128, heads=4, layers=2, context=64, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(context, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=dropout, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        x = self.embed(tokens) + self.position[:n]
        return self.head(self.blocks(x, mask=causal, is_causal=True))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--device", default="neuron")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyLM().to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    data = torch.randint(0, 64, (args.batch, 65), device=args.device)  # a skewed vocabulary
    for step in range(args.steps):
        logits = model(data[:, :-1])
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), data[:, 1:].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 5 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
