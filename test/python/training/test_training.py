"""Training on neuron: an MLP, a small CNN and a small transformer train for 20 steps from the
same initialization on neuron and on the CPU, and the losses must agree step by step.

Every training step uses what a real training loop uses: an optimizer (SGD with momentum, Adam,
AdamW, each as a for-loop, with foreach=True and with fused=True), gradient clipping
(clip_grad_norm_, with a max norm small enough that it clips), an LR scheduler, and
zero_grad(set_to_none=True) and zero_grad(set_to_none=False) on alternate steps. No op may fall
back to the CPU (torch_neuron.get_fallback_ops() is empty afterwards).

Tolerances:

- float32: bit-exact. Neuron ops run ATen's own CPU kernels on device memory (Note [Host
  execution]), so the same ops in the same order give the same bits: losses, gradient norms
  and final parameters and buffers must be equal, not merely close.
- autocast bfloat16: rtol 2e-2 against torch.autocast("cpu", dtype=torch.bfloat16). The two
  autocasts do not cast the same ops: neuron uses CUDA's op lists (softmax, log_softmax and
  the norms run in float32) while CPU autocast runs log_softmax in bfloat16. The losses then
  differ by bfloat16 rounding (observed <= 3e-3 relative over 20 steps); 2e-2 is about 2.5
  bfloat16 epsilons (2**-7), tight enough to catch a wrong cast or a wrong kernel, which moves
  the loss by far more.
"""

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_neuron

STEPS = 20
AUTOCAST_RTOL = 2e-2
MAX_NORM = 0.1  # gradient clipping threshold: below the gradient norms, so clipping acts
VOCAB, SEQ = 32, 8


class TinyTransformer(nn.Module):
    """Token embedding + learned positions, a causal nn.TransformerEncoder, a vocabulary head."""

    def __init__(self, vocab=VOCAB, dim=16, heads=2, layers=2, context=SEQ, dropout=0.0):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.randn(context, dim) * 0.02)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=dropout,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        n = tokens.shape[1]
        causal = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        x = self.embed(tokens) + self.position[:n]
        return self.head(self.encoder(x, mask=causal, is_causal=True))


def make_mlp():
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.GELU(),
                         nn.Linear(32, 4))


def make_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(8, 4))


def mlp_batch(g):
    return torch.randn(16, 16, generator=g), torch.randint(0, 4, (16,), generator=g)


def cnn_batch(g):
    return torch.randn(8, 3, 8, 8, generator=g), torch.randint(0, 4, (8,), generator=g)


def lm_batch(g):
    tokens = torch.randint(0, VOCAB, (4, SEQ + 1), generator=g)
    return tokens[:, :-1], tokens[:, 1:]


# name -> (model factory, batch factory). Each batch is (input, class targets); the loss is
# cross-entropy over the last dimension of the output.
MODELS = {
    "mlp": (make_mlp, mlp_batch),
    "cnn": (make_cnn, cnn_batch),
    "transformer": (TinyTransformer, lm_batch),
}

OPTIMIZERS = {
    "sgd": lambda params, **kw: torch.optim.SGD(params, lr=0.05, momentum=0.9, **kw),
    "adam": lambda params, **kw: torch.optim.Adam(params, lr=1e-2, **kw),
    "adamw": lambda params, **kw: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.1, **kw),
}

MODES = {"forloop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}

_initial_models = {}


def initial_model(name):
    """One initialization per model, shared by every run that trains it."""
    if name not in _initial_models:
        torch.manual_seed(0)
        _initial_models[name] = MODELS[name][0]()
    return _initial_models[name]


def train(model, device, optimizer="adamw", mode="forloop", batch=lm_batch, autocast=False,
          steps=STEPS, max_norm=MAX_NORM):
    """Trains a copy of `model` on `device`; returns (losses, gradient norms, trained model)."""
    model = copy.deepcopy(model).to(device)
    opt = OPTIMIZERS[optimizer](model.parameters(), **MODES[mode])
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps, eta_min=1e-3)
    losses, norms = [], []
    for step in range(steps):
        # Two batches in turn: the model can fit them, so the loss falls.
        x, y = (t.to(device) for t in batch(torch.Generator().manual_seed(step % 2)))
        opt.zero_grad(set_to_none=step % 2 == 0)
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):
            out = model(x)
            loss = F.cross_entropy(out.flatten(0, -2), y.flatten())
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm).item())
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses, norms, model


def train_on_neuron(*args, **kwargs):
    torch_neuron.clear_op_tracking()
    result = train(*args, **kwargs)
    assert torch_neuron.get_fallback_ops() == {}
    return result


CASES = [(m, o, mode) for m in MODELS for o in OPTIMIZERS for mode in MODES]


@pytest.mark.parametrize("model_name, optimizer, mode", CASES)
def test_float32_training_is_bit_exact(model_name, optimizer, mode):
    model, batch = initial_model(model_name), MODELS[model_name][1]
    cpu_losses, cpu_norms, cpu_model = train(model, "cpu", optimizer, mode, batch)
    losses, norms, trained = train_on_neuron(model, "neuron", optimizer, mode, batch)
    executed = torch_neuron.get_executed_ops()
    fused_op = {"sgd": "aten::_fused_sgd_", "adam": "aten::_fused_adam_",
                "adamw": "aten::_fused_adamw_"}[optimizer]
    assert (fused_op in executed) == (mode == "fused")  # the mode really ran on the device
    assert (mode == "foreach") <= any(op.startswith("aten::_foreach_add") for op in executed)
    assert losses == cpu_losses
    assert norms == cpu_norms
    assert sum(n > MAX_NORM for n in norms) > STEPS // 2, "clipping should have acted"
    assert losses[-2] < losses[0]
    for (name, got), want in zip(trained.state_dict().items(), cpu_model.state_dict().values()):
        assert got.device.type == "neuron", name
        assert torch.equal(got.cpu(), want), name  # parameters, BatchNorm running stats


@pytest.mark.parametrize("model_name, optimizer, mode", CASES)
def test_autocast_bfloat16_training_matches_cpu_autocast(model_name, optimizer, mode):
    model, batch = initial_model(model_name), MODELS[model_name][1]
    cpu_losses, _, _ = train(model, "cpu", optimizer, mode, batch, autocast=True)
    losses, _, trained = train_on_neuron(model, "neuron", optimizer, mode, batch, autocast=True)
    torch.testing.assert_close(losses, cpu_losses, rtol=AUTOCAST_RTOL, atol=0)
    assert losses[-2] < losses[0]
    assert all(p.dtype == torch.float32 for p in trained.parameters())  # autocast keeps masters


def test_zero_grad_set_to_none_false_keeps_zeroed_gradients_on_device():
    model = make_mlp().to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = (t.to("neuron") for t in mlp_batch(torch.Generator().manual_seed(0)))
    F.cross_entropy(model(x), y).backward()
    grads = [p.grad for p in model.parameters()]
    opt.zero_grad(set_to_none=False)
    for p, g in zip(model.parameters(), grads):
        assert p.grad is g and g.device.type == "neuron"  # the same tensors, zeroed in place
        assert torch.count_nonzero(g).item() == 0
    opt.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in model.parameters())


def dropout_losses(seed, device="neuron"):
    torch.manual_seed(0)
    model = TinyTransformer(dropout=0.2)
    torch.manual_seed(seed)
    return (train_on_neuron if device == "neuron" else train)(model, device, "adamw",
                                                              steps=10)[0]


def test_dropout_training_is_reproducible_with_the_same_seed():
    first = dropout_losses(seed=7)
    assert dropout_losses(seed=7) == first
    assert dropout_losses(seed=8) != first  # dropout is active and follows the seed


def test_dropout_masks_are_the_neuron_streams_not_the_cpus():
    # The neuron generator is a counter-based Philox stream like CUDA's (Note [Philox
    # generator]): after torch.manual_seed the two devices draw different dropout masks (the
    # same seed reproduces each device's own, test_dropout_training_is_reproducible_...).
    assert dropout_losses(seed=7) != dropout_losses(seed=7, device="cpu")


def test_dropout_draws_from_the_neuron_generator():
    # Note [Dropout draws from the neuron generator]: torch.neuron's seed and state decide the
    # masks, and neuron dropout leaves the CPU's random stream alone.
    x = torch.ones(256, device="neuron")
    cpu_state = torch.get_rng_state()
    torch.neuron.manual_seed(3)
    state = torch.neuron.get_rng_state()
    first = F.dropout(x, 0.5).cpu()
    assert torch.equal(torch.get_rng_state(), cpu_state)
    torch.neuron.set_rng_state(state)
    assert torch.equal(F.dropout(x, 0.5).cpu(), first)
    assert not torch.equal(F.dropout(x, 0.5).cpu(), first)
    assert set(first.unique().tolist()) == {0.0, 2.0}
