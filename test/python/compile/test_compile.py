"""torch.compile on neuron: TorchInductor's C++ kernels on neuron memory, each charged as one
launch (torch_neuron/compile, Note [Fused kernel cost]). The references are the same
programs run eagerly on neuron (and on the CPU), each with its own copy of the inputs."""

import copy
import inspect
import math
import os
import pathlib

import pytest
import torch
import torch.nn as nn

import torch_neuron
from conftest import run_python, run_python_json
from torch_neuron import profiler


def test_neuron_is_a_listed_backend():
    assert "neuron" in torch._dynamo.list_backends()


def test_compiled_model_matches_cpu_forward_and_backward():
    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    model = copy.deepcopy(cpu).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(8, 16)
    want = cpu(x)
    want.sum().backward()
    torch_neuron.clear_op_tracking()
    got = compiled(x.to("neuron"))
    got.sum().backward()
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), want)
    for p, q in zip(model.parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)
    ops = torch_neuron.get_executed_ops()
    assert any(name.startswith("cpp_fused_") for name in ops), ops  # generated kernels ran
    assert torch_neuron.get_fallback_ops() == {}


def test_default_inductor_backend_compiles_for_neuron_and_leaves_cpu_alone():
    # Plain torch.compile (Inductor) works on neuron tensors, and CPU Inductor in the same
    # process still compiles for the CPU.
    out = run_python_json("""
        import json, torch, torch_neuron
        f = lambda x, y: (torch.relu(2 * x + y).sin() * 3).sum(-1)
        x, y = torch.randn(64, 128), torch.randn(64, 128)
        on_neuron = torch.compile(f)(x.to("neuron"), y.to("neuron"))
        on_cpu = torch.compile(f)(x.clone(), y.clone())
        print(json.dumps([on_neuron.device.type, torch.allclose(on_neuron.cpu(), f(x, y), atol=1e-5),
                          on_cpu.device.type, torch.allclose(on_cpu, f(x, y), atol=1e-5),
                          sorted(k for k in torch_neuron.get_executed_ops() if "fused" in k)]))
    """)
    assert out[:4] == ["neuron", True, "cpu", True]
    assert len(out[4]) == 1 and out[4][0].startswith("cpp_fused_")


def test_cpp_wrapper_is_refused_with_a_clear_message():
    out = run_python("""
        import torch, torch_neuron
        torch.compile(lambda x: x.sin(), options={"cpp_wrapper": True})(torch.ones(2, device="neuron"))
    """)
    assert out.returncode != 0
    assert "(cpp_wrapper=True) is not supported for the neuron device" in out.stderr



def test_factories_on_the_default_neuron_device_compile_on_the_current_device():
    # torch.set_default_device("neuron") gives the graph's factories a device without an
    # index; Inductor asks the device interface's Worker for the current one, as for CUDA.
    def f(x):
        return torch.zeros_like(x) + torch.ones(x.shape) * torch.arange(x.shape[0]) \
            + torch.full((3,), 2.0).sum()

    x = torch.linspace(-1, 1, 3)
    want = f(x)
    torch.set_default_device("neuron")
    try:
        for index in (0, 1):
            torch.neuron.set_device(index)
            # PyTorch's fake-tensor cache keys a factory on device "neuron" without the
            # current index (so does it on "cuda"): start each device afresh.
            torch._dynamo.reset()
            torch._subclasses.fake_tensor.FakeTensorMode.cache_clear()
            got = torch.compile(f)(torch.linspace(-1, 1, 3))
            assert got.device == torch.device("neuron", index)
            torch.testing.assert_close(got.cpu(), want)
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("backend", ["neuron", "inductor"])
def test_a_graph_on_another_device_than_the_current_one_runs_there(backend):
    # neuron:0 is current, the tensors live on neuron:1: the wrapper enters a device guard, as
    # for CUDA, so buffers, results and charges are neuron:1's (before: a pointwise graph
    # returned its result on neuron:0, a graph with a matmul raised).
    torch._dynamo.reset()
    torch.neuron.set_device(0)
    x = torch.randn(8, 8)
    a = x.to("neuron:1")
    pointwise = torch.compile(lambda t: t.sin() * 2, backend=backend)
    matmul = torch.compile(lambda t: (t @ t).relu() + 1, backend=backend)
    torch.neuron.synchronize(1)
    before = torch.neuron.simulated_time_ns(1)
    for fn, eager in ((pointwise, lambda t: t.sin() * 2), (matmul, lambda t: (t @ t).relu() + 1)):
        got = fn(a)
        assert got.device == torch.device("neuron", 1)
        torch.testing.assert_close(got.cpu(), eager(x))
    torch.neuron.synchronize(1)
    assert torch.neuron.simulated_time_ns(1) > before
    assert torch.neuron.current_device() == 0


def test_device_interface_worker_answers_for_neuron():
    from torch._dynamo.device_interface import get_interface_for_device

    torch_neuron.compile.register()
    worker = get_interface_for_device("neuron").Worker
    torch.neuron.set_device(1)
    assert worker.current_device() == 1
    # The kernels are CPU code, so Inductor sizes them from the CPU's properties.
    assert worker.get_device_properties("neuron:1").multi_processor_count == os.cpu_count()
    assert worker.get_device_properties() == worker.get_device_properties(0)
    with pytest.raises(ValueError, match="invalid device neuron:99"):
        worker.get_device_properties(99)
    with pytest.raises(ValueError, match="expected a neuron device"):
        worker.get_device_properties("cpu")
    with pytest.raises(TypeError, match="expected a neuron device"):
        worker.get_device_properties(1.5)

# -- training programs: compiled against eager, both on neuron ----------------------------------


class Block(nn.Module):
    """A pre-norm transformer block: attention (causal, or with a mask) and an MLP."""

    def __init__(self, d=64, heads=4, masked=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads, self.masked = heads, masked

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, -1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.masked:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
            a = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, attn_implementation="sdpa")
    return LlamaForCausalLM(config)


def llama_loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


def mse_loss(model, x):
    return model(x).square().mean()


def three_steps(model, inputs, loss_fn, compile_it):
    """Losses, outputs and gradients of 3 SGD steps."""
    run = torch.compile(model, backend="neuron") if compile_it else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = loss_fn(run, inputs)
        loss.backward()
        losses.append(loss.detach())
        opt.step()
    grads = [p.grad.detach().clone() for p in model.parameters()]
    return losses, grads


@pytest.mark.parametrize("name", ["mlp", "transformer-causal", "transformer-masked",
                                  "hf-tiny-llama"])
def test_compiled_training_matches_eager(name):
    torch.manual_seed(0)
    if name == "mlp":
        model, loss_fn = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64),
                                       nn.Linear(64, 8)), mse_loss
        inputs = torch.randn(16, 32)
    elif name.startswith("transformer"):
        model, loss_fn = Block(masked=name.endswith("masked")), mse_loss
        inputs = torch.randn(4, 16, 64)
    else:
        model, loss_fn = tiny_llama(), llama_loss
        inputs = torch.randint(0, 128, (2, 16))
    model.to("neuron")
    eager_model, compiled_model = copy.deepcopy(model), copy.deepcopy(model)
    fallbacks = torch_neuron.get_fallback_ops()
    eager = three_steps(eager_model, inputs.to("neuron"), loss_fn, compile_it=False)
    compiled = three_steps(compiled_model, inputs.to("neuron"), loss_fn, compile_it=True)
    assert torch_neuron.get_fallback_ops() == fallbacks  # no new CPU fallbacks
    for got, want in zip(compiled[0], eager[0]):
        assert got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-5)
    for got, want in zip(compiled[1], eager[1]):
        assert got.device.type == "neuron"
        torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4)


def test_compiled_step_launches_fewer_ops_and_is_predicted_faster():
    torch.manual_seed(0)
    model = Block(d=128).to("neuron")
    compiled = torch.compile(copy.deepcopy(model), backend="neuron")
    x = torch.randn(8, 64, 128, device="neuron")

    def measure(m):
        m(x).square().mean().backward()  # warm-up (compiles)
        torch.neuron.synchronize()
        torch_neuron.clear_op_tracking()
        start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        start.record()
        m(x).square().mean().backward()
        end.record()
        end.synchronize()
        return start.elapsed_time(end), sum(torch_neuron.get_executed_ops().values())

    eager_ms, eager_ops = measure(model)
    compiled_ms, compiled_ops = measure(compiled)
    assert compiled_ops < eager_ops
    assert compiled_ms < eager_ms


def test_one_fused_kernel_is_charged_by_the_formula():
    """relu(x * y + 1) over [256, 1024] float32 is one kernel of one loop: it reads x and y and
    writes the result (3 x 1 MiB of HBM), makes two VectorE passes, a tensor_tensor for x * y
    (2 cycles per element and lane) and a tensor_scalar for + 1 and max 0 (its two operators,
    1 cycle), each with 100 cycles per 2048-element instruction, and pays the launch overhead
    once (Note [Fused kernel cost]). Its graph is that one kernel, so the graph's launch (Note
    [Compiled graph schedule]) takes what the kernel alone would."""
    f = torch.compile(lambda x, y: torch.relu(x * y + 1), backend="neuron")
    x = torch.randn(256, 1024, device="neuron")
    y = torch.randn(256, 1024, device="neuron")
    f(x, y)
    torch_neuron.clear_op_tracking()
    with profiler.profile() as prof:
        out = f(x, y)
    torch.testing.assert_close(out.cpu(), torch.relu(x.cpu() * y.cpu() + 1))
    assert [k for k in torch_neuron.get_executed_ops() if k.startswith("cpp_fused_")] != []
    (kernel,) = [r for r in prof.records if r["name"].startswith("compiled graph")]
    info = torch_neuron._C._instance_info()
    per_lane = math.ceil(256 * 1024 / (128 * info["physical_cores_per_logical"]))
    vector_ns = (3 * per_lane + 2 * 100 * math.ceil(per_lane / 2048)) / info["vector_engine_ghz"]
    bytes_moved = 3 * 256 * 1024 * 4
    hbm_ns = bytes_moved / info["stream_gbps_per_core"]
    assert kernel["bytes"] == bytes_moved
    assert kernel["engine_ns"]["VectorE"] == pytest.approx(vector_ns, rel=1e-9)
    assert kernel["engine_ns"]["DMA"] == pytest.approx(hbm_ns, rel=1e-9)
    assert kernel["duration_ns"] == pytest.approx(1500 + max(vector_ns, hbm_ns), rel=1e-9)


def test_a_fused_chain_of_activation_functions_makes_one_scalare_pass_each():
    """An activation instruction applies one function (Note [Fused kernel cost]): fused, eight
    chained functions make eight ScalarE passes, about what the eight eager ops cost (before:
    one pass)."""
    def chain(x):
        return x.sin().exp().tanh().sigmoid().log1p().sqrt().cos().erf()

    compiled = torch.compile(chain, backend="neuron")
    x = torch.randn(256, 1024, device="neuron")
    compiled(x)

    def scalar_ns(fn):
        with profiler.profile() as prof:
            out = fn(x)
        return out, sum(r["engine_ns"].get("ScalarE", 0) for r in prof.records)

    one = torch.compile(lambda x: x.sin(), backend="neuron")
    one(x)
    fused_out, fused = scalar_ns(compiled)
    eager_out, eager = scalar_ns(chain)
    torch.testing.assert_close(fused_out.cpu(), eager_out.cpu())
    # Eight passes (the kernel's passes share their instructions' fixed overheads, so a little
    # under eight times one), about what eager charges (a few functions do extra work there).
    assert 7 * scalar_ns(one)[1] < fused <= 8 * scalar_ns(one)[1]
    assert fused == pytest.approx(eager, rel=0.1)


def test_a_fused_chain_of_arithmetic_costs_its_instructions():
    """Six rounds of x = x * y + 1 over [256, 1024] float32, one loop (Note [Fused kernel
    cost]): each x * y is a tensor_tensor that also applies the previous + 1
    (scalar_tensor_tensor), and the last + 1 is a tensor_scalar: six two-input passes and one
    one-input pass (before: one pass for the whole chain), at 2 and 1 cycles per element and
    lane, with 100 cycles per 2048 elements of each kind of pass (trnsim's FusedKernel: one
    instruction stream per kind). (Inductor splits longer chains into loops of its own
    choosing.)"""
    def chain(x, y):
        for _ in range(6):
            x = x * y + 1
        return x

    compiled = torch.compile(chain, backend="neuron")
    x = torch.randn(256, 1024, device="neuron") / 4
    y = torch.randn(256, 1024, device="neuron") / 4
    compiled(x, y)
    with profiler.profile() as prof:
        out = compiled(x, y)
    torch.testing.assert_close(out.cpu(), chain(x.cpu(), y.cpu()))
    info = torch_neuron._C._instance_info()
    per_lane = math.ceil(256 * 1024 / (128 * info["physical_cores_per_logical"]))
    two_input, one_input = 6 * per_lane, per_lane
    cycles = (2 * two_input + 100 * math.ceil(two_input / 2048)
              + one_input + 100 * math.ceil(one_input / 2048))
    expected = cycles / info["vector_engine_ghz"]
    (graph,) = [r for r in prof.records if r["name"].startswith("compiled graph")]
    assert graph["engine_ns"]["VectorE"] == pytest.approx(expected, rel=1e-9)


def busy_per_engine(fn, *args):
    """fn(*args) and the simulated busy time of each engine it charged, ns."""
    with torch.no_grad(), profiler.profile() as prof:
        out = fn(*args)
    busy = {}
    for r in prof.records:
        for engine, ns in r["engine_ns"].items():
            busy[engine] = busy.get(engine, 0) + ns
    return out, busy


def test_fused_gelu_and_layer_norm_cost_no_more_than_their_eager_ops():
    """Inductor decomposes GELU into erf arithmetic and LayerNorm into reductions and
    arithmetic, more instructions than Trainium runs them with (one GELU activation; bn_stats).
    A fused kernel costs no more engine time than the ATen ops fused into it would alone
    (Note [Fused kernel bound] in trnsim's work.cpp): per engine, what the eager ops cost,
    less the instruction overheads their passes share in one kernel. (Before: VectorE more
    than twice the eager ops', and the compiled block predicted slower than eager.)"""
    norm = torch.nn.LayerNorm(1024).to("neuron")

    def block(x, y):
        return torch.nn.functional.gelu(norm(x)) + y

    compiled = torch.compile(block, backend="neuron")
    x = torch.randn(512, 1024, device="neuron")
    y = torch.randn(512, 1024, device="neuron")
    compiled(x, y)

    fused_out, fused = busy_per_engine(compiled, x, y)
    eager_out, eager = busy_per_engine(block, x, y)
    cpu_norm = copy.deepcopy(norm).cpu()
    expected = torch.nn.functional.gelu(cpu_norm(x.cpu())) + y.cpu()
    torch.testing.assert_close(fused_out.cpu(), expected)
    torch.testing.assert_close(eager_out.cpu(), expected)
    for engine in ("VectorE", "ScalarE"):
        assert 0.9 * eager[engine] <= fused[engine] <= eager[engine], engine


def _gelu_written_out(x):
    """Hugging Face's NewGELUActivation (ALBERT's, GPT-2's "gelu_new"): tanh-approximated GELU
    as arithmetic."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))


@pytest.mark.parametrize("written_out, activation", [
    (_gelu_written_out, lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
    (lambda x: x * torch.sigmoid(x), torch.nn.functional.silu),
    (lambda x: torch.log1p(torch.exp(-x.abs())) + x.clamp(min=0), torch.nn.functional.softplus),
], ids=["gelu_new", "silu", "softplus"])
def test_an_activation_function_written_out_costs_one_activation(written_out, activation):
    """A fused loop whose arithmetic computes one of ScalarE's activation functions of one
    value is one ScalarE activation, however it is written (Note [Fused kernel cost]): ALBERT's
    GELU as arithmetic costs what F.gelu(approximate="tanh") does. (Before: one activation
    and four VectorE passes; eager, the ops one by one, costs more still.) The input is
    bf16, as under autocast, so the casts are part of the chain."""
    def f(x, y):
        return written_out(x + y)  # the chain starts from a value of two inputs

    def g(x, y):
        return activation(x + y)

    x = torch.randn(512, 1024, device="neuron", dtype=torch.bfloat16)
    y = torch.randn(512, 1024, device="neuron", dtype=torch.bfloat16)
    fused, reference = torch.compile(f, backend="neuron"), torch.compile(g, backend="neuron")
    fused(x, y), reference(x, y)
    out, busy = busy_per_engine(fused, x, y)
    _, expected = busy_per_engine(reference, x, y)
    torch.testing.assert_close(out.cpu(), g(x.cpu(), y.cpu()), atol=2e-2, rtol=2e-2)
    assert busy == expected
    assert busy["ScalarE"] > 0 and busy["VectorE"] > 0  # the add of x and y stays on VectorE


def test_arithmetic_that_is_no_activation_function_keeps_its_instructions():
    """The same shape of chain with one constant changed computes no function ScalarE has, so
    it costs its instructions: more VectorE time than the GELU it resembles."""
    def almost_gelu(x):
        return 0.5 * x * (1.0 + torch.tanh(0.7 * (x + 0.044715 * x.pow(3))))

    x = torch.randn(512, 1024, device="neuron")
    compiled = torch.compile(almost_gelu, backend="neuron")
    gelu = torch.compile(_gelu_written_out, backend="neuron")
    compiled(x), gelu(x)
    out, busy = busy_per_engine(compiled, x)
    _, gelu_busy = busy_per_engine(gelu, x)
    torch.testing.assert_close(out.cpu(), almost_gelu(x.cpu()))
    assert busy["VectorE"] > 2 * gelu_busy.get("VectorE", 0)


def test_a_view_fused_into_a_kernel_adds_no_work_to_its_bound():
    """A view is no eager kernel (Note [Fused kernel bound]): GELU of a reshaped tensor costs
    one ScalarE pass and no VectorE time, as eager GELU does."""
    def f(x):
        return torch.nn.functional.gelu(x.view(512, 1024))

    compiled = torch.compile(f, backend="neuron")
    x = torch.randn(256, 2048, device="neuron")
    compiled(x)

    fused_out, fused = busy_per_engine(compiled, x)
    eager_out, eager = busy_per_engine(f, x)
    torch.testing.assert_close(fused_out.cpu(), f(x.cpu()))
    assert fused.get("VectorE", 0) == eager.get("VectorE", 0) == 0
    assert fused["ScalarE"] == pytest.approx(eager["ScalarE"], rel=1e-9)


def test_a_fused_gather_moves_the_rows_it_reads_not_the_table():
    """An embedding lookup fused with an add, [64] ids into a [100000, 256] float32 table: the
    kernel reads the 64 indexed rows (64 x 256 x 4 bytes, not the table's 100 MB), the int64
    ids and the [64, 256] addend, and writes the [64, 256] result, as the eager gather is
    charged for the rows it reads (Note [Fused kernel cost])."""
    table = torch.empty(100_000, 256, device="neuron")
    ids = torch.zeros(64, dtype=torch.long, device="neuron")
    bias = torch.empty(64, 256, device="neuron")
    f = torch.compile(lambda ids, bias: torch.nn.functional.embedding(ids, table) + bias,
                      backend="neuron")
    with torch_neuron.predict_only():
        f(ids, bias)
        with profiler.profile() as prof:
            f(ids, bias)
    (graph,) = [r for r in prof.records if r["name"].startswith("compiled graph")]
    assert graph["bytes"] == 64 * 256 * 4 + 64 * 8 + 2 * 64 * 256 * 4


# -- dynamic shapes -------------------------------------------------------------------------------


@pytest.mark.parametrize("dynamic,frames", [(None, 2), (True, 1), ("mark", 1), (False, 4)])
def test_dynamic_shapes(dynamic, frames):
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("neuron")
    f = lambda x: (x * 2).sin().sum(0)  # noqa: E731
    compiled = torch.compile(f, backend=counter, dynamic=None if dynamic == "mark" else dynamic)
    charged = {}
    for n in (8, 16, 24, 40):
        x = torch.randn(n, 512)
        on_neuron = x.to("neuron")
        if dynamic == "mark":
            torch._dynamo.mark_dynamic(on_neuron, 0)
        with profiler.profile() as prof:
            out = compiled(on_neuron)
        torch.testing.assert_close(out.cpu(), f(x), rtol=1e-5, atol=1e-4)
        (graph,) = [r for r in prof.records if r["name"].startswith("compiled graph")]
        charged[n] = graph["bytes"]  # one kernel
    assert counter.frame_count == frames
    # Each call is charged for the shape it ran with (the input it reads grows with n).
    assert charged[40] - charged[8] == (40 - 8) * 512 * 4


def test_recompilations_are_in_the_report():
    torch._dynamo.reset()
    f = torch.compile(lambda x: x.cos() + 1, backend="neuron", dynamic=False)
    with profiler.profile() as prof:
        for n in (4, 5, 6):
            f(torch.ones(n, device="neuron"))
    assert prof.compiles == {"graphs": 3, "recompiles": 2}
    assert "torch.compile: 3 graphs compiled, 2 of them recompilations" in prof.summary()


# -- TorchNeuron's contract -----------------------------------------------------------------------


def test_an_op_without_a_lowering_falls_back_to_the_cpu_as_in_eager():
    f = torch.compile(lambda a: torch.linalg.svdvals(a) * 2, backend="neuron")
    a = torch.randn(6, 6)
    before = torch_neuron.get_fallback_ops()
    out = f(a.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.linalg.svdvals(a) * 2, rtol=1e-4, atol=1e-5)
    after = torch_neuron.get_fallback_ops()
    assert sum(after.values()) > sum(before.values())
    refused = run_python("""
        import torch, torch_neuron
        torch.compile(lambda a: torch.linalg.svdvals(a) * 2, backend="neuron")(torch.randn(6, 6, device="neuron"))
    """, env={"TORCH_NEURON_FALLBACK": "error"})
    assert refused.returncode != 0 and "TORCH_NEURON_FALLBACK=error" in refused.stderr


def test_second_process_hits_the_cache_and_is_still_charged(tmp_path):
    code = """
        import json, torch, torch_neuron
        from torch._dynamo.utils import counters
        f = torch.compile(lambda x: (x.exp() + x).sum(1), backend="neuron")
        x = torch.ones(64, 256, device="neuron")
        torch.neuron.synchronize()
        start = torch.neuron.simulated_time_ns()
        f(x)
        torch.neuron.synchronize()
        print(json.dumps({"ns": torch.neuron.simulated_time_ns() - start,
                          "hits": counters["inductor"]["fxgraph_cache_hit"],
                          "tag": torch.compiler.config.cache_key_tag}))
    """
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path)}
    first, second = run_python_json(code, env=env), run_python_json(code, env=env)
    assert first["hits"] == 0 and second["hits"] >= 1
    assert second["ns"] == first["ns"] > 0
    assert "torch_neuron-" in first["tag"]  # the key includes torch_neuron's build


# A process compiling into an empty cache folder takes 15-25 s here (Inductor's C++ prelude):
# one fills the folder, and each test runs one more process, within the time limit per test.
NEFF_CACHE_PROGRAM = """
    import json, os, torch, torch_neuron
    from torch._dynamo.utils import counters
    torch.compile(lambda x: x.tanh() * 2, backend="neuron")(torch.ones(8, device="neuron"))
    print(json.dumps({"dir": os.environ.get("TORCHINDUCTOR_CACHE_DIR"),
                      "hits": counters["inductor"]["fxgraph_cache_hit"]}))
"""


@pytest.fixture(scope="module")
def neff_cache(tmp_path_factory):
    """TORCH_NEURONX_NEFF_CACHE_DIR, and the first run's result, which filled it."""
    folder = tmp_path_factory.mktemp("neff_cache")
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(folder)}
    return env, folder, run_python_json(NEFF_CACHE_PROGRAM, env=env)


def test_neff_cache_dir_is_the_compile_cache(neff_cache):
    env, folder, first = neff_cache
    assert first["dir"] == str(folder) and any(folder.iterdir())
    assert run_python_json(NEFF_CACHE_PROGRAM, env=env)["hits"] >= 1


def test_neff_disable_cache_turns_the_compile_cache_off(neff_cache):
    env, _, _ = neff_cache  # the folder holds the graph, and is not read:
    off = run_python_json(NEFF_CACHE_PROGRAM, env={**env, "TORCH_NEURONX_NEFF_DISABLE_CACHE": "1"})
    assert off["hits"] == 0


def test_generated_kernel_source_is_saved_with_the_artifacts(tmp_path):
    result = run_python("""
        import torch
        f = torch.compile(lambda x: (x * 2).sin(), backend="neuron")
        x = torch.ones(4, device="neuron", requires_grad=True)
        f(x).sum().backward()
    """, env={"TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": "1",
              "TORCH_NEURONX_DEBUG_DIR": str(tmp_path), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    kernels = sorted(os.listdir(tmp_path / "kernels" / "proc_0"))
    assert sorted(k.split("_")[1] for k in kernels) == ["backward.py", "forward.py"]
    assert all("_charge_kernel(" in (tmp_path / "kernels" / "proc_0" / k).read_text()
               for k in kernels)


def test_mode_other_than_default_warns():
    with pytest.warns(UserWarning, match="only mode='default'"):
        torch.compile(lambda x: x + 1, backend="neuron", mode="max-autotune")(
            torch.ones(2, device="neuron"))


# -- Hugging Face generation with a static cache ---------------------------------------------------


def test_static_cache_generate_with_compiled_forward_does_not_recompile():
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model = tiny_llama().to("neuron").eval()
    ids = torch.randint(0, 128, (1, 6), device="neuron")
    settings = dict(max_new_tokens=8, do_sample=False, cache_implementation="static")
    eager = model.generate(ids, **settings)
    torch._dynamo.reset()
    model.forward = torch.compile(model.forward, backend="neuron")
    first = model.generate(ids, **settings)  # warm-up: prefill and decode compile
    graphs = counters["stats"]["unique_graphs"]
    second = model.generate(ids, **settings)
    assert counters["stats"]["unique_graphs"] == graphs  # no recompilation after warm-up
    assert first.tolist() == second.tolist() == eager.tolist()


# -- the Inductor internals torch_neuron patches (torch_neuron/compile/patches.py) -------------


def test_patched_inductor_internals_are_what_the_patches_expect():
    """Fails when PyTorch changes what a patch relies on: then the patch can be dropped (PyTorch
    handles neuron itself) or must be revisited."""
    from torch._inductor import config, scheduler
    from torch._inductor.utils import get_current_backend

    from torch_neuron.compile import patches, register

    register()
    # get_current_backend answers the CUDA backend for an unknown device ...
    assert get_current_backend.__wrapped__("neuron") == config.cuda_backend != config.cpu_backend
    # ... and these are all the modules that use it (each binds it by name when imported).
    root = pathlib.Path(inspect.getfile(scheduler)).parent
    users = {".".join(path.relative_to(root.parent.parent).with_suffix("").parts)
             for path in root.rglob("*.py") if "get_current_backend" in path.read_text()}
    assert users == set(patches.CURRENT_BACKEND_MODULES)
    # use_two_step_variance picks the C++ threshold by device.type == "cpu".
    from torch._inductor import lowering

    source = inspect.getsource(lowering.use_two_step_variance.__wrapped__)
    assert 'device.type == "cpu"' in source and "cpp.use_two_step_variance_threshold" in source
    # device_need_guard enters a device guard for GPUs only.
    from torch._inductor import utils

    assert not utils.device_need_guard.__wrapped__("neuron")
    assert "is_gpu" in inspect.getsource(utils.device_need_guard.__wrapped__)
    assert scheduler.device_need_guard is utils.device_need_guard
    # is_cpu decides by device.type == "cpu".
    assert 'device.type == "cpu"' in inspect.getsource(scheduler.BaseSchedulerNode.is_cpu.__wrapped__)


# -- random ops in compiled checkpointed regions (torch_neuron/compile/rng_state.py) ---------


@pytest.mark.parametrize("backend", ["neuron", "aot_eager"])
def test_compiled_checkpointed_dropout_replays_its_mask_in_the_backward(backend):
    """The backward of a checkpointed region recomputes its dropout: with the generator state
    the forward used, the mask is the forward's, so the input's gradient is the upstream
    gradient through exactly the forward's kept elements (scaled by 1 / (1 - p))."""
    from torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    w = torch.randn(64, 64, device="neuron", requires_grad=True)
    x = torch.randn(32, 64, device="neuron", requires_grad=True)
    block = lambda t: torch.nn.functional.dropout(t @ w, p=0.5, training=True)  # noqa: E731
    f = torch.compile(lambda t: checkpoint(block, t, use_reentrant=False), backend=backend)
    y = f(x)
    upstream = torch.randn_like(y)
    y.backward(upstream)
    kept = (y != 0).float()
    assert 0.3 < kept.mean().item() < 0.7  # a real mask
    expected = ((upstream * kept * 2.0) @ w.T).cpu()
    torch.testing.assert_close(x.grad.cpu(), expected, rtol=1e-5, atol=1e-5)


def test_rng_state_operators_are_what_the_patch_expects():
    """Fails when PyTorch changes the random-op replay operators that rng_state.py patches:
    each still picks its implementation from a table without neuron."""
    from torch._C import DispatchKey
    from torch._prims import rng_prims

    for hop in (rng_prims.run_and_save_rng_state, rng_prims.run_with_rng_state):
        kernel = hop.py_kernels[DispatchKey.BackendSelect]
        assert getattr(kernel, "_torch_neuron_patched", False)
        original = kernel.__kwdefaults__["_original"]
        source = inspect.getsource(original)
        assert '"cuda": impl_cuda' in source and '"neuron"' not in source
