"""HBM use of a long training run: 500 steps of a tiny transformer keep
torch.neuron.memory_allocated flat after warm-up, and max_memory_allocated reports the true peak.

Tolerance: exact equality. Each step allocates and frees the same tensors in the same order, and
the allocator's statistics count bytes of live blocks (rounded to 512), not timing or cache
state; so once the optimizer state exists (after the first step) the live bytes at the same
point of every step are the same number. Any growth is a leak: a tensor kept per step, which
would grow memory by at least 512 bytes per step, seen from the third step on; 500 steps (where
2000 took 25 s) also leave room for a cache that grows only now and then.
"""

import gc

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron

STEPS = 500
VOCAB, SEQ = 16, 8


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 8)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(8, VOCAB)

    def forward(self, tokens):
        causal = nn.Transformer.generate_square_subsequent_mask(SEQ, device=tokens.device)
        return self.head(self.encoder(self.embed(tokens), mask=causal, is_causal=True))


@pytest.fixture(scope="module")
def run():
    """Trains for STEPS steps. In steps 100 and STEPS - 1 it samples memory_allocated at every
    point it can observe, including inside backward (gradient hooks) and around the optimizer
    step (hooks)."""
    # Earlier tests may leave neuron tensors in reference cycles; were the collector to free
    # them during this run, memory_allocated would drop by their bytes mid-run.
    gc.collect()
    torch.neuron.empty_cache()
    torch.manual_seed(0)
    model = TinyLM().to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    data = torch.randint(0, VOCAB, (32, 4, SEQ + 1), generator=torch.Generator().manual_seed(0))
    observed = {100: [], STEPS - 1: []}
    sampling = None

    def sample(*_):
        if sampling is not None:
            observed[sampling].append(torch.neuron.memory_allocated())

    for p in model.parameters():
        p.register_hook(lambda grad: sample())
    opt.register_step_pre_hook(sample)
    opt.register_step_post_hook(sample)

    after_step, reserved, step_peaks, losses = {}, {}, {}, []
    torch_neuron.clear_op_tracking()
    for step in range(STEPS):
        sampling = step if step in observed else None
        if sampling is not None:
            torch.neuron.reset_peak_memory_stats()
            assert torch.neuron.max_memory_allocated() == torch.neuron.memory_allocated()
        batch = data[step % 32].to("neuron")
        opt.zero_grad(set_to_none=True)
        sample()
        loss = F.cross_entropy(model(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        sample()
        loss.backward()
        sample()
        opt.step()
        losses.append(loss.item())
        after_step[step] = torch.neuron.memory_allocated()
        reserved[step] = torch.neuron.memory_reserved()
        if step in (100, STEPS - 1):
            step_peaks[step] = torch.neuron.max_memory_allocated()
    return {"after_step": after_step, "reserved": reserved, "step_peaks": step_peaks,
            "observed": observed, "losses": losses, "peak": torch.neuron.max_memory_allocated(),
            "fallback": torch_neuron.get_fallback_ops()}


def test_memory_allocated_is_flat_after_warm_up(run):
    after = run["after_step"]
    assert after[100] == after[STEPS - 1]
    assert len({after[s] for s in range(1, STEPS)}) == 1  # flat from the second step on
    assert run["fallback"] == {}


def test_memory_reserved_is_flat_after_warm_up(run):
    # The caching allocator reuses its blocks: no new segments once training is steady.
    assert run["reserved"][100] == run["reserved"][STEPS - 1]


def test_max_memory_allocated_is_at_least_every_observed_value(run):
    # Peaks were reset at the start of steps 100 and STEPS - 1, which were sampled throughout.
    step_100, last_step = run["observed"][100], run["observed"][STEPS - 1]
    assert len(step_100) > 5
    assert run["step_peaks"][100] >= max(step_100)
    assert run["peak"] >= max(last_step)
    assert step_100 == last_step
    assert run["step_peaks"][100] == run["step_peaks"][STEPS - 1]
    # The peak is inside the step, above what is left once the step is over.
    assert run["step_peaks"][100] > run["after_step"][100]


def test_training_progressed(run):
    assert sum(run["losses"][-32:]) < sum(run["losses"][:32])


def test_max_memory_allocated_sees_a_transient_peak_and_reset_clears_it():
    torch.neuron.reset_peak_memory_stats()
    base = torch.neuron.memory_allocated()
    assert torch.neuron.max_memory_allocated() == base
    t = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    del t
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() == base + (1 << 20)
    stats = torch.neuron.memory_stats()
    assert stats["allocated_bytes.all.peak"] == base + (1 << 20)
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
