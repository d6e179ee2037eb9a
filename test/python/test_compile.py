"""torch.compile(backend="neuron") runs compiled graphs on the device, forward and backward."""

import torch

import torch_neuron
from conftest import run_python_json


def test_compiled_model_matches_cpu_forward_and_backward():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model.load_state_dict(cpu.state_dict())
    model.to("neuron")
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
    assert "aten::mm" in torch_neuron.get_executed_ops() or "aten::addmm" in torch_neuron.get_executed_ops()
    assert torch_neuron.get_fallback_ops() == {}


def test_neuron_is_a_listed_backend():
    assert "neuron" in torch._dynamo.list_backends()


def test_default_inductor_backend_names_the_neuron_backend():
    # TorchInductor has no code generator for neuron: it must say how to compile instead of
    # failing with KeyError: 'neuron', and leave the device and the CPU's Inductor usable.
    out = run_python_json("""
        import json, torch, torch_neuron
        double_relu = lambda x: torch.relu(x) * 2
        try:
            torch.compile(double_relu)(torch.randn(4, device="neuron"))
            error = ""
        except Exception as e:
            error = str(e)
        x = torch.randn(4)
        on_neuron = torch.compile(double_relu, backend="neuron")(x.to("neuron")).cpu()
        on_cpu = torch.compile(double_relu)(x)
        print(json.dumps([error, torch.equal(on_neuron, x.relu() * 2),
                          torch.equal(on_cpu, x.relu() * 2)]))
    """)
    error, neuron_ok, cpu_ok = out
    assert "no code generator for the neuron device" in error
    assert 'backend="neuron"' in error
    assert neuron_ok and cpu_ok
