"""`nki.nki_op` (torch.library.custom_op): an NKI kernel as an operator in a training step with
autograd and inside torch.compile(backend="neuron"), against the same math on the CPU."""

import pytest
import torch

import torch_neuron  # noqa: F401
import torch_neuron.nki as nki
import torch_neuron.nki.language as nl


@nki.jit
def _mul_kernel(a, b, out):
    nl.store(out, nl.multiply(nl.load(a), nl.load(b)))


@nki.nki_op("nkitest::mul", mutates_args={})
def mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    _mul_kernel(a, b, out)
    return out


@mul.register_fake
def _(a, b):
    return torch.empty_like(a)


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    return mul(grad, b), mul(grad, a)


mul.register_autograd(_backward, setup_context=_setup)


def test_nki_op_trains_with_autograd():
    torch.manual_seed(0)
    x, w0 = torch.randn(128, 64), torch.randn(128, 64)
    w = w0.clone().to("neuron").requires_grad_()
    opt = torch.optim.SGD([w], lr=0.1)
    loss = (mul(x.to("neuron"), w) ** 2).sum()
    loss.backward()
    opt.step()
    # CPU reference: d/dw sum((x w)^2) = 2 x^2 w
    expected_grad = 2 * x * x * w0
    torch.testing.assert_close(w.grad.cpu(), expected_grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(w.detach().cpu(), w0 - 0.1 * expected_grad, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.extended  # torch.compile's first compilation takes about 10 s
def test_nki_op_inside_torch_compile():
    torch.manual_seed(0)
    a, b = torch.randn(128, 32), torch.randn(128, 32)

    def f(a, b):
        return torch.relu(mul(a + 1, b)) * 2

    compiled = torch.compile(f, backend="neuron")
    out = compiled(a.to("neuron"), b.to("neuron"))
    torch.testing.assert_close(out.cpu(), torch.relu((a + 1) * b) * 2)
    an, bn = a.to("neuron"), b.to("neuron")
    with torch.profiler.profile() as prof:
        compiled(an, bn)
    launches = {e.name: e.device_time for e in prof.events() if e.device_time > 0}
    # The kernel joined the graph's one launch (an opaque op in its schedule), no launch of
    # its own; the graph takes at least the kernel's makespan plus one launch overhead.
    assert not any(name.startswith("nki.") for name in launches)
    graph = [t for name, t in launches.items() if name.startswith("compiled graph")]
    kernel_us = _mul_kernel.last_run.timing["makespan_ns"] / 1e3
    assert len(graph) == 1 and graph[0] >= kernel_us + 1.5
