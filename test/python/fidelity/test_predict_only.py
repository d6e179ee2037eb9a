"""Predict-only execution (Note [Predict-only execution], torch_neuron/__init__.py): ops are
charged and allocate HBM as when they compute, but compute nothing. The reference is the same
program run with execution on, in a fresh process each."""

import pytest
import torch

import torch_neuron

from conftest import run_python, run_python_json

# A small model with the kinds of kernels the backend has: host-executed ops (boxed and
# typed), attention, convolution, dropout, embedding, random init, copies in, AdamW (foreach).
TRAIN = """
import json, sys, torch, torch_neuron
import torch.nn as nn
torch_neuron.set_execute({execute})

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(100, 64)
        self.conv = nn.Conv1d(64, 64, 3, padding=1)
        self.attn = nn.MultiheadAttention(64, 4, batch_first=True, dropout=0.1)
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 100)
    def forward(self, ids):
        x = self.embed(ids)
        x = x + self.conv(x.transpose(1, 2)).transpose(1, 2)
        x = self.norm(x + self.attn(x, x, x, need_weights=False)[0])
        return self.head(nn.functional.gelu(x))

torch.manual_seed(0)
with torch.device("neuron"):
    model = Block()
ids = torch.randint(0, 100, (4, 16)).to("neuron")
labels = torch.randint(0, 100, (4 * 16,), device="neuron")
opt = torch.optim.AdamW(model.parameters(), foreach=True)
torch.neuron.synchronize()
torch.neuron.reset_peak_memory_stats()
start = torch.neuron.simulated_time_ns()
for _ in range(2):
    loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), labels)
    loss.backward()
    opt.step()
    opt.zero_grad()
torch.neuron.synchronize()
print(json.dumps({{"ns": torch.neuron.simulated_time_ns() - start,
                   "peak": torch.neuron.max_memory_allocated(),
                   "ops": torch_neuron.get_executed_ops()}}))
"""


def test_predicted_time_and_memory_equal_a_real_run():
    real = run_python_json(TRAIN.format(execute=True))
    predicted = run_python_json(TRAIN.format(execute=False))
    assert predicted["ns"] == pytest.approx(real["ns"], rel=1e-9)
    assert predicted["ops"] == real["ops"]
    # The scratch ATen's CPU kernels allocate in HBM does not count in the executed run's peak
    # (Note [Host kernel scratch]): Trainium kernels have none.
    assert predicted["peak"] == real["peak"]


def test_cpu_kernel_scratch_is_not_in_the_peak():
    # A convolution's CPU kernel allocates its im2col columns (twice the output here) and frees
    # them before it returns; they counted in the executed run's peak, which was then twice
    # what predict-only mode reported.
    def peak_of_conv():
        x = torch.zeros(16, 64, 56, 56, device="neuron")
        w = torch.zeros(64, 64, 3, 3, device="neuron")
        torch.neuron.synchronize()
        torch.neuron.empty_cache()  # a larger cached block would count in full
        torch.neuron.reset_peak_memory_stats()
        base = torch.neuron.memory_allocated()
        y = torch.nn.functional.conv2d(x, w, padding=1)
        return torch.neuron.max_memory_allocated() - base, y.untyped_storage().nbytes()

    with torch_neuron.predict_only():
        predicted, output_bytes = peak_of_conv()
    executed, _ = peak_of_conv()
    assert predicted == executed == output_bytes


OPS = [
    ("add", lambda a, b: a + b),
    ("matmul", lambda a, b: a @ b.T),
    ("in-place", lambda a, b: a.mul_(2)),
    ("out=", lambda a, b: torch.add(a, b, out=torch.empty(0, device=a.device))),
    ("view of result", lambda a, b: (a * b).T[1:]),
    ("reduction", lambda a, b: a.sum(1, keepdim=True)),
    ("float64", lambda a, b: a.double().exp()),
    ("softmax", lambda a, b: torch.softmax(a, -1)),
    ("cat", lambda a, b: torch.cat([a, b], 1)),
    ("index_select", lambda a, b: a.index_select(0, torch.tensor([0, 2], device=a.device))),
    ("chunk", lambda a, b: torch.stack(a.chunk(2, 1))),
    ("sort values", lambda a, b: a.sort(1)[0]),
]


@pytest.mark.parametrize("name,op", OPS, ids=[name for name, _ in OPS])
def test_results_have_the_geometry_of_computed_ones(name, op):
    def run(execute):
        a = torch.empty(4, 6, device="neuron")
        b = torch.empty(4, 6, device="neuron")
        torch_neuron.set_execute(execute)
        try:
            out = op(a, b)
        finally:
            torch_neuron.set_execute(True)
        return out, a

    computed, computed_arg = run(True)
    predicted, predicted_arg = run(False)
    for got, want in ((predicted, computed), (predicted_arg, computed_arg)):
        assert got.device == want.device
        assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)


@pytest.mark.parametrize("what,fn", [
    ("nonzero", lambda x: torch.nonzero(x)),
    ("masked_select", lambda x: x.masked_select(x > 0)),
    ("unique", lambda x: torch.unique(x)),
    ("copy to the CPU", lambda x: x.cpu()),
    ("print", lambda x: str(x)),
    ("int item", lambda x: x.long().sum().item()),
    ("bool", lambda x: bool((x > 0).any())),
])
def test_what_needs_values_raises_naming_the_mode(what, fn):
    x = torch.empty(8, device="neuron")
    with torch_neuron.predict_only():
        with pytest.raises(NotImplementedError, match="predict-only"):
            fn(x)
    # The device works afterwards, computing again.
    assert torch.ones(2, device="neuron").sum().item() == 2


def test_float_item_is_nan():
    with torch_neuron.predict_only():
        loss = torch.empty(8, device="neuron").square().mean()
        value = loss.item()
    assert value != value  # NaN


def test_untouched_device_memory_uses_no_ram():
    code = """
    import json, resource, torch, torch_neuron
    torch_neuron.set_execute(False)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    x = torch.randn(1 << 30, device="neuron")          # 4 GiB of float32
    y = (x * 2 + 1).exp()                               # 12 GiB more while it runs
    del y
    w = torch.empty(8192, 8192, device="neuron", dtype=torch.bfloat16)
    z = x[: 8192 * 8192].view(8192, 8192).bfloat16() @ w
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"rss_growth_kib": after - before,
                      "peak": torch.neuron.max_memory_allocated()}))
    """
    out = run_python_json(code)
    assert out["peak"] >= 12 * 2**30
    assert out["rss_growth_kib"] < 200 * 1024, out


def test_out_of_memory_at_the_instance_capacity():
    with torch_neuron.predict_only():
        capacity = torch.neuron.get_device_properties(0).total_memory
        keep = torch.empty(capacity // 4 * 3 // 4, device="neuron")  # 3/4 of HBM in float32
        with pytest.raises(torch.OutOfMemoryError):
            keep * 2
        del keep
    assert torch.ones(1, device="neuron").item() == 1


def test_switched_by_environment_variable():
    out = run_python("import torch_neuron; print(torch_neuron.get_execute())",
                     env={"TORCH_NEURON_EXECUTE": "0"})
    assert out.stdout.strip() == "False", out.stderr
    bad = run_python("import torch, torch_neuron; torch.ones(1, device='neuron')",
                     env={"TORCH_NEURON_EXECUTE": "maybe"})
    assert bad.returncode != 0 and "TORCH_NEURON_EXECUTE='maybe' is not a boolean" in bad.stderr


def test_predict_only_block_restores_execution():
    assert torch_neuron.get_execute()
    with torch_neuron.predict_only():
        assert not torch_neuron.get_execute()
    assert torch_neuron.get_execute()
