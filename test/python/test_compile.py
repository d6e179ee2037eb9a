"""torch.compile(backend="neuron") runs compiled graphs on the device, forward and backward."""

import torch

import torch_neuron


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
