"""Compiled graphs in predict-only mode (Note [Compiled kernels in predict-only mode] in
torch_neuron/compile/kernels.py): their generated kernels are charged but neither run nor
compiled. The references are the same compiled program run with execution on (its time, its
peak HBM, its values against the CPU) and Inductor's C++ builder, which must not be called."""

import copy

import pytest
import torch
import torch.nn as nn

import torch_neuron
from conftest import run_python_json


class _Builds:
    """Counts the C++ builds Inductor starts (its CppBuilder: kernels, headers, ISA probes)."""

    def __init__(self, monkeypatch):
        from torch._inductor import cpp_builder

        self.count = 0
        build = cpp_builder.CppBuilder.build

        def counting_build(builder, *args, **kwargs):
            self.count += 1
            return build(builder, *args, **kwargs)

        monkeypatch.setattr(cpp_builder.CppBuilder, "build", counting_build)


def _timed_step(compiled, x):
    """One forward and backward of `compiled`: its simulated time (events) and peak HBM."""
    torch.neuron.synchronize()
    torch.neuron.reset_peak_memory_stats()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    out = compiled(x)
    out.sum().backward()
    end.record()
    return start.elapsed_time(end), torch.neuron.max_memory_allocated(), out


@pytest.mark.extended  # two cold compiles, about 15 s
def test_predicted_like_an_executed_run_and_no_kernel_compiled(monkeypatch):
    from torch._inductor.cpu_vec_isa import pick_vec_isa
    from torch._inductor.utils import fresh_cache

    torch.manual_seed(0)
    cpu = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    x_cpu = torch.randn(16, 32)
    with fresh_cache():  # a cold cache: an executed run has to build its kernels
        pick_vec_isa()  # Inductor's probe of the host's vector ISA (not a kernel) runs first
        builds = _Builds(monkeypatch)
        torch._dynamo.reset()
        model = copy.deepcopy(cpu).to("neuron")
        x = x_cpu.to("neuron")
        with torch_neuron.predict_only():
            compiled = torch.compile(model, backend="neuron")
            _timed_step(compiled, x)  # compiles forward and backward
            model.zero_grad()
            predicted_ms, predicted_peak, _ = _timed_step(compiled, x)
        assert builds.count == 0
        assert torch_neuron.get_execute()
        # The same compiled graph, now executed: its kernels are built on this first call.
        model.zero_grad()
        ms, peak, out = _timed_step(compiled, x)
        assert builds.count > 0
        torch._dynamo.reset()
    want = cpu(x_cpu)
    want.sum().backward()
    torch.testing.assert_close(out.cpu(), want)
    for p, q in zip(model.parameters(), cpu.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)
    assert predicted_ms > 0
    assert predicted_ms == pytest.approx(ms, rel=1e-9)
    # The executed run may also count scratch buffers of ATen's CPU kernels (extern kernels
    # run on the host), as in eager mode (test_predict_only.py).
    assert peak - 64 * 1024 <= predicted_peak <= peak


def test_kernel_runs_only_when_executing():
    from torch_neuron.compile.kernels import NeuronKernel

    calls = []

    class Compiler:  # stands in for Inductor's AsyncCompile
        def cpp_pybinding(self, argtypes, source):
            return lambda *args: calls.append(args)

    kernel = NeuronKernel(Compiler(), ["float*"], "source")  # compiled now: executing
    kernel(1)
    with torch_neuron.predict_only():
        kernel(2)
        deferred = NeuronKernel(Compiler(), ["float*"], "source")
    assert calls == [(1,)]
    assert deferred._compiled is None  # nothing compiled while predicting


@pytest.mark.extended  # a fresh interpreter and two compiles, about 10 s
def test_full_size_compiled_model_commits_no_ram():
    # Weights and activations of 4.5 GiB; the generated kernel, if it ran, would write a
    # 1.5 GiB result (and commit it as host RAM: about 1.5 GiB of RSS, measured).
    out = run_python_json("""
        import json, torch, torch_neuron
        import torch.nn as nn

        def rss(field):
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith(field):
                        return int(line.split()[1]) * 1024

        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(3072, 131072))  # 1.5 GiB

            def forward(self, x):
                return nn.functional.gelu(x * self.weight) + x

        torch_neuron.set_execute(False)
        torch.compile(lambda t: (t * 2).sin(), backend="neuron")(torch.ones(4, device="neuron"))
        before = rss("VmRSS:")
        with torch.device("neuron"):
            model = Scale()
        x = torch.empty(3072, 131072, device="neuron")  # 1.5 GiB
        compiled = torch.compile(model, backend="neuron")
        torch.neuron.reset_peak_memory_stats()
        torch_neuron.clear_op_tracking()
        with torch.no_grad():
            compiled(x)
        ops = torch_neuron.get_executed_ops()
        print(json.dumps({"rss_growth": rss("VmHWM:") - before,
                          "peak": torch.neuron.max_memory_allocated(),
                          "kernels": sum(n for k, n in ops.items() if k.startswith("cpp_"))}))
    """)
    assert out["peak"] > 2 * 2**30, out
    assert out["kernels"] >= 1, out  # the generated kernel was charged
    assert out["rss_growth"] < 2**30, out
